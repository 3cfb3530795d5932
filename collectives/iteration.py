"""Simulate training iterations: a workload (Chakra ETs) through the system layer on a
network backend, as ASTRA-sim does, with ASTRA-sim's own input files.

    >>> from tracefabric.collectives.iteration import simulate
    >>> r = simulate("fixtures/workloads/8npus_1MB/all_reduce", "sys.json", "switch_8npus.yml",
    ...              backend="analytical:astra-unaware")
    >>> r.ranks.wall_ns.tolist()      # one row per rank
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import _core
from ..astra_configs.formats import (PACKET_NETWORK_KEYS, AstraNetwork, PacketFabric, RemoteMemory, SystemConfig,
                                    check_network, check_system, read_memory, read_network, read_system)
from ..errors import ConfigError, SimulationError, from_engine, from_system
from ..specs import plain
from ..astra_configs.servers import check_servers
from . import astra_limits
from .placement import resolve as resolve_placement
from .workload import Workload, engine_input, read_workload

__all__ = ["simulate", "IterationResults", "SimulationError", "BACKENDS", "backend_spec"]

BACKENDS: tuple[str, ...] = tuple(_core.backend_names())  # the engine's list
#: Reuse of busy periods on the packet backend (`simulate(reuse=)`), the default first.
REUSE_MODES = ("exact", "fast", "off")
SCHEME_OPTIONS = ("scheme", "lb", "cc", "loss", "qdisc", "lb_params", "cc_params", "loss_params", "qdisc_params")


@dataclass
class IterationResults:
    """Per-rank times (ASTRA-sim's statistics) and per-collective records of one run."""

    backend: str
    ranks: pd.DataFrame = field(repr=False)
    collectives: pd.DataFrame = field(repr=False)
    flows: int = 0
    network_counters: dict[str, int] = field(default_factory=dict)
    #: How ranks were placed on the fabric: "packed", a policy, or the placement file used.
    placement: str = "packed"
    #: Packet backend: per link (owner, peer, stage, data_bytes, bytes, max_queue_bytes,
    #: down_ps) and per stage (queues, utilization, max link load, drops); empty otherwise.
    links: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    stages: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    #: Packet backend: which reuse of busy periods ran (`off`, `exact`, `fast`; see
    #: docs/iterations.md); its counts are in `network_counters` (`reuse_*`, `events_skipped`).
    reuse: str = ""

    @property
    def iteration_ns(self) -> float:
        """Iteration time: when the slowest rank finished."""
        return float(self.ranks["wall_ns"].max())

    def summary_row(self) -> dict[str, Any]:
        r = self.ranks
        return {"backend": self.backend, "iteration_us": self.iteration_ns / 1e3,
                "compute_us": float(r["compute_ns"].max()) / 1e3, "comm_us": float(r["comm_ns"].max()) / 1e3,
                "exposed_comm_us": float(r["exposed_comm_ns"].max()) / 1e3, "collectives": len(self.collectives),
                "flows": self.flows}

    def to_parquet(self, folder: str | Path) -> Path:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self.ranks.to_parquet(out / "ranks.parquet")
        self.collectives.to_parquet(out / "collectives.parquet")
        if len(self.links):
            self.links.to_parquet(out / "links.parquet")
            self.stages.to_parquet(out / "stages.parquet")
        return out


def _need_path(value: Any, name: str, alternatives: str) -> None:
    """A ConfigError for an argument that is none of the kinds `simulate` takes (a list,
    None, ...), instead of a TypeError from deep inside pathlib."""
    if not isinstance(value, (str, Path)):
        raise ConfigError(f"{name} = {value!r:.80}: expected a file path or {alternatives}", name)


def _network(network: str | Path | dict[str, Any] | AstraNetwork | PacketFabric) -> AstraNetwork | PacketFabric:
    if isinstance(network, (AstraNetwork, PacketFabric)):
        return network
    if isinstance(network, dict):
        return check_network(plain(network))
    _need_path(network, "network", "a dict of network keys")
    return read_network(network)


def _system(system: str | Path | dict[str, Any] | SystemConfig) -> SystemConfig:
    if isinstance(system, SystemConfig):
        return system
    if isinstance(system, dict):
        return check_system(plain(system))
    _need_path(system, "system", "a dict of ASTRA-sim system keys")
    return read_system(system)


def backend_spec(backend: str, net: AstraNetwork | PacketFabric, ranks: int, scheme: dict[str, Any],
                 placement: Any = None, source: str | Path | None = None) -> tuple[dict[str, Any], list[int], str]:
    """The Rust backend spec, the network dimensions the system layer plans with, and how
    ranks were placed (`placement.resolve`; `source`: where the workload's ETs are)."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; expected one of: {', '.join(BACKENDS)}", "backend")
    unknown = sorted(set(scheme) - set(SCHEME_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown scheme option {unknown[0]!r}; expected one of: {', '.join(SCHEME_OPTIONS)}", unknown[0])
    given = [k for k, v in scheme.items() if v is not None]
    if given and backend != "packet":
        # Silently ignored, they would make two "different" runs the same one.
        raise ConfigError(f"{given[0]} = {scheme[given[0]]!r}: LB/CC/loss schemes apply to the packet backend only, "
                          f"not to {backend}", given[0])
    if isinstance(net, AstraNetwork):
        if backend == "packet":
            raise ConfigError(f"{net.path}: the packet backend needs a packet-fabric network (topology: {{kind: fat_tree, k: 8}}, "
                              "link, switch, packet), not ASTRA-sim's analytical dimensions", "network")
        if placement is not None and placement != "packed":
            raise ConfigError(f"placement = {str(placement):.80}: ASTRA-sim's dimensions number NPUs by rank; a placement "
                              "needs a packet-fabric network", "placement")
        astra_limits.check_network(backend, net.npus_count, net.path)
        if net.npus != ranks:
            raise ConfigError(f"{net.path}: the network has {net.npus} NPUs ({' x '.join(map(str, net.npus_count))}) "
                              f"but the workload has {ranks} ranks", "npus_count")
        return {"kind": backend, "dims": net.dims()}, list(net.npus_count), "packed"
    if backend in ("analytical:astra-unaware", "analytical:astra-aware"):
        packet_backends = [b for b in BACKENDS if not b.startswith("analytical:astra")]
        raise ConfigError(f"{net.path}: backend {backend} models ASTRA-sim's analytical dimensions; give an ASTRA-sim "
                          "network YAML (topology/npus_count/bandwidth/latency lists), or run this packet fabric on "
                          f"backend {' or '.join(packet_backends)} (--backend packet)", "network")
    from ..network_backends.packet import build_config, fabric_hosts
    servers = check_servers(net.config["servers"], net.path) if "servers" in net.config else None
    try:
        cfg = build_config(net.config["topology"], None, seed=net.config.get("seed", 0),
                           link=net.config.get("link"), switch=net.config.get("switch"), packet=net.config.get("packet"),
                           limits=net.config.get("limits"), failures=net.config.get("failures"), **scheme)
        hosts = fabric_hosts(cfg)
    except ConfigError as e:
        if e.field.split(".")[0] not in PACKET_NETWORK_KEYS:  # a scheme option given beside the file
            raise
        raise e.in_file(net.path) from None
    if ranks > hosts:
        raise ConfigError(f"{net.path}: the fabric has {hosts} hosts but the workload has {ranks} ranks", "topology")
    gpus = servers["gpus"] if servers else 1
    if hosts % gpus:
        raise ConfigError(f"{net.path}: servers.gpus = {gpus}: expected a divisor of the fabric's {hosts} hosts "
                          "(one NIC per GPU)", "servers.gpus")
    slots, how = resolve_placement(placement, source, ranks, gpus, hosts)
    spec: dict[str, Any] = {"kind": backend, "config": cfg}
    if slots is not None:
        spec["placement"] = slots
    dims = [ranks]
    if servers and gpus > 1:
        spec["servers"] = servers
        if ranks % gpus:
            raise ConfigError(f"{net.path}: the workload's {ranks} ranks do not fill servers of {gpus} GPUs "
                              "(servers.gpus); hierarchical collectives need whole servers", "servers.gpus")
        # Inside a server (dimension 0), then across servers (dimension 1), as synthesis lays ranks out.
        dims = [gpus] + ([ranks // gpus] if ranks > gpus else [])
        for r in range(0, ranks, gpus) if slots is not None else ():
            split = next((r + i for i in range(gpus) if slots[r + i] // gpus != slots[r] // gpus), None)
            if split is not None:
                raise ConfigError(f"placement ({how}): rank {split} is on server {slots[split] // gpus} but rank {r} on "
                                  f"server {slots[r] // gpus}; hierarchical collectives need ranks {r}..{r + gpus - 1} "
                                  "(one server's worth) on one server", "placement")
    return spec, dims, how


def simulate(
    workload: str | Path | Workload,
    system: str | Path | dict[str, Any] | SystemConfig,
    network: str | Path | dict[str, Any] | AstraNetwork | PacketFabric,
    *,
    backend: str = "analytical:astra-unaware",
    memory: str | Path | RemoteMemory | None = None,
    comm_groups: str | Path | None = None,
    placement: Any = None,
    reuse: str = "exact",
    seed: int | None = None,
    **scheme: Any,
) -> IterationResults:
    """Run one workload. `scheme` takes the packet engine's scheme options (`scheme=` preset
    name, `lb`, `cc`, `loss` and their `*_params`) for the packet backend. `placement` puts
    ranks on a packet fabric's GPU slots (see `placement.resolve`; default: the workload's
    placement.json, else rank r on slot r). `reuse` (packet backend): `exact` replays busy
    periods only where the result is bit-identical to simulating them, `fast` also where
    the schemes' state differs (an approximation), `off` simulates every packet. `seed`
    replaces a packet fabric's own `seed` (its random LB choices, failures, placements)."""
    if reuse not in REUSE_MODES:
        raise ConfigError(f"reuse = {reuse!r:.40}: expected one of {', '.join(REUSE_MODES)}", "reuse")
    sys_cfg = _system(system)
    net = _network(network)
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**64:
            raise ConfigError(f"seed = {seed!r:.40}: expected an integer in [0, 2^64)", "seed")
        if isinstance(net, AstraNetwork):  # ASTRA-sim's analytical dimensions draw nothing at random
            raise ConfigError(f"seed = {seed}: {net.path} is an ASTRA-sim network; a seed applies to packet fabrics only", "seed")
        net = PacketFabric({**net.config, "seed": seed}, net.path)
    if memory is not None and not isinstance(memory, RemoteMemory):
        _need_path(memory, "memory", "a RemoteMemory")
    mem = memory if isinstance(memory, RemoteMemory) else read_memory(memory)
    if not isinstance(workload, Workload):
        _need_path(workload, "workload", "a Workload (an ET prefix or folder)")
        if comm_groups is not None:
            _need_path(comm_groups, "comm_groups", "None")
    w = workload if isinstance(workload, Workload) else read_workload(workload, comm_groups)
    spec, dims, placed = backend_spec(backend, net, w.ranks, scheme, placement, w.source)
    if backend == "packet":
        spec["reuse"] = reuse
    astra = backend.startswith("analytical:astra")
    engine_system = sys_cfg.for_engine(dims, astra=astra)
    try:
        raw = _core.simulate_system(json.dumps(engine_input(w, sys_cfg, mem, astra=astra)), json.dumps(engine_system),
                                    json.dumps(spec))
    except _core.SystemLayerError as e:
        field = str(e.args[2]) if len(e.args) > 2 else ""
        # The servers section is the network file's, checked against its fabric in Rust.
        raise from_system(e, net.path if field.startswith("servers") else sys_cfg.path) from None
    except _core.EngineError as e:  # the packet fabric's own config checks
        err = from_engine(e)
        if (type(err) is ConfigError and isinstance(net, PacketFabric)
                and (err.field or "").split(".")[0].split("[")[0] in PACKET_NETWORK_KEYS):
            raise err.in_file(net.path) from None  # a value in the network file (e.g. failures.probability)
        raise err from None
    ranks = pd.DataFrame(raw["ranks"])
    for col in ("wall", "compute", "comm", "exposed_comm", "overlap"):
        ranks[f"{col}_ns"] = ranks.pop(f"{col}_ps") / 1000
    ranks.insert(0, "rank", range(len(ranks)))
    colls = pd.DataFrame(raw["collectives"])
    names = ["world"] + sorted(w.groups)
    colls.insert(0, "group_name", [names[g] for g in colls["group"]] if len(colls) else [])
    for col in ("first_issue", "start", "end"):
        colls[f"{col}_ns"] = colls.pop(f"{col}_ps") / 1000
    colls["cct_ns"] = colls["end_ns"] - colls["start_ns"]
    return IterationResults(backend, ranks, colls, int(raw["flows"]), dict(raw["network_counters"]), placed,
                            pd.DataFrame(raw.get("links", {})), pd.DataFrame(raw.get("stages", {})),
                            str(raw.get("reuse", "")))
