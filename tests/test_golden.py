"""Golden results: every simulated number a refactoring must not move, compared exactly
with the values checked in under `tests/golden/` (see `golden/cases.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import cases  # noqa: E402


def _check(name: str, runs: dict) -> None:
    golden = cases.load(name)
    assert sorted(runs) == sorted(golden), f"{name}: the set of golden runs changed"
    moved = {key: (golden[key], got) for key, run in runs.items() if (got := run()) != golden[key]}
    assert not moved, f"{name}: {len(moved)} runs moved; first: {next(iter(moved.items()))}"


def test_every_lb_and_loss_scheme_on_k4_gives_its_golden_run():
    _check("packet_k4", cases.packet_k4_cases())


def test_ofan_fig1_contenders_give_their_golden_runs():
    _check("packet_fig1", cases.packet_fig1_cases())


def test_system_layer_runs_give_their_golden_times(shared, tmp_path):
    _check("system", cases.system_cases(shared, tmp_path))


def test_golden_runs_are_not_trivial():
    # The k=4 set must exercise drops, ECN marks, timeouts and retransmissions, or it guards little.
    k4 = cases.load("packet_k4")
    for key in ("data_packets_dropped", "ecn_marks", "timeouts", "retransmissions"):
        assert sum(r[key] for r in k4.values()) > 0, key
    assert len({r["digest"] for r in k4.values()}) > len(k4) // 2
