"""Capture real PyTorch runs (CPU, gloo) and check the converted Chakra ETs against what the
model and the training script say independently."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from chakra.schema.protobuf import et_def_pb2 as pb
from tracefabric.errors import AstraExtensionWarning, ConfigError
from tracefabric.traces import validate as v
from tracefabric.traces.capture import capture
from tracefabric.traces.chakra_io import framed, comm_type_name, read_pb_trace, read_trace, write_trace
from tracefabric.traces.convert import ConversionError, convert, kineto_sync_dependencies

from conftest import need_torch_module

need_torch_module()
from tracefabric.traces.workloads import get_workload  # noqa: E402
from tracefabric.traces.workloads.tiny_llama import TinyLlamaConfig  # noqa: E402

FP32 = 4
MOE = {"tokens": 16, "dim": 8, "delay_rank": 1, "delay_ms": 300.0}


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory) -> Path:
    out = capture(get_workload("fsdp2-llama"), tmp_path_factory.mktemp("fsdp2"), world=2)
    return convert(out)


@pytest.fixture(scope="module")
def moe(tmp_path_factory) -> Path:
    out = capture(get_workload("moe"), tmp_path_factory.mktemp("moe"), world=4, **MOE)
    return convert(out)


@pytest.fixture(scope="module")
def moe_ep3(tmp_path_factory) -> Path:
    """6 ranks, 3 experts: two expert-parallel groups [0,1,2], [3,4,5]; ranks r and r + 3 hold the
    same expert. The groups have sizes 6, 3 and 2, but an all-reduce's shape never tells its
    group: the capture's annotations must."""
    out = capture(get_workload("moe"), tmp_path_factory.mktemp("moe_ep3"), world=6, tokens=12, dim=8, ep=3)
    return convert(out)


def colls(et: Path, rank: int) -> list:
    _, nodes = read_trace(et / f"trace.{rank}.et")
    return [n for n in nodes if n.type == "COMM_COLL_NODE"]


def padded_bytes(shapes: list[tuple[int, ...]], world: int) -> int:
    """FSDP2 shards each parameter on dim 0 into `world` equal chunks, padding dim 0 up."""
    return sum(math.ceil(s[0] / world) * world * math.prod(s[1:]) for s in shapes) * FP32


def fsdp_expected(world: int, flat: bool) -> list[tuple[str, int]]:
    """The collective sequence of one FSDP training step of the tiny Llama, from its shapes.

    FSDP2 shards each parameter on dim 0 (padding dim 0 up); FSDP1 flattens each unit into one
    FlatParameter padded to a multiple of the world size. Forward all-gathers every unit (root
    first, then blocks in order). Non-root units reshard after forward and the root does not, so
    backward all-gathers the blocks again (last first) and reduce-scatters every unit's
    gradients, the root's last."""
    c = TinyLlamaConfig()
    kv = c.dim // c.heads * c.kv_heads
    block_shapes = [(c.dim, c.dim), (kv, c.dim), (kv, c.dim), (c.dim, c.dim), (c.ffn, c.dim), (c.ffn, c.dim),
                    (c.dim, c.ffn), (c.dim,), (c.dim,)]
    root_shapes = [(c.vocab, c.dim), (c.dim,), (c.vocab, c.dim)]
    if flat:
        block, root = (math.ceil(sum(math.prod(s) for s in shapes) / world) * world * FP32
                       for shapes in (block_shapes, root_shapes))
    else:
        block, root = padded_bytes(block_shapes, world), padded_bytes(root_shapes, world)
    # The zoo's closed-form counts for the same model (traces/models.py) must agree with the shapes.
    from tracefabric.traces.models import get_model

    m = get_model("tiny-llama")
    assert block == m.layer_params() * FP32 == 37_120
    assert root == (m.embedding_params() + m.head_params()) * FP32 == 16_512
    # An all-gather's comm_size is each rank's shard of the padded buffer.
    blocks = [("ALL_GATHER", block // world)] * c.layers
    return ([("ALL_GATHER", root // world)] + blocks + blocks
            + [("REDUCE_SCATTER", block)] * c.layers + [("REDUCE_SCATTER", root)])


def assert_fsdp_sequence(et: Path, world: int, flat: bool) -> None:
    expected = fsdp_expected(world, flat)
    for rank in range(world):
        got = [(comm_type_name(n.attrs["comm_type"]), n.attrs["comm_size"]) for n in colls(et, rank)]
        assert got == expected
        assert {n.attrs["pg_name"] for n in colls(et, rank)} == {"0"}
    assert json.loads((et / "comm_groups.json").read_text()) == {"0": list(range(world))}


def test_fsdp2_collectives_match_the_reshard_policy_and_parameter_counts(fsdp2):
    assert_fsdp_sequence(fsdp2, 2, flat=False)


def test_fsdp1_flat_parameters_give_the_same_sequence(tmp_path):
    out = capture(get_workload("fsdp1-llama"), tmp_path, world=2)
    assert_fsdp_sequence(convert(out), 2, flat=True)


def test_every_collective_has_a_consumer_and_no_backend_records_remain(fsdp2, moe):
    for et, world in ((fsdp2, 2), (moe, 4)):
        for rank in range(world):
            _, nodes = read_trace(et / f"trace.{rank}.et")
            waited = {d for n in nodes for d in n.data_deps}
            comm = [n for n in nodes if n.type.startswith("COMM")]
            assert comm and all(n.id in waited for n in comm)
            assert not [n.name for n in nodes if n.name.startswith(("gloo:", "nccl:"))]
            assert all(not n.attrs["is_cpu_op"] for n in comm)


def test_moe_all_to_all_splits_equal_the_tokens_the_script_routed(moe):
    row = MOE["dim"] * FP32
    for rank in range(4):
        rec = json.loads((moe.parent / "records" / f"rank{rank}.json").read_text())
        send = next(x["value"] for x in rec["send_tokens"] if x["step"] == 1)  # step 0 is the warm-up
        recv = next(x["value"] for x in rec["recv_tokens"] if x["step"] == 1)
        a2a = [n for n in colls(moe, rank) if comm_type_name(n.attrs["comm_type"]) == "ALL_TO_ALL"]
        counts, dispatch, combine, combine_grad = a2a
        assert counts.attrs["comm_split_sizes"] == [8] * 4  # one int64 token count per peer
        assert dispatch.attrs["comm_split_sizes"] == [t * row for t in send]
        assert dispatch.attrs["comm_recv_split_sizes"] == [t * row for t in recv]
        assert dispatch.attrs["comm_size"] == sum(send) * row == MOE["tokens"] * row
        assert combine.attrs["comm_split_sizes"] == [t * row for t in recv]
        assert combine_grad.attrs["comm_split_sizes"] == [t * row for t in send]


def test_waiting_for_a_straggler_is_separated_from_the_collective(moe):
    """Rank 1 sleeps 300 ms before the dispatch: ranks receiving its tokens wait ~300 ms; the
    all-to-all itself (a few hundred bytes) takes a small fraction of that."""
    delay_us = MOE["delay_ms"] * 1e3
    waiting = 0
    for rank in range(4):
        rec = json.loads((moe.parent / "records" / f"rank{rank}.json").read_text())
        recv = next(x["value"] for x in rec["recv_tokens"] if x["step"] == 1)
        dispatch = colls(moe, rank)[1]
        if rank != 1 and recv[1] > 0:
            waiting += 1
            assert dispatch.attrs["wait_micros"] >= 0.8 * delay_us
            assert dispatch.duration_micros < 0.5 * delay_us
            assert dispatch.attrs["own_micros"] == dispatch.duration_micros
    assert waiting >= 1
    assert colls(moe, 1)[1].attrs["wait_micros"] < 0.2 * delay_us


def test_converted_traces_validate_and_decode_with_chakra_jsonizer(fsdp2, moe, tmp_path):
    for et in (fsdp2, moe):
        traces, groups = v.load(et)
        assert v.problems(traces, groups) == []
    out = tmp_path / "rank0.json"
    subprocess.run(["chakra_jsonizer", "--input_filename", str(moe / "trace.0.et"), "--output_filename", str(out)],
                   check=True, capture_output=True)
    text = out.read_text()
    ours = [n for n in read_trace(moe / "trace.0.et")[1] if n.type == "COMM_COLL_NODE"]
    assert text.count("COMM_COLL_NODE") == len(ours) == 5
    assert text.count('"comm_split_sizes"') == 4


def _rewrite(src: Path, dst: Path, rank: int, edit) -> Path:
    shutil.copytree(src, dst)
    meta, nodes = read_pb_trace(dst / f"trace.{rank}.et")
    nodes = edit(meta, nodes) or nodes
    with open(dst / f"trace.{rank}.et", "wb") as f:
        f.write(framed(meta))
        for n in nodes:
            f.write(framed(n))
    return dst


def _problems(et: Path) -> str:
    traces, groups = v.load(et)
    return "\n".join(v.problems(traces, groups))


def test_validate_names_rank_node_and_field_for_each_corruption(fsdp2, moe, tmp_path):
    def by_name(nodes, kind):
        return [n for n in nodes if n.type == pb.NodeType.Value(kind)]

    def cycle(meta, nodes):
        a, b = by_name(nodes, "COMM_COLL_NODE")[:2]
        a.data_deps.append(b.id)  # b (later) already depends on a through the chain
        return nodes

    msg = _problems(_rewrite(fsdp2, tmp_path / "cycle", 1, cycle))
    assert "rank 1" in msg and "dependency cycle through nodes" in msg

    def missing(meta, nodes):
        comm = by_name(nodes, "COMM_COLL_NODE")[0]
        return [n for n in nodes if n.id != comm.id]

    msg = _problems(_rewrite(fsdp2, tmp_path / "missing", 0, missing))
    assert "rank 0" in msg and "refers to missing node" in msg
    assert "rank 1 issues 8 collectives, rank 0 issues 7" in msg

    def resize(meta, nodes):
        n = by_name(nodes, "COMM_COLL_NODE")[1]
        next(a for a in n.attr if a.name == "comm_size").int64_val = 999
        return nodes

    msg = _problems(_rewrite(fsdp2, tmp_path / "resize", 1, resize))
    assert "collective #1: rank 0 has ALL_GATHER 18560 B" in msg and "rank 1 has ALL_GATHER 999 B" in msg

    def schema(meta, nodes):
        meta.version = "0.0.3"

    msg = _problems(_rewrite(fsdp2, tmp_path / "schema", 0, schema))
    assert "field 'version' is '0.0.3'; supported: 0.0.4" in msg

    def self_loop(meta, nodes):
        nodes[0].ctrl_deps.append(nodes[0].id)

    msg = _problems(_rewrite(fsdp2, tmp_path / "self", 0, self_loop))
    assert f"node {read_pb_trace(fsdp2 / 'trace.0.et')[1][0].id}" in msg and "'ctrl_deps' points to the node itself" in msg

    def split(meta, nodes):
        n = by_name(nodes, "COMM_COLL_NODE")[1]
        sizes = next(a for a in n.attr if a.name == "comm_split_sizes").int64_list.values
        sizes[2] += 32

    msg = _problems(_rewrite(moe, tmp_path / "split", 0, split))
    assert "rank 0 sends" in msg and "to rank 2" in msg and "comm_recv_split_sizes" in msg


def test_validate_reports_unmatched_send(tmp_path):
    from tracefabric.traces.models import get_model
    from tracefabric.traces.synthesis import Plan, synthesize, write

    s = synthesize(get_model("gpt2-small"), Plan(parallel="dp", world=4, gpus_per_server=1, pp=2, microbatches=2))
    write(s, tmp_path / "pp")
    traces, groups = v.load(tmp_path / "pp")
    assert v.problems(traces, groups) == []  # synthesized traces pass the same checks

    def drop_recv(meta, nodes):
        recv = by_name_first(nodes, "COMM_RECV_NODE")
        return [n for n in nodes if n.id != recv.id and recv.id not in n.data_deps]

    def by_name_first(nodes, kind):
        return next(n for n in nodes if n.type == pb.NodeType.Value(kind))

    rank = next(t.rank for t in traces if any(n.type == "COMM_RECV_NODE" for n in t.nodes))
    prefix = traces[0].path.name.rsplit(".", 2)[0]
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "pp", bad)
    meta, nodes = read_pb_trace(bad / f"{prefix}.{rank}.et")
    with open(bad / f"{prefix}.{rank}.et", "wb") as f:
        f.write(framed(meta))
        for n in drop_recv(meta, nodes):
            f.write(framed(n))
    assert "1 send(s), 0 receive(s): a simulator would deadlock" in _problems(bad)


def test_cli_validate_fails_with_the_message(fsdp2, tmp_path):
    def schema(meta, nodes):
        meta.version = "9.9"

    bad = _rewrite(fsdp2, tmp_path / "bad", 1, schema)
    r = subprocess.run(["tracefabric", "trace", "validate", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "rank 1" in r.stdout and "'9.9'" in r.stdout
    r = subprocess.run(["tracefabric", "trace", "validate", str(fsdp2)], capture_output=True, text=True)
    assert r.returncode == 0 and "2 ranks valid" in r.stdout


def test_sync_dependencies_from_kineto():
    """A synchronize call depends on the kernel that finished last before it returned."""
    k = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k1", "ts": 0, "dur": 10, "args": {"External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": 5, "dur": 15, "args": {"External id": 2}},
        {"ph": "X", "cat": "kernel", "name": "k3", "ts": 30, "dur": 5, "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 12, "dur": 13,
         "args": {"External id": 9}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 26, "dur": 1, "args": {"External id": 3}},
    ]}
    assert kineto_sync_dependencies(k) == {9: [2]}


def test_bad_capture_inputs_are_named(tmp_path):
    with pytest.raises(ConversionError, match="capture.json: file not found"):
        convert(tmp_path)
    (tmp_path / "capture.json").write_text(json.dumps({"world": 1}))
    with pytest.raises(ConversionError, match=r"rank0\.host\.json: file not found"):
        convert(tmp_path)
    from tracefabric.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown backend 'mpi'"):
        capture(get_workload("moe"), tmp_path, world=2, backend="mpi")
    with pytest.raises(ConfigError, match="FILE.py:FUNCTION"):
        capture("no_colon", tmp_path, world=2)
    with pytest.raises(ConfigError, match="unknown workload 'bert'"):
        get_workload("bert")
    # Each of these used to be a traceback, or was found only inside every spawned rank.
    (tmp_path / "sys.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"sys\.json is not a \.py file"):
        capture(f"{tmp_path}/sys.json:build", tmp_path, world=2)
    with pytest.raises(ConfigError, match=r"cannot import module 'no_such_module_xyz'"):
        capture("no_such_module_xyz:build", tmp_path, world=2)
    with pytest.raises(ConfigError, match=r"world must be in 1\.\.256 local ranks \(got 1180591620717411303424\)"):
        capture(get_workload("moe"), tmp_path, world=2**70)
    with pytest.raises(ConfigError, match=r"need warmup >= 0 and steps >= 1 \(got warmup=1, steps=0\)"):
        capture(get_workload("moe"), tmp_path, world=2, steps=0)


# --- synthesis and rescaling tied to the captured runs (the synthesis issue's checks 2 and 5) ---

def sequence(et: Path, rank: int, groups: dict[str, list[int]]) -> list[tuple[str, list[int], int]]:
    """(type, group ranks, bytes) of every collective in issue order."""
    return [(comm_type_name(n.attrs["comm_type"]), groups[str(n.attrs["pg_name"])], n.attrs["comm_size"])
            for n in colls(et, rank)]


def synthesize_tiny_llama(world: int, out: Path) -> Path:
    from tracefabric.traces.models import get_model
    from tracefabric.traces.synthesis import Plan, synthesize, write

    c = TinyLlamaConfig()
    s = synthesize(get_model("tiny-llama"), Plan("fsdp", world=world, gpus_per_server=1, precision="fp32",
                                                 seq=c.seq, micro_batch=c.batch, root_unit=True))
    write(s, out, prefix="trace")
    return out


def test_synthesized_tiny_llama_issues_the_captured_fsdp2_sequence(fsdp2, tmp_path):
    from tracefabric.traces.models import get_model

    c, m = TinyLlamaConfig(), get_model("tiny-llama")  # the zoo entry is the model the workload trains
    assert (m.layers, m.hidden, m.ffn, m.heads, m.kv_heads, m.vocab) == (c.layers, c.dim, c.ffn, c.heads, c.kv_heads, c.vocab)
    syn = synthesize_tiny_llama(2, tmp_path / "syn")
    for rank in range(2):
        got = sequence(syn, rank, json.loads((syn / "comm_groups.json").read_text()))
        assert got == sequence(fsdp2, rank, json.loads((fsdp2 / "comm_groups.json").read_text()))
        assert len(got) == 8


def test_synthesized_tiny_moe_with_the_captured_routing_issues_the_captured_sequence(moe, tmp_path):
    """The zoo's `tiny-moe` is the layer the MoE workload trains (4 ranks, one expert each, top-1,
    fp32). Given the routing the script decided (its recorded token counts), synthesis issues the
    captured collectives rank by rank: counts exchange, dispatch, combine (the dispatch matrix
    transposed), the combine's gradient, and the router's all-reduce. The dispatch's gradient is
    absent in both: the layer's input is data, so autograd never sends it."""
    from tracefabric.traces.models import get_model
    from tracefabric.traces.synthesis import Plan, synthesize, write

    m = get_model("tiny-moe")
    assert (m.hidden, m.ffn, m.experts, m.top_k) == (MOE["dim"], 16, 4, 1)
    routing = [next(x["value"] for x in json.loads((moe.parent / "records" / f"rank{r}.json").read_text())["send_tokens"]
                    if x["step"] == 1) for r in range(4)]
    s = synthesize(m, Plan("dp", world=4, gpus_per_server=1, precision="fp32", seq=MOE["tokens"], ep=4, routing=routing))
    syn = write(s, tmp_path / "syn", prefix="trace") and tmp_path / "syn"
    g_syn = json.loads((syn / "comm_groups.json").read_text())
    g_cap = json.loads((moe / "comm_groups.json").read_text())
    for rank in range(4):
        got = sequence(syn, rank, g_syn)
        assert got == sequence(moe, rank, g_cap)
        assert [t for t, _, _ in got] == ["ALL_TO_ALL"] * 4 + ["ALL_REDUCE"]
        splits = [n.attrs.get("comm_split_sizes") for n in colls(syn, rank)]
        assert splits == [n.attrs.get("comm_split_sizes") for n in colls(moe, rank)]


def test_measured_durations_carry_the_captured_compute_onto_synthesized_traces(fsdp2, moe, tmp_path):
    """Synthesized tiny Llama with the captured compute: between every two consecutive
    collectives a synthesized rank computes what the captured rank measured there (intervals
    without a synthesized compute node hand their time on), so totals match exactly; on 8 ranks
    rank r takes captured rank r mod 2. Simulated, both the captured and the synthesized
    iteration lie between the slowest rank's compute (a lower bound) and the lock-step time
    (every collective a barrier: sum over intervals of the slowest rank's compute, plus every
    collective's time, an upper bound); synthesis may overlap more than gloo's blocking calls."""
    from dataclasses import replace

    from tracefabric.errors import ConfigError
    from tracefabric.collectives.iteration import simulate
    from tracefabric.traces.measured import intervals, measured_durations
    from tracefabric.traces.models import get_model
    from tracefabric.traces.synthesis import Plan, synthesize, write

    c = TinyLlamaConfig()
    plan = lambda world: Plan("fsdp", world=world, gpus_per_server=1, precision="fp32", seq=c.seq,  # noqa: E731
                              micro_batch=c.batch, root_unit=True)
    for world in (2, 8):
        measured, report = measured_durations(synthesize(get_model("tiny-llama"), plan(world)), fsdp2)
        for rank in range(world):
            _, cap_nodes = read_trace(fsdp2 / f"trace.{rank % 2}.et")
            labels, cap = intervals(cap_nodes)
            got_labels, got = intervals(measured.graphs[rank])
            assert got_labels == labels and len(labels) == 8
            cap_t, got_t = [sum(n.duration_micros for n in p) for p in cap], [sum(n.duration_micros for n in p) for p in got]
            assert sum(got_t) == sum(cap_t) == report["ranks"][rank]["captured_compute_us"] > 0
            for i, part in enumerate(got):
                if part and all(got[:i]):  # no earlier interval handed its time on into this one
                    assert got_t[i] == cap_t[i]
    write(measured_durations(synthesize(get_model("tiny-llama"), plan(2)), fsdp2)[0], tmp_path / "meas", prefix="trace")
    roofline = synthesize_tiny_llama(2, tmp_path / "roof")
    system = {"scheduling-policy": "LIFO", "collective-optimization": "localBWAware", "preferred-dataset-splits": 1,
              "endpoint-delay": 10, "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
              "all-reduce-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
    net = {"topology": ["Switch"], "npus_count": [2], "bandwidth": [50], "latency": [500]}
    walls = {}
    for et in (fsdp2, tmp_path / "meas", roofline):
        r = simulate(et, system, net, backend="analytical:astra-unaware")
        per_rank = [[sum(max(n.duration_micros * 1000, 1) for n in p) for p in intervals(read_trace(et / f"trace.{k}.et")[1])[1]]
                    for k in range(2)]
        lock_step = sum(max(ts) for ts in zip(*per_rank)) + r.collectives["cct_ns"].sum()
        walls[et] = r.ranks["wall_ns"].max()
        assert max(map(sum, per_rank)) <= walls[et] <= lock_step * 1.001
    assert walls[roofline] < 0.01 * walls[fsdp2]  # an H100 roofline vs ops measured on a 2-core CPU
    with pytest.raises(ConfigError, match="communication node #0 is ALL_TO_ALL in the captured trace but ALL_GATHER"):
        measured_durations(synthesize(get_model("tiny-llama"), plan(2)), moe)
    # Another model with the same sequence (FFN 48 instead of 64) was accepted. A layer unit
    # gathers, in fp32: q and o (dim^2 each), k and v (dim x kv_heads x head_dim each), three
    # FFN projections (dim x ffn) and two norms (dim).
    narrow = replace(get_model("tiny-llama"), ffn=48)
    per_layer = lambda ffn: FP32 * (2 * c.dim * c.dim + 2 * c.dim * (c.dim // c.heads * c.kv_heads)  # noqa: E731
                                    + 3 * c.dim * ffn + 2 * c.dim)
    assert per_layer(64) == 37_120
    # All-gathers carry each of the 2 ranks' shard.
    with pytest.raises(ConfigError, match=f"#1 \\(ALL_GATHER\\) has comm_size 18,560 B in the captured trace but {-(-per_layer(48) // 2):,} B"):
        measured_durations(synthesize(narrow, plan(2)), fsdp2)


def test_expert_parallel_capture_names_every_group_and_rescales_by_group_shape(moe_ep3, tmp_path):
    """Captured with gloo (which records no group names), every collective lands on the group
    the script used: counts/dispatch/combine on the rank's EP block, the router's gradient
    (3 experts x 8 x fp32 = 96 B) on the world, the expert's (8x16+16+16x8+8 = 280 fp32 = 1,120 B)
    on the ranks holding the same expert. Rescaled to 12 ranks, EP blocks are copied with their
    routing, the world and the expert-data groups widen."""
    from tracefabric.traces.rescale import rescale

    groups = json.loads((moe_ep3 / "comm_groups.json").read_text())
    row = 8 * FP32
    for rank in range(6):
        rec = json.loads((moe_ep3.parent / "records" / f"rank{rank}.json").read_text())
        send = next(x["value"] for x in rec["send_tokens"] if x["step"] == 1)
        got = sequence(moe_ep3, rank, groups)
        block = [rank // 3 * 3 + i for i in range(3)]
        assert [(t, m) for t, m, _ in got] == [("ALL_TO_ALL", block)] * 4 + [("ALL_REDUCE", list(range(6))),
                                                                            ("ALL_REDUCE", [rank % 3, rank % 3 + 3])]
        assert [b for _, _, b in got][4:] == [3 * 8 * FP32, 280 * FP32]
        assert colls(moe_ep3, rank)[1].attrs["comm_split_sizes"] == [t * row for t in send]
        _, nodes = read_trace(moe_ep3 / f"trace.{rank}.et")
        assert not [n.name for n in nodes if n.name.startswith("## tracefabric")]  # annotations removed
    report = rescale(moe_ep3, 12, tmp_path / "r12")
    assert sorted(g["shape"] for g in report["groups"].values()) == ["block"] * 2 + ["strided"] * 3 + ["world"]
    g12 = json.loads((tmp_path / "r12" / "comm_groups.json").read_text())
    for rank in range(12):
        got = sequence(tmp_path / "r12", rank, g12)
        block = [rank // 3 * 3 + i for i in range(3)]
        assert [m for _, m, _ in got] == [block] * 4 + [list(range(12)), list(range(rank % 3, 12, 3))]
        assert [(t, b) for t, _, b in got] == [(t, b) for t, _, b in sequence(moe_ep3, rank % 6, groups)]
        assert [n.attrs.get("comm_split_sizes") for n in colls(tmp_path / "r12", rank)] == \
            [n.attrs.get("comm_split_sizes") for n in colls(moe_ep3, rank % 6)]
    # The file lists exactly the 1 + 4 + 3 groups the ranks use, each once, captured ids kept.
    assert sorted(map(sorted, g12.values())) == sorted([list(range(12))] + [list(range(b, b + 3)) for b in (0, 3, 6, 9)]
                                                        + [list(range(e, 12, 3)) for e in range(3)])
    for g, members in groups.items():
        if len(members) == 6:
            assert g12[g] == list(range(12))
        elif len(members) == 3:  # an EP block is copied; the captured one keeps its id and ranks
            assert g12[g] == members
        else:  # an expert-data pair widens to every third rank
            assert g12[g] == list(range(min(members), 12, 3))
    traces, tg = v.load(tmp_path / "r12")
    assert v.problems(traces, tg) == []


def test_rescaling_the_captured_trace_to_8_ranks_equals_synthesizing_8(fsdp2, tmp_path):
    from tracefabric.traces.rescale import rescale

    report = rescale(fsdp2, 8, tmp_path / "r8")
    assert report["from_ranks"] == 2 and report["to_ranks"] == 8
    syn = synthesize_tiny_llama(8, tmp_path / "syn8")
    g_r = json.loads((tmp_path / "r8" / "comm_groups.json").read_text())
    g_s = json.loads((syn / "comm_groups.json").read_text())
    for rank in range(8):
        assert sequence(tmp_path / "r8", rank, g_r) == sequence(syn, rank, g_s)
    traces, groups = v.load(tmp_path / "r8")
    assert len(traces) == 8 and v.problems(traces, groups) == []
    # Measured compute is kept (weak scaling): new rank 5 runs captured rank 1's graph.
    assert [n.duration_micros for n in traces[5].nodes if n.type == "COMP_NODE"] == \
        [n.duration_micros for n in read_trace(fsdp2 / "trace.1.et")[1] if n.type == "COMP_NODE"]


def test_rescale_pads_to_the_new_width_and_refuses_what_it_cannot_rescale(fsdp2, moe, tmp_path):
    from tracefabric.traces.rescale import RescaleError, rescale

    report = rescale(fsdp2, 3, tmp_path / "r3")
    # 9,280 fp32 block parameters padded to a multiple of 3 ranks: 9,282 x 4 B; the root's 4,128
    # divide by 3 and stay.
    assert {(c["from"], c["to"]) for c in report["resized_on_rank0"]} == {(37_120, 37_128)}
    with pytest.raises(RescaleError, match="all-to-all traffic depends on expert placement"):
        rescale(moe, 8, tmp_path / "moe8")
    for bad in (0, 2.5, "4", True, 2**40):  # 2**40 ran out of memory; "4", 2.5 were TypeErrors
        with pytest.raises(RescaleError, match=r"ranks must be an integer in 1\.\.131072"):
            rescale(fsdp2, bad, tmp_path / "bad")
    # Into its own folder it overwrote comm_groups.json and left the old traces beside the new.
    with pytest.raises(RescaleError, match=r"is the input folder; its comm_groups\.json would be overwritten") as e:
        rescale(fsdp2, 4, fsdp2)
    assert e.value.field == "out"


def test_a_failing_user_step_is_reported_with_its_error(tmp_path):
    from tracefabric.traces.capture import CaptureError

    script = tmp_path / "bad.py"
    script.write_text("def build(ctx):\n    def step():\n        raise RuntimeError('shape mismatch in my model')\n"
                      "    return step\n")
    with pytest.raises(CaptureError, match="a rank of .*bad.py:build failed: RuntimeError: shape mismatch in my model"):
        capture(f"{script}:build", tmp_path / "out", world=2)


@pytest.mark.parametrize("returned,what", [("None", "None"), ("ctx.world", "a value of type int"),
                                           ("torch.zeros(2)", "a value of type Tensor")])
def test_a_build_function_returning_no_step_is_named_once(tmp_path, returned, what):
    # Each rank failed at its first step as "TypeError: 'NoneType' object is not callable".
    from tracefabric.traces.capture import CaptureError

    script = tmp_path / "nostep.py"
    script.write_text(f"import torch\ndef build(ctx):\n    model = torch.nn.Linear(2, 2)\n    return {returned}\n")
    with pytest.raises(CaptureError, match=rf"^capture: {script}:build returned {what}: expected a callable that runs "
                                           r"one training step \(build\(ctx\) -> step\)$") as e:
        capture(f"{script}:build", tmp_path / "out", world=2)
    assert e.value.field == "script"
    assert not (tmp_path / "out" / "raw").exists()  # refused before the profiler wrote a trace


def test_process_groups_merge_what_each_rank_saw(tmp_path):
    """c10d tells a rank only the groups it belongs to: the converter unions every rank's list."""
    from tracefabric.traces.convert import _groups_of

    for r, groups in enumerate(([{"pg_name": "0", "ranks": [0, 1, 2, 3]}, {"pg_name": "1", "ranks": [0, 1]}],
                                [{"pg_name": "0", "ranks": [0, 1, 2, 3]}, {"pg_name": "2", "ranks": [2, 3]}])):
        (tmp_path / f"rank{r}.json").write_text(json.dumps({"_process_groups": groups}))
    got = _groups_of({}, {}, [tmp_path / "rank0.json", tmp_path / "rank1.json"])
    assert {g["pg_name"]: g["ranks"] for g in got} == {"0": [0, 1, 2, 3], "1": [0, 1], "2": [2, 3]}
    kineto = {"distributedInfo": {"pg_config": [{"pg_name": "0", "ranks": [0, 1]}]}}
    assert [g["ranks"] for g in _groups_of({}, kineto, [])] == [[0, 1]]


def test_self_parented_nodes_do_not_hang_the_converter():
    """PyTorch's root node lists itself as its parent; walking a subtree must still end."""
    from tracefabric.traces.convert import _descendants

    children = {1: [{"id": 1}, {"id": 2}], 2: [{"id": 2}, {"id": 3}]}
    assert sorted(c["id"] for c in _descendants(1, children)) == [2, 3]


def test_captured_traces_run_through_the_system_layer(fsdp2, moe):
    from tracefabric.collectives.iteration import simulate

    system = {"scheduling-policy": "LIFO", "collective-optimization": "localBWAware", "preferred-dataset-splits": 1,
              "endpoint-delay": 10, "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
              "all-reduce-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
    net = lambda n: {"topology": ["Switch"], "npus_count": [n], "bandwidth": [50], "latency": [500]}  # noqa: E731
    r = simulate(fsdp2, system, net(2), backend="analytical:astra-unaware")
    kinds = {"ALL_GATHER": "all_gather", "REDUCE_SCATTER": "reduce_scatter"}
    assert [(k, b) for k, b in zip(r.collectives["kind"], r.collectives["bytes"])] == \
        [(kinds[k], b) for k, b in fsdp_expected(2, flat=False)]
    for rank in range(2):
        _, nodes = read_trace(fsdp2 / f"trace.{rank}.et")
        compute = sum(max(n.duration_micros * 1000, 1) for n in nodes if n.type == "COMP_NODE")
        row = r.ranks.loc[rank]
        assert row["compute_ns"] == compute  # every measured kernel/op duration, run once
        # A rank is always computing or waiting on communication (its own transfers, or peers
        # that have not reached the collective yet), so its wall is at most the two summed.
        assert compute <= row["wall_ns"] <= row["compute_ns"] + row["comm_ns"]
    # ASTRA-sim's ranks progress through a collective each on its own clock, so a rank that
    # reaches it late may spend less than the group's CCT in it (captured ranks are never quite
    # in step); but no collective ends after the iteration, and each takes time.
    assert r.ranks["wall_ns"].max() >= r.collectives["end_ns"].max()
    assert (r.collectives["cct_ns"] > 0).all()
    m = simulate(moe, system, net(4), backend="analytical:flow")
    a2a = m.collectives[m.collectives["kind"] == "all_to_all"]
    _, nodes = read_trace(moe / "trace.0.et")
    dispatch = [n for n in nodes if n.type == "COMM_COLL_NODE" and "comm_split_sizes" in n.attrs]
    assert len(a2a) == len(dispatch) >= 3
    # Direct all-to-all-v: one flow per non-empty off-diagonal split, summed over the ranks.
    for k, row in enumerate(a2a.itertuples()):
        nonzero = 0
        for rank in range(4):
            _, rn = read_trace(moe / f"trace.{rank}.et")
            splits = [n for n in rn if n.type == "COMM_COLL_NODE" and "comm_split_sizes" in n.attrs][k].attrs["comm_split_sizes"]
            nonzero += sum(1 for peer, b in enumerate(splits) if b > 0 and peer != rank)
        assert row.flows == nonzero


LAUNCHER = '''
import os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from tracefabric.traces.capture import TraceCapture

def main(rank, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    x = torch.ones(1000)
    with TraceCapture(out, rank=rank, warmup=1, steps=1, records={"mine": rank}, meta={"launcher": "own"}) as cap:
        for _ in cap.steps():
            dist.all_reduce(x)
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(main, args=(sys.argv[1], sys.argv[2]), nprocs=2)
'''


def test_a_capture_from_the_users_own_launcher_converts(tmp_path):
    """The documented context manager (docs/capture.md) in a launcher of the user's own: the folder it leaves
    converts like a `trace capture` folder; the one recorded all-reduce is 1,000 fp32 = 4,000 B."""
    from tracefabric.traces.capture import _free_port

    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    out = tmp_path / "mine"
    subprocess.run([sys.executable, str(script), str(out), str(_free_port())], check=True, timeout=300)
    meta = json.loads((out / "capture.json").read_text())
    assert (meta["world"], meta["backend"], meta["steps"], meta["launcher"]) == (2, "gloo", 1, "own")
    assert json.loads((out / "records" / "rank1.json").read_text())["mine"] == 1
    et = convert(out)
    for rank in range(2):
        assert [(comm_type_name(n.attrs["comm_type"]), n.attrs["comm_size"]) for n in colls(et, rank)] == [("ALL_REDUCE", 4000)]


def test_trace_capture_refuses_to_start_without_torch_distributed_or_with_another_rank(tmp_path):
    """Both were only found on leaving, after the profiled steps had run."""
    import torch.distributed as dist
    from tracefabric.traces.capture import TraceCapture

    assert not dist.is_initialized()
    with pytest.raises(ConfigError, match=r"torch\.distributed is not initialized; call torch\.distributed\.init_process_group"):
        with TraceCapture(tmp_path / "a", rank=0):
            pass
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        with pytest.raises(ConfigError, match=r"rank = 1, but this process is rank 0 of 1 in torch\.distributed") as e:
            with TraceCapture(tmp_path / "b", rank=1):
                pass
        assert e.value.field == "rank"
        assert not (tmp_path / "b" / "raw").exists()  # refused before the profiler started
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("text,message", [
    ("[]", r"expected a JSON object \(as `trace capture` writes it\), got list"),
    ('{"world": "abc"}', r"field 'world' must be a rank count in 1\.\.131072 \(got 'abc'\)"),
    ('{"world": 2.5}', r"field 'world' must be a rank count in 1\.\.131072 \(got 2\.5\)"),
    ("{", r"not valid JSON"),
    ('{"world": 2, "world": 4}', r"key 'world' appears twice"),
])
def test_a_corrupt_capture_json_is_named_not_a_traceback(tmp_path, text, message):
    (tmp_path / "capture.json").write_text(text)
    with pytest.raises(ConfigError, match=rf"capture\.json: {message}"):
        convert(tmp_path)


def _copy_capture(et: Path, to: Path) -> Path:
    """A capture folder's inputs (capture.json, raw/, records/), without its conversion."""
    to.mkdir()
    for part in ("capture.json", "raw", "records"):
        src = et.parent / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, to / part)
    return to


def test_raw_files_of_another_rank_or_run_are_refused(fsdp2, tmp_path):
    # Swapped between ranks, they converted as "valid": each rank got the other's compute.
    cap = _copy_capture(fsdp2, tmp_path / "swap")
    raw = cap / "raw"
    k0, k1 = (raw / "rank0.kineto.json").read_bytes(), (raw / "rank1.kineto.json").read_bytes()
    (raw / "rank0.kineto.json").write_bytes(k1)
    (raw / "rank1.kineto.json").write_bytes(k0)
    with pytest.raises(ConfigError, match=r"rank0\.kineto\.json: field distributedInfo\.rank = 1: expected 0 \(rank 0 of "
                                          r"capture\.json's world of 2\)$") as e:
        convert(cap)
    assert e.value.field == "rank"
    # Kineto files in place, host traces swapped: the process ids differ.
    (raw / "rank0.kineto.json").write_bytes(k0)
    (raw / "rank1.kineto.json").write_bytes(k1)
    h0, h1 = (raw / "rank0.host.json").read_bytes(), (raw / "rank1.host.json").read_bytes()
    (raw / "rank0.host.json").write_bytes(h1)
    (raw / "rank1.host.json").write_bytes(h0)
    pid1 = json.loads(h1)["pid"]
    with pytest.raises(ConfigError, match=rf"rank0\.host\.json: field 'pid' = {pid1}: expected the process that wrote "
                                          r"rank0\.kineto\.json \(\d+\): the two files are not from one run$"):
        convert(cap)
    # A world that is not the capture's, from capture.json.
    (raw / "rank0.host.json").write_bytes(h0)
    (raw / "rank1.host.json").write_bytes(h1)
    meta = json.loads((cap / "capture.json").read_text())
    (cap / "capture.json").write_text(json.dumps({**meta, "world": 1}))
    with pytest.raises(ConfigError, match=r"field distributedInfo\.world_size = 2: expected 1"):
        convert(cap)


@pytest.mark.parametrize("groups,message", [
    ([{"ranks": [0, 1]}], r"process_groups\[0\]: expected an object with a string 'pg_name' \(got \{'ranks': \[0, 1\]\}\)"),
    (["0"], r"process_groups\[0\]: expected an object with a string 'pg_name' \(got '0'\)"),
    ([{"pg_name": "0", "ranks": [0, 2]}], r"process_groups\[0\]: group '0': field 'ranks' = \[0, 2\]: expected a list of "
                                          r"ranks in 0\.\.1 \(capture\.json's world is 2\)"),
])
def test_bad_process_groups_and_records_are_named(fsdp2, tmp_path, groups, message):
    # A KeyError, a TypeError, and an error blaming the output's comm_groups.json before.
    cap = _copy_capture(fsdp2, tmp_path / "c")
    meta = json.loads((cap / "capture.json").read_text())
    (cap / "capture.json").write_text(json.dumps({**meta, "process_groups": groups}))
    with pytest.raises(ConfigError, match=rf"capture\.json: {message}$"):
        convert(cap)
    (cap / "capture.json").write_text(json.dumps(meta))
    (cap / "records" / "rank1.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"records/rank1\.json: expected a JSON object \(as `trace capture` writes it\), got list$"):
        convert(cap)


def test_a_smaller_conversion_into_the_same_folder_removes_the_old_ranks(fsdp2, tmp_path):
    cap = _copy_capture(fsdp2, tmp_path / "c")
    (cap / "et").mkdir()
    shutil.copy(fsdp2 / "trace.0.et", cap / "et" / "trace.2.et")  # as a 3-rank conversion would leave it
    et = convert(cap)
    assert sorted(p.name for p in et.glob("*.et")) == ["trace.0.et", "trace.1.et"]
    assert len(v.load(et)[0]) == 2


SUBGROUP_STEP = '''
import torch, torch.distributed as dist

def build(ctx):
    pair = dist.new_group([1, 2])
    def step():
        dist.all_reduce(torch.ones(25))                      # 100 B, world
        if ctx.rank == 1:                                    # 12 B inside group [1, 2]: group rank 1 is rank 2
            dist.send(torch.ones(3), dst=2, group=pair)
        elif ctx.rank == 2:
            dist.recv(torch.ones(3), src=1, group=pair)
        dist.barrier()
        dist.reduce(torch.ones(4), dst=0)                    # a collective `run` does not simulate
    return step
'''


def test_send_and_recv_inside_a_group_name_global_ranks_and_barriers_run(tmp_path):
    # c10d records the peer's rank in the group: rank 1's send to rank 2 of the world read as a send
    # to rank 1 (itself), rank 2's receive as one from rank 0, and `trace validate` saw a deadlock.
    script = tmp_path / "step.py"
    script.write_text(SUBGROUP_STEP)
    cap = capture(f"{script}:build", tmp_path / "cap", world=3)
    et = convert(cap)
    p2p = {r: [(n.type, n.attrs.get("comm_dst", n.attrs.get("comm_src")), n.attrs["comm_size"])
               for n in read_trace(et / f"trace.{r}.et")[1] if n.type in ("COMM_SEND_NODE", "COMM_RECV_NODE")]
           for r in range(3)}
    assert p2p == {0: [], 1: [("COMM_SEND_NODE", 2, 12)], 2: [("COMM_RECV_NODE", 1, 12)]}
    # The reduce is refused by `run`, so `trace validate` names it and `trace convert` exits 1 (it exited 0).
    traces, groups = v.load(et)
    assert [p.split(": ", 1)[1] for p in v.problems(traces, groups)] == [
        "node {} (c10d::reduce_): comm_type REDUCE: `run` simulates only ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, "
        "BARRIER".format(n.id) for t in traces for n in t.nodes if n.name == "c10d::reduce_"] and len(traces) == 3
    proc = subprocess.run(["tracefabric", "trace", "convert", str(cap)], capture_output=True, text=True)
    said = " ".join(proc.stdout.split())  # the console wraps long lines
    assert proc.returncode == 1 and "3 problem(s):" in said and said.count("comm_type REDUCE") == 3
    # Without the reduce the trace runs; the barrier is an all-reduce of 0 bytes, after the world's 100 B one.
    (tmp_path / "run").mkdir()
    for t in traces:
        kept = [n for n in t.nodes if n.name != "c10d::reduce_"]
        ids = {n.id for n in kept}
        for n in kept:
            n.data_deps = [d for d in n.data_deps if d in ids]
            n.ctrl_deps = [d for d in n.ctrl_deps if d in ids]
        write_trace(tmp_path / "run" / f"trace.{t.rank}.et", kept, t.meta)
    shutil.copy(et / "comm_groups.json", tmp_path / "run" / "comm_groups.json")
    from tracefabric.collectives.iteration import simulate
    net = {"topology": ["Switch"], "npus_count": [3], "bandwidth": [100], "latency": [1000]}
    system = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
              "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
              "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
    # ASTRA-sim has no barrier: the astra-* backends run it as tracefabric's extension, and say so.
    with pytest.warns(AstraExtensionWarning, match=r"node \d+ \('c10d::barrier'\): comm_type BARRIER: ASTRA-sim 2\.x has no "
                                                   r"barrier collective .* not ASTRA-compatible"):
        r = simulate(tmp_path / "run", system, net)
    assert r.collectives[["kind", "bytes"]].values.tolist() == [["all_reduce", 100], ["all_reduce", 0]]


P2P_STEP = '''
import torch, torch.distributed as dist

def build(ctx):
    w = torch.randn(256, 256)
    def step():
        x = torch.randn(64, 256)
        if ctx.rank == 0:
            req = dist.isend(torch.ones(1 << 22), dst=1)     # 16 MiB, overlapped with the matmuls
            y = x @ w @ w @ w
            req.wait()
            dist.send(torch.ones(1 << 16), dst=1)            # 256 KiB, blocking
            z = x @ w
        else:
            buf = torch.empty(1 << 22)
            req = dist.irecv(buf, src=0)
            y = x @ w @ w @ w
            req.wait()
            s = buf.sum()                                    # the first op reading the message
            b = torch.empty(1 << 16)
            dist.recv(b, src=0)
            z = x @ w + b[:256].sum()
    return step
'''


def test_isend_and_irecv_overlap_compute_and_blocking_send_and_recv_do_not(tmp_path):
    # They were converted as blocking: the thread waited for every transfer, so an iteration
    # that overlaps its pipeline sends with compute was simulated as if it did not.
    script = tmp_path / "step.py"
    script.write_text(P2P_STEP)
    et = convert(capture(f"{script}:build", tmp_path / "cap", world=2))
    nodes = {r: read_trace(et / f"trace.{r}.et")[1] for r in range(2)}
    p2p = {r: [n for n in nodes[r] if n.type in ("COMM_SEND_NODE", "COMM_RECV_NODE")] for r in range(2)}
    waiting = {r: [[m.name for m in nodes[r] if c.id in m.data_deps + m.ctrl_deps] for c in p2p[r]] for r in range(2)}
    assert [[c.attrs["comm_size"] for c in p2p[r]] for r in range(2)] == [[16 << 20, 256 << 10]] * 2
    # isend: nothing waits (its req.wait() records nothing); irecv: only the op reading the message.
    assert waiting == {0: [[], ["aten::matmul"]], 1: [["aten::sum"], ["aten::matmul"]]}
    # Simulated with a transfer (16 MiB at 0.5 GB/s: 33.6 ms) longer than the matmuls issued
    # between the irecv and its reader, all of their compute overlaps it.
    from tracefabric.collectives.iteration import simulate
    irecv = p2p[1][0]
    reader = next(m for m in nodes[1] if irecv.id in m.data_deps)
    between = sum(n.duration_micros for n in nodes[1] if n.type == "COMP_NODE" and irecv.id < n.id < reader.id)
    assert 0 < between * 1000 < (16 << 20) / 0.5
    net = {"topology": ["Switch"], "npus_count": [2], "bandwidth": [0.5], "latency": [1000]}
    system = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
              "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
              "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
    r = simulate(et, system, net)
    assert r.ranks.set_index("rank").loc[1, "overlap_ns"] == between * 1000


def test_a_send_to_a_rank_past_its_group_is_refused_by_name():
    # c10d names the peer by its rank in the group: group rank 1 of [1, 2] is world rank 2, and a
    # group rank 2 (a hand-edited or corrupt trace) has no world rank to map to.
    from tracefabric.traces.convert import ConversionError, _collective

    send = {"id": 9, "name": "c10d::send"}
    three_fp32 = [[1, 7, 0, 3, 4, "cpu"]]
    types = ["GenericList[Tensor]", "ScriptObject", "Int", "Int"]
    pair = [{"pg_name": "pair", "ranks": [1, 2]}]
    gloo = [{"id": 10, "name": "gloo:send", "ts": 5.0, "inclusive_dur": 1.0}]
    c = _collective(1, send, [three_fp32, None, 1, 4], types, pair, gloo, "rank 1")
    assert (c.kind, c.size, c.attrs) == ("COMM_SEND_NODE", 12, {"comm_dst": 2, "comm_tag": 4})
    with pytest.raises(ConversionError, match=r"^rank 1: c10d::send \(node 9\) addresses rank 2 of group 'pair', "
                                              r"which has 2 ranks \[1, 2\]$") as e:
        _collective(1, send, [three_fp32, None, 2, 4], types, pair, gloo, "rank 1")
    assert e.value.field == "comm_peer"


def test_a_real_nccl_capture_from_an_h100_converts_and_runs(tmp_path):
    """The `moe` workload captured with backend nccl on one H100 (torch 2.11.0+cu130, NCCL 2.28.9;
    tests/data, 32 KB): NCCL kernels are the collectives' execution records and GPU kernels come
    as nodes of their own. With one rank the all-to-alls move tokens to the rank itself."""
    import tarfile

    with tarfile.open(Path(__file__).parent / "data" / "h100_nccl_moe_world1.tar.gz") as t:
        t.extractall(tmp_path, filter="data")
    cap = tmp_path / "moe_w1"
    meta = json.loads((cap / "capture.json").read_text())
    assert (meta["backend"], meta["device"], meta["world"]) == ("nccl", "cuda", 1)
    et = convert(cap)
    traces, groups = v.load(et)
    assert v.problems(traces, groups) == []
    nodes = traces[0].nodes
    rec = json.loads((cap / "records" / "rank0.json").read_text())
    sent = next(x["value"] for x in rec["send_tokens"] if x["step"] == 1)
    row = MOE["dim"] * FP32
    got = [(comm_type_name(n.attrs["comm_type"]), n.attrs["comm_size"]) for n in nodes if n.type == "COMM_COLL_NODE"]
    # Token counts (one int64), dispatch, combine, combine's gradient, then the router's gradient
    # (dim x 1 expert, no bias) all-reduced.
    assert got == [("ALL_TO_ALL", 8)] + [("ALL_TO_ALL", sum(sent) * row)] * 3 + [("ALL_REDUCE", MOE["dim"] * FP32)]
    assert sum(sent) == 16
    # Every GPU kernel, copy and fill of the recorded step is a GPU node, except NCCL's (the collectives).
    kineto = json.loads((cap / "raw" / "rank0.kineto.json").read_text())
    gpu_events = [e for e in kineto["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    nccl = [e for e in gpu_events if e["name"].startswith("ncclDevKernel")]
    gpu_nodes = [n for n in nodes if n.type == "COMP_NODE" and n.attrs.get("is_cpu_op") is False]
    assert len(nccl) == 3 and len(gpu_nodes) == len(gpu_events) - len(nccl) == 50
    assert not [n for n in nodes if "nccl" in n.name.lower()]
    # CPU ops and kernels run on two units side by side: the iteration lies between the CPU's
    # own time and the CPU's plus the GPU's (what one shared unit gave).
    from tracefabric.collectives.iteration import simulate

    cpu_us = sum(n.duration_micros for n in nodes if n.type == "COMP_NODE" and n.attrs.get("is_cpu_op"))
    gpu_us = sum(n.duration_micros for n in gpu_nodes)
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1}}
    system = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
              "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
              "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
    r = simulate(et, system, fabric, backend="analytical:flow")
    wall = r.ranks["wall_ns"].iloc[0]
    assert cpu_us * 1000 <= wall < (cpu_us + gpu_us) * 1000 and gpu_us > 0


# --- capture: mismatched ranks, broken scripts, memory and GPUs refused with one line ---

MISMATCHED_STEP = '''
import torch, torch.distributed as dist

def build(ctx):
    def step():
        if ctx.rank == 0:  # rank 1 never sends
            dist.recv(torch.empty(1), src=1)
    return step
'''


def test_a_rank_waiting_for_a_message_never_sent_fails_after_the_collective_timeout(tmp_path):
    # It hung for gloo's default of 30 minutes.
    from tracefabric.traces.capture import COLLECTIVE_TIMEOUT_S, CaptureError

    assert COLLECTIVE_TIMEOUT_S == 300
    script = tmp_path / "mismatch.py"
    script.write_text(MISMATCHED_STEP)
    with pytest.raises(CaptureError, match=r"^capture: a rank of .*mismatch\.py:build waited longer than the collective "
                                           r"timeout \(3 s\) for another rank: .*raise collective_timeout "
                                           r"\(--collective-timeout\)$") as e:
        capture(f"{script}:build", tmp_path / "out", world=2, collective_timeout=3)
    assert e.value.field == "collective_timeout"
    for bad in (0, -1, float("nan"), True, "5", 10**9):
        with pytest.raises(ConfigError, match=rf"^capture: collective_timeout = {bad!r}: expected a number of seconds "
                                              r"above 0 and at most 86,400$"):
            capture(f"{script}:build", tmp_path / "out", world=2, collective_timeout=bad)


def test_a_rank_that_exits_without_an_exception_is_named(tmp_path):
    # torch's ProcessExitedException was a traceback.
    from tracefabric.traces.capture import CaptureError

    script = tmp_path / "quits.py"
    script.write_text("import os\ndef build(ctx):\n    def step():\n        os._exit(7)\n    return step\n")
    with pytest.raises(CaptureError, match=r"^capture: rank [01] of .*quits\.py:build exited with code 7 before its "
                                           r"steps ended$"):
        capture(f"{script}:build", tmp_path / "out", world=2)


def test_a_script_that_fails_to_import_is_named_with_its_line(tmp_path, monkeypatch):
    # Each was a Python traceback of importlib's frames (sys.exit ended the CLI without a word).
    bad = tmp_path / "syntax.py"
    bad.write_text("import torch\ndef build(ctx:\n    pass\n")
    with pytest.raises(ConfigError, match=rf"^capture: {bad}, line 2: syntax error: '\(' was never closed$"):
        capture(f"{bad}:build", tmp_path / "out", world=2)
    bad = tmp_path / "raises.py"
    bad.write_text("import torch\nSIZE = {}['hidden']\ndef build(ctx):\n    pass\n")
    with pytest.raises(ConfigError, match=rf"^capture: {bad}, line 2: importing it raised KeyError: 'hidden'$"):
        capture(f"{bad}:build", tmp_path / "out", world=2)
    bad = tmp_path / "leaves.py"
    bad.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(ConfigError, match=rf"^capture: {bad}, line 2: importing it raised SystemExit: exit code 3$"):
        capture(f"{bad}:build", tmp_path / "out", world=2)
    (tmp_path / "tf_raising_module.py").write_text("raise ValueError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"^capture: module 'tf_raising_module': importing it raised ValueError: no config$"):
        capture("tf_raising_module:build", tmp_path / "out", world=2)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options,param_bytes", [({}, 90_752), ({"dim": 64, "ffn": 256, "seq": 64, "vocab": 500}, 748_800)])
def test_the_llama_memory_estimate_follows_the_built_model(options, param_bytes):
    """Parameters counted from the built module, activations from the tensors autograd saves:
    every rank builds the whole model, then keeps half its gradients (world 2)."""
    import torch
    from torch import nn
    from tracefabric.traces.workloads import tiny_llama

    c = TinyLlamaConfig(**options)
    torch.manual_seed(0)
    model = tiny_llama.TinyLlama(c)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    assert params == 4 * tiny_llama.parameter_counts(c)[0] == param_bytes
    saved, own = {}, {p.untyped_storage().data_ptr() for p in model.parameters()}

    def keep(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    tokens = torch.randint(0, c.vocab, (c.batch, c.seq + 1))
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        nn.functional.cross_entropy(model(tokens[:, :-1]).reshape(-1, c.vocab), tokens[:, 1:].reshape(-1))
    activations = sum(n for ptr, n in saved.items() if ptr not in own)
    measured = params + params / 2 + activations
    estimate = get_workload("fsdp2-llama").memory_bytes(2, options)
    assert 1 / 3 <= estimate / measured <= 3, (estimate, measured)


def test_a_model_too_large_for_memory_is_refused_before_ranks_start(tmp_path, monkeypatch):
    # dim 16384, ffn 65536: each rank allocated tens of GB, with nothing said before.
    import tracefabric.traces.capture as cap
    from tracefabric.traces.workloads import tiny_llama

    monkeypatch.setattr(cap, "available_memory", lambda: 2**30)
    huge = {"dim": 16384, "ffn": 65536, "heads": 128, "kv_heads": 8}
    total, block, _ = tiny_llama.parameter_counts(TinyLlamaConfig(**huge))
    assert (total, block) == (7_585_480_704, 3_791_683_584)
    per_rank = 4 * (total + 2 * block)  # its shards of parameters and gradients, one block whole with its gradient
    assert get_workload("fsdp1-llama").memory_bytes(2, huge) == pytest.approx(per_rank, rel=1e-2)  # + activations
    with pytest.raises(ConfigError, match=r"^capture: fsdp1-llama needs about 56\.6 GiB per rank \(parameters, gradients "
                                          r"and activations\) x 2 local ranks = 113\.2 GiB, more than 80% of the 1\.0 GiB "
                                          r"of memory available; lower the options dim, ffn, layers, vocab, seq or "
                                          r"batch, or the ranks$") as e:
        capture(get_workload("fsdp1-llama"), tmp_path / "out", world=2, **huge)
    assert e.value.field == "option"
    # 2^20 tokens of dim 4096 on 4 ranks: the activations alone are tens of GB a rank.
    with pytest.raises(ConfigError, match=r"^capture: moe needs about 2\d\d\.\d GiB per rank .* x 4 local ranks"):
        capture(get_workload("moe"), tmp_path / "out", world=4, tokens=2**20, dim=4096)
    assert not (tmp_path / "out").exists()


def test_the_llama_option_errors_name_the_chosen_workload(tmp_path):
    with pytest.raises(ConfigError, match=r"^capture: fsdp1-llama option dim = -4: expected an integer in 1\.\.1048576$"):
        capture(get_workload("fsdp1-llama"), tmp_path, world=2, dim=-4)
    with pytest.raises(ConfigError, match=r"^capture: fsdp2-llama options heads = 5 must divide dim = 32, and kv_heads = 2 "
                                          r"must divide heads$"):
        capture(get_workload("fsdp2-llama"), tmp_path, world=2, heads=5)


def test_nccl_needs_a_gpu_per_rank(tmp_path, monkeypatch):
    # Two ranks on one GPU failed in every rank with NCCL's "Duplicate GPU detected".
    import types

    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"^capture: backend nccl needs one GPU per rank \(NCCL refuses two ranks on one "
                                          r"GPU\): 2 ranks, 1 GPU visible$") as e:
        capture(get_workload("moe"), tmp_path / "out", world=2, backend="nccl")
    assert e.value.field == "world"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ConfigError, match=r"^capture: backend nccl needs a CUDA GPU and none is visible"):
        capture(get_workload("moe"), tmp_path / "out", world=1, backend="nccl")
    # With a GPU per rank, the model must fit in one GPU's memory (here 2 GiB).
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(total_memory=2**31))
    with pytest.raises(ConfigError, match=r"^capture: fsdp2-llama needs about 9\.0 GiB per rank \(parameters, gradients "
                                          r"and activations\), more than 80% of the GPU's 2\.0 GiB; lower the options "
                                          r"dim, ffn, layers, vocab, seq or batch$"):
        capture(get_workload("fsdp2-llama"), tmp_path / "out", world=2, backend="nccl", dim=8192, ffn=16384)
    assert not (tmp_path / "out").exists()
