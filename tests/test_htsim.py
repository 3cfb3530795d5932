"""htsim interop: connection matrices written and read in full (triggers, failures), a
collective's step dependencies as triggers, the htsim_uec flags for a fabric, and htsim's
per-flow output read into tracefabric's flow frame."""

from __future__ import annotations

import dataclasses
import random

import pandas as pd
import pytest
from typer.testing import CliRunner

from tracefabric import _core
from tracefabric.tools.cli import app
from tracefabric.collectives import collective_flows
from tracefabric.errors import TrafficFileError
from tracefabric.network_backends.packet.cm import CmFailure, ConnectionMatrix, format_cm, read_cm
from tracefabric.interop.htsim.export import collective_matrix, traffic_matrix, uec_flags
from tracefabric.interop.htsim.output import HtsimOutputError, parse_output
from tracefabric.network_backends.packet import build_config

runner = CliRunner()


def without_lines(cm: ConnectionMatrix) -> ConnectionMatrix:
    strip = lambda xs: [dataclasses.replace(x, line=None) for x in xs]  # noqa: E731
    return ConnectionMatrix(cm.nodes, strip(cm.flows), strip(cm.triggers), strip(cm.failures))


def flow_set(cm: ConnectionMatrix) -> set[tuple]:
    return {(f.src, f.dst, f.size, f.start_us) for f in cm.flows}


def test_fig1_permutation_exports_as_the_fixture(shared, tmp_path):
    fixture = shared / "fixtures" / "htsim" / "perm128_1MiB.cm"
    # The fixture is Python's random.Random(1) derangement of 128 hosts (rejection sampling);
    # tracefabric's Fig. 1 runs take it as `file:` traffic.
    rng, dst = random.Random(1), []
    while not dst or any(d == s for s, d in enumerate(dst)):
        dst = list(range(128))
        rng.shuffle(dst)
    assert flow_set(read_cm(fixture)) == {(s, d, 2**20, 0) for s, d in enumerate(dst)}
    out = tmp_path / "fig1.cm"
    res = runner.invoke(app, ["htsim", "export", "--topology", "fat-tree:k=8", "--traffic", f"file:{fixture}", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert flow_set(read_cm(out)) == flow_set(read_cm(fixture))
    # The flags describe OFAN's Fig. 1 fabric: 128 hosts, 800 Gbps, 0.5 us links, 800 KB = 192 frames of 4,158 B.
    flags = res.output.split("htsim_uec ", 1)[1].split()
    for key, value in (("-nodes", "128"), ("-tiers", "3"), ("-linkspeed", "800000"), ("-hop_latency", "0.5"),
                       ("-mtu", "4158"), ("-q", "192"), ("-end", "0")):
        assert flags[flags.index(key) + 1] == value, key


def test_a_generated_traffic_exports_the_engines_own_flows(tmp_path):
    cfg = build_config("fat-tree:k=4", "all-to-all:size=64KiB,staggered=true", seed=3)
    cm = traffic_matrix(cfg)
    raw = _core.traffic_flows(__import__("json").dumps(cfg))
    assert [(f.src, f.dst, f.size, f.id) for f in cm.flows] == \
        [(s, d, b, i + 1) for i, (s, d, b) in enumerate(zip(raw["src"], raw["dst"], raw["bytes"]))]
    assert len(cm.flows) == 16 * 15 and cm.nodes == 16
    path = tmp_path / "a2a.cm"
    path.write_text(format_cm(cm))
    assert without_lines(read_cm(path)) == cm  # the round trip keeps every field


def test_ring_all_reduce_triggers_encode_its_steps(tmp_path):
    n, size = 8, 8 * 2**20
    cm = collective_matrix("ring", "all_reduce", n, size, nodes=16)
    path = tmp_path / "ar.cm"
    path.write_text(format_cm(cm))
    back = read_cm(path)
    assert without_lines(back) == cm
    dag = collective_flows("ring", "all_reduce", n, size)
    assert len(back.flows) == 2 * (n - 1) * n and {f.size for f in back.flows} == {size // n}
    fired_by = {}
    for f in back.flows:
        if f.recv_done_trigger is not None:
            fired_by.setdefault(f.recv_done_trigger, []).append(f.id - 1)
    kinds = {t.id: t.kind for t in back.triggers}
    for i, f in enumerate(back.flows):
        k, p = divmod(i, n)  # step k, position p sends to p + 1
        assert (f.src, f.dst) == (p, (p + 1) % n)
        if k == 0:
            assert (f.start_us, f.trigger) == (0, None)
            continue
        # Step k of p starts when step k - 1 of p - 1 has arrived at p: one oneshot trigger.
        assert f.start_us is None and kinds[f.trigger] == "oneshot"
        assert fired_by[f.trigger] == [(k - 1) * n + (p - 1) % n] == dag[i]["after"]


def test_direct_all_reduce_waits_at_a_barrier_per_rank():
    n = 4
    cm = collective_matrix("direct", "all_reduce", n, 4096)
    barriers = [t for t in cm.triggers if t.kind == "barrier"]
    # Rank q sends its reduced block once the n - 1 pieces of it have arrived.
    assert len(barriers) == n and {t.count for t in barriers} == {n - 1}
    for t in barriers:
        senders = {f.src for f in cm.flows if f.trigger == t.id}
        feeders = [f for f in cm.flows if f.recv_done_trigger == t.id]
        assert len(senders) == 1 and len(feeders) == n - 1 and {f.dst for f in feeders} == senders


def test_the_full_format_reads_triggers_and_failures_and_names_bad_lines(tmp_path):
    good = ("Nodes 16\nConnections 2\nTriggers 1\nFailures 1\n0->1 id 1 start 5 size 4096 recv_done_trigger 7 prio 3\n"
            "2->3 id 2 trigger 7 size 100\ntrigger id 7 barrier count 1\nfailure switch_type AGG switch_id 2 link_id 1\n")
    p = tmp_path / "g.cm"
    p.write_text(good)
    cm = read_cm(p)
    assert [(f.start_us, f.trigger, f.recv_done_trigger, f.prio) for f in cm.flows] == [(5, None, 7, 3), (None, 7, None, None)]
    assert without_lines(cm).failures == [CmFailure("AGG", 2, 1)]
    assert format_cm(cm) == good
    bad = {
        "0->1 id 1 start 0 trigger 2 size 10\ntrigger id 2 oneshot\n": (1, "trigger", "both `start` and `trigger`"),
        "0->1 id 1 trigger 2 size 10\n": (1, "trigger", "trigger 2 is never defined"),
        "0->1 id 1 start 0 size 10\ntrigger id 2 barrier\n": (2, "count", "needs `count N`"),
        "0->1 trigger 2 size 10\ntrigger id 2 oneshot\n": (1, "id", "but no `id`"),
        "Triggers 2\n0->1 id 1 start 0 size 10\ntrigger id 2 oneshot\n": (None, "Triggers", "`Triggers 2` but the file has 1"),
        "0->1 id 1 start 0 size 10\nfailure switch_type SPINE switch_id 0 link_id 0\n": (2, "switch_type", "TOR, AGG, CORE"),
        "0->1 id 1 start 0 size 10\ntrigger id 2 oneshot\ntrigger id 2 multishot\n": (3, "id", "also defined on line 2"),
    }
    for body, (line, field, words) in bad.items():
        p.write_text(body)
        with pytest.raises(TrafficFileError) as e:
            read_cm(p)
        assert (e.value.line, e.value.field) == (line, field) and words in str(e.value), body


HTSIM_OUT = """Connection 0->1 starting at 0 size 1048576
Flow Uec_0_1 flowId 1 uecSrc1 finished at 23.5 total messages 1 total packets 256 RTS 0 total bytes 1048576 in_flight now 0
Flow Uec_1_2 flowId 2 uecSrc2 finished at 30.25 total messages 1 total packets 256 RTS 0 total bytes 1048576 in_flight now 0
"""


def test_parse_reads_htsims_completions_into_the_flow_frame(tmp_path):
    p = tmp_path / "t.cm"
    p.write_text("Nodes 4\nConnections 2\n0->1 id 1 start 2 size 1048576 recv_done_trigger 1\n"
                 "1->2 id 2 trigger 1 size 1048576\ntrigger id 1 oneshot\n")
    cm = read_cm(p)
    frame = parse_output(HTSIM_OUT, cm)
    expected = pd.DataFrame({"flow_id": [1, 2], "src": [0, 1], "dst": [1, 2], "bytes": [1048576, 1048576],
                             "start_ps": [2_000_000, float("nan")], "finish_ps": [23_500_000, 30_250_000],
                             "fct_ps": [21_500_000, float("nan")]})
    pd.testing.assert_frame_equal(frame, expected, check_dtype=False)
    # Without the matrix: sizes from htsim's own line, no starts.
    alone = parse_output(HTSIM_OUT)
    assert alone["bytes"].tolist() == [1048576] * 2 and alone["start_ps"].isna().all()
    with pytest.raises(HtsimOutputError, match=r"flows \[2\] of the connection matrix never finished"):
        parse_output(HTSIM_OUT.rsplit("Flow", 1)[0], cm)
    with pytest.raises(HtsimOutputError, match=r"line 2: flow 1 \(0->1\) is no flow in the connection matrix"):
        parse_output(HTSIM_OUT, read_cm_text(tmp_path, "Nodes 4\nConnections 1\n0->1 id 9 start 0 size 10\n"))
    with pytest.raises(HtsimOutputError, match="no `Flow ... finished at T` lines"):
        parse_output("Starting simulation\nDone\n")
    # The CLI writes the same frame.
    (tmp_path / "out.txt").write_text(HTSIM_OUT)
    res = runner.invoke(app, ["htsim", "parse", str(tmp_path / "out.txt"), "--cm", str(p), "--flows-out", str(tmp_path / "f.csv")])
    assert res.exit_code == 0, res.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "f.csv"), frame, check_dtype=False)


def read_cm_text(tmp_path, text: str) -> ConnectionMatrix:
    p = tmp_path / "x.cm"
    p.write_text(text)
    return read_cm(p)


def test_flags_follow_the_fabric_and_name_what_does_not_carry_over():
    cfg = build_config("leaf-spine:leaves=4,spines=2", None, lb="plb", seed=7, link={"rate_gbps": 400, "latency_ns": 250},
                       switch={"buffer_bytes": 41_580, "ecn": False})
    args, notes = uec_flags(cfg, "x.cm")
    flag = lambda k: args[args.index(k) + 1]  # noqa: E731
    assert (flag("-tiers"), flag("-linkspeed"), flag("-hop_latency"), flag("-q"), flag("-seed")) == ("2", "400000", "0.25", "10", "7")
    assert "-ecn" not in args and "-load_balancing_algo" not in args
    assert any("htsim_uec always marks ECN" in n for n in notes) and any(n.startswith("lb plb") for n in notes)


def test_an_oversubscribed_fat_tree_is_named_as_not_carried_over():
    full = uec_flags(build_config("fat-tree:k=8", None), "x.cm")
    over = uec_flags(build_config("fat-tree:k=8,oversubscription=4", None), "x.cm")
    assert over[0] == full[0] and ("-nodes", "128") == tuple(over[0][over[0].index("-nodes"):][:2])
    assert [n for n in over[1] if n not in full[1]] == ["oversubscription 4: not carried over (these flags build a full-bisection tree)"]
