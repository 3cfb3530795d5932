"""Rate-based and telemetry CC (issue 39: DCQCN, HPCC, MCC) through the Python API: each
preset runs and conserves bytes on k=4, DCQCN's notification point answers marks with
CNPs, and bad parameters (and RED's `ecn_pmax`) are refused naming the field. The numbers against the papers (DCQCN's
recovery trace, HPCC's fixed point, the MCC toy) are Rust tests beside the schemes
(`network_backends/packet/src/cc/`)."""

from __future__ import annotations

import pytest

from tracefabric.astra_configs import load_scheme_preset
from tracefabric.errors import ConfigError
from tracefabric.network_backends.packet import simulate

PRESETS = ["roce", "hpcc", "mcc_spray"]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_runs_and_conserves_bytes(name):
    preset = load_scheme_preset(name)
    r = simulate("fat-tree:k=4", "permutation:size=512KiB", scheme=name, seed=2)
    s = r.summary
    assert s["data_bytes_sent"] == s["data_bytes_delivered"] + s["data_bytes_dropped"] + s["data_bytes_trimmed"], name
    assert s["packets_alive_at_end"] == 0 and r.cct_us * 1e6 >= s["lower_bound_ps"], name
    assert r.config["scheme"]["cc"] == preset["cc"], name


def test_dcqcn_sends_cnps_only_for_marked_packets_and_cuts_on_them():
    # A 4:1 incast into 100 KB buffers with marking from 5 KB: marks, CNPs (at most one per
    # flow per 50 µs), and as many rate cuts as CNPs (the paper's RP cuts on every CNP).
    r = simulate("fat-tree:k=4", "incast:dst=0,senders=4,size=2MiB", scheme="roce", seed=1,
                 link={"rate_gbps": 100, "latency_ns": 1000}, switch={"buffer_bytes": 100_000})
    counters = dict(r.summary["scheme_counters"])
    cnps, cuts = counters["receiver.cnps"], counters["cc.rate_cuts"]
    assert r.summary["ecn_marks"] > 0 and cnps > 0
    assert 0 < cuts <= cnps  # (a CNP on a reply after its flow completed is not seen)
    # 4 flows, each at most one CNP per 50 µs over the run.
    assert cnps <= 4 * (r.cct_us / 50 + 1)


def test_the_roce_preset_with_the_vendor_variant_is_the_vendor_variant():
    # The preset pins only `variant`: switching it gets the vendor defaults (300 µs timer,
    # F = 1, CNP per marked packet), the same run as naming them all by hand.
    incast = "incast:dst=0,senders=4,size=1MiB"
    kw = dict(seed=1, link={"rate_gbps": 100, "latency_ns": 1000}, switch={"buffer_bytes": 100_000})
    r = simulate("fat-tree:k=4", incast, scheme="roce", cc_params={"variant": "vendor"}, **kw)
    assert r.config["scheme"]["cc_params"] == {"variant": "vendor"}
    by_hand = simulate("fat-tree:k=4", incast, scheme="roce", **kw,
                       cc_params={"variant": "vendor", "alpha_interval_us": 1.0, "timer_us": 300.0, "f": 1, "cnp_interval_us": 0.0})
    assert r.summary["digest"] == by_hand.summary["digest"] and r.summary["scheme_counters"]["cc.rate_cuts"] > 0


@pytest.mark.parametrize("pmax", [0.0, 1.5, -0.1])
def test_a_marking_probability_outside_0_1_is_refused(pmax):
    with pytest.raises(ConfigError) as e:
        simulate("fat-tree:k=4", "permutation:size=64KiB", switch={"ecn_pmax": pmax})
    assert e.value.field == "switch.ecn_pmax" and "(0, 1]" in str(e.value)
