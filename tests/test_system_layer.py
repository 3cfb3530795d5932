"""Workload and system layers: ETs -> collectives -> flows -> iteration time, on every
backend, against ASTRA-sim's printed results, closed forms and the packet engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracefabric import _core
from tracefabric.astra_configs.formats import read_memory, read_network, read_system
from tracefabric.collectives import collective_flows
from tracefabric.traces.microbenchmark import write_microbenchmark
from tracefabric.collectives.workload import engine_input, read_workload
from tracefabric.astra_configs.formats import RemoteMemory
from tracefabric.errors import ConfigError
from tracefabric.collectives.iteration import SimulationError, simulate
from tracefabric.interop import astra_sim
from tracefabric.network_backends.packet import simulate as packet_simulate
from tracefabric.traces.chakra_io import COMM_TYPES, EtNode, write_trace

# ASTRA-sim 2.x (fixtures README): 1 MiB ring all-reduce on a 50 GB/s, 500 ns switch.
ASTRA_REFERENCE = {  # (NPUs, splits): (congestion-unaware ns, congestion-aware ns)
    (8, 4): (92_440, 126_600),
    (64, 4): (548_896, 587_200),
    (8, 1): (50_025, 84_199),
    (64, 1): (167_590, 206_020),
}

BARE_SYSTEM = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
               "endpoint-delay": 0, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
               "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
GB = 2**30 / 1e9  # ASTRA-sim's "GB/s" in bytes per ns


def fixture_paths(shared: Path, npus: int, splits: int) -> dict:
    f = shared / "fixtures" / "astra-sim"
    return {"workload": f / "workloads" / f"{npus}npus_1MB" / "all_reduce",
            "system": f / "configs" / ("sys_ring_4chunks.json" if splits == 4 else "sys_ring_1chunk.json"),
            "network": f / "configs" / f"switch_{npus}npus.yml", "memory": f / "configs" / "no_memory_expansion.json"}


@pytest.mark.parametrize("npus,splits", sorted(ASTRA_REFERENCE))
@pytest.mark.parametrize("mode", ["astra-unaware", "astra-aware"])
def test_reproduces_astra_sim_analytical_backends(shared, npus, splits, mode):
    expected = ASTRA_REFERENCE[(npus, splits)][mode == "astra-aware"]
    p = fixture_paths(shared, npus, splits)
    r = simulate(p["workload"], p["system"], p["network"], memory=p["memory"], backend=f"analytical:{mode}")
    assert len(r.ranks) == npus
    walls = set(r.ranks["wall_ns"])
    assert len(walls) == 1
    (wall,) = walls
    assert abs(wall - expected) <= 0.01 * expected
    assert wall == expected  # in fact to the ns
    # ASTRA-sim's model, independently: per chunk E + 2(n-1)(D + E) + (n-1) x 3 floor(msg / 1600).
    msg = (2**20 // splits) // npus
    d = int(2 * 500 + msg / (50 * GB)) if mode == "astra-unaware" else 2 * int(500 + msg / (50 * GB))
    assert wall == splits * (10 + 2 * (npus - 1) * (d + 10) + (npus - 1) * 3 * (msg // 1600))
    assert r.collectives["chunks"].tolist() == [splits]
    assert r.flows == splits * 2 * (npus - 1) * npus


@pytest.mark.parametrize("n", [4, 8])
def test_flow_mode_ring_all_reduce_is_bandwidth_term_plus_latency(tmp_path, n):
    size = n * 2**24  # blocks of 2^24 B take a whole number of ps at 50 GB/s
    wl = write_microbenchmark(tmp_path, n, "all_reduce", size)
    net = {"topology": ["Switch"], "npus_count": [n], "bandwidth": [50], "latency": [500]}
    r = simulate(wl, BARE_SYSTEM, net, backend="analytical:flow")
    bandwidth_ns = 2 * (n - 1) / n * size / (50 * GB)
    latency_ns = 2 * (n - 1) * 2 * 500  # every step crosses two links, cut-through
    assert r.ranks["wall_ns"].tolist() == [pytest.approx(bandwidth_ns + latency_ns, abs=1e-3)] * n


def test_flow_mode_direct_all_to_all_meets_the_host_nic_bound(tmp_path):
    hosts, per_peer, rate = 16, 64 * 4096, 50.0  # fat tree k=4, 400 Gbps = 50 B/ns; 64 full packets per pair
    wl = write_microbenchmark(tmp_path, hosts, "all_to_all", hosts * per_peer)
    fabric = {"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 400, "latency_ns": 500}}
    r = simulate(wl, BARE_SYSTEM, fabric, backend="analytical:flow")
    # The bound: a NIC serializes every data frame it sends and every ACK it returns
    # (4096 B payload + 62 B header + 20 B gap; 64 B ACK + 20 B gap), then the last frame
    # crosses the longest (inter-pod, 6-link) path store-and-forward and its ACK comes back.
    nic = (hosts - 1) * per_peer * (4096 + 62 + 20 + 64 + 20) / 4096 / rate
    tail = 6 * 500 + 5 * (4096 + 62) / rate + 6 * 500 + 6 * 64 / rate
    assert r.iteration_ns == pytest.approx(nic + tail, abs=0.01)
    # Bracketed by the packet engine: above its (shortest-path) bound, below its best run.
    packet = packet_simulate(topology="fat-tree:k=4", traffic=f"all-to-all:size={per_peer}", lb="host_spray",
                             link={"rate_gbps": 400, "latency_ns": 500})
    assert packet.summary["lower_bound_ps"] / 1000 < r.iteration_ns < packet.cct_us * 1000


def test_packet_backend_matches_flow_mode_on_an_uncongested_ring(tmp_path):
    # 2 leaves x 4 hosts: ring neighbours share a leaf except 3->4 and 7->0, one spine path each way.
    wl = write_microbenchmark(tmp_path, 8, "all_reduce", 8 * 2**20)
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 2, "spines": 4}, "link": {"rate_gbps": 400, "latency_ns": 500}}
    flow = simulate(wl, BARE_SYSTEM, fabric, backend="analytical:flow")
    packet = simulate(wl, BARE_SYSTEM, fabric, backend="packet", scheme="ecmp")
    assert packet.flows == flow.flows == 2 * 7 * 8
    assert packet.network_counters["data_packets_dropped"] == 0
    assert abs(packet.iteration_ns / flow.iteration_ns - 1) < 0.02
    # Both above the pure bandwidth term at 400 Gbps.
    assert flow.iteration_ns > 2 * 7 / 8 * 8 * 2**20 / 50


flows_of = collective_flows


def test_recursive_doubling_flows_follow_the_definition():
    n, s = 8, 1 << 20
    ar = flows_of("recursive_doubling", "all_reduce", n, s)
    assert len(ar) == n * 3 and all(f["bytes"] == s for f in ar)
    for k in range(3):
        step = ar[k * n:(k + 1) * n]
        assert [(f["src"], f["dst"]) for f in step] == [(p, p ^ (1 << k)) for p in range(n)]
        for f in step:  # waits for everything its earlier partners sent it (it sends all of it on)
            assert [(ar[a]["src"], ar[a]["dst"]) for a in f["after"]] == [(f["src"] ^ (1 << j), f["src"]) for j in range(k)]
    ag = flows_of("recursive_doubling", "all_gather", n, s)
    assert [f["bytes"] for f in ag[::n]] == [s // 8, s // 4, s // 2]
    rs = flows_of("recursive_doubling", "reduce_scatter", n, s)
    assert [f["bytes"] for f in rs[::n]] == [s // 2, s // 4, s // 8] and all(f["reduce"] for f in rs)
    hd = flows_of("halving_doubling", "all_reduce", n, s)
    assert [f["bytes"] for f in hd[::n]] == [s // 2, s // 4, s // 8, s // 8, s // 4, s // 2]
    assert [hd[k * n]["dst"] for k in range(6)] == [4, 2, 1, 1, 2, 4]  # partner of rank 0
    with pytest.raises(ConfigError, match="power-of-two group size, got 6 ranks") as err:
        collective_flows("recursive_doubling", "all_reduce", 6, 1024)
    assert err.value.field == "algorithm"
    with pytest.raises(ConfigError, match=r"ranks: expected 1\.\.=4096 ranks, got 0") as err:
        collective_flows("ring", "all_reduce", 0, 1024)  # was a division by zero (a Rust panic)
    assert err.value.field == "ranks"
    # Negative or oversized Python ints were OverflowErrors from the conversion; 2^40 ranks would fill memory.
    for ranks, size, message in ((-1, 8, "ranks: expected 1..=4096 ranks, got -1"), (2**40, 8, "got 1099511627776"),
                                 (4, -8, "size: expected 0..=2^64-1 bytes, got -8"), (4, 2**64, f"got {2**64}")):
        with pytest.raises(ConfigError, match=re.escape(message)) as err:
            collective_flows("ring", "all_reduce", ranks, size)
        assert err.value.field == ("ranks" if size == 8 else "size")


@pytest.mark.parametrize("n", [2, 5, 8, 16, 24])
def test_double_binary_tree_flows_follow_the_definition(n):
    s = 1 << 20
    flows = flows_of("double_binary_tree", "all_reduce", n, s)
    assert len(flows) == 4 * (n - 1)
    assert sum(f["bytes"] for f in flows) == 2 * (n - 1) * s  # each tree moves S/2 up and S/2 down
    per_tree = [flows[: 2 * (n - 1)], flows[2 * (n - 1):]]
    for tree in per_tree:
        up, down = tree[: n - 1], tree[n - 1:]
        assert all(f["reduce"] for f in up) and not any(f["reduce"] for f in down)
        parent = {f["src"]: f["dst"] for f in up}
        assert len(parent) == n - 1  # every rank but the root sends up exactly once
        (root,) = set(range(n)) - set(parent)
        for r in range(n):  # following parents reaches the root: a spanning tree
            seen = set()
            while r != root:
                assert r not in seen
                seen.add(r)
                r = parent[r]
        assert sorted((f["dst"], f["src"]) for f in down) == sorted(parent.items())
        for f in up:  # a node sends up only after all its children arrived
            children = {c for c, p in parent.items() if p == f["src"]}
            assert {tree[a - (0 if tree is per_tree[0] else 2 * (n - 1))]["src"] for a in f["after"]} == children
    if n % 2 == 0:  # NCCL's property: no rank is an inner node of both trees
        inner = [{f["dst"] for f in t[: n - 1]} for t in per_tree]
        assert not (inner[0] & inner[1])


def test_ring_and_direct_flow_counts():
    n, s = 8, 8 * 1000 + 3  # uneven: every byte is still carried
    ring = flows_of("ring", "all_reduce", n, s)
    assert len(ring) == 2 * (n - 1) * n
    assert sum(f["bytes"] for f in ring[: (n - 1) * n]) == (n - 1) * s
    direct = flows_of("direct", "all_reduce", n, s)
    assert len(direct) == 2 * n * (n - 1)
    assert all(len(f["after"]) == n - 1 for f in direct[n * (n - 1):])


# ---- a hand-built workload: compute, groups, point-to-point ----------------------

def _coll(i, kind, size, deps=(), pg=None):
    attrs = {"is_cpu_op": False, "comm_type": COMM_TYPES[kind], "comm_size": size}
    if pg is not None:
        attrs["pg_name"] = pg
    return EtNode(i, f"{kind.lower()}{i}", "COMM_COLL_NODE", data_deps=list(deps), attrs=attrs)


def _comp(i, micros, deps=()):
    return EtNode(i, f"comp{i}", "COMP_NODE", data_deps=list(deps), duration_micros=micros)


def small_workload(folder: Path) -> Path:
    """4 ranks: compute 10 us, then an all-reduce inside each pair ("1": 0,1; "2": 2,3) overlapped
    with 20 us more compute, then a world all-gather; rank 0 sends 1 MB to rank 2 at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(4):
        nodes = [_comp(0, 10), _coll(1, "ALL_REDUCE", 1 << 20, [0], pg="1" if r < 2 else "2"), _comp(2, 20, [0]),
                 _coll(3, "ALL_GATHER", 1 << 16, [1, 2])]
        if r == 0:
            nodes.append(EtNode(4, "send", "COMM_SEND_NODE", data_deps=[3], attrs={"comm_dst": 2, "comm_size": 10**6, "comm_tag": 7}))
        if r == 2:
            nodes.append(EtNode(4, "recv", "COMM_RECV_NODE", data_deps=[3], attrs={"comm_src": 0, "comm_size": 10**6, "comm_tag": 7}))
        write_trace(folder / f"w.{r}.et", nodes)
    (folder / "comm_groups.json").write_text(json.dumps({"1": [0, 1], "2": [2, 3]}))
    return folder / "w"


def test_workload_layer_overlaps_communication_with_compute(tmp_path):
    wl = small_workload(tmp_path / "w")
    net = {"topology": ["Switch"], "npus_count": [4], "bandwidth": [100], "latency": [1000]}
    r = simulate(wl, BARE_SYSTEM, net, backend="analytical:astra-unaware")
    d = lambda b: int(2 * 1000 + b / (100 * GB))  # noqa: E731 (ASTRA-sim's message time, ns)
    pair_ar = 2 * d(2**20 // 2)  # ring on 2 ranks: one RS and one AG step of S/2
    ag = 3 * d(2**16)  # comm_size is each rank's shard: every ring step moves a whole shard
    compute_end = 10_000 + 20_000  # the pair all-reduce (~ 2 x 7.2 us) hides behind 20 us of compute
    assert pair_ar < 20_000
    expected = compute_end + ag
    walls = r.ranks["wall_ns"].tolist()
    assert walls[1] == walls[3] == expected
    assert walls[0] == walls[2] == expected + d(10**6)
    assert r.ranks["compute_ns"].tolist() == [30_000] * 4
    assert r.ranks.loc[1, "exposed_comm_ns"] == expected - 30_000
    assert r.ranks.loc[1, "comm_ns"] == pair_ar + ag
    assert r.ranks.loc[1, "overlap_ns"] == pair_ar
    assert list(r.collectives["group_name"]) == ["world", "1", "2"]
    assert r.collectives.set_index("group_name").loc["1", "cct_ns"] == pair_ar


def test_export_decodes_with_chakra_and_reimports_identically(tmp_path, shared):
    wl = small_workload(tmp_path / "w")
    net = read_network(fixture_paths(shared, 8, 1)["network"])
    net.npus_count = [4]
    system = read_system(fixture_paths(shared, 8, 4)["system"])
    w = read_workload(wl)
    files = astra_sim.export(w, system, net, RemoteMemory(), tmp_path / "exp")
    # Chakra's own jsonizer reads every exported ET; attribute types are ASTRA-sim's.
    for r in range(4):
        out = tmp_path / f"j{r}.json"
        subprocess.run(["chakra_jsonizer", "--input_filename", str(files["workload"]) + f".{r}.et", "--output_filename", str(out)],
                       check=True, capture_output=True)
        text = out.read_text()
        assert "comm_size" in text and "int64Val" in text
        if r in (0, 2):
            assert "int32Val" in text  # comm_src / comm_dst / comm_tag
    groups = json.loads(files["comm_groups"].read_text())
    assert sorted(groups.values()) == [[0, 1], [2, 3]]
    again = read_workload(files["workload"])
    strip = lambda d: {**d, "ranks": [n["nodes"] for n in d["ranks"]], "group_names": None}  # noqa: E731
    assert strip(engine_input(again, system, RemoteMemory())) == strip(engine_input(w, system, RemoteMemory()))
    a = simulate(wl, files["system"], files["network"], backend="analytical:astra-aware")
    b = simulate(files["workload"], files["system"], files["network"], backend="analytical:astra-aware")
    assert a.ranks["wall_ns"].tolist() == b.ranks["wall_ns"].tolist()
    assert "--workload-configuration=workload/workload" in files["run"].read_text()


def test_output_parser_reads_astra_sim_stdout(shared):
    text = (shared / "fixtures" / "astra-sim" / "stdout_all_reduce_8npus_1MB_unaware.txt").read_text()
    df = astra_sim.parse_output(text)
    assert df["rank"].tolist() == list(range(8))
    assert df["finished_ns"].tolist() == [92_440] * 8
    assert df["wall_ns"].tolist() == [92_440] * 8
    assert df["comm_ns"].tolist() == [92_440] * 8
    assert df["exposed_comm_ns"].tolist() == [92_440] * 8


def test_astra_run_without_a_binary_says_how_to_get_one(tmp_path):
    with pytest.raises(astra_sim.AstraSimError, match="git clone --recurse-submodules"):
        astra_sim.run(None, tmp_path)
    with pytest.raises(astra_sim.AstraSimError, match="no such ASTRA-sim binary"):
        astra_sim.run(tmp_path / "nope", tmp_path)
    # A folder, or a file without the execute bit, used to end as "Permission denied".
    text = tmp_path / "notes.txt"
    text.write_text("not a program")
    for path in (tmp_path, text):
        with pytest.raises(astra_sim.AstraSimError, match=rf"^{re.escape(str(path))}: not an executable file; expected an "
                                                          "ASTRA-sim analytical binary"):
            astra_sim.run(path, tmp_path)


def test_astra_run_passes_the_export_and_parses_what_the_binary_prints(tmp_path, shared):
    p = fixture_paths(shared, 8, 4)
    w = read_workload(p["workload"])
    exp = tmp_path / "exp"
    astra_sim.export(w, read_system(p["system"]), read_network(p["network"]), RemoteMemory(), exp)
    stdout = shared / "fixtures" / "astra-sim" / "stdout_all_reduce_8npus_1MB_unaware.txt"
    # A stand-in binary: checks the flags ASTRA-sim takes, then prints ASTRA-sim's real output.
    stub = tmp_path / "AstraSim_Analytical_Congestion_Unaware"
    stub.write_text(f"#!{sys.executable}\nimport sys, pathlib\n"
                    "args = dict(a.split('=', 1) for a in sys.argv[1:])\n"
                    "assert pathlib.Path(args['--workload-configuration'] + '.7.et').is_file(), args\n"
                    "assert pathlib.Path(args['--network-configuration']).is_file()\n"
                    f"print(open({str(stdout)!r}).read())\n")
    stub.chmod(0o755)
    df = astra_sim.run(stub, exp)
    ours = simulate(p["workload"], p["system"], p["network"], backend="analytical:astra-unaware")
    assert df["finished_ns"].tolist() == ours.ranks["wall_ns"].tolist() == [92_440] * 8
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'sys[0] finished'\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(astra_sim.AstraSimError, match="exited with status 3"):
        astra_sim.run(broken, exp)
    # A binary whose last ranks never report used to give a table of the ones that did.
    half = tmp_path / "half"
    half.write_text("#!/bin/sh\n" + "".join(f"echo 'sys[{r}] finished, 92440 cycles'\n" for r in range(4)))
    half.chmod(0o755)
    with pytest.raises(astra_sim.AstraSimError, match="4 ranks reported `finished`, but the export has 8"):
        astra_sim.run(half, exp)


# ---- bad input: every case names the file, the node or key, and what was expected -----

NET4 = {"topology": ["Switch"], "npus_count": [4], "bandwidth": [100], "latency": [1000]}


def net4_message_ns(size: int) -> int:
    """ASTRA-sim's congestion-unaware time of one message on NET4: two 1 us links, 100 GB/s."""
    return int(2 * 1000 + size / (100 * GB))


@pytest.mark.parametrize("change,message", [
    ({"preferred-data-splits": 4}, r"unknown key 'preferred-data-splits'; expected one of: scheduling-policy"),
    ({"preferred-dataset-splits": "4"}, r"key 'preferred-dataset-splits' = '4': expected int"),
    ({"scheduling-policy": "EXPLICIT"}, r"expected LIFO or FIFO"),
    ({"all-reduce-implementation": ["ringy"]}, r"all-reduce-implementation: unknown collective algorithm 'ringy'; expected one of: ring, direct"),
    ({"all-reduce-implementation-custom": ["x"]}, r"custom collective ETs .* are not supported"),
    ({"model-shared-bus": 1}, r"LogGP shared bus is not modelled"),
    # Non-finite and out-of-range numbers are named here, not by the Rust JSON reader.
    ({"endpoint-delay": float("nan")}, r"key 'endpoint-delay' = nan: expected a finite number <= 1e\+11"),
    ({"endpoint-delay": 1e17}, r"key 'endpoint-delay' = 1e\+17: expected a finite number <= 1e\+11"),
    ({"local-mem-bw": float("inf")}, r"key 'local-mem-bw' = inf: expected a finite number >= 0$"),
    # 2^31 splits used to run out of memory building the chunks.
    ({"preferred-dataset-splits": 2**31}, r"key 'preferred-dataset-splits' = 2147483648: expected a finite number <= 65536"),
    ({1: 2}, r"key 1: expected a string naming an ASTRA-sim system key"),
])
def test_bad_system_config(tmp_path, change, message):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    with pytest.raises(ConfigError, match=message):
        simulate(wl, {**BARE_SYSTEM, **change}, NET4)


def test_astra_sim_algorithm_names_read_the_same_everywhere(tmp_path):
    # `direct8` ran from a system JSON but `collective_flows` refused it: one table now.
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    walls = {name: simulate(wl, {**BARE_SYSTEM, "all-reduce-implementation": [name]}, NET4).iteration_ns
             for name in ("direct", "direct8", "oneDirect4", "ring", "oneRing")}
    # Direct: one reduce-scatter and one all-gather step of S/4 to all peers at once, against
    # the ring's 2 x 3 steps.
    assert walls["direct"] == walls["direct8"] == walls["oneDirect4"] == 2 * net4_message_ns(2**20 // 4)
    assert walls["ring"] == walls["oneRing"] == 6 * net4_message_ns(2**20 // 4)
    assert collective_flows("direct8", "all_to_all", 4, 64) == collective_flows("direct", "all_to_all", 4, 64)
    # A window below the peers (direct2 on 4 NPUs: 2 of 3 in flight) ran as plain direct: refused.
    for name in ("direct2", "oneDirect0"):
        with pytest.raises(ConfigError, match=rf"all-reduce-implementation\[0\] = '{name}': a window of {name[-1]} peers in "
                                              r"flight is not modelled; expected direct \(every peer at once\), or a window "
                                              r"of at least 3 for 4 ranks") as e:
            simulate(wl, {**BARE_SYSTEM, "all-reduce-implementation": [name]}, NET4)
        assert e.value.field == "all-reduce-implementation"
    with pytest.raises(ConfigError, match=r"^algorithm = 'direct2': a window of 2 peers"):
        collective_flows("direct2", "all_to_all", 4, 64)
    assert collective_flows("direct2", "all_to_all", 3, 64) == collective_flows("direct", "all_to_all", 3, 64)
    with pytest.raises(ConfigError, match=r"unknown collective algorithm 'ring8'; expected one of: ring, direct, "
                                          r"recursive_doubling, halving_doubling, double_binary_tree \(or ASTRA-sim's "
                                          r"oneRing, .*, direct<N>\)"):
        simulate(wl, {**BARE_SYSTEM, "all-reduce-implementation": ["ring8"]}, NET4)
    with pytest.raises(ConfigError, match=r"unknown collective algorithm `ring8`"):
        collective_flows("ring8", "all_reduce", 4, 64)
    # Not the extension's own exception type (its args were a tuple); `kind` named.
    with pytest.raises(ConfigError, match=r"kind: unknown variant `bogus`") as err:
        collective_flows("ring", "bogus", 4, 64)
    assert err.value.field == "kind"


def test_scheme_options_on_a_backend_without_schemes_are_refused(tmp_path):
    # They were silently ignored: `--lb reps` and `--lb ecmp` gave the same analytical run.
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    with pytest.raises(ConfigError, match=r"^lb = 'reps': LB/CC/loss schemes apply to the packet backend only, "
                       r"not to analytical:astra-unaware") as e:
        simulate(wl, BARE_SYSTEM, NET4, lb="reps")
    assert e.value.field == "lb"
    # lb=None is what the CLI passes when unset: the run is the ring all-reduce, 2 x 3 steps of S/4.
    assert simulate(wl, BARE_SYSTEM, NET4, lb=None).iteration_ns == 6 * net4_message_ns(2**20 // 4)


@pytest.mark.parametrize("args,field", [
    ((None, BARE_SYSTEM, NET4), "workload"),
    (("WL", [1], NET4), "system"),
    (("WL", BARE_SYSTEM, ["Switch"]), "network"),
])
def test_arguments_of_the_wrong_kind_are_named(tmp_path, args, field):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    args = tuple(wl if a == "WL" else a for a in args)
    with pytest.raises(ConfigError, match=rf"^{field} = .*: expected a file path or ") as e:
        simulate(*args)
    assert e.value.field == field
    with pytest.raises(ConfigError, match=r"^memory = \{'memory-type'.*: expected a file path or a RemoteMemory") as e:
        simulate(wl, BARE_SYSTEM, NET4, memory={"memory-type": "NO_MEMORY_EXPANSION"})


def test_missing_required_system_key_and_files(tmp_path):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    cfg = dict(BARE_SYSTEM)
    del cfg["collective-optimization"]
    with pytest.raises(ConfigError, match="missing required key 'collective-optimization'"):
        simulate(wl, cfg, NET4)
    with pytest.raises(ConfigError, match=r"nope\.json: system file not found"):
        simulate(wl, tmp_path / "nope.json", NET4)
    with pytest.raises(ConfigError, match=r"missing\.yml: network file not found"):
        simulate(wl, BARE_SYSTEM, tmp_path / "missing.yml")
    with pytest.raises(ConfigError, match=r"absent: no Chakra ETs named absent\.<rank>\.et in "):
        simulate(tmp_path / "absent", BARE_SYSTEM, NET4)
    # A folder that does not exist is a typo, not an empty folder.
    with pytest.raises(ConfigError, match=r"gone/absent: not found \(expected a folder of <prefix>\.<rank>\.et"):
        simulate(tmp_path / "gone" / "absent", BARE_SYSTEM, NET4)


@pytest.mark.parametrize("net,message", [
    ({**NET4, "latency_ns": [1]}, r"unknown key 'latency_ns'; expected one of: topology, npus_count, bandwidth, latency"),
    ({**NET4, "bandwidth": [100, 50]}, r"key 'bandwidth' has 2 entries but 'topology' has 1 dimensions"),
    ({**NET4, "topology": ["Torus"]}, r"topology\[0\] = 'Torus': expected one of Ring, FullyConnected, Switch"),
    ({**NET4, "npus_count": [8]}, r"the network has 8 NPUs \(8\) but the workload has 4 ranks"),
    ({**NET4, "bandwidth": [-1]}, r"bandwidth\[0\] = -1: expected a number of GB/s in 0.001..1e\+06"),
    # NaN used to reach the Rust reader as a bare `NaN` token ("expected value at line 1 column 84");
    # 1e300 GB/s made the flow model report a deadlock.
    ({**NET4, "bandwidth": [float("nan")]}, r"bandwidth\[0\] = nan: expected a number of GB/s in 0.001..1e\+06"),
    ({**NET4, "bandwidth": [1e300]}, r"bandwidth\[0\] = 1e\+300: expected a number of GB/s in 0.001..1e\+06"),
    ({**NET4, "latency": [float("inf")]}, r"latency\[0\] = inf: expected a number of ns in 0..1e\+11"),
])
def test_bad_network_config(tmp_path, net, message):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    with pytest.raises(ConfigError, match=message):
        simulate(wl, BARE_SYSTEM, net)


def _write_ranks(folder: Path, per_rank: list[list[EtNode]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r, nodes in enumerate(per_rank):
        write_trace(folder / f"t.{r}.et", nodes)
    return folder / "t"


def test_dependency_cycle_is_named(tmp_path):
    nodes = [_comp(0, 1, [2]), _comp(1, 1, [0]), _comp(2, 1, [1])]
    wl = _write_ranks(tmp_path, [nodes, [_comp(0, 1)], [_comp(0, 1)], [_comp(0, 1)]])
    with pytest.raises(ConfigError, match=r"t\.0\.et: node \d: dependency cycle: (\d -> ){3}\d"):
        simulate(wl, BARE_SYSTEM, NET4)


def test_dangling_dependency_is_named(tmp_path):
    wl = _write_ranks(tmp_path, [[_comp(0, 1), _comp(5, 1, [9])]] + [[_comp(0, 1)]] * 3)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 5 \(comp5\): field 'data_deps' refers to missing node 9"):
        simulate(wl, BARE_SYSTEM, NET4)


def test_duplicate_node_ids_and_self_dependencies_are_named(tmp_path):
    # Either would make the graph ambiguous: two nodes answering to id 1 (the run used to take
    # the last one, silently), a node waiting for itself.
    wl = _write_ranks(tmp_path / "dup", [[_comp(0, 1), _comp(1, 1), _comp(1, 1, [0])]] + [[_comp(0, 1)]] * 3)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node id 1 appears 2 times \(ids must be unique\)") as e:
        simulate(wl, BARE_SYSTEM, NET4)
    assert e.value.field == "id"
    wl = _write_ranks(tmp_path / "self", [[_comp(0, 1)]] * 3 + [[_comp(0, 1), _comp(1, 1, [1])]])
    with pytest.raises(ConfigError, match=r"t\.3\.et: node 1 \(comp1\): field 'data_deps' points to the node itself") as e:
        simulate(wl, BARE_SYSTEM, NET4)
    assert e.value.field == "data_deps"


def test_collectives_that_differ_across_a_group(tmp_path):
    ranks = [[_coll(0, "ALL_REDUCE", 1024)]] * 3 + [[_coll(0, "ALL_REDUCE", 2048)]]
    wl = _write_ranks(tmp_path, ranks)
    with pytest.raises(ConfigError, match=r"t\.3\.et: node 0: collective #0 on group `world` is all_reduce of 2048 bytes here "
                                          r"but all_reduce of 1024 bytes on rank 0 \(.*t\.0\.et node 0\)"):
        simulate(wl, BARE_SYSTEM, NET4)
    ranks = [[_coll(0, "ALL_REDUCE", 1024), _coll(1, "ALL_GATHER", 64, [0])]] * 3 + [[_coll(0, "ALL_REDUCE", 1024)]]
    wl = _write_ranks(tmp_path / "b", ranks)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 1: collective #1 on group `world` has no counterpart on rank 3"):
        simulate(wl, BARE_SYSTEM, NET4)


def test_send_without_receive_and_unknown_group(tmp_path):
    send = EtNode(0, "send", "COMM_SEND_NODE", attrs={"comm_dst": 1, "comm_size": 100, "comm_tag": 3})
    wl = _write_ranks(tmp_path, [[send], [_comp(0, 1)], [_comp(0, 1)], [_comp(0, 1)]])
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0: send to rank 1 \(tag 3\) has no matching receive in .*t\.1\.et: it would wait forever"):
        simulate(wl, BARE_SYSTEM, NET4)
    wl = _write_ranks(tmp_path / "g", [[_coll(0, "ALL_REDUCE", 64, pg="tp7")]] * 4)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('all_reduce0'\): pg_name 'tp7' is not a known communicator group"):
        simulate(wl, BARE_SYSTEM, NET4)


def test_a_bad_comm_groups_file_is_named_with_its_group(tmp_path):
    from tracefabric.traces import validate

    wl = _write_ranks(tmp_path / "twice", [[_coll(0, "ALL_REDUCE", 64, pg="1")]] * 4)
    groups = tmp_path / "twice" / "comm_groups.json"
    groups.write_text(json.dumps({"1": [0, 1, 2, 3, 2]}))
    want = rf"{groups}: group '1' lists rank\(s\) \[2\] more than once"
    for read in (lambda: simulate(wl, BARE_SYSTEM, NET4), lambda: validate.load(wl.parent)):
        with pytest.raises(ConfigError, match=want) as e:
            read()
        assert e.value.field == "1"
    # A file given apart: a rank past the workload's 4 is named with the file.
    apart = tmp_path / "groups.json"
    apart.write_text(json.dumps({"1": [0, 1, 2, 3], "tp": [3, 4]}))
    want = rf"{apart}: group 'tp' lists ranks \[4\], but the workload has 4 ranks \(0\.\.3\)"
    for read in (lambda: simulate(wl, BARE_SYSTEM, NET4, comm_groups=apart), lambda: validate.load(wl.parent, apart)):
        with pytest.raises(ConfigError, match=want):
            read()
    # A group named 'world' that is not every rank would share its name in results with the world.
    apart.write_text(json.dumps({"world": [0, 1]}))
    want = rf"{apart}: group 'world' lists 2 of the 4 ranks; results call the group of every rank 'world'"
    for read in (lambda: simulate(wl, BARE_SYSTEM, NET4, comm_groups=apart), lambda: validate.load(wl.parent, apart)):
        with pytest.raises(ConfigError, match=want):
            read()
    apart.write_text(json.dumps({"1": [0, 1, 2, 3], "world": [3, 2, 1, 0]}))
    assert simulate(wl, BARE_SYSTEM, NET4, comm_groups=apart).collectives["group_name"].tolist() == ["1"]
    # The same beside the ETs (a rank's ET deleted): `trace validate` refuses it as `run` does.
    groups.write_text(json.dumps({"1": [0, 1, 2, 3]}))
    (wl.parent / "t.3.et").unlink()
    want = rf"{groups}: group '1' lists ranks \[3\], but the workload has 3 ranks \(0\.\.2\)"
    for read in (lambda: simulate(wl, BARE_SYSTEM, NET4), lambda: validate.load(wl.parent)):
        with pytest.raises(ConfigError, match=want):
            read()


def test_run_and_trace_validate_read_pg_name_by_one_rule(tmp_path):
    """Without comm_groups.json only the world's names ("0", or none) are groups: `trace validate`
    used to pass a trace naming another group that `run` then refused."""
    from tracefabric.traces import validate

    def both(folder, pg):
        wl = _write_ranks(folder, [[_coll(0, "ALL_REDUCE", 64, pg=pg)]] * 4)
        problems = validate.problems(*validate.load(folder))
        try:
            r = simulate(wl, BARE_SYSTEM, NET4)
            return problems, r.iteration_ns
        except ConfigError as e:
            return problems, str(e)

    problems, refused = both(tmp_path / "tp7", "tp7")
    want = "pg_name 'tp7' is not a known communicator group; known: none (no comm_groups.json)"
    assert want in refused and len(problems) == 4 and all(want in p for p in problems)
    # "0", "" and no pg_name mean the world: both accept, and the run takes the world all-reduce's time.
    runs = [both(tmp_path / f"w{i}", pg) for i, pg in enumerate(["0", "", None])]
    assert [p for p, _ in runs] == [[], [], []]
    assert runs[0][1] == runs[1][1] == runs[2][1] == 6 * net4_message_ns(64 // 4)


def test_algorithm_that_cannot_run_on_the_group(tmp_path, shared):
    # The system file is at fault: the error names it and its key, then the collective that needs it.
    wl = write_microbenchmark(tmp_path / "w", 6, "all_reduce", 6 << 10)
    net = {**NET4, "npus_count": [6]}
    sys_file = tmp_path / "sys.json"
    sys_file.write_text(json.dumps({**BARE_SYSTEM, "all-reduce-implementation": ["halvingDoubling"]}))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(sys_file))}: system config `all-reduce-implementation`: algorithm "
                                          r"`halving_doubling` needs a power-of-two group size, got 6 ranks, for the all_reduce on "
                                          r"group `world` \(.*all_reduce\.0\.et node 0\)$") as e:
        simulate(wl, sys_file, net)
    assert e.value.field == "all-reduce-implementation"
    # Too few entries for a 2-dimensional network: `run` refuses it, and so does `astra export`, which
    # used to write the directory for ASTRA-sim to fail on.
    f = fixture_paths(shared, 8, 4)
    net2d = tmp_path / "net2d.yml"
    net2d.write_text("topology: [Ring, Switch]\nnpus_count: [2, 4]\nbandwidth: [50, 50]\nlatency: [500, 500]\n")
    want = r"sys_ring_4chunks\.json: system config `all-reduce-implementation`: 1 entries, but dimension 1 needs one " \
           r"\(the network has 2 dimensions\)"
    with pytest.raises(ConfigError, match=want):
        simulate(f["workload"], f["system"], net2d)
    with pytest.raises(ConfigError, match=want):
        astra_sim.export(read_workload(f["workload"]), read_system(f["system"]), read_network(net2d), read_memory(None),
                         tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_deadlock_is_reported_not_hung(tmp_path):
    # Rank 0 waits for rank 1's send before the all-reduce; rank 1 sends only after it.
    r0 = [EtNode(0, "recv", "COMM_RECV_NODE", attrs={"comm_src": 1, "comm_size": 64}), _coll(1, "ALL_REDUCE", 1024, [0])]
    r1 = [_coll(0, "ALL_REDUCE", 1024), EtNode(1, "send", "COMM_SEND_NODE", data_deps=[0], attrs={"comm_dst": 0, "comm_size": 64})]
    wl = _write_ranks(tmp_path, [r0, r1, [_coll(0, "ALL_REDUCE", 1024)], [_coll(0, "ALL_REDUCE", 1024)]])
    with pytest.raises(SimulationError, match=r"deadlock: rank 0 has 2 nodes that can never run; .*t\.0\.et: node 0: its receive from rank 1 never gets its data"):
        simulate(wl, BARE_SYSTEM, NET4)
    # `trace validate` finds the same deadlock without running (it used to pass this trace).
    from tracefabric.traces import validate as v
    found = v.problems(*v.load(wl))
    waits = "(all_reduce0): its ALL_REDUCE 1024 B (collective #0 on group '') waits for ranks [0] that never issue theirs"
    assert found == [f"rank 0 ({tmp_path / 't.0.et'}): deadlock: 2 node(s) can never run; node 0 (recv): its receive "
                     "from rank 1 never gets its data (the send never issues)",
                     f"rank 1 ({tmp_path / 't.1.et'}): deadlock: 2 node(s) can never run; node 0 {waits}",
                     f"rank 2 ({tmp_path / 't.2.et'}): deadlock: 1 node(s) can never run; node 0 {waits}",
                     f"rank 3 ({tmp_path / 't.3.et'}): deadlock: 1 node(s) can never run; node 0 {waits}"]
    # `astra export` refuses it too: ASTRA-sim would hang or fail on it.
    from tracefabric.astra_configs.formats import check_network, check_system
    with pytest.raises(v.ValidationError, match=r"rank 0 \(.*t\.0\.et\): deadlock: 2 node\(s\) can never run"):
        astra_sim.export(read_workload(wl), check_system(BARE_SYSTEM), check_network(NET4), read_memory(None), tmp_path / "exp")
    assert not (tmp_path / "exp").exists()
    # On many ranks, the first few are named and the rest counted.
    wl = _write_ranks(tmp_path / "wide", [r0, r1] + [[_coll(0, "ALL_REDUCE", 1024)]] * 10)
    found = v.problems(*v.load(wl))
    assert len(found) == 9 and found[-1] == "deadlock: 4 more rank(s) have nodes that can never run"


def test_collectives_issued_in_opposite_orders_on_two_groups_deadlock_in_run_and_validate(tmp_path):
    # Rank 0 issues group a's all-reduce, then b's; rank 1 the reverse, each after the other:
    # neither collective ever has all its members.
    from tracefabric.traces import validate as v
    r0 = [_coll(0, "ALL_REDUCE", 64, pg="a"), _coll(1, "ALL_REDUCE", 64, [0], pg="b")]
    r1 = [_coll(0, "ALL_REDUCE", 64, pg="b"), _coll(1, "ALL_REDUCE", 64, [0], pg="a")]
    wl = _write_ranks(tmp_path, [r0, r1])
    (tmp_path / "comm_groups.json").write_text(json.dumps({"a": [0, 1], "b": [0, 1]}))
    net2 = {**NET4, "npus_count": [2]}
    with pytest.raises(SimulationError, match=r"deadlock: rank 0 has 2 nodes .* its all_reduce on group `a` waits for ranks \[1\]"):
        simulate(wl, BARE_SYSTEM, net2)
    found = v.problems(*v.load(wl))
    assert [p.split(": ", 1)[1] for p in found] == [
        "deadlock: 2 node(s) can never run; node 0 (all_reduce0): its ALL_REDUCE 64 B (collective #0 on group 'a') "
        "waits for ranks [1] that never issue theirs",
        "deadlock: 2 node(s) can never run; node 0 (all_reduce0): its ALL_REDUCE 64 B (collective #0 on group 'b') "
        "waits for ranks [0] that never issue theirs"]
    # The same two ranks issuing in one order: no problem, and the run ends.
    ok = _write_ranks(tmp_path / "ok", [r0, [_coll(0, "ALL_REDUCE", 64, pg="a"), _coll(1, "ALL_REDUCE", 64, [0], pg="b")]])
    (tmp_path / "ok" / "comm_groups.json").write_text(json.dumps({"a": [0, 1], "b": [0, 1]}))
    assert v.problems(*v.load(ok)) == []
    assert simulate(ok, BARE_SYSTEM, net2).iteration_ns == 2 * 2 * net4_message_ns(64 // 2)  # one after the other


def test_validate_pairs_sends_receives_and_splits_as_run_does(tmp_path):
    from tracefabric.traces import validate as v

    def p2p(i, kind, peer, size):
        field = "comm_dst" if kind == "SEND" else "comm_src"
        return EtNode(i, f"{kind.lower()}{i}", f"COMM_{kind}_NODE", attrs={field: peer, "comm_size": size, "comm_tag": 1})

    # Sends of 100 then 200 B against receives of 200 then 100 B: `run` pairs them in node order
    # (validate counted them as a multiset and passed).
    wl = _write_ranks(tmp_path / "order", [[p2p(0, "SEND", 1, 100), p2p(1, "SEND", 1, 200)],
                                           [p2p(0, "RECV", 0, 200), p2p(1, "RECV", 0, 100)]])
    found = v.problems(*v.load(wl))
    assert found[0] == "send/recv rank 0 -> rank 1 (tag 1): rank 1's receive (node 0) of 200 B pairs with rank 0's send (node 0) of 100 B, in node order"
    with pytest.raises(ConfigError, match=r"receive of 200 bytes from rank 0 \(tag 1\) matches a send of 100 bytes"):
        simulate(wl, BARE_SYSTEM, {**NET4, "npus_count": [2]})
    # A receive of 0 bytes takes any size, in both.
    wl = _write_ranks(tmp_path / "zero", [[p2p(0, "SEND", 1, 100)], [p2p(0, "RECV", 0, 0)]])
    assert v.problems(*v.load(wl)) == []
    assert simulate(wl, BARE_SYSTEM, {**NET4, "npus_count": [2]}).iteration_ns == net4_message_ns(100)
    # All-to-all-v receive splits given by some ranks only are checked too (validate skipped them).
    sends = [[0, 100, 200], [300, 0, 400], [500, 600, 0]]
    nodes = []
    for r in range(3):
        n = _coll(0, "ALL_TO_ALL", sum(sends[r]))
        n.attrs["comm_split_sizes"] = sends[r]
        if r == 1:
            n.attrs["comm_recv_split_sizes"] = [999, 0, 600]
        nodes.append([n])
    wl = _write_ranks(tmp_path / "a2a", nodes)
    assert v.problems(*v.load(wl)) == ["group '', collective #0: rank 0 sends 100 B to rank 1 (node 0, comm_split_sizes) but "
                                       "rank 1 expects 999 B (node 0, comm_recv_split_sizes)"]
    with pytest.raises(ConfigError, match=r"t\.1\.et: node 0: all-to-all-v: this rank expects 999 bytes from rank 0"):
        simulate(wl, BARE_SYSTEM, {**NET4, "npus_count": [3]})


def test_validate_checks_split_lengths_and_durations_as_run_does(tmp_path):
    from tracefabric.traces import validate as v
    a2a = _coll(0, "ALL_TO_ALL", 30)
    a2a.attrs["comm_split_sizes"] = [10, 20]  # 3 ranks
    wl = _write_ranks(tmp_path / "a", [[a2a]] * 3)
    found = v.problems(*v.load(wl))
    assert found == [f"group '': rank {r}: node 0 (all_to_all0): comm_split_sizes has 2 entries, expected one per group "
                     "member (3)" for r in range(3)]
    with pytest.raises(ConfigError, match=r"comm_split_sizes has 2 entries, expected one per group member \(3\)"):
        simulate(wl, BARE_SYSTEM, {**NET4, "npus_count": [3]})
    # 2^62 ps is 4,611,686 s: one microsecond more than that is past the clock.
    micros = 2**62 // 10**6 + 1
    wl = _write_ranks(tmp_path / "d", [[_comp(0, micros)], [_comp(0, 1)]])
    assert v.problems(*v.load(wl)) == [f"rank 0 ({tmp_path / 'd' / 't.0.et'}): node 0 (comp0): duration_micros = {micros} "
                                       "is past the simulators' picosecond clock (2^62 ps, 53 days)"]
    with pytest.raises(ConfigError, match=r"duration_micros gives 4\.612e\+06 s, past the simulators' picosecond clock"):
        simulate(wl, BARE_SYSTEM, {**NET4, "npus_count": [2]})
    ok = _write_ranks(tmp_path / "ok", [[_comp(0, micros - 1)], [_comp(0, 1)]])
    assert v.problems(*v.load(ok)) == []


def test_corrupt_trace_names_the_file(tmp_path):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1024)
    (tmp_path / "all_reduce.2.et").write_bytes(b"\x05abc")
    with pytest.raises(ConfigError, match=r"all_reduce\.2\.et: truncated message at byte 1"):
        simulate(wl, BARE_SYSTEM, NET4)


def test_output_parser_rejects_foreign_text():
    with pytest.raises(astra_sim.AstraSimError, match="no `sys\\[r\\] finished, T cycles` lines found"):
        astra_sim.parse_output("hello\n", "x.txt")
    with pytest.raises(astra_sim.AstraSimError, match=r"ranks \[1\] never reported"):
        astra_sim.parse_output("sys[0] finished, 5 cycles\nsys[2] finished, 5 cycles\n", "x.txt")


def test_point_to_point_completes_on_arrival_in_astra_mode_and_pays_the_endpoint_delay_elsewhere(tmp_path):
    send = EtNode(0, "send", "COMM_SEND_NODE", attrs={"comm_dst": 1, "comm_size": 10**6, "comm_tag": 1})
    recv = EtNode(0, "recv", "COMM_RECV_NODE", attrs={"comm_src": 0, "comm_size": 10**6, "comm_tag": 1})
    wl = _write_ranks(tmp_path, [[send], [recv, _comp(1, 5, [0])]])
    net = {"topology": ["Switch"], "npus_count": [2], "bandwidth": [100], "latency": [1000]}
    system = {**BARE_SYSTEM, "endpoint-delay": 10}
    # ASTRA-sim's network front end calls both handlers when the data arrives: no endpoint delay.
    r = simulate(wl, system, net, backend="analytical:astra-unaware")
    d = int(2 * 1000 + 10**6 / (100 * GB))
    assert r.ranks["wall_ns"].tolist() == [d, d + 5_000]
    assert r.ranks["comm_ns"].tolist() == [d, d]
    # The physical model charges the receiver its endpoint delay before the data is usable.
    flow = simulate(wl, system, net, backend="analytical:flow")
    sent = flow.ranks["wall_ns"][0]
    assert flow.ranks["wall_ns"].tolist() == [sent, sent + 10 + 5_000]


def test_backend_and_network_must_fit_together(tmp_path):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2}}
    with pytest.raises(ConfigError, match=r"unknown backend 'ns3'; expected one of: analytical:astra-unaware"):
        simulate(wl, BARE_SYSTEM, NET4, backend="ns3")
    with pytest.raises(ConfigError, match=r"the packet backend needs a packet-fabric network"):
        simulate(wl, BARE_SYSTEM, NET4, backend="packet")
    with pytest.raises(ConfigError, match=r"backend analytical:astra-aware models ASTRA-sim's analytical dimensions"):
        simulate(wl, BARE_SYSTEM, fabric, backend="analytical:astra-aware")
    with pytest.raises(ConfigError, match=r"the fabric has 2 hosts but the workload has 4 ranks"):
        simulate(wl, BARE_SYSTEM, fabric, backend="packet")


def test_the_packet_backend_runs_a_workload_that_sends_nothing(tmp_path):
    # Compute only on 2 ranks (5 and 7 us), then a 1-rank group's all-reduce, which moves no
    # bytes: the engine has no flow to declare, yet the iteration is the slowest rank's compute.
    # `analytical:flow` on the same fabric agrees; the packet engine used to refuse the run.
    wl = _write_ranks(tmp_path / "w", [[_comp(0, 5), _coll(1, "ALL_REDUCE", 1024, [0], pg="solo0")],
                                       [_comp(0, 7), _coll(1, "ALL_REDUCE", 1024, [0], pg="solo1")]])
    (tmp_path / "w" / "comm_groups.json").write_text(json.dumps({"solo0": [0], "solo1": [1]}))
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2}}
    packet = simulate(wl, BARE_SYSTEM, fabric, backend="packet")
    flow = simulate(wl, BARE_SYSTEM, fabric, backend="analytical:flow")
    assert packet.ranks["wall_ns"].tolist() == flow.ranks["wall_ns"].tolist() == [5000, 7000]
    # A bad fabric is still refused on that path.
    with pytest.raises(ConfigError, match=r"`link.rate_gbps`"):
        simulate(wl, BARE_SYSTEM, {**fabric, "link": {"rate_gbps": -1}}, backend="packet")


def test_the_packet_backend_completes_empty_transfers_at_their_start(tmp_path):
    # A ring reduce-scatter of 2 B on 4 ranks holds blocks of 1, 1, 0 and 0 B: 6 of its 12 flows
    # are empty. The engine used to refuse them ("flow 1: field `bytes` must be > 0"). Empty
    # transfers send nothing and end when they start, so the CCT is the chain of 1 B flows,
    # three in a row (0->1, then 1->2 after it, then 2->3): 3 x one 1 B flow's FCT on the
    # idle leaf, measured by the engine alone.
    wl = write_microbenchmark(tmp_path / "rs", 4, "reduce_scatter", 2)
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 4},
              "link": {"rate_gbps": 100, "latency_ns": 500}}
    assert [f["bytes"] for f in collective_flows("ring", "reduce_scatter", 4, 2)] == [1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    one = packet_simulate(fabric["topology"], {"kind": "flows", "src": [0], "dst": [1], "bytes": [1], "start_ps": [0]},
                          link=fabric["link"], scheme="ecmp")
    # 1 + 62 B at 100 Gbps (80 ps a byte) over 2 links, then a 64 B ACK back.
    assert one.flows["fct_ps"].iloc[0] == 2 * (63 * 80 + 500_000) + 2 * (64 * 80 + 500_000)
    fct_ns = one.flows["fct_us"].iloc[0] * 1000
    r = simulate(wl, BARE_SYSTEM, fabric, backend="packet", scheme="ecmp")
    assert r.flows == 12
    assert r.collectives["cct_ns"].iloc[0] == pytest.approx(3 * fct_ns, abs=1e-3)
    # A zero-byte send ends when it is issued: the receiver's compute starts at the sender's 5 us.
    send = EtNode(1, "send", "COMM_SEND_NODE", data_deps=[0], attrs={"comm_dst": 1, "comm_size": 0, "comm_tag": 1})
    recv = EtNode(0, "recv", "COMM_RECV_NODE", attrs={"comm_src": 0, "comm_size": 0, "comm_tag": 1})
    wl = _write_ranks(tmp_path / "p2p", [[_comp(0, 5), send], [recv, _comp(1, 3, [0])]])
    r = simulate(wl, BARE_SYSTEM, fabric, backend="packet")
    assert r.ranks["wall_ns"].tolist() == [5000, 8000]


def test_cpu_and_gpu_compute_nodes_run_side_by_side(tmp_path):
    # ASTRA-sim's HardwareResource has one slot for CPU ops (is_cpu_op) and one for GPU kernels:
    # a GPU trace's CPU launch ops run ahead of its kernels. Rank 0: CPU 5 us and GPU 3 us, both
    # ready at 0, then GPU 2 us after the CPU node -> wall 7 us, busy 0..7 us. Rank 1: the same
    # on one unit (all CPU) runs one after the other: 5 + 3 + 2 = 10 us, also the iteration.
    def comp(i, us, cpu, deps=()):
        return EtNode(i, f"c{i}", "COMP_NODE", data_deps=list(deps), duration_micros=us, attrs={"is_cpu_op": cpu})
    mixed = [comp(0, 5, True), comp(1, 3, False), comp(2, 2, False, [0])]
    one_unit = [comp(0, 5, True), comp(1, 3, True), comp(2, 2, True, [0])]
    # Without the attribute a node is a GPU kernel, as ASTRA-sim's roofline reads it.
    absent = [comp(0, 5, True), _comp(1, 3), _comp(2, 2, [0])]
    wl = _write_ranks(tmp_path / "w", [mixed, one_unit, absent, [_comp(0, 1)]])
    r = simulate(wl, BARE_SYSTEM, NET4)
    assert r.ranks["wall_ns"].tolist() == [7000, 10000, 7000, 1000]
    # Compute time is the units' busy time, their union (not the nodes' sum, 10 us on rank 0).
    assert r.ranks["compute_ns"].tolist() == [7000, 10000, 7000, 1000]
    assert r.iteration_ns == 10000


def test_a_send_to_the_own_rank_is_a_local_copy_on_every_backend(tmp_path):
    # Rank 0 computes 5 us, sends 1 MB to itself, and computes 3 us once the receive is
    # done: the copy crosses no network, so every backend ends rank 0 at 8 us. The packet
    # engine used to refuse the run ("a host cannot send to itself").
    send = EtNode(1, "send", "COMM_SEND_NODE", data_deps=[0], attrs={"comm_dst": 0, "comm_size": 10**6, "comm_tag": 4})
    recv = EtNode(2, "recv", "COMM_RECV_NODE", attrs={"comm_src": 0, "comm_size": 10**6, "comm_tag": 4})
    wl = _write_ranks(tmp_path / "w", [[_comp(0, 5), send, recv, _comp(3, 3, [2])], [_comp(0, 1)]])
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2}}
    net2 = {**NET4, "npus_count": [2]}
    for backend, net in [("analytical:astra-unaware", net2), ("analytical:astra-aware", net2),
                         ("analytical:flow", fabric), ("packet", fabric)]:
        r = simulate(wl, BARE_SYSTEM, net, backend=backend)
        assert r.ranks["wall_ns"].tolist() == [8000, 1000], backend


def test_a_flow_the_packet_engine_refuses_is_named_by_its_et_node(tmp_path):
    # 2^40 B cannot cross a 100 Gbps NIC within limits.max_time_ms (1 s): the error names the
    # rank's trace and node, not the engine's internal flow index.
    ms = f"{2**40 * 8 / 100e9 * 1e3:.1f}"  # 87960.9
    send = EtNode(3, "send", "COMM_SEND_NODE", attrs={"comm_dst": 1, "comm_size": 2**40, "comm_tag": 1})
    recv = EtNode(4, "recv", "COMM_RECV_NODE", attrs={"comm_src": 0, "comm_size": 2**40, "comm_tag": 1})
    wl = _write_ranks(tmp_path / "p2p", [[send], [recv]])
    fabric = {"topology": {"kind": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2},
              "link": {"rate_gbps": 100, "latency_ns": 500}}
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 3: send: its transfer of 1099511627776 bytes from rank 0 "
                                          r"to rank 1 is refused by the network backend: field `bytes` = 1099511627776 "
                                          rf"needs at least {ms} ms"):
        simulate(wl, BARE_SYSTEM, fabric, backend="packet")
    # In a collective: the all-to-all's node on the sending rank (its position in the group).
    wl = _write_ranks(tmp_path / "a2a", [[_coll(7, "ALL_TO_ALL", 2**41)], [_coll(9, "ALL_TO_ALL", 2**41)]])
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 7: all_to_all on group `world`: its transfer of 1099511627776 "
                                          r"bytes from rank 0 to rank 1"):
        simulate(wl, BARE_SYSTEM, fabric, backend="packet")


@pytest.mark.parametrize("attrs,field,message", [
    ({"comm_size": "abc"}, "comm_size", "attribute 'comm_size' = 'abc': expected an integer"),
    ({"comm_split_sizes": "1,2"}, "comm_split_sizes", "expected a list of bytes per group rank"),
    ({"comm_split_sizes": [-1, 2, 3, 4], "comm_type": COMM_TYPES["ALL_TO_ALL"]}, "comm_split_sizes", "expected bytes >= 0"),
])
def test_ill_typed_et_attributes_are_named_with_the_node(tmp_path, attrs, field, message):
    # These were raw ValueErrors / TypeErrors.
    node = _coll(0, "ALL_REDUCE", 64)
    node.attrs.update(attrs)
    wl = _write_ranks(tmp_path, [[node]] * 4)
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        simulate(wl, BARE_SYSTEM, NET4)
    assert e.value.field == field and "t.0.et: node 0" in str(e.value)


def test_all_to_all_v_receive_splits_must_match_what_peers_send(tmp_path):
    # 3 ranks; rank r sends sends[r][j] B to rank j, and expects recvs[r][i] from rank i. `run`
    # used to ignore comm_recv_split_sizes, so a mismatch (what `trace validate` refuses) ran.
    sends = [[0, 100, 200], [300, 0, 400], [500, 600, 0]]

    def a2av(recvs):
        def node(r):
            n = _coll(4 + r, "ALL_TO_ALL", sum(sends[r]))
            n.attrs.update(comm_split_sizes=sends[r], comm_recv_split_sizes=recvs[r])
            return n
        return _write_ranks(tmp_path / str(len(list(tmp_path.iterdir()))), [[node(r)] for r in range(3)])

    transpose = [[sends[i][r] for i in range(3)] for r in range(3)]
    net3 = {**NET4, "npus_count": [3]}
    ok = simulate(a2av(transpose), BARE_SYSTEM, net3, backend="analytical:flow")
    # Direct, one chunk: every rank's sends leave at once over two 1 us hops; the largest message
    # (600 B) alone bounds the CCT below, all 2,100 B through one link above.
    bw = 100 * GB
    assert 2000 + 600 / bw <= ok.collectives["cct_ns"].iloc[0] <= 2000 + 2100 / bw
    # ASTRA-sim reads comm_size only and matches messages by size: ranks sending 300, 700 and
    # 1,100 B never complete there, so the astra-* backends refuse it.
    with pytest.raises(ConfigError, match=r"t\.1\.et: node 5: all-to-all-v: this rank sends 700 B but rank 0 sends "
                                          r"300 B; ASTRA-sim 2\.x reads comm_size only"):
        simulate(a2av(transpose), BARE_SYSTEM, net3, backend="analytical:astra-unaware")
    wrong = [row[:] for row in transpose]
    wrong[2][1] = 999  # rank 2 expects 999 B from rank 1, which sends it 400
    with pytest.raises(ConfigError, match=r"t\.2\.et: node 6: all-to-all-v: this rank expects 999 bytes from rank 1 "
                                          r"\(comm_recv_split_sizes\), but that rank sends it 400 \(.*t\.1\.et node 5, "
                                          r"comm_split_sizes\)"):
        simulate(a2av(wrong), BARE_SYSTEM, net3, backend="analytical:astra-unaware")
    with pytest.raises(ConfigError, match=r"comm_recv_split_sizes has 2 entries, expected one per group member \(3\)"):
        simulate(a2av([r[:2] for r in transpose]), BARE_SYSTEM, net3, backend="analytical:astra-unaware")


def test_a_node_type_chakra_does_not_define_is_named(tmp_path):
    from chakra.schema.protobuf import et_def_pb2 as pb
    from tracefabric.traces.chakra_io import framed, read_pb_trace

    wl = _write_ranks(tmp_path, [[_comp(0, 1)]] * 4)
    meta, nodes = read_pb_trace(tmp_path / "t.0.et")
    nodes[0].type = 99
    (tmp_path / "t.0.et").write_bytes(framed(meta) + framed(nodes[0]))
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0: type 99 is not a Chakra NodeType") as e:
        simulate(wl, BARE_SYSTEM, NET4)
    assert e.value.field == "type"
    assert 99 not in pb.NodeType.values()


@pytest.mark.parametrize("backend", ["analytical:astra-unaware", "analytical:astra-aware", "analytical:flow"])
def test_times_past_the_picosecond_clock_are_refused_not_wrapped(tmp_path, backend):
    # Network times that saturated u64 used to report 2,224 ns (unaware/aware) or 36,460 ns
    # (flow) for a 1 MiB all-reduce. With bandwidth and latency now bounded, a huge message
    # still passes the clock: 2^50 B on 8 NPUs, one ring step's 2^47 B over the switch's
    # 2 links at 1e-3 GB/s, against 2^62 ps.
    wl = write_microbenchmark(tmp_path, 8, "all_reduce", 1 << 50)
    net = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [1e-3], "latency": [500]}
    bw = 1e-3 * 2**30 / 1e9
    seconds = re.sub(r"e\+0*", "e", f"{2 * (500 + 2**47 / bw) / 1e9:.3e}")  # as Rust prints it
    # Refused as the ET node that issues it (its file, node and transfer), not as the network's failure.
    with pytest.raises(ConfigError, match=rf"^{tmp_path}/all_reduce\.0\.et: node 0: all_reduce on group `world`: its "
                       rf"transfer of {2**47} bytes from rank 0 to rank 1 is refused by the network backend: a message of "
                       rf"{2**47} B could take up to {seconds} s .* past the simulators' picosecond clock") as e:
        simulate(wl, BARE_SYSTEM, net, backend=backend)
    assert e.value.field == "workload"


@pytest.mark.parametrize("backend", ["analytical:astra-unaware", "analytical:flow"])
def test_system_layer_times_past_the_clock_are_named(tmp_path, backend):
    # A local reduction at 1e-300 GB/s used to saturate and wrap: 90,676 ns for a 92,440 ns
    # all-reduce. 1 MiB / 8 = 131,072 B per ring step: 3 passes of 1.311e305 ns.
    wl = write_microbenchmark(tmp_path / "ar", 8, "all_reduce", 1 << 20)
    net = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [50], "latency": [500]}
    with pytest.raises(ConfigError, match=r"^<system config>: system config `local-mem-bw`: a local reduction of 131072 B "
                       r"at 1e-300 GB/s takes 3\.932e296 s, past the picosecond clock") as e:
        simulate(wl, {**BARE_SYSTEM, "local-mem-bw": 1e-300}, net, backend=backend)
    assert e.value.field == "local-mem-bw"
    # One compute node longer than the clock is named with its field; two that only pass it
    # together end the run at the second one's finish: 2 x 2.4e12 us = 4.8e6 s > 2^62 ps.
    wl = _write_ranks(tmp_path / "long", [[_comp(0, 5 * 10**12)]] + [[_comp(0, 1)]] * 3)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('comp0'\): duration_micros gives 5\.000e\+06 s, past") as e:
        simulate(wl, BARE_SYSTEM, NET4, backend=backend)
    assert e.value.field == "duration_micros"
    wl = _write_ranks(tmp_path / "sum", [[_comp(0, 24 * 10**11), _comp(1, 24 * 10**11, [0])]] + [[_comp(0, 1)]] * 3)
    with pytest.raises(SimulationError, match=r"t\.0\.et: node 1 finishes at 4\.800e6 s, past the picosecond clock") as e:
        simulate(wl, BARE_SYSTEM, NET4, backend=backend)
    assert e.value.kind == "clock"


def test_memory_nodes_need_remote_memory(tmp_path):
    load = EtNode(0, "load", "MEM_LOAD_NODE", attrs={"tensor_size": 10**6})
    wl = _write_ranks(tmp_path, [[load]] + [[_comp(0, 1)]] * 3)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('load'\): MEM_LOAD_NODE needs remote memory, but the memory config is NO_MEMORY_EXPANSION"):
        simulate(wl, BARE_SYSTEM, NET4)
    mem = tmp_path / "mem.json"
    mem.write_text(json.dumps({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 10}))
    r = simulate(wl, BARE_SYSTEM, NET4, memory=mem)
    assert r.ranks.loc[0, "wall_ns"] == 100 + 10**6 / 10  # latency + bytes / (10 GB/s)
    mem.write_text(json.dumps({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-bandwidth": 10}))
    with pytest.raises(ConfigError, match=r"mem\.json: unknown key 'remote-mem-bandwidth'; expected one of: memory-type"):
        simulate(wl, BARE_SYSTEM, NET4, memory=mem)
    # Past the clock, the error names the size, the bandwidth and the latency (it blamed tensor_size
    # alone), and a denormal bandwidth is refused as inf, not an OverflowError. 1 MB at 1e-10 GB/s (0.1 B/s) is 1e7 s.
    for bw, took in ((1e-10, r"1\.000e\+07 s"), (5e-324, "inf s")):
        mem.write_text(json.dumps({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": bw}))
        with pytest.raises(ConfigError, match=rf"t\.0\.et: node 0 \('load'\): a remote access of tensor_size = 1000000 B at "
                                              rf"remote-mem-bw = {bw:g} GB/s and remote-mem-latency = 100 ns takes {took}, past"):
            simulate(wl, BARE_SYSTEM, NET4, memory=mem)


def test_inspect_and_validate_read_unknown_comm_types_empty_ranks_and_missing_sizes(tmp_path):
    # `trace inspect` used to end in a ValueError on both traces; `validate` passed the first.
    from tracefabric.traces import validate as v
    bad = EtNode(0, "coll0", "COMM_COLL_NODE", attrs={"comm_type": 99, "comm_size": 4096})
    traces, groups = v.load(_write_ranks(tmp_path / "bad", [[bad]] * 2))
    assert v.inspect(traces)[1]["collectives"] == {"?": ["comm_type 99 4096 B (node 0)"]}
    found = v.problems(traces, groups)
    assert sum("node 0 (coll0): comm_type 99 is not a Chakra CollectiveCommType" in p for p in found) == 2
    traces, groups = v.load(_write_ranks(tmp_path / "empty", [[]] * 2))
    assert [(r["critical_path_us"], r["nodes"]) for r in v.inspect(traces)] == [(0, {}), (0, {})]
    # A collective without comm_size: `validate` refuses it, and so does `run` (it ran as 0 B).
    unsized = EtNode(0, "coll0", "COMM_COLL_NODE", attrs={"comm_type": COMM_TYPES["ALL_REDUCE"]})
    wl = _write_ranks(tmp_path / "unsized", [[unsized]] * 4)
    traces, groups = v.load(wl)
    assert sum("lacks attribute 'comm_size'" in p for p in v.problems(traces, groups)) == 4
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('coll0'\): collective without attribute 'comm_size'"):
        simulate(wl, BARE_SYSTEM, NET4)
    # `astra export` checks what `run` checks: it used to write this workload, and a negative size.
    from tracefabric.astra_configs.formats import check_network, check_system
    export = lambda w: astra_sim.export(read_workload(w), check_system(BARE_SYSTEM), check_network(NET4), read_memory(None),
                                        tmp_path / "exp")
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('coll0'\): collective without attribute 'comm_size'"):
        export(wl)
    negative = EtNode(0, "coll0", "COMM_COLL_NODE", attrs={"comm_type": COMM_TYPES["ALL_REDUCE"], "comm_size": -8})
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('coll0'\): comm_size = -8: expected bytes >= 0"):
        export(_write_ranks(tmp_path / "negative", [[negative]] * 4))
    assert not (tmp_path / "exp").exists()


def test_astra_parse_names_a_binary_file_instead_of_a_unicode_traceback(tmp_path):
    out = tmp_path / "out.bin"
    out.write_bytes(bytes(range(256)) * 4)
    proc = subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", "astra", "parse", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {out}: no `sys[r] finished, T cycles` lines found"


def test_a_folder_with_two_workloads_or_two_files_per_rank_is_refused(tmp_path):
    # Each rank used to take whichever file sorted last, so two workloads could mix.
    from tracefabric.traces import validate as v
    for prefix in ("a", "b"):
        for r in range(2):
            write_trace(tmp_path / f"{prefix}.{r}.et", [_comp(0, 1 + r)])
    with pytest.raises(ConfigError, match=r"ETs of several workloads \(a, b\); name one as .*/a$"):
        v.load(tmp_path)
    traces, _ = v.load(tmp_path / "b")  # a prefix still picks one
    assert [t.nodes[0].duration_micros for t in traces] == [1, 2]
    write_trace(tmp_path / "b.01.et", [_comp(0, 5)])
    with pytest.raises(ConfigError, match=r"b\.01\.et and b\.1\.et are both rank 1|b\.1\.et and b\.01\.et are both rank 1"):
        v.load(tmp_path / "b")
    # A file of the workload whose rank is no number used to be left out silently.
    (tmp_path / "b.01.et").unlink()
    write_trace(tmp_path / "b.-1.et", [_comp(0, 5)])
    for where in (tmp_path / "b", tmp_path):
        with pytest.raises(ConfigError, match=r"b\.-1\.et: not named <prefix>\.<rank>\.et with a rank 0, 1, \.\.\.$"):
            v.load(where)
    assert len(v.load(tmp_path / "a")[0]) == 2  # another prefix's stray file is not this workload's


def test_validate_counts_every_rank_in_the_world_and_reads_pg_name_0_as_it(tmp_path):
    # A rank issuing no world collective passed `validate` ("collectives match") but not
    # `run`; and pg_name "0" and an absent pg_name were compared as two groups.
    from tracefabric.traces import validate as v
    ar = _coll(0, "ALL_REDUCE", 4096)
    traces, groups = v.load(_write_ranks(tmp_path / "a", [[ar]] * 3 + [[_comp(0, 1)]]))
    assert v.problems(traces, groups) == [f"group '': rank 3 ({tmp_path / 'a' / 't.3.et'}) issues no collective on it, "
                                          "rank 0 issues 1"]
    traces, groups = v.load(_write_ranks(tmp_path / "b", [[ar]] * 2 + [[_coll(0, "ALL_REDUCE", 4096, pg="0")]] * 2))
    assert v.problems(traces, groups) == []
    # `run` agrees: one world all-reduce, 2 x 3 ring steps of 1 KiB.
    assert simulate(tmp_path / "b" / "t", BARE_SYSTEM, NET4).iteration_ns == 6 * net4_message_ns(4096 // 4)
