"""Shared helpers for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


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
