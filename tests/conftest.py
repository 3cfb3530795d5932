"""Shared helpers for the test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
IN_CI = bool(os.environ.get("CI"))


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


HAVE_TORCH = _have_torch()
TORCH_REASON = 'needs PyTorch (pip install ".[capture]"); in CI (CI=true) its absence fails instead'
# Capture tests skip on a light install, but CI installs `.[test]`, which brings torch: there a
# missing torch must fail them, never skip them.
needs_torch = pytest.mark.skipif(not HAVE_TORCH and not IN_CI, reason=TORCH_REASON)


def need_torch_module() -> None:
    """At the top of a module of capture tests: skip it without PyTorch, except in CI, where its
    imports then fail the suite."""
    if not HAVE_TORCH and not IN_CI:
        pytest.skip(TORCH_REASON, allow_module_level=True)


@pytest.fixture(scope="session")
def shared() -> Path:
    """The team's shared/ folder (fixtures of real ASTRA-sim and htsim inputs), beside the repo."""
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} not found: the tests read fixtures from ../shared (present in CI)")
    return SHARED


# The OFAN paper's defaults (§5), in picoseconds at 800 Gbps (10 ps per byte).
T_DATA = (4096 + 62) * 10
T_GAP = 20 * 10
T_ACK = 64 * 10
LINK = 500_000
