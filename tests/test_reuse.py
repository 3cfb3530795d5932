"""Reuse of busy periods on the packet backend (network_backends/packet/src/reuse.rs):
exact mode must give bit-identical results to simulating every packet, while skipping the
work of repeated collectives; fast mode is an approximation whose error is measured here
(the validation table of docs/iterations.md)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tracefabric.collectives.iteration import simulate
from tracefabric.errors import ConfigError
from tracefabric.traces.models import ZOO, get_model
from tracefabric.traces.synthesis import Plan, synthesize, write

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 1, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
          **{f"{k}-implementation": ["ring", "ring"] for k in ("all-reduce", "all-gather", "reduce-scatter")},
          "all-to-all-implementation": ["direct", "direct"]}
# GPT-2 small FSDP on 4 servers x 8 GPUs over a k=8 fat tree; the MoE model of the README's
# study (FSDP + 16-way expert parallelism) on its 2:1 oversubscribed leaf-spine.
FAT_TREE = {"topology": {"kind": "fat_tree", "k": 8}, "link": {"rate_gbps": 800, "latency_ns": 500},
            "servers": {"gpus": 8}}
LEAF_SPINE = {"topology": {"kind": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 8},
              "link": {"rate_gbps": 400, "latency_ns": 500}, "switch": {"buffer_bytes": 400000}}
# Eight links of the fat tree fail 150 us in, are detected 5 us later and routed around at 100 us.
FAILURES = {"probability": 0.02, "at_us": 150, "detection_us": 5, "convergence_us": 100, "seed": 4}

# The validation cases: FSDP and MoE, ideal and real CC, ECMP and packet schemes, failures.
CASES = {
    "fsdp-ecmp": ("fsdp", "ecmp", None),
    "fsdp-smartt-reps": ("fsdp", "smartt_reps", None),
    "fsdp-dctcp": ("fsdp", "dctcp", None),
    "moe-ecmp": ("moe", "ecmp", None),
    "moe-reps": ("moe", "reps", None),
    "fsdp-reps-failures": ("fsdp", "reps", FAILURES),
}


@lru_cache(maxsize=None)
def workload(kind: str) -> str:
    import tempfile
    d = tempfile.mkdtemp(prefix=f"reuse-{kind}-")
    if kind == "fsdp":
        write(synthesize(ZOO["gpt2-small"], Plan("fsdp", world=32, gpus_per_server=8, precision="fp8")), d)
    else:
        write(synthesize(get_model(EXAMPLES / "models" / "moe-s"), Plan("fsdp", world=32, ep=16)), d)
    return d


@lru_cache(maxsize=None)
def run(kind: str, scheme: str, failures: str | None, reuse: str):
    net = dict(FAT_TREE if kind == "fsdp" else LEAF_SPINE)
    if failures:
        net["failures"] = json.loads(failures)
    return simulate(workload(kind), SYSTEM, net, backend="packet", scheme=scheme, reuse=reuse)


def case(name: str, reuse: str):
    kind, scheme, failures = CASES[name]
    return run(kind, scheme, json.dumps(failures) if failures else None, reuse)


def errors(full, other) -> tuple[float, float]:
    """Iteration time and worst per-collective CCT, relative to the full run."""
    it = abs(other.iteration_ns / full.iteration_ns - 1)
    a, b = full.collectives.cct_ns.to_numpy(), other.collectives.cct_ns.to_numpy()
    return it, float(np.max(np.abs(b - a) / a))


@pytest.mark.parametrize("name", list(CASES))
def test_exact_reuse_is_bit_identical_to_the_full_run_and_skips_work(name):
    full, exact = case(name, "off"), case(name, "exact")
    assert (full.reuse, exact.reuse) == ("off", "exact")
    assert full.network_counters["reuse_replayed"] == 0 and full.network_counters["events_skipped"] == 0
    assert exact.ranks.equals(full.ranks)
    assert exact.collectives.equals(full.collectives)
    assert exact.links.equals(full.links), "per-link bytes and queues of replayed periods are added"
    assert exact.stages.equals(full.stages)
    for k in ("data_packet_hops", "data_bytes_sent", "data_bytes_delivered", "data_packets_dropped", "ecn_marks",
              "scale_out_bytes"):
        assert exact.network_counters[k] == full.network_counters[k], k
    c = exact.network_counters
    # Work saved: every event a replay skipped is one the full run simulated.
    assert c["reuse_replayed"] > 0 and c["events_skipped"] > 0
    assert c["events"] + c["events_skipped"] >= full.network_counters["events"] * 0.99
    if name.startswith("fsdp") and "failures" not in name:
        # FSDP repeats each layer's collectives on an idle network: most periods replay.
        assert c["reuse_replayed"] >= 0.8 * c["reuse_periods"]
        assert c["events"] < 0.3 * full.network_counters["events"]


@pytest.mark.parametrize("name", list(CASES))
def test_fast_reuse_stays_within_the_validation_limits(name):
    it, cct = errors(case(name, "off"), case(name, "fast"))
    assert it <= 0.01 and cct <= 0.03, (name, it, cct)


def test_fast_reuse_of_schemes_with_state_across_flows():
    # OFAN (round-robin pointers kept across flows) and host spraying (one random stream)
    # are never replayed exactly; fast mode replays them, with this error on FSDP.
    for scheme in ("mswift_sack", "host_spray"):
        full, exact, fast = (run("fsdp", scheme, None, m) for m in ("off", "exact", "fast"))
        assert exact.network_counters["reuse_replayed"] == 0 and exact.collectives.equals(full.collectives)
        assert fast.network_counters["reuse_replayed"] > 0
        it, cct = errors(full, fast)
        assert it <= 0.01, (scheme, it)
        # Host spraying's draws differ from the full run's in replayed periods: a short
        # collective's CCT moves by up to ~5 % (measured 5.2 %), the iteration by < 0.1 %.
        assert cct <= (0.0 if scheme == "mswift_sack" else 0.08), (scheme, cct)


def test_reuse_is_deterministic_and_checked():
    a, b = (simulate(workload("fsdp"), SYSTEM, FAT_TREE, backend="packet", scheme="host_spray", reuse="fast")
            for _ in range(2))
    assert a.collectives.equals(b.collectives) and a.links.equals(b.links)
    with pytest.raises(ConfigError) as e:
        simulate(workload("fsdp"), SYSTEM, FAT_TREE, backend="packet", reuse="sometimes")
    assert e.value.field == "reuse" and "exact, fast, off" in str(e.value)


def test_engine_windows_give_one_engines_results():
    """A run declaring more flows than limits.max_flows runs on a sequence of engines, each
    built for a window of them at a quiescent point: the same iteration as one engine, and
    refused with failures (whose scheduled changes one engine cannot hand to the next)."""
    one = case("fsdp-ecmp", "exact")
    assert one.network_counters["reuse_flows_replayed"] > 3000  # of ~4,000 crossing the fabric
    for reuse in ("exact", "off"):
        net = {**FAT_TREE, "limits": {"max_flows": 1000}}
        windowed = simulate(workload("fsdp"), SYSTEM, net, backend="packet", scheme="ecmp", reuse=reuse)
        assert windowed.collectives.equals(one.collectives) and windowed.links.equals(one.links), reuse
        assert windowed.stages.equals(one.stages)
    with pytest.raises(ConfigError, match="more than limits.max_flows = 1000: it runs on a sequence of engines"):
        simulate(workload("fsdp"), SYSTEM, {**net, "failures": FAILURES}, backend="packet", scheme="ecmp")
