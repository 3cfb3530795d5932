"""The light install: `pip install .` has no PyTorch; everything but capture works without it, and
capture says in one line what to install. Missing torch is simulated with a `torch` package on
PYTHONPATH whose import fails as a missing module's does (child processes inherit it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tracefabric.traces.capture import TORCH_HINT

from conftest import REPO

HINT_LINE = f"error: {TORCH_HINT}"


@pytest.fixture
def no_torch(tmp_path) -> dict[str, str]:
    """The environment of a process on which `import torch` fails as without PyTorch."""
    (tmp_path / "blocked" / "torch").mkdir(parents=True)
    (tmp_path / "blocked" / "torch" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "blocked"), os.environ.get("PYTHONPATH", "")])}


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_pyproject_keeps_torch_out_of_the_base_install():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in meta["dependencies"] if d.startswith("torch")]
    assert meta["optional-dependencies"]["capture"] == ["torch>=2.6"]
    assert "tracefabric[capture]" in meta["optional-dependencies"]["test"]  # CI runs the real capture tests
    assert any(d.startswith("mkdocs-material") for d in meta["optional-dependencies"]["test"])


def test_trace_capture_without_torch_prints_one_line_and_exits_non_zero(no_torch, tmp_path):
    out = tmp_path / "cap"
    proc = subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", "trace", "capture",
                           "--ranks", "1", "--out", str(out)], env=no_torch, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [HINT_LINE]
    assert 'pip install "tracefabric[capture]"' in HINT_LINE
    assert not out.exists()  # refused before anything was written


def test_the_capture_api_without_torch_raises_missing_dependency(no_torch, tmp_path):
    code = """
from tracefabric.errors import MissingDependencyError
from tracefabric.traces.capture import TraceCapture, capture
for call in (lambda: capture("x.py:build", "out", 1), lambda: TraceCapture("out", 0).__enter__(),
             lambda: __import__("tracefabric.traces.workloads")):
    try:
        call()
    except MissingDependencyError as e:
        print(e.package, e.extra, str(e).count(chr(10)))
"""
    proc = _python(code, no_torch, tmp_path)
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == ["torch capture 0"] * 3


def test_a_light_install_synthesizes_validates_and_simulates_without_torch(no_torch, tmp_path):
    code = f"""
import sys
from tracefabric.collectives.workload import read_workload
from tracefabric.collectives.iteration import simulate
from tracefabric.network_backends.packet import simulate as packet
from tracefabric.traces import validate as v
from tracefabric.traces.models import get_model
from tracefabric.traces.synthesis import Plan, synthesize, write
write(synthesize(get_model("gpt2-small"), Plan("dp", world=4, gpus_per_server=1)), "et")
print(len(v.problems(*v.load("et"))), read_workload("et").ranks)
r = simulate("et", {{"scheduling-policy": "LIFO", "collective-optimization": "baseline",
                     "preferred-dataset-splits": 1, "all-reduce-implementation": ["ring"]}},
             {{"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]}})
print(len(r.ranks), r.iteration_ns > 0)
print(packet("fat-tree:k=4", "permutation:size=64KiB", seed=1).cct_us > 0)
print("torch" in sys.modules and sys.modules["torch"] is not None)
"""
    proc = _python(code, no_torch, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0 4", "4 True", "True", "False"]


def test_cli_commands_other_than_capture_run_without_torch(no_torch, tmp_path):
    run = subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", "net", "run",
                          "--topology", "fat-tree:k=4", "--traffic", "permutation:size=16KiB", "--json"],
                         env=no_torch, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert '"cct_us"' in run.stdout
