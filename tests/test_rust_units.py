"""The Rust unit and integration tests run as part of this suite (one command runs everything)."""

from __future__ import annotations

import re
import shutil
import subprocess

from conftest import REPO


def test_cargo_tests_of_every_crate_pass():
    assert shutil.which("cargo"), "cargo is needed to run the engine's Rust tests"
    # stderr (cargo's "Running <binary>" lines) interleaved with stdout (each binary's result).
    proc = subprocess.run(["cargo", "test", "--release", "-p", "tracefabric-fabric", "-p", "tracefabric-packet", "-p", "tracefabric-collectives",
                           "-p", "tracefabric-analytical"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout
    print(out[-3000:])
    assert proc.returncode == 0, out[-8000:]
    failed = re.findall(r"test result: \w+\. \d+ passed; (\d+) failed", out)
    assert failed and set(failed) == {"0"}
    # Tests per binary, so a module that drops out of a crate's build is noticed.
    ran = {name: int(n) for name, n in re.findall(
        r"Running (?:unittests src/lib\.rs|tests/\w+\.rs) \(\S+/deps/(\w+?)-[0-9a-f]+\)\n(?:.*\n)*?test result: \w+\. (\d+) passed", out)}
    # At least the tests each binary has now (more is fine): the packet
    # engine's units (topology, events, loss recovery, bounds, traffic, sim) and integration
    # tests, the collectives' algorithms, chunking and layout, the analytical backends.
    least = {"tracefabric_fabric": 16, "tracefabric_packet": 86, "engine": 13, "catalogue": 6, "failures": 7, "lossless": 7, "tracefabric_collectives": 11, "tracefabric_analytical": 6}
    short = {k: ran.get(k, 0) for k, n in least.items() if ran.get(k, 0) < n}
    assert not short, f"fewer Rust tests ran than expected: {short} (expected at least {least}; ran {ran})"
