"""The GPU side of a converted NCCL capture, checked against the raw host and Kineto traces read
as plain JSON: kernels of one stream chained in launch order, and a collective's completion
edge on the kernels of the op that reads its result, not on that op itself."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from tracefabric.traces import validate as v
from tracefabric.traces.convert import convert

GPU = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def h100(tmp_path_factory) -> tuple[Path, Path]:
    """The `moe` workload on one H100 (torch 2.11, NCCL 2.28.9): its capture folder and converted ETs."""
    tmp = tmp_path_factory.mktemp("h100")
    with tarfile.open(Path(__file__).parent / "data" / "h100_nccl_moe_world1.tar.gz") as t:
        t.extractall(tmp, filter="data")
    return tmp / "moe_w1", convert(tmp / "moe_w1")


def _records(value) -> list[list]:
    if isinstance(value, list) and len(value) == 6 and isinstance(value[0], int) and isinstance(value[5], str):
        return [value]
    return [t for x in value for t in _records(x)] if isinstance(value, list) else []


def _attr(node: dict, name: str):
    return next(a["value"] for a in node["attrs"] if a["name"] == name)


def _launched(events: list[dict], op: dict) -> list[dict]:
    """Kineto: the GPU events launched by `op` or by an op running inside it on its thread (a
    kernel carries the External id of the innermost op that launched it)."""
    inside = {e["args"]["External id"] for e in events if e.get("cat") == "cpu_op" and e["tid"] == op["tid"]
              and op["ts"] <= e["ts"] and e["ts"] + e["dur"] <= op["ts"] + op["dur"]}
    return [e for e in events if e.get("cat") in GPU and e["args"].get("External id") in inside]


def test_kernels_of_one_stream_are_chained_in_launch_order(h100):
    cap, et = h100
    events = json.loads((cap / "raw" / "rank0.kineto.json").read_text())["traceEvents"]
    traces, groups = v.load(et)
    assert v.problems(traces, groups) == []
    nodes = {n.id: n for n in traces[0].nodes}
    streams = sorted({e["args"]["stream"] for e in events if e.get("cat") in GPU})
    assert streams == [7]  # the collectives too: torch 2.11 runs a synchronous NCCL call on the current stream
    for s in streams:
        # Kineto's order on the stream; an NCCL kernel is its collective's COMM node in the ET.
        kineto = [e["name"] for e in sorted((e for e in events if e.get("cat") in GPU and e["args"]["stream"] == s),
                                            key=lambda e: e["ts"])]
        kineto = ["NCCL" if k.startswith("ncclDevKernel") else k for k in kineto]
        mine = {i for i, n in nodes.items() if n.attrs.get("is_cpu_op") is False and n.attrs.get("stream") == s}
        assert len(mine) == len(kineto) == 53  # 50 kernels, copies and fills + 3 NCCL kernels
        edges = {(d, i) for i in mine for d in nodes[i].data_deps if d in mine}
        # The chain is the only order of the stream's nodes the edges allow: one node ready at each step.
        order, ready = [], [i for i in mine if not any(b == i for _, b in edges)]
        while ready:
            assert len(ready) == 1, f"stream {s}: {len(ready)} nodes could run next after {len(order)}"
            order.append(ready.pop())
            ready = [b for a, b in edges if a == order[-1] and all(x in order for x, y in edges if y == b)]
        names = ["NCCL" if nodes[i].type == "COMM_COLL_NODE" else nodes[i].name for i in order]
        assert names == kineto
        chain = {(a, b) for a, b in zip(order, order[1:])}
        assert chain <= edges and len(chain) == len(kineto) - 1 == 52
        # Every other same-stream edge is a collective's completion edge.
        assert all(nodes[a].type == "COMM_COLL_NODE" for a, _ in edges - chain)


def test_a_collectives_result_is_awaited_by_the_kernels_of_its_reader(h100):
    """For each c10d op of the raw host trace, its reader is the first later op of its thread that
    reads its output; Kineto says which GPU events that op launched."""
    cap, et = h100
    host = sorted(json.loads((cap / "raw" / "rank0.host.json").read_text())["nodes"], key=lambda n: n["id"])
    events = json.loads((cap / "raw" / "rank0.kineto.json").read_text())["traceEvents"]
    ops = {e["args"]["Record function id"]: e for e in events if e.get("cat") == "cpu_op"}
    stream = sorted((e for e in events if e.get("cat") in GPU), key=lambda e: e["ts"])  # one stream (above)
    nodes = v.load(et)[0][0].nodes
    by_rf = {n.attrs["rf_id"]: n for n in nodes if n.attrs.get("is_cpu_op") is not False or n.type != "COMP_NODE"}
    children: dict[int, list[int]] = {}
    for n in host:
        children.setdefault(n["ctrl_deps"], []).append(n["id"])
    fallbacks = awaited_kernels = 0
    for c in (n for n in host if n["name"].startswith("c10d::")):
        below, todo = set(), [c["id"]]
        while todo:
            below.update(todo)
            todo = [k for x in todo for k in children.get(x, []) if k not in below]
        out = _records(c["inputs"]["values"][0])[0][1]  # storage of the result (all-to-all's output, all-reduce's buffer)
        reader = next(n for n in host if n["id"] > c["id"] and n["id"] not in below and _attr(n, "tid") == _attr(c, "tid")
                      and not n["name"].startswith("c10d::") and out in [t[1] for t in _records(n["inputs"]["values"])])
        kernels = _launched(events, ops[_attr(reader, "rf_id")])
        nccl = [e for e in _launched(events, ops[_attr(c, "rf_id")]) if e["name"].startswith("ncclDevKernel")]
        # The next event on the stream after the collective's own kernel waits for it too (FIFO).
        after = [stream[stream.index(nccl[0]) + 1]] if nccl else []
        expected = sorted(e["name"] for e in {id(e): e for e in kernels + after}.values())
        coll = by_rf[_attr(c, "rf_id")]
        waiting = [n for n in nodes if coll.id in n.data_deps]
        assert sorted(n.name for n in waiting if n.attrs.get("is_cpu_op") is False) == expected, reader["name"]
        # The reader itself waits only when it launched no kernel (it reads on the CPU, or only the shape).
        assert [n.name for n in waiting if n.attrs.get("is_cpu_op")] == ([] if kernels else [reader["name"]])
        fallbacks += not kernels
        awaited_kernels += len(kernels)
    # Readers: the counts' .tolist() and empty_like launch nothing; linear (1 GEMM), AddmmBackward0
    # (2 GEMMs) and the gradient's div_ (1 kernel) hand the wait to their kernels.
    assert (fallbacks, awaited_kernels) == (2, 4)
