"""Inspect and validate a set of per-rank Chakra ETs (`<prefix>.<rank>.et` + `comm_groups.json`).

Validation reports every problem it finds, each naming the rank, file, node id and field:
unsupported schema version, duplicate node ids, dependencies on missing nodes or on the node
itself, dependency cycles, communication nodes without the attributes a simulator needs,
collective sequences that differ between the ranks of a group (type, size, all-to-all splits
and their lengths), sends without a matching receive, durations past the simulators' clock,
and, when all that is consistent, nodes that could never run (a receive whose send waits on
it, collectives issued in opposite orders on two groups): the deadlocks `run` would report.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _core
from ..astra_configs.formats import read_comm_groups
from ..errors import ConfigError
from ..specs import missing_ranks
from .chakra_io import COLLECTIVES, SCHEMA_VERSION, EtNode, comm_kind, int_attr, int_value, read_trace, split_sum_problem

SUPPORTED_VERSIONS = (SCHEMA_VERSION,)
COMM_NODES = ("COMM_COLL_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE")


class ValidationError(ConfigError):
    """One or more problems in a set of ETs; `problems` lists them all."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s):\n  " + "\n  ".join(problems), "et")
        self.problems = problems


@dataclass
class RankTrace:
    rank: int
    path: Path
    meta: dict[str, Any]
    nodes: list[EtNode]


def load(where: str | Path, comm_groups: str | Path | None = None) -> tuple[list[RankTrace], dict[str, list[int]]]:
    """ETs of every rank: `where` is a directory holding `<prefix>.<r>.et` files, a prefix
    (`dir/trace` for `dir/trace.0.et`, ...), or one of those files. Ranks must be 0..N-1 with
    none missing. Groups come from `comm_groups` if given, else from `comm_groups.json` beside
    the ETs if there is one; a group listing a rank the workload lacks is refused."""
    where = Path(where)
    # One rank's file (`dir/t.0.et`) stands for its workload, the prefix `dir/t`.
    if where.is_file() and (own := re.fullmatch(r"(.+)\.[0-9]+\.et", where.name)):
        where = where.with_name(own.group(1))
    folder, prefix = (where, None) if where.is_dir() else (where.parent, where.name)
    if not folder.is_dir():  # a typo in the path, not a folder without ETs
        raise ConfigError(f"{where}: not found (expected a folder of <prefix>.<rank>.et files, or such a prefix)", "workload")
    by_prefix: dict[str, dict[int, Path]] = defaultdict(dict)
    for p in sorted(folder.glob("*.et")):
        m = re.fullmatch(r"(.+)\.([0-9]+)\.et", p.name)
        if not m:
            if prefix is None or p.name.startswith(prefix + "."):  # t.-1.et, t.x.et: not silently left out
                raise ConfigError(f"{p}: not named <prefix>.<rank>.et with a rank 0, 1, ...", "workload")
            continue
        if prefix is None or m.group(1) == prefix:
            ranks = by_prefix[m.group(1)]
            r = int(m.group(2))
            if r in ranks:  # t.3.et and t.03.et: which one is rank 3?
                raise ConfigError(f"{folder}: {ranks[r].name} and {p.name} are both rank {r}", "workload")
            ranks[r] = p
    if len(by_prefix) > 1:
        raise ConfigError(f"{where}: ETs of several workloads ({', '.join(sorted(by_prefix))}); name one as "
                          f"{folder / sorted(by_prefix)[0]}", "workload")
    found = next(iter(by_prefix.values()), {})
    if not found:
        named = "<prefix>.<rank>.et" if prefix is None else f"{prefix}.<rank>.et"
        raise ConfigError(f"{where}: no Chakra ETs named {named} in {folder}", "workload")
    if missing := missing_ranks(found):
        raise ConfigError(f"{where}: ranks {missing} have no ET (found {len(found)} ranks, up to {max(found)})", "workload")
    traces = []
    for r in sorted(found):
        meta, nodes = read_trace(found[r])
        traces.append(RankTrace(r, found[r], meta, nodes))
    groups_file = Path(comm_groups) if comm_groups is not None else folder / "comm_groups.json"
    groups = read_comm_groups(groups_file) if comm_groups is not None or groups_file.is_file() else {}
    for name, ranks in groups.items():
        bad = [r for r in ranks if r >= len(traces)]
        if bad:
            raise ConfigError(f"{groups_file}: group {name!r} lists ranks {bad}, but the workload has "
                              f"{len(traces)} ranks (0..{len(traces) - 1})", name)
        if name == "world" and sorted(ranks) != list(range(len(traces))):  # results name every rank's group so
            raise ConfigError(f"{groups_file}: group 'world' lists {len(ranks)} of the {len(traces)} ranks; results "
                              "call the group of every rank 'world': rename the group", name)
    return traces, groups


def _deps(n: EtNode) -> list[int]:
    return list(n.data_deps) + list(n.ctrl_deps)


def _topological(nodes: list[EtNode]) -> tuple[list[int], list[int]]:
    """(order, ids left on a cycle) by Kahn's algorithm over data and control dependencies."""
    ids = {n.id for n in nodes}
    indeg = {n.id: len({d for d in _deps(n) if d in ids and d != n.id}) for n in nodes}
    users: dict[int, list[int]] = defaultdict(list)
    for n in nodes:
        for d in {d for d in _deps(n) if d in ids and d != n.id}:
            users[d].append(n.id)
    ready = [i for i, k in indeg.items() if k == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    return order, sorted(i for i, k in indeg.items() if k > 0)


def _cycle(nodes: list[EtNode], stuck: list[int]) -> list[int]:
    """One dependency cycle among the nodes Kahn's algorithm could not order."""
    by_id = {n.id: n for n in nodes}
    left = set(stuck)
    i, seen = stuck[0], []
    while i not in seen:
        seen.append(i)
        i = next(d for d in _deps(by_id[i]) if d in left and d != i)
    return seen[seen.index(i):] + [i]


def collectives(t: RankTrace) -> list[EtNode]:
    return [n for n in t.nodes if n.type in COMM_NODES]


def _comm_kind(n: EtNode) -> str | None:
    """The Chakra name of a node's `comm_type`, or None when it names no CollectiveCommType."""
    return comm_kind(n.attrs.get("comm_type"))


def _int(n: EtNode, key: str, default: Any = None) -> Any:
    """Attribute `key` read as `run` reads it (an integer, also from a string of digits), or
    as stored when it is not one: that is a problem of its own, reported once."""
    v = n.attrs.get(key)
    if type(v) is int:  # the common case, without the reader's checks (validate reads every node)
        return v
    try:
        return int_attr(n.attrs, key, "", default)
    except ConfigError:
        return v


def _splits(n: EtNode, key: str) -> Any:
    """A split-size list with its entries read as `run` reads them, or as stored."""
    splits = n.attrs.get(key)
    if not isinstance(splits, list):
        return splits
    try:
        return [int_value(x, key, "") for x in splits]
    except ConfigError:
        return splits


def describe(n: EtNode) -> str:
    if "comm_type" not in n.attrs:
        kind = n.type.replace("_NODE", "")
    else:  # an unknown type is shown as it is; `trace validate` names the problem
        kind = _comm_kind(n) or f"comm_type {n.attrs['comm_type']!r}"
    return f"{kind} {_int(n, 'comm_size', '?')} B"


def critical_path(t: RankTrace) -> tuple[int, list[int]]:
    """Longest chain of node durations (µs) through the dependency graph, and its node ids
    (0 and no ids for an empty or cyclic graph)."""
    order, stuck = _topological(t.nodes)
    if stuck or not t.nodes:
        return 0, []
    by_id = {n.id: n for n in t.nodes}
    best: dict[int, tuple[int, int | None]] = {}
    for i in order:
        n = by_id[i]
        prev = max(((best[d][0], d) for d in _deps(n) if d in best), default=(0, None))
        best[i] = (prev[0] + n.duration_micros, prev[1])
    end = max(best, key=lambda i: best[i][0])
    path, i = [], end
    while i is not None:
        path.append(i)
        i = best[i][1]
    return best[end][0], path[::-1]


def inspect(traces: list[RankTrace]) -> list[dict[str, Any]]:
    out = []
    for t in traces:
        length, path = critical_path(t)
        if t.nodes and not path:  # a cycle: no longest path, not one of 0 µs
            length = None
        per_group: dict[str, list[str]] = defaultdict(list)
        for n in collectives(t):
            per_group[str(n.attrs.get("pg_name", "?"))].append(f"{describe(n)} (node {n.id})")
        out.append({"rank": t.rank, "file": str(t.path), "version": t.meta.get("version"),
                    "nodes": dict(Counter(n.type for n in t.nodes)), "collectives": dict(per_group),
                    "critical_path_us": length, "critical_path_nodes": len(path),
                    "compute_us": sum(n.duration_micros for n in t.nodes if n.type == "COMP_NODE")})
    return out


def problems(traces: list[RankTrace], groups: dict[str, list[int]]) -> list[str]:
    out: list[str] = []
    for t in traces:
        out += _rank_problems(t, groups)
    out += _group_problems(traces, groups)
    out += _p2p_problems(traces)
    if not out:  # the order check assumes consistent graphs, sequences and pairs
        out += deadlock_problems(traces, groups)
    return out


def validate(traces: list[RankTrace], groups: dict[str, list[int]]) -> None:
    found = problems(traces, groups)
    if found:
        raise ValidationError(found)


# `pg_name` values that mean every rank when comm_groups.json lists no group of that name:
# ASTRA-sim's own ETs carry none (or "0").
WORLD_NAMES = ("", "0")


def group_problem(pg: Any, groups: dict[str, list[int]]) -> str | None:
    """Why a collective's `pg_name` names no group, or None: it must be a group of
    comm_groups.json, or absent, empty or "0" for the world. `run` and `trace validate`
    both apply this rule."""
    name = "" if pg is None else str(pg)
    if name in groups or name in WORLD_NAMES:
        return None
    known = ", ".join(sorted(groups)) or "none (no comm_groups.json)"
    return f"pg_name {name!r} is not a known communicator group; known: {known}"


def _group_of(n: EtNode, groups: dict[str, list[int]]) -> str:
    """A collective's group as `run` reads pg_name (group_problem): absent, "" and "0" are
    the world, named ""."""
    name = str(n.attrs.get("pg_name", ""))
    return "" if name not in groups and name in WORLD_NAMES else name


def graph_problems(nodes: list[EtNode]) -> list[tuple[str, str]]:
    """(field, message) for each repeated node id and each dependency on the node itself or
    on a node the trace does not have (cycles are found apart)."""
    out = []
    ids = Counter(n.id for n in nodes)
    for i, k in ids.items():
        if k > 1:
            out.append(("id", f"node id {i} appears {k} times (ids must be unique)"))
    for n in nodes:
        for fld in ("data_deps", "ctrl_deps"):
            for d in getattr(n, fld):
                if d == n.id:
                    out.append((fld, f"node {n.id} ({n.name}): field '{fld}' points to the node itself"))
                elif d not in ids:
                    out.append((fld, f"node {n.id} ({n.name}): field '{fld}' refers to missing node {d}"))
    return out


# What a node's count attributes count: `run` and `trace validate` refuse them below 0.
COUNT_UNITS = {"num_ops": "operations", "tensor_size": "bytes"}


def _rank_problems(t: RankTrace, groups: dict[str, list[int]]) -> list[str]:
    out = []
    where = f"rank {t.rank} ({t.path})"
    version = t.meta.get("version")
    if version not in SUPPORTED_VERSIONS:
        out.append(f"{where}: GlobalMetadata field 'version' is {version!r}; supported: {', '.join(SUPPORTED_VERSIONS)}")
    out += [f"{where}: {message}" for _, message in graph_problems(t.nodes)]
    for n in t.nodes:
        if n.type == "COMP_NODE" and n.duration_micros * 1_000_000 >= _core.CLOCK_LIMIT_PS:  # as `run` reads it
            out.append(f"{where}: node {n.id} ({n.name}): duration_micros = {n.duration_micros} is past the simulators' "
                       "picosecond clock (2^62 ps, 53 days)")
        # The roofline's inputs (and a memory node's bytes), as `run` reads them: none is negative.
        counts = ("num_ops", "tensor_size") if n.type == "COMP_NODE" else ("tensor_size",)
        for key in counts if n.type in ("COMP_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE") else ():
            if isinstance(value := _int(n, key, 0), int) and value < 0:
                out.append(f"{where}: node {n.id} ({n.name}): {key} = {value}: expected {COUNT_UNITS[key]} >= 0")
        if n.type in COMM_NODES:
            need = {"COMM_COLL_NODE": ("comm_type", "comm_size"), "COMM_SEND_NODE": ("comm_dst", "comm_size"),
                    "COMM_RECV_NODE": ("comm_src", "comm_size")}[n.type]
            for a in need:
                if a not in n.attrs:
                    out.append(f"{where}: node {n.id} ({n.name}): {n.type} lacks attribute '{a}'")
            # The checks `run` makes of the same attributes (collectives/workload.py).
            if n.type == "COMM_COLL_NODE" and "comm_type" in n.attrs and _comm_kind(n) is None:
                out.append(f"{where}: node {n.id} ({n.name}): comm_type {n.attrs['comm_type']!r} is not a Chakra CollectiveCommType")
            elif n.type == "COMM_COLL_NODE" and "comm_type" in n.attrs and _comm_kind(n) not in COLLECTIVES:
                out.append(f"{where}: node {n.id} ({n.name}): comm_type {_comm_kind(n)}: `run` simulates only "
                           f"{', '.join(COLLECTIVES)}")
            # Read as `run` reads them (collectives/workload.py), so the two agree.
            peer = {"COMM_SEND_NODE": ("comm_dst",), "COMM_RECV_NODE": ("comm_src",)}.get(n.type, ())
            for key in ("comm_size", *peer):
                value = _int(n, key, 0)
                if not isinstance(value, int) or value < 0:
                    what = "bytes" if key == "comm_size" else "a rank"
                    out.append(f"{where}: node {n.id} ({n.name}): {key} = {value!r}: expected {what} >= 0")
            sends, size = _splits(n, "comm_split_sizes"), _int(n, "comm_size")
            if (isinstance(sends, list) and all(isinstance(x, int) for x in sends) and isinstance(size, int)
                    and (bad := split_sum_problem(size, sends))):
                out.append(f"{where}: node {n.id} ({n.name}): {bad}")
            pg = n.attrs.get("pg_name")
            if n.type == "COMM_COLL_NODE" and (bad := group_problem(pg, groups)):
                out.append(f"{where}: node {n.id} ({n.name}): {bad}")
            elif pg is not None and str(pg) in groups and t.rank not in groups[str(pg)]:
                out.append(f"{where}: node {n.id}: rank {t.rank} is not a member of group {pg!r} {groups[str(pg)]}")
    _, stuck = _topological(t.nodes)
    if stuck:
        cyc = _cycle(t.nodes, stuck)
        out.append(f"{where}: dependency cycle through nodes {' -> '.join(map(str, cyc))}")
    return out


def _group_problems(traces: list[RankTrace], groups: dict[str, list[int]]) -> list[str]:
    out = []
    by_rank = {t.rank: t for t in traces}
    seqs: dict[str, dict[int, list[EtNode]]] = defaultdict(dict)
    for t in traces:
        for n in collectives(t):
            if n.type == "COMM_COLL_NODE":
                seqs[_group_of(n, groups)].setdefault(t.rank, []).append(n)
    for g, per in seqs.items():
        # The world's members are every rank, not just those that issued on it.
        members = groups.get(g) or (sorted(by_rank) if g == "" else sorted(per))
        absent = [r for r in members if r in by_rank and r not in per]
        for r in absent:
            out.append(f"group {g!r}: rank {r} ({by_rank[r].path}) issues no collective on it, "
                       f"rank {min(per)} issues {len(per[min(per)])}")
        ref = min(per)
        for r, seq in per.items():
            if len(seq) != len(per[ref]):
                out.append(f"group {g!r}: rank {r} issues {len(seq)} collectives, rank {ref} issues {len(per[ref])}")
            for k, (a, b) in enumerate(zip(per[ref], seq)):
                if _comm_kind(a) != _comm_kind(b) or (
                        _comm_kind(a) != "ALL_TO_ALL" and _int(a, "comm_size") != _int(b, "comm_size")):
                    out.append(f"group {g!r}, collective #{k}: rank {ref} has {describe(a)} (node {a.id}), "
                               f"rank {r} has {describe(b)} (node {b.id})")
        out += _all_to_all_problems(g, members, per)
    return out


def _all_to_all_problems(g: str, members: list[int], per: dict[int, list[EtNode]]) -> list[str]:
    """Split lists have one entry per group member, and what rank a sends to group rank j
    must be what rank members[j] receives from a."""
    out = []
    for r, seq in per.items():
        for n in seq:
            for attr in ("comm_split_sizes", "comm_recv_split_sizes"):
                splits = _splits(n, attr)
                if isinstance(splits, list) and len(splits) != len(members):
                    out.append(f"group {g!r}: rank {r}: node {n.id} ({n.name}): {attr} has {len(splits)} entries, "
                               f"expected one per group member ({len(members)})")
    if out:
        return out
    for k in range(min(len(s) for s in per.values())):
        nodes = {r: s[k] for r, s in per.items()}
        # As `run`: every receiver that lists its receive splits is checked against its senders.
        for b, nb in nodes.items():
            expected = _splits(nb, "comm_recv_split_sizes")
            if not isinstance(expected, list) or b not in members:
                continue
            for i, want in enumerate(expected):
                a = members[i] if i < len(members) else None
                sent_list = _splits(nodes[a], "comm_split_sizes") if a in nodes else None
                if isinstance(sent_list, list) and members.index(b) < len(sent_list):
                    sent = sent_list[members.index(b)]
                    if sent != want:
                        out.append(f"group {g!r}, collective #{k}: rank {a} sends {sent} B to rank {b} (node {nodes[a].id}, "
                                   f"comm_split_sizes) but rank {b} expects {want} B (node {nb.id}, comm_recv_split_sizes)")
    return out


def _p2p_problems(traces: list[RankTrace]) -> list[str]:
    """Sends and receives paired as `run` pairs them: by (src, dst, tag), in node order; a
    receive of 0 bytes takes any size, any other must equal its send's."""
    sends: dict[tuple, list[EtNode]] = defaultdict(list)
    recvs: dict[tuple, list[EtNode]] = defaultdict(list)
    for t in traces:
        for n in t.nodes:
            if n.type == "COMM_SEND_NODE":
                sends[(t.rank, _int(n, "comm_dst"), _int(n, "comm_tag", 0))].append(n)
            elif n.type == "COMM_RECV_NODE":
                recvs[(_int(n, "comm_src"), t.rank, _int(n, "comm_tag", 0))].append(n)
    out = []
    for key in sorted(set(sends) | set(recvs), key=str):
        src, dst, tag = key
        s, r = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(r):
            out.append(f"send/recv rank {src} -> rank {dst} (tag {tag}): {len(s)} send(s), {len(r)} receive(s): "
                       "a simulator would deadlock")
            continue
        for a, b in zip(s, r):
            sent, want = _int(a, "comm_size"), _int(b, "comm_size")
            if want != sent and want != 0:
                out.append(f"send/recv rank {src} -> rank {dst} (tag {tag}): rank {dst}'s receive (node {b.id}) of {want} B "
                           f"pairs with rank {src}'s send (node {a.id}) of {sent} B, in node order")
    return out


DEADLOCK_RANKS_SHOWN = 8  # a deadlock on 1,000 ranks is one problem, not 1,000 lines


def deadlock_problems(traces: list[RankTrace], groups: dict[str, list[int]]) -> list[str]:
    """Nodes that can never run, found as `run` would find them, without timing: play every
    rank's graph with collectives matched by their place in their group's sequence (ready
    once every member has issued theirs) and receives matched to sends by (src, dst, tag) in
    node order (ready once the send has issued). Sends and other nodes never wait."""
    by_rank = {t.rank: t for t in traces}
    index = {t.rank: {n.id: i for i, n in enumerate(t.nodes)} for t in traces}
    waiting = {t.rank: [len({d for d in _deps(n) if d != n.id}) for n in t.nodes] for t in traces}
    users: dict[tuple[int, int], list[int]] = defaultdict(list)
    for t in traces:
        for i, n in enumerate(t.nodes):
            for d in {d for d in _deps(n) if d != n.id}:
                users[(t.rank, index[t.rank][d])].append(i)
    # Collective instances: (group, k) -> [(rank, node index)], in member order.
    instance_of: dict[tuple[int, int], tuple[str, int]] = {}
    members_of: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    seen: Counter = Counter()
    pair_of: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for t in traces:
        for i, n in enumerate(t.nodes):
            if n.type == "COMM_COLL_NODE":
                g = _group_of(n, groups)
                key = (g, seen[(g, t.rank)])
                seen[(g, t.rank)] += 1
                instance_of[(t.rank, i)] = key
                members_of[key].append((t.rank, i))
            elif n.type in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                send = n.type == "COMM_SEND_NODE"
                src, dst = (t.rank, _int(n, "comm_dst")) if send else (_int(n, "comm_src"), t.rank)
                key = (src, dst, _int(n, "comm_tag", 0), send)
                pair_of[(t.rank, i)] = (*key[:3], seen[key])
                seen[key] += 1
    world = sorted(by_rank)
    group_size = {key: len(groups.get(key[0]) or world) for key in members_of}
    issued: Counter = Counter()
    sent: set = set()
    recv_waiting: dict[tuple[int, int, int, int], tuple[int, int]] = {}
    done = {t.rank: [False] * len(t.nodes) for t in traces}
    ready = [(r, i) for r, w in waiting.items() for i, k in enumerate(w) if k == 0]

    def finish(r: int, i: int) -> None:
        done[r][i] = True
        for u in users[(r, i)]:
            waiting[r][u] -= 1
            if waiting[r][u] == 0:
                ready.append((r, u))

    while ready:
        r, i = ready.pop()
        node = by_rank[r].nodes[i]
        if node.type == "COMM_COLL_NODE":
            key = instance_of[(r, i)]
            issued[key] += 1
            if issued[key] == group_size[key]:
                for m in members_of[key]:
                    finish(*m)
        elif node.type == "COMM_RECV_NODE":
            pair = pair_of[(r, i)]
            if pair in sent:
                finish(r, i)
            else:
                recv_waiting[pair] = (r, i)
        else:
            if node.type == "COMM_SEND_NODE":
                pair = pair_of[(r, i)]
                sent.add(pair)
                if pair in recv_waiting:
                    finish(*recv_waiting.pop(pair))
            finish(r, i)
    out = []
    for t in traces:
        stuck = [i for i, k in enumerate(waiting[t.rank]) if k == 0 and not done[t.rank][i]]
        if not stuck:
            continue
        why = []
        for i in stuck[:3]:
            n = t.nodes[i]
            if n.type == "COMM_RECV_NODE":
                why.append(f"node {n.id} ({n.name}): its receive from rank {_int(n, 'comm_src')} never gets its data "
                           "(the send never issues)")
            else:
                key = instance_of[(t.rank, i)]
                issuers = {m for m, j in members_of[key] if waiting[m][j] == 0}
                missing = [m for m in (groups.get(key[0]) or world) if m not in issuers]
                why.append(f"node {n.id} ({n.name}): its {describe(n)} (collective #{key[1]} on group {key[0]!r}) "
                           f"waits for ranks {missing[:8]} that never issue theirs")
        blocked = sum(1 for d in done[t.rank] if not d)
        out.append(f"rank {t.rank} ({t.path}): deadlock: {blocked} node(s) can never run; " + "; ".join(why))
    if len(out) > DEADLOCK_RANKS_SHOWN:
        more = len(out) - DEADLOCK_RANKS_SHOWN
        out = out[:DEADLOCK_RANKS_SHOWN] + [f"deadlock: {more} more rank(s) have nodes that can never run"]
    return out
