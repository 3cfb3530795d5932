"""The Rust unit and integration tests run as part of this suite (one command runs everything)."""

from __future__ import annotations

import re
import shutil
import subprocess

from conftest import REPO


def test_cargo_tests_of_every_crate_pass():
    assert shutil.which("cargo"), "cargo is needed to run the engine's Rust tests"
    proc = subprocess.run(["cargo", "test", "--release", "-p", "tracefabric-packet", "-p", "tracefabric-collectives", "-p", "tracefabric-analytical"], cwd=REPO, capture_output=True, text=True)
    results = re.findall(r"test result: (\w+)\. (\d+) passed; (\d+) failed", proc.stdout)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    passed = sum(int(p) for _, p, _ in results)
    failed = sum(int(f) for _, _, f in results)
    assert failed == 0
    # packet engine (units, topology, events, loss recovery, bounds, traffic, integration),
    # collectives (algorithms, chunking, layout), analytical backends
    assert passed >= 30, f"only {passed} Rust tests ran"
