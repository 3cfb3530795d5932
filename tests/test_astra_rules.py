"""ASTRA-sim 2.x's rules in the astra-* backends, each against a hand-derived closed form (or a
small independent model of the rule), and against what ASTRA-sim printed where a fixture has it.

Every message time below is ASTRA-sim's congestion-unaware one: hops x latency + bytes / bw,
truncated to whole ns, with "GB/s" read as 2^30 / 1e9 bytes per ns. A ring chunk costs one
endpoint delay to start, then per step the message, the receiver's endpoint delay and, while
reducing, 3 local memory passes floor(bytes / 1600) ns each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracefabric.iteration import SimulationError, simulate
from tracefabric.traces.chakra_io import COMM_TYPES, EtNode, write_trace

GB = 2**30 / 1e9
D = 10  # endpoint delay of every fixture system config, ns
SPLITS = 4


def msg(bytes_: int, gbps: float, latency: float, hops: int) -> int:
    return int(hops * latency + bytes_ / (gbps * GB))


def red(bytes_: int) -> int:
    return 3 * (bytes_ // 1600)


def ring_all_reduce(n: int, size: int, gbps: float, latency: float, hops: int) -> int:
    """Chunks one after the other (one active chunk); each: n - 1 reducing steps, n - 1 plain."""
    block = size // SPLITS // n
    m = msg(block, gbps, latency, hops)
    return SPLITS * (D + (n - 1) * (m + D + red(block)) + (n - 1) * (m + D))


SWITCH = (50.0, 500.0, 2)  # the fixtures' switch: 50 GB/s, 500 ns, two hops
RING = (100.0, 100.0)  # dimension 0 of the 2-D fixtures: a ring of 8, 100 GB/s, 100 ns a hop


def fixture(shared: Path, name: str, mode: str = "unaware"):
    f = shared / "fixtures" / "astra-sim" / "multi" / name
    return simulate(f / "workload", f / "system.json", f / "network.yml", memory=f / "memory.json",
                    backend=f"analytical:astra-{mode}")


def coll(i: int, kind: str, size: int, pg: str | None = None, deps=(), **attrs) -> EtNode:
    a = {"is_cpu_op": False, "comm_type": COMM_TYPES[kind], "comm_size": size, **attrs}
    if pg is not None:
        a["pg_name"] = pg
    return EtNode(i, f"{kind.lower()}{i}", "COMM_COLL_NODE", data_deps=list(deps), attrs=a)


def write(folder: Path, per_rank: list[list[EtNode]], groups: dict[str, list[int]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r, nodes in enumerate(per_rank):
        write_trace(folder / f"t.{r}.et", nodes)
    (folder / "comm_groups.json").write_text(json.dumps(groups))
    return folder / "t"


def probe(shared: Path, name: str, wl: Path, mode: str = "unaware"):
    f = shared / "fixtures" / "astra-sim" / "multi" / name
    return simulate(wl, f / "system.json", f / "network.yml", backend=f"analytical:astra-{mode}")


# --- rule 2: one communication operation per rank at a time, ready nodes in ascending id ----------

TP = {"1": [0, 1], "2": [2, 3], "3": [4, 5], "4": [6, 7]}
DP = {"5": [0, 2, 4, 6], "6": [1, 3, 5, 7]}


def test_two_ready_collectives_take_the_sum_of_their_times_not_the_max(shared):
    tp, dp = ring_all_reduce(2, 2**20, *SWITCH), ring_all_reduce(4, 2**20, *SWITCH)
    assert (tp, dp) == (28_620, 55_000)
    r = fixture(shared, "x_two_groups8")
    assert r.ranks["wall_ns"].tolist() == [tp + dp] * 8 == [83_620] * 8  # what ASTRA-sim printed
    ends = r.collectives.set_index("group_name")["end_ns"]
    assert ends[["1", "2", "3", "4"]].tolist() == [tp] * 4 and ends[["5", "6"]].tolist() == [tp + dp] * 2


def test_the_lower_node_id_goes_first(shared, tmp_path):
    # The same two all-reduces with the ids swapped: the DP one (id 0) runs first on every rank.
    per_rank = [[coll(0, "ALL_REDUCE", 2**20, pg="5" if r % 2 == 0 else "6"), coll(1, "ALL_REDUCE", 2**20, pg=str(r // 2 + 1))]
                for r in range(8)]
    r = probe(shared, "x_two_groups8", write(tmp_path, per_rank, {**TP, **DP}))
    tp, dp = ring_all_reduce(2, 2**20, *SWITCH), ring_all_reduce(4, 2**20, *SWITCH)
    ends = r.collectives.set_index("group_name")["end_ns"]
    assert ends[["5", "6"]].tolist() == [dp] * 2 and ends[["1", "2", "3", "4"]].tolist() == [dp + tp] * 4


def test_compute_runs_beside_communication_but_one_compute_at_a_time(shared, tmp_path):
    # Per rank: two independent compute nodes (30 and 20 us) and a world all-reduce, all ready at
    # t = 0: the GPU runs 30 then 20 us while the all-reduce (92,440 ns) holds the comm slot.
    comp = lambda i, us: EtNode(i, f"c{i}", "COMP_NODE", duration_micros=us)  # noqa: E731
    per_rank = [[comp(0, 30), comp(1, 20), coll(2, "ALL_REDUCE", 2**20)] for _ in range(8)]
    r = probe(shared, "x_two_groups8", write(tmp_path, per_rank, {}))
    ar = ring_all_reduce(8, 2**20, *SWITCH)
    assert ar == 92_440
    assert r.ranks["wall_ns"].tolist() == [max(ar, 50_000)] * 8
    assert r.ranks["exposed_comm_ns"].tolist() == [ar - 50_000] * 8  # wall less the GPU's compute


# --- rule 3: a send holds the rank until its data has arrived -----------------------------------

def test_a_send_holds_the_rank_until_its_data_arrived(shared):
    send = msg(2**20, *SWITCH)
    assert send == 20_531
    for mode, per_hop in (("unaware", send), ("aware", None)):
        r = fixture(shared, "x_send_then_ar8", mode)
        if per_hop is None:  # store and forward: two links of latency + serialization each
            per_hop = 2 * msg(2**20, 50.0, 500.0, 1)
            ar = 126_600  # ASTRA-sim's congestion-aware 8-NPU all-reduce (fixtures README)
        else:
            ar = ring_all_reduce(8, 2**20, *SWITCH)
        assert r.ranks["wall_ns"].tolist() == [per_hop + ar] * 8


def test_a_receive_whose_data_is_there_completes_when_issued(shared, tmp_path):
    # Rank 1 computes 50 us before its receive; rank 0's 1 MiB arrived at 20,531 ns.
    send = EtNode(0, "s", "COMM_SEND_NODE", attrs={"is_cpu_op": False, "comm_dst": 1, "comm_size": 2**20, "comm_tag": 0})
    recv = EtNode(1, "r", "COMM_RECV_NODE", data_deps=[0], attrs={"is_cpu_op": False, "comm_src": 0, "comm_size": 2**20, "comm_tag": 0})
    after = EtNode(2, "c", "COMP_NODE", data_deps=[1], duration_micros=5)
    per_rank = [[send]] + [[EtNode(0, "c0", "COMP_NODE", duration_micros=50), recv, after]]
    net = {"topology": ["Switch"], "npus_count": [2], "bandwidth": [50], "latency": [500]}
    f = shared / "fixtures" / "astra-sim" / "multi" / "x_send_then_ar8"
    r = simulate(write(tmp_path, per_rank, {}), f / "system.json", net, backend="analytical:astra-unaware")
    assert r.ranks["wall_ns"].tolist() == [20_531, 55_000]


# --- rule 4: ring all-to-all = n(n-1)/2 ring steps of chunk / n, split sizes ignored ---------------

def ring_all_to_all(n: int, size: int) -> int:
    return SPLITS * (D + n * (n - 1) // 2 * (msg(size // SPLITS // n, *SWITCH) + D))


def test_ring_all_to_all_is_n_n_minus_1_over_2_steps(shared):
    assert ring_all_to_all(64, 2**20) == 8_757_544  # what ASTRA-sim printed for the 64-NPU fixture
    r = fixture(shared, "x_mixed_seq8")
    ag = SPLITS * (D + 7 * (msg(2**20 // SPLITS, *SWITCH) + D))  # comm_size is each rank's shard
    rs = ring_all_reduce(8, 2**20, *SWITCH) - SPLITS * 7 * (msg(2**20 // SPLITS // 8, *SWITCH) + D)  # the reducing half
    assert r.ranks["wall_ns"].tolist() == [ag + 50_000 + ring_all_to_all(8, 2**20) + 20_000 + rs] * 8 == [463_576] * 8


def test_ring_all_to_all_ignores_split_sizes(shared, tmp_path):
    skewed = [[2**20 - 7 * 1000 if j == r else 1000 for j in range(8)] for r in range(8)]
    per_rank = [[coll(0, "ALL_TO_ALL", 2**20, comm_split_sizes=skewed[r], comm_recv_split_sizes=[row[r] for row in skewed])]
                for r in range(8)]
    r = probe(shared, "x_mixed_seq8", write(tmp_path, per_rank, {}))
    assert r.ranks["wall_ns"].tolist() == [ring_all_to_all(8, 2**20)] * 8


# --- rule 5: involved_dim -----------------------------------------------------------------------

def test_involved_dim_keeps_the_all_reduce_on_dimension_1(shared):
    dim1 = ring_all_reduce(2, 2**20, *SWITCH)  # the 2-NPU switch dimension only
    assert dim1 == 28_620
    assert fixture(shared, "x_ar_world16_dim1").ranks["wall_ns"].tolist() == [dim1] * 16


def test_world_all_gather_runs_dimension_by_dimension_highest_first(shared):
    chunk = 2**20 // SPLITS
    dim1 = D + msg(chunk, *SWITCH) + D  # 2 NPUs: one step of the shard
    dim0 = D + 7 * (msg(2 * chunk, *RING, 1) + D)  # 8 NPUs on a ring: 7 one-hop steps of 2 shards
    # Each chunk moves on to dimension 0 when done with dimension 1; one chunk per dimension at a time.
    assert fixture(shared, "x_ag_world16").ranks["wall_ns"].tolist() == [dim1 + SPLITS * dim0] * 16 == [145_718] * 16


# --- rule 6: a sub-group on a multi-dimensional network is a flat ring ----------------------------

def per_rank_ring(delays: list[int], steps: int, reducing: int, block: int) -> int:
    """An independent model of ASTRA-sim's ring on each rank's clock: rank p sends step k + 1 once
    it processed step k from p - 1 and sent its own step k; its chunk ends when it processed its
    last receive, and its next chunk starts then. delays[p]: message time from p to p + 1."""
    n = len(delays)
    start = [0] * n
    for _ in range(SPLITS):
        send = [[0] * steps for _ in range(n)]
        for p in range(n):
            send[p][0] = start[p] + D
        for k in range(1, steps):
            for p in range(n):
                arrived = send[p - 1][k - 1] + delays[p - 1]
                send[p][k] = max(arrived, send[p][k - 1]) + D + (red(block) if k - 1 < reducing else 0)
        start = [max(send[p - 1][steps - 1] + delays[p - 1], send[p][steps - 1]) + D for p in range(n)]
    return max(start)


def test_sub_group_rings_over_its_members_priced_on_their_lowest_differing_dimension(shared, tmp_path):
    # {0, 1, 2, 3} differ in dimension 0 (a ring of 8): 1 hop between neighbours, 3 back from 3 to 0.
    block = 2**20 // SPLITS // 4
    hop = lambda h: msg(block, *RING, h)  # noqa: E731
    expected = per_rank_ring([hop(1), hop(1), hop(1), hop(3)], 6, 3, block)
    assert expected == 19_960
    assert fixture(shared, "x_ar_tpgroups16").ranks["wall_ns"].tolist() == [expected] * 16
    # Pairs {r, r + 8} differ only in dimension 1 (the switch); pairs {2k, 2k + 1} in dimension 0.
    across = {str(k): [k, k + 8] for k in range(8)}
    per_rank = [[coll(0, "ALL_REDUCE", 2**20, pg=str(r % 8))] for r in range(16)]
    r = probe(shared, "x_ar_tpgroups16", write(tmp_path / "across", per_rank, across))
    assert r.ranks["wall_ns"].tolist() == [ring_all_reduce(2, 2**20, *SWITCH)] * 16
    inside = {str(k): [2 * k, 2 * k + 1] for k in range(8)}
    per_rank = [[coll(0, "ALL_REDUCE", 2**20, pg=str(r // 2))] for r in range(16)]
    r = probe(shared, "x_ar_tpgroups16", write(tmp_path / "inside", per_rank, inside))
    assert r.ranks["wall_ns"].tolist() == [ring_all_reduce(2, 2**20, *RING, 1)] * 16


@pytest.mark.parametrize("direct", [False, True])
def test_a_sub_group_runs_a_ring_whatever_the_config_names(shared, tmp_path, direct):
    f = shared / "fixtures" / "astra-sim" / "multi" / "x_two_groups8"
    system = json.loads((f / "system.json").read_text())
    if direct:
        system["all-reduce-implementation"] = ["direct"]
    per_rank = [[coll(0, "ALL_REDUCE", 2**20, pg=str(r // 2 + 1))] for r in range(8)]
    r = simulate(write(tmp_path, per_rank, TP), system, f / "network.yml", backend="analytical:astra-unaware")
    assert r.ranks["wall_ns"].tolist() == [ring_all_reduce(2, 2**20, *SWITCH)] * 8
    assert set(r.collectives["algorithm"]) == {"ring"}


def test_opposite_orders_on_two_groups_deadlock_as_in_astra_sim(shared, tmp_path):
    # Ranks 0 and 1 share two groups and issue their all-reduces in opposite id orders: each
    # holds its communication slot for the collective the other has not issued.
    groups = {"1": [0, 1], "2": [0, 1]}
    per_rank = [[coll(0, "ALL_REDUCE", 1024, pg="1"), coll(1, "ALL_REDUCE", 1024, pg="2")],
                [coll(0, "ALL_REDUCE", 1024, pg="2"), coll(1, "ALL_REDUCE", 1024, pg="1")]]
    net = {"topology": ["Switch"], "npus_count": [2], "bandwidth": [50], "latency": [500]}
    f = shared / "fixtures" / "astra-sim" / "multi" / "x_two_groups8"
    wl = write(tmp_path, per_rank, groups)
    with pytest.raises(SimulationError, match=r"deadlock: rank 0 has 2 nodes that can never run; .*t\.0\.et: node 1: it "
                                              r"waits for the rank's communication slot, held by node 0 that never finishes"):
        simulate(wl, f / "system.json", net, backend="analytical:astra-unaware")
    # The physical model runs both at once.
    r = simulate(wl, f / "system.json", net, backend="analytical:flow")
    assert len(r.collectives) == 2
