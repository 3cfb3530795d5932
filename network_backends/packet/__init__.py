"""The packet-level backend: tracefabric's Rust engine (`_core`), driven from Python.

    >>> from tracefabric.network_backends.packet import simulate
    >>> r = simulate(topology="fat-tree:k=4", traffic="permutation:size=64KiB", lb="host_spray", seed=1)
    >>> r.cct_us > r.lower_bound_us
    True
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pandas as pd

from ... import _core
from ...astra_configs import load_scheme_preset
from ...errors import ConfigError, FlowError, TrafficFileError, UnknownSchemeError, from_engine
from ...specs import plain, shown
from .specs import failures_config, topology_config, traffic_config, traffic_file_path
from .traffic_files import connection_matrix_nodes, file_field, flow_line

__all__ = ["simulate", "build_config", "PacketResults", "scheme_names"]


def scheme_names() -> dict[str, list[str]]:
    """Registered scheme names per family: {"lb": [...], "cc": [...], "loss": [...]}."""
    return dict(_core.scheme_names())


def build_config(
    topology: str | dict[str, Any] = "fat-tree:k=8",
    traffic: str | dict[str, Any] | None = "permutation:size=1MiB",
    *,
    scheme: str | None = None,
    lb: str | None = None,
    cc: str | None = None,
    loss: str | None = None,
    lb_params: dict[str, Any] | None = None,
    cc_params: dict[str, Any] | None = None,
    loss_params: dict[str, Any] | None = None,
    qdisc: str | None = None,
    qdisc_params: dict[str, Any] | None = None,
    seed: int = 0,
    link: dict[str, Any] | None = None,
    switch: dict[str, Any] | None = None,
    packet: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    failures: str | dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The engine's JSON config. A `scheme` preset supplies LB/CC/loss and their paper
    parameters (and the queue discipline and limits it needs); explicit `lb`/`cc`/`loss`/`qdisc`,
    `*_params` and `limits` override it. `traffic=None` gives a backend's config, whose flows come
    from a workload."""
    topology, traffic, seed = plain(topology), plain(traffic), plain(seed)
    lb_params, cc_params, loss_params, qdisc_params, link, switch, packet, limits = map(
        plain, (lb_params, cc_params, loss_params, qdisc_params, link, switch, packet, limits))
    sch: dict[str, Any] = {"lb": "ecmp", "lb_params": {}, "cc": "ideal", "cc_params": {}, "loss": "erasure", "loss_params": {},
                           "qdisc": "red", "qdisc_params": {}}
    sw: dict[str, Any] = {}
    lim: dict[str, Any] = {}
    if scheme is not None:
        preset = load_scheme_preset(scheme)
        for k in sch:
            if k in preset:
                sch[k] = preset[k]
        sw.update(preset.get("switch", {}))
        lim.update(preset.get("limits", {}))
    for name, value in (("lb", lb), ("cc", cc), ("loss", loss), ("qdisc", qdisc)):
        if value is not None:
            if scheme is not None and value != sch[name]:
                sch[f"{name}_params"] = {}  # preset parameters belong to the preset's scheme
            sch[name] = value
    sections = (("lb_params", lb_params), ("cc_params", cc_params), ("loss_params", loss_params),
                ("qdisc_params", qdisc_params), ("link", link), ("switch", switch), ("packet", packet), ("limits", limits))
    for name, value in sections:
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"`{name}`: expected a dict of settings, got {type(value).__name__}", name)
    for name, value in (("lb_params", lb_params), ("cc_params", cc_params), ("loss_params", loss_params),
                        ("qdisc_params", qdisc_params)):
        if value:
            sch[name] = {**sch[name], **value}
    registered = scheme_names()
    for family in ("lb", "cc", "loss", "qdisc"):
        if sch[family] not in registered[family]:
            known = registered[family]
            raise UnknownSchemeError(f"unknown {family} scheme `{sch[family]}`; expected one of: {', '.join(known)}", family, sch[family], known)
    if sch["qdisc"] == "red" and not sch["qdisc_params"]:
        del sch["qdisc"], sch["qdisc_params"]  # the engine's default, left out of the config
    sw.update(switch or {})
    lim.update(limits or {})
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 1 << 64:
        raise ConfigError(f"`seed`: expected an integer in 0..2^64-1, got {seed!r}", "seed")
    cfg: dict[str, Any] = {"topology": topology_config(topology), "scheme": sch, "seed": seed}
    if traffic is not None:
        cfg["traffic"] = traffic_config(traffic)
    for name, value in (("link", link), ("switch", sw), ("packet", packet), ("limits", lim)):
        if value:
            cfg[name] = value
    if failures:
        cfg["failures"] = failures_config(plain(failures))
    bad = _first_unencodable(cfg)
    if bad:
        expected = "a finite number" if isinstance(bad[1], float) else "a number in -2^63..2^64-1"
        raise ConfigError(f"`{bad[0]}`: expected {expected}, got {shown(bad[1])}", bad[0])
    if traffic is not None:
        _check_matrix_nodes(traffic, cfg["topology"])
    return cfg


def fabric_hosts(config: dict[str, Any]) -> int:
    """Hosts of the fabric a config (with or without traffic) describes, as the engine builds it."""
    fabric = {k: v for k, v in config.items() if k != "traffic"}
    try:
        return int(_core.fabric_hosts(json.dumps(fabric)))
    except _core.EngineError as e:
        raise from_engine(e) from None


def _check_matrix_nodes(traffic: str | dict[str, Any], topology: dict[str, Any]) -> None:
    """htsim sizes its fabric from a connection matrix's `Nodes N`: a file written for more
    hosts than this fabric has is refused, not run on part of it."""
    path = traffic_file_path(traffic) if isinstance(traffic, str) else None
    header = connection_matrix_nodes(path) if path else None
    if not header:
        return
    hosts = fabric_hosts({"topology": topology})
    if header[0] > hosts:
        raise TrafficFileError(f"`Nodes {header[0]}`, but the fabric has {hosts} hosts", path, header[1], "Nodes")


def _first_unencodable(x: Any, where: str = "") -> tuple[str, float | int] | None:
    """(dotted field, value) of the first value of a config the engine cannot read: NaN or an
    infinity (JSON cannot carry them), an integer outside the engine's -2^63..2^64-1."""
    if isinstance(x, float) and not math.isfinite(x):
        return where, x
    if isinstance(x, int) and not isinstance(x, bool) and not -(2**63) <= x < 2**64:
        return where, x
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        found = _first_unencodable(v, f"{where}.{k}" if where else str(k))
        if found:
            return found
    return None


@dataclass
class PacketResults:
    """One run's results: a summary, per-flow, per-stage and per-link tables."""

    config: dict[str, Any]
    summary: dict[str, Any]
    flows: pd.DataFrame = field(repr=False)
    stages: pd.DataFrame = field(repr=False)
    #: One row per link direction (output port): owner and peer node ids, stage,
    #: data and total bytes sent, max queue. Hosts are nodes 0..n_hosts-1.
    links: pd.DataFrame = field(repr=False)

    @property
    def cct_us(self) -> float:
        return self.summary["cct_ps"] / 1e6

    @property
    def lower_bound_us(self) -> float:
        return self.summary["lower_bound_ps"] / 1e6

    @property
    def cct_increase(self) -> float:
        """CCT over its lower bound, minus one (0.05 = 5 % above the bound)."""
        return self.summary["cct_ps"] / self.summary["lower_bound_ps"] - 1.0

    def to_frame(self) -> pd.DataFrame:
        """Per-flow results (FCT in picoseconds and microseconds)."""
        return self.flows

    def summary_row(self) -> dict[str, Any]:
        sch = self.config["scheme"]
        return {
            "lb": sch["lb"], "cc": sch["cc"], "loss": sch["loss"], "seed": self.config["seed"],
            "cct_us": self.cct_us, "lower_bound_us": self.lower_bound_us, "cct_increase_pct": 100 * self.cct_increase,
            "max_queue_bytes": int(self.stages["max_queue_bytes"].max()),
            "drops": self.summary["data_packets_dropped"], "ecn_marks": self.summary["ecn_marks"],
            "queue_pairs": self.summary["lb_counters"].get("queue_pairs", 0),
            "pointers": self.summary["lb_counters"].get("pointers", 0),
            "events": self.summary["events"], "data_packet_hops": self.summary["data_packet_hops"],
        }


def simulate(
    topology: str | dict[str, Any] = "fat-tree:k=8",
    traffic: str | dict[str, Any] | None = "permutation:size=1MiB",
    *,
    progress: Callable[[int, int], bool | None] | None = None,
    **kwargs: Any,
) -> PacketResults:
    """Run one packet-level simulation; see `build_config` for the options.

    `progress(done_flows, total_flows)` is called about every million events; returning
    False cancels the run. The GIL is released while the engine runs.
    """
    _check_options(kwargs)
    cfg = build_config(topology, traffic, **kwargs)
    with traffic_file_errors(traffic):
        return run_config(cfg, progress=progress)


def _check_options(kwargs: dict[str, Any]) -> None:
    """A misspelt option is named here, as `simulate`'s: Python's own TypeError would name
    `build_config`, which the caller never called."""
    accepted = [*inspect.signature(build_config).parameters, "progress"]
    for key in kwargs:
        if key not in accepted:
            near = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean `{near[0]}`? " if near else ""
            raise ConfigError(f"simulate(): unknown option `{key}`; {hint}expected one of: {', '.join(accepted)}", key)


@contextmanager
def traffic_file_errors(traffic: str | dict[str, Any]) -> Iterator[None]:
    """The engine names a bad flow by its index; for a `file:PATH` traffic spec, re-raise
    its error naming the file and the flow's line instead."""
    try:
        yield
    except FlowError as e:
        path = traffic_file_path(traffic) if isinstance(traffic, str) else None
        if path is None:
            raise
        message = str(e).split(": ", 1)[-1]  # without the engine's "flow N: "
        name = file_field(path, e.field, e.index)  # e.g. a connection matrix's `size` for `bytes`
        message = message.replace(f"field `{e.field}`", f"field `{name}`")
        if name in ("start_us", "start"):  # the file writes starts in µs: say the time in them too
            message = re.sub(r"([0-9]+) ps\b", lambda m: f"{_us(int(m.group(1)))} µs", message)
        raise TrafficFileError(message, path, flow_line(path, e.index), name) from None


def _us(ps: int) -> str:
    """Picoseconds as exact microseconds: 2500000 -> 2.5."""
    return f"{ps // 10**6}.{ps % 10**6:06d}".rstrip("0").rstrip(".")


def check_config(cfg: dict[str, Any]) -> None:
    """Raise the error `run_config(cfg)` would raise before its first event, without running."""
    try:
        _core.check_packet(json.dumps(cfg))
    except _core.EngineError as e:
        raise from_engine(e) from None


def run_config(cfg: dict[str, Any], progress: Callable[[int, int], bool | None] | None = None) -> PacketResults:
    """Run an engine config dict as `build_config` makes it."""
    if progress is not None and not callable(progress):
        raise ConfigError(f"`progress`: expected a callable progress(done, total), got {type(progress).__name__}", "progress")
    cb = None if progress is None else (lambda d, t: (r := progress(d, t)) is None or bool(r))
    try:
        raw = _core.simulate_packet(json.dumps(cfg), cb)
    except _core.EngineError as e:
        raise from_engine(e) from None
    flows = pd.DataFrame(raw.pop("flows"))
    flows["fct_us"] = flows["fct_ps"] / 1e6
    stages = pd.DataFrame(raw.pop("stages"))
    links = pd.DataFrame(raw.pop("links"))
    return PacketResults(config=cfg, summary=raw, flows=flows, stages=stages, links=links)
