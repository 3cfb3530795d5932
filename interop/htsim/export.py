"""A traffic or a collective's flows as an htsim connection matrix, and the `htsim_uec` flags
for the fabric tracefabric would run them on.

A traffic's flows are the packet engine's own (the same generator and seed). A collective is
one DAG of transfers (`collective_flows`): a transfer without dependencies starts at 0; the
others start on a trigger that the transfers they wait on fire when their data has arrived
(`recv_done_trigger`): a oneshot trigger for one dependency, a barrier counting them for
several. Transfers with the same dependencies share a trigger. htsim models no endpoint delay
or local reduction: the file carries the dependencies, not the system layer's timing.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ... import _core
from ...collectives import collective_flows
from ...errors import ConfigError, from_engine
from ...network_backends.packet import fabric_hosts
from ...network_backends.packet.cm import INT_MAX, CmFlow, CmTrigger, ConnectionMatrix

# tracefabric scheme -> htsim_uec flags that select the nearest behaviour; others have none.
LB_FLAGS = {"reps": ["-load_balancing_algo", "reps"], "host_spray": ["-load_balancing_algo", "oblivious"],
            "ecmp": ["-load_balancing_algo", "oblivious", "-paths", "1"], "switch_ar": ["-strat", "ecmp_ar"],
            "switch_rr": ["-strat", "ecmp_rr"]}
CC_FLAGS = {"ideal": ["-sender_cc_algo", "constant"], "dctcp": ["-sender_cc_algo", "dctcp"]}


def _flow(i: int, src: int, dst: int, size: int, what: str) -> CmFlow:
    """Flow i (id i + 1: htsim's ids start at 1), with the sizes htsim can read."""
    if size == 0:
        raise ConfigError(f"{what} {i}: 0 bytes, which htsim reads as a flow without end; expected > 0", "bytes")
    if size > INT_MAX:
        raise ConfigError(f"{what} {i}: {size} B, past the {INT_MAX} B htsim reads into a flow's `size`", "bytes")
    return CmFlow(src, dst, size, id=i + 1)


def traffic_matrix(config: dict[str, Any]) -> ConnectionMatrix:
    """The flows of a packet config's traffic (as `build_config` makes it)."""
    try:
        raw = _core.traffic_flows(json.dumps(config))
    except _core.EngineError as e:
        raise from_engine(e) from None
    flows = []
    for i, (src, dst, size, start) in enumerate(zip(raw["src"], raw["dst"], raw["bytes"], raw["start_ps"])):
        f = _flow(i, src, dst, size, "flow")
        if start % 10**6:
            raise ConfigError(f"flow {i}: starts at {start} ps; a connection matrix's `start` is whole microseconds",
                              "start")
        f.start_us = start // 10**6
        flows.append(f)
    return ConnectionMatrix(nodes=fabric_hosts(config), flows=flows)


def collective_matrix(algorithm: str, kind: str, ranks: int, size: int, nodes: int | None = None) -> ConnectionMatrix:
    """One collective's DAG on hosts 0..ranks-1 (of `nodes`, default `ranks`), with its step
    dependencies as triggers."""
    dag = collective_flows(algorithm, kind, ranks, size)
    nodes = ranks if nodes is None else nodes
    if nodes < ranks:
        raise ConfigError(f"the fabric has {nodes} hosts but the collective {ranks} ranks", "ranks")
    flows = [_flow(i, t["src"], t["dst"], t["bytes"], f"{algorithm} {kind} transfer") for i, t in enumerate(dag)]
    triggers: dict[tuple[int, ...], CmTrigger] = {}
    for i, t in enumerate(dag):
        if not t["after"]:
            flows[i].start_us = 0
            continue
        waits = tuple(sorted(t["after"]))
        if waits not in triggers:
            kind_, count = ("oneshot", None) if len(waits) == 1 else ("barrier", len(waits))
            triggers[waits] = CmTrigger(len(triggers) + 1, kind_, count)
        tid = triggers[waits].id
        flows[i].trigger = tid
        for w in waits:
            if flows[w].recv_done_trigger not in (None, tid):
                raise ConfigError(f"{algorithm} {kind} on {ranks} ranks: transfer {w} is waited on by transfers with "
                                  "different dependencies, and an htsim flow fires one recv_done_trigger", "algorithm")
            flows[w].recv_done_trigger = tid
    return ConnectionMatrix(nodes=nodes, flows=flows, triggers=list(triggers.values()))


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def uec_flags(config: dict[str, Any], tm: str) -> tuple[list[str], list[str]]:
    """(htsim_uec's arguments for this fabric and scheme, what they do not carry over)."""
    topo, link = config["topology"], config.get("link", {})
    switch, packet, scheme = config.get("switch", {}), config.get("packet", {}), config["scheme"]
    mtu = packet.get("payload_bytes", 4096) + packet.get("header_bytes", 62)
    buffer = switch.get("buffer_bytes", 800_000)
    queue = max(1, buffer // mtu)
    args = ["-tm", tm, "-nodes", str(fabric_hosts(config)), "-tiers", "3" if topo["kind"] == "fat_tree" else "2",
            "-linkspeed", _number(link.get("rate_gbps", 800.0) * 1000), "-hop_latency", _number(link.get("latency_ns", 500.0) / 1000),
            "-switch_latency", _number(switch.get("latency_ns", 0.0) / 1000), "-mtu", str(mtu), "-q", str(queue)]
    notes = []
    if switch.get("ecn", True):
        args += ["-ecn", str(math.ceil(switch.get("ecn_kmin", 0.2) * queue)), str(math.ceil(switch.get("ecn_kmax", 0.8) * queue))]
    else:
        notes.append("switch.ecn = false: htsim_uec always marks ECN")
    args += LB_FLAGS.get(scheme["lb"], []) + CC_FLAGS.get(scheme["cc"], [])
    for family, table in (("lb", LB_FLAGS), ("cc", CC_FLAGS)):
        if scheme[family] not in table:
            notes.append(f"{family} {scheme[family]}: no htsim_uec counterpart (its default is used)")
    args += ["-disable_trim", "-seed", str(config.get("seed", 0)), "-end", "0"]  # 0: until the last event
    if topo["kind"] != "fat_tree":
        notes.append("leaf-spine: htsim_uec's 2-tier fat tree derives its switch counts from -nodes")
    elif topo.get("oversubscription", 1) != 1:
        notes.append(f"oversubscription {topo['oversubscription']}: not carried over (these flags build a full-bisection tree)")
    return args, notes
