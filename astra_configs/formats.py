"""ASTRA-sim 2.x's configuration formats, read strictly and written back: the system
JSON, the analytical network YAML, the remote-memory JSON and the comm-group JSON.

ASTRA-sim silently ignores keys it does not know; tracefabric refuses them by name,
because a misspelt key (`preferred-data-splits`) silently changes a study. Keys that
ASTRA-sim parses but that change nothing in tracefabric's model are accepted and listed
in `SYSTEM_KEYS_WITHOUT_EFFECT`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable

import yaml

from .. import _core
from ..errors import ConfigError
from ..jsonio import DuplicateKeyError, load_json, not_a_file
from ..specs import shown

# key -> (accepted JSON types, default or REQUIRED, meaning)
REQUIRED = object()
SYSTEM_KEYS: dict[str, tuple[tuple[type, ...], Any, str]] = {
    "scheduling-policy": ((str,), REQUIRED, "LIFO or FIFO: which waiting collective's chunks go first"),
    "collective-optimization": ((str,), REQUIRED, "baseline or localBWAware (multi-dimensional all-reduce as RS, AR, AG)"),
    "preferred-dataset-splits": ((int,), REQUIRED, "chunks per collective"),
    "endpoint-delay": ((int, float), 10, "ns a receiver spends on every message (and once per phase start)"),
    "active-chunks-per-dimension": ((int,), 1, "chunks in flight per dimension queue"),
    "all-reduce-implementation": ((list,), [], "algorithm per network dimension"),
    "all-gather-implementation": ((list,), [], "algorithm per network dimension"),
    "reduce-scatter-implementation": ((list,), [], "algorithm per network dimension"),
    "all-to-all-implementation": ((list,), [], "algorithm per network dimension"),
    "broadcast-implementation": ((list,), ["direct"], "tracefabric extension: algorithm per dimension for broadcast"),
    "local-mem-bw": ((int, float), 0, "GB/s (x 1e9 B/s): local reduction time and the roofline's memory roof"),
    "peak-perf": ((int, float), 0, "TFLOPS: the roofline's compute roof"),
    "roofline-enabled": ((int, bool), 0, "compute time from num_ops and tensor_size instead of duration_micros"),
    "replay-only": ((int, bool), 0, "replay every compute node from duration_micros, even with the roofline on"),
    "local-reduction-delay": ((int, float), 1, "parsed by ASTRA-sim, unused by its ring model"),
    "boost-mode": ((int, bool), 0, "not parsed by ASTRA-sim 2.x"),
    "L": ((int, float), 0, "LogGP memory-bus latency (only with model-shared-bus)"),
    "o": ((int, float), 0, "LogGP overhead"),
    "g": ((int, float), 0, "LogGP gap"),
    "G": ((int, float), 0, "LogGP gap per byte"),
    "model-shared-bus": ((int, bool), 0, "LogGP shared memory bus: not modelled (must be 0)"),
    "trace-enabled": ((int, bool), 0, "ASTRA-sim debug logging"),
    "track-local-mem": ((int, bool), 0, "ASTRA-sim memory-usage tracking"),
    "local-mem-trace-filename": ((str,), "local_mem_trace", "ASTRA-sim memory trace file"),
    "intra-dimension-scheduling": ((str,), "FIFO", "fixed to FIFO in ASTRA-sim 2.x"),
    "inter-dimension-scheduling": ((str,), "baseline", "fixed to ascending in ASTRA-sim 2.x"),
}
SYSTEM_KEYS_WITHOUT_EFFECT = ["local-reduction-delay", "boost-mode", "L", "o", "g", "G", "trace-enabled",
                              "track-local-mem", "local-mem-trace-filename", "intra-dimension-scheduling",
                              "inter-dimension-scheduling"]
# Upper limits: where the system layer's integers end (u32), its clock would (ns), or the
# chunks of one collective would fill memory (each is a DAG of flows; ASTRA-sim uses 1-64).
SYSTEM_KEY_MAX = {"preferred-dataset-splits": 2**16, "active-chunks-per-dimension": 2**32 - 1,
                  "endpoint-delay": 1e11}
NON_NEGATIVE_KEYS = ("endpoint-delay", "local-mem-bw", "peak-perf")
IMPLEMENTATION_KEYS = ["all-reduce-implementation", "all-gather-implementation", "reduce-scatter-implementation",
                       "all-to-all-implementation", "broadcast-implementation"]


def canonical_algorithm(name: str, where: str, field: str) -> str:
    """tracefabric's name for an ASTRA-sim or tracefabric algorithm name (`direct8` -> direct);
    an unknown one is a ConfigError naming `where` (the file and key) and `field` (the key)."""
    base = _core.algorithm_name(name)
    if base is None:
        ours, astra = _core.algorithm_names()
        raise ConfigError(f"{where}: unknown collective algorithm {name!r}; expected one of: "
                          f"{', '.join(ours)} (or ASTRA-sim's {', '.join(astra)}, direct<N>)", field)
    return base


def check_direct_window(name: Any, ranks: int, where: str, field: str) -> None:
    """ASTRA-sim's `direct<N>` / `oneDirect<N>` keep at most N peers in flight; we model every
    peer at once, which is the same schedule only when N covers the ranks' other members."""
    m = re.fullmatch(r"(?:one)?[dD]irect([0-9]+)", name) if isinstance(name, str) else None
    if m and int(m.group(1)) < ranks - 1:
        raise ConfigError(f"{where} = {name!r}: a window of {int(m.group(1))} peers in flight is not modelled; expected "
                          f"direct (every peer at once), or a window of at least {ranks - 1} for {ranks} ranks", field)


@dataclass
class SystemConfig:
    """An ASTRA-sim system JSON, checked. `raw` keeps the file's keys for writing it back."""

    raw: dict[str, Any]
    path: str = "<system config>"

    def __getitem__(self, key: str) -> Any:
        return self.raw.get(key, SYSTEM_KEYS[key][1])

    @property
    def roofline(self) -> bool:
        return bool(self["roofline-enabled"]) and not bool(self["replay-only"])

    def for_engine(self, dims: list[int], astra: bool) -> dict[str, Any]:
        """The normalized config the Rust system layer takes; `astra`: ASTRA-sim 2.x's
        semantics and block sizes (the `analytical:astra-*` backends, and `astra export`)."""
        for key in IMPLEMENTATION_KEYS:
            for dim, (name, npus) in enumerate(zip(self[key], dims)):
                check_direct_window(name, npus, f"{self.path}: {key}[{dim}]", key)
        return {
            "scheduling_policy": self["scheduling-policy"].lower(),
            "endpoint_delay_ps": round(float(self["endpoint-delay"]) * 1000),
            "active_chunks_per_dimension": int(self["active-chunks-per-dimension"]),
            "preferred_dataset_splits": int(self["preferred-dataset-splits"]),
            "implementations": {k: [canonical_algorithm(a, f"{self.path}: {k}", k) for a in self[k]] for k in IMPLEMENTATION_KEYS},
            "local_bw_aware": self["collective-optimization"] == "localBWAware",
            "local_mem_bw_bytes_per_ns": float(self["local-mem-bw"]),
            "blocks": "truncate" if astra else "exact",
            "dims": dims,
            "astra": astra,
        }


def _finite_at_most(value: int | float, limit: float) -> bool:
    try:  # an integer past 1.8e308 has no float: the readers' float() would raise OverflowError
        return math.isfinite(float(value)) and value <= limit
    except OverflowError:
        return False


def check_system(raw: Any, path: str = "<system config>") -> SystemConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object of ASTRA-sim system keys", "system")
    for key, value in raw.items():
        if not isinstance(key, str):
            raise ConfigError(f"{path}: key {key!r}: expected a string naming an ASTRA-sim system key", "system")
        if key not in SYSTEM_KEYS:
            if key.endswith("-implementation-custom") or key == "per-node-custom-implementation":
                raise ConfigError(f"{path}: key {key!r}: custom collective ETs (ASTRA-sim's CollectiveAPI) are not "
                                  "supported; use a named algorithm in the matching *-implementation list", key)
            raise ConfigError(f"{path}: unknown key {key!r}; expected one of: {', '.join(SYSTEM_KEYS)}", key)
        types = SYSTEM_KEYS[key][0]
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            raise ConfigError(f"{path}: key {key!r} = {value!r}: expected {' or '.join(t.__name__ for t in types)}", key)
        if isinstance(value, (int, float)) and not _finite_at_most(value, SYSTEM_KEY_MAX.get(key, math.inf)):
            limit = f" <= {SYSTEM_KEY_MAX[key]:{'d' if types == (int,) else 'g'}}" if key in SYSTEM_KEY_MAX else ""
            limit = limit or (" >= 0" if key in NON_NEGATIVE_KEYS else "")
            raise ConfigError(f"{path}: key {key!r} = {shown(value)}: expected a finite number{limit}", key)
    for key, (_, default, _) in SYSTEM_KEYS.items():
        if default is REQUIRED and key not in raw:
            raise ConfigError(f"{path}: missing required key {key!r}", key)
    cfg = SystemConfig(dict(raw), path)
    if cfg["scheduling-policy"] not in ("LIFO", "FIFO"):
        raise ConfigError(f"{path}: key 'scheduling-policy' = {cfg['scheduling-policy']!r}: expected LIFO or FIFO "
                          "(EXPLICIT priorities are not supported)", "scheduling-policy")
    if cfg["collective-optimization"] not in ("baseline", "localBWAware"):
        raise ConfigError(f"{path}: key 'collective-optimization' = {cfg['collective-optimization']!r}: "
                          "expected baseline or localBWAware", "collective-optimization")
    for key in ("preferred-dataset-splits", "active-chunks-per-dimension"):
        if int(cfg[key]) < 1:
            raise ConfigError(f"{path}: key {key!r} = {cfg[key]}: expected an integer >= 1", key)
    for key in NON_NEGATIVE_KEYS:
        if float(cfg[key]) < 0:
            raise ConfigError(f"{path}: key {key!r} = {cfg[key]}: expected a non-negative number", key)
    if cfg["model-shared-bus"]:
        raise ConfigError(f"{path}: key 'model-shared-bus' = {cfg['model-shared-bus']}: the LogGP shared bus "
                          "is not modelled; set it to 0", "model-shared-bus")
    for key in IMPLEMENTATION_KEYS:
        value = cfg[key]
        if not all(isinstance(a, str) for a in value):
            raise ConfigError(f"{path}: key {key!r} = {value!r}: expected a list of algorithm names", key)
        for a in value:
            canonical_algorithm(a, f"{path}: {key}", key)
    if cfg.roofline and (float(cfg["peak-perf"]) <= 0 or float(cfg["local-mem-bw"]) <= 0):
        raise ConfigError(f"{path}: roofline-enabled needs positive 'peak-perf' and 'local-mem-bw'", "roofline-enabled")
    return cfg


def read_system(path: str | Path) -> SystemConfig:
    path = Path(path)
    return check_system(load_json(path, "system", "system"), str(path))


def write_system(cfg: SystemConfig, path: str | Path) -> None:
    Path(path).write_text(json.dumps(cfg.raw, indent=4) + "\n")


# ---- network ------------------------------------------------------------------------

DIM_KINDS = ("Ring", "FullyConnected", "Switch")
NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
# As the Rust topology checks them (BANDWIDTH_GBS, LATENCY_NS); named here with the file.
NETWORK_RANGES = {"bandwidth": (1e-3, 1e6, "GB/s"), "latency": (0.0, 1e11, "ns")}


@dataclass
class AstraNetwork:
    """ASTRA-sim's analytical network: one entry per dimension, innermost first."""

    topology: list[str]
    npus_count: list[int]
    bandwidth: list[float]  # GB/s (x 2^30 / 1e9 B/ns, as ASTRA-sim converts it)
    latency: list[float]  # ns
    path: str = "<network config>"

    @property
    def npus(self) -> int:
        n = 1
        for c in self.npus_count:
            n *= c
        return n

    def dims(self) -> list[dict[str, Any]]:
        return [{"kind": t, "npus": n, "bandwidth_gbps": float(b), "latency_ns": float(lat)}
                for t, n, b, lat in zip(self.topology, self.npus_count, self.bandwidth, self.latency)]


@dataclass
class PacketFabric:
    """tracefabric's richer network file for the packet engine: its config without traffic
    or scheme (topology, link, switch, packet, limits, seed)."""

    config: dict[str, Any]
    path: str = "<network config>"


PACKET_NETWORK_KEYS = ("topology", "link", "switch", "packet", "limits", "seed", "failures", "servers")


def check_network(raw: Any, path: str = "<network config>") -> AstraNetwork | PacketFabric:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with keys {', '.join(NETWORK_KEYS)}", "network")
    for key in raw:
        if not isinstance(key, str):  # YAML keys may be numbers, null, ...
            raise ConfigError(f"{path}: key {key!r}: expected a string naming a network key", "network")
    if isinstance(raw.get("topology"), dict):
        for key in raw:
            if key not in PACKET_NETWORK_KEYS:
                raise ConfigError(f"{path}: unknown key {key!r} in a packet-fabric network; expected one of: "
                                  f"{', '.join(PACKET_NETWORK_KEYS)}", key)
        return PacketFabric(dict(raw), path)
    for key in raw:
        if key not in NETWORK_KEYS:
            raise ConfigError(f"{path}: unknown key {key!r}; expected one of: {', '.join(NETWORK_KEYS)}", key)
    for key in NETWORK_KEYS:
        if key not in raw:
            raise ConfigError(f"{path}: missing key {key!r} (a list with one entry per dimension)", key)
        if not isinstance(raw[key], list) or not raw[key]:
            raise ConfigError(f"{path}: key {key!r} = {raw[key]!r}: expected a non-empty list, one entry per dimension", key)
    dims = len(raw["topology"])
    for key in NETWORK_KEYS[1:]:
        if len(raw[key]) != dims:
            raise ConfigError(f"{path}: key {key!r} has {len(raw[key])} entries but 'topology' has {dims} dimensions", key)
    for d, t in enumerate(raw["topology"]):
        if t not in DIM_KINDS:
            raise ConfigError(f"{path}: topology[{d}] = {t!r}: expected one of {', '.join(DIM_KINDS)}", "topology")
    for d, n in enumerate(raw["npus_count"]):
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ConfigError(f"{path}: npus_count[{d}] = {n!r}: expected an integer >= 2", "npus_count")
    for key, (low, high, unit) in NETWORK_RANGES.items():
        for d, v in enumerate(raw[key]):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (low <= v and _finite_at_most(v, high)):
                raise ConfigError(f"{path}: {key}[{d}] = {shown(v)}: expected a number of {unit} in {low:g}..{high:g}", key)
    return AstraNetwork(list(raw["topology"]), list(raw["npus_count"]), [float(b) for b in raw["bandwidth"]],
                        [float(v) for v in raw["latency"]], path)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping key given twice (it keeps the last)."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            continue  # construct_mapping names it
        if key in seen:
            raise DuplicateKeyError(key, key_node.start_mark.line + 1)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


@dataclass(frozen=True)
class _UnclearNumber:
    """A YAML number PyYAML (YAML 1.1) reads otherwise than ASTRA-sim's yaml-cpp, or one Python
    cannot hold: read_network refuses it with its key and line."""

    text: str
    line: int
    why: str
    advice: bool = True  # "write it in decimal" fits the forms, not a number too long


def _yaml11_value(loader: yaml.SafeLoader, node: yaml.ScalarNode, tag: str) -> str:
    try:
        return repr(getattr(yaml.SafeLoader, f"construct_yaml_{tag}")(loader, node))
    except ValueError:
        return "a string"


def _strict_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | _UnclearNumber:
    """Plain decimal integers only. yaml-cpp reads npus_count (int) with C++ base detection
    (0500 octal, 0x10 hex) but bandwidth and latency (double) as decimal (0500 = 500, 0x10
    refused); YAML 1.1 reads 0500 as 320, 0b101, 1_000 and 8:20 (base 60) as numbers that
    yaml-cpp refuses. No reading of these forms is right for every field: they are refused."""
    text = loader.construct_scalar(node)
    line = node.start_mark.line + 1
    digits = text.lstrip("+-")
    if len(digits) > (sys.get_int_max_str_digits() or math.inf):  # int() would raise a 100-line ValueError
        return _UnclearNumber(f"{text[:6]}...", line, f"an integer of {len(digits)} digits, past the "
                              f"{sys.get_int_max_str_digits()} Python reads", advice=False)
    if re.fullmatch(r"0|[1-9][0-9]*", digits):
        return int(text)
    old = _yaml11_value(loader, node, "int")
    if ":" in text or "_" in text:
        form = "a base-60 number" if ":" in text else "digit separators (_)"
        why = f"{form}: YAML 1.1 reads it as {old}, ASTRA-sim (yaml-cpp) as no number"
    elif digits[:2].lower() == "0b":  # C++ streams detect 0x and 0, not 0b
        why = f"binary: YAML 1.1 reads it as {old}, ASTRA-sim (yaml-cpp) as no number"
    elif digits[:2].lower() == "0x":
        why = f"hexadecimal: YAML 1.1 reads it as {old}, ASTRA-sim (yaml-cpp) as {old} in npus_count but as no number in bandwidth and latency"
    else:  # a leading zero
        octal = old != "a string"
        why = (f"a leading 0: YAML 1.1 reads it as {'octal ' if octal else ''}{old}, ASTRA-sim (yaml-cpp) as "
               f"{int(text)} in bandwidth and latency but as {'octal ' + old if octal else 'no number'} in npus_count")
    return _UnclearNumber(text, line, why)


def _strict_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | _UnclearNumber:
    text = loader.construct_scalar(node)
    if ":" in text or "_" in text:  # YAML 1.1's base-60 (1:30.5) and 1_000.5; yaml-cpp reads neither
        form = "a base-60 number" if ":" in text else "digit separators (_)"
        return _UnclearNumber(text, node.start_mark.line + 1, f"{form}: YAML 1.1 reads it as "
                              f"{_yaml11_value(loader, node, 'float')}, ASTRA-sim (yaml-cpp) as no number")
    return yaml.SafeLoader.construct_yaml_float(loader, node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _strict_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _strict_float)
# YAML 1.1 reads `5e1` (no dot) as a string; ASTRA-sim's yaml-cpp, and users, take it as 50.0.
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
                                       list("-+0123456789"))
# ... and `09` (a leading 0 but no octal) as a string, which yaml-cpp reads as 9: an int, refused above.
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?0[0-9_]+$"), list("-+0"))


def _non_json_value(x: Any, where: str = "") -> tuple[str, Any] | None:
    """(key path, value) of the first value JSON cannot carry (a YAML date, binary, set, an
    unclear number, ...)."""
    if isinstance(x, dict):
        if key := next((k for k in x if isinstance(k, _UnclearNumber)), None):  # `0500: ...` as a key
            return where, key
        items = [(f"{where}.{k}" if where else str(k), v) for k, v in x.items()]
    elif isinstance(x, list):
        items = [(f"{where}[{i}]", v) for i, v in enumerate(x)]
    else:
        return None if x is None or isinstance(x, (str, int, float, bool)) else (where, x)
    for k, v in items:
        if found := _non_json_value(v, k):
            return found
    return None


def read_network(path: str | Path) -> AstraNetwork | PacketFabric:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {not_a_file(path, 'network')}", "network")
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
        bad = _non_json_value(raw)
    except DuplicateKeyError as e:
        raise ConfigError(f"{path}: {e}", str(e.key)) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(e).split())})", "network") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})", "network") from None
    except RecursionError:  # [[[[...]]]]: the composer (or the walk above) recurses per level
        raise ConfigError(f"{path}: lists or mappings nested too deeply for Python (recursion limit "
                          f"{sys.getrecursionlimit()})", "network") from None
    if bad and isinstance(bad[1], _UnclearNumber):
        n = bad[1]
        advice = "; write it in decimal, without leading zeros or separators" if n.advice else ""
        raise ConfigError(f"{path}: {bad[0] or 'the document'} = {n.text} (line {n.line}): {n.why}{advice}",
                          bad[0] or "network")
    if bad:
        raise ConfigError(f"{path}: {bad[0]} = {bad[1]!r}: a YAML {type(bad[1]).__name__}, expected a number, "
                          "string, list or mapping (quote it for a string)", bad[0])
    return check_network(raw, str(path))


def write_network(net: AstraNetwork, path: str | Path) -> None:
    def fmt(v: list[Any]) -> str:
        return "[ " + ", ".join(str(x) for x in v) + " ]"
    Path(path).write_text(f"topology: {fmt(net.topology)}\nnpus_count: {fmt(net.npus_count)}\n"
                          f"bandwidth: {fmt(net.bandwidth)}  # GB/s\nlatency: {fmt(net.latency)}  # ns\n")


# ---- remote memory, comm groups ----------------------------------------------------

MEMORY_TYPES = ("NO_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "MEMORY_POOL")
# Types whose requests ASTRA-sim serializes across NPUs -> the queue tracefabric does not model.
SHARED_MEMORY_TYPES = {"PER_NODE_MEMORY_EXPANSION": "the queue of remote requests shared by the NPUs of a node",
                       "MEMORY_POOL": "the one queue of remote requests shared by all NPUs"}
MEMORY_KEYS = {"memory-type": (str,), "remote-mem-latency": (int, float), "remote-mem-bw": (int, float),
               "num-nodes": (int,), "num-npus-per-node": (int,)}


@dataclass
class RemoteMemory:
    memory_type: str = "NO_MEMORY_EXPANSION"
    latency_ns: float = 0.0
    bandwidth_gbps: float = 0.0
    raw: dict[str, Any] = field(default_factory=lambda: {"memory-type": "NO_MEMORY_EXPANSION"})

    def access_ps(self, tensor_bytes: int) -> float:
        """Time of one remote load/store (requests do not queue: ASTRA-sim's PER_NPU model);
        a float, so that a tiny bandwidth gives inf for the caller to refuse, not an OverflowError."""
        size = float(tensor_bytes) if tensor_bytes < 2**1000 else math.inf  # int / float overflows past 1.8e308
        return (self.latency_ns + size / self.bandwidth_gbps) * 1000


def read_memory(path: str | Path | None) -> RemoteMemory:
    if path is None:
        return RemoteMemory()
    path = Path(path)
    raw = load_json(path, "remote memory", "remote memory")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object", "remote memory")
    for key, value in raw.items():
        if key not in MEMORY_KEYS:
            raise ConfigError(f"{path}: unknown key {key!r}; expected one of: {', '.join(MEMORY_KEYS)}", key)
        if isinstance(value, bool) or not isinstance(value, MEMORY_KEYS[key]):
            raise ConfigError(f"{path}: key {key!r} = {value!r}: expected {' or '.join(t.__name__ for t in MEMORY_KEYS[key])}", key)
        if isinstance(value, (int, float)) and not (value >= 0 and _finite_at_most(value, math.inf)):
            raise ConfigError(f"{path}: key {key!r} = {shown(value)}: expected a finite number >= 0", key)
    kind = raw.get("memory-type")
    if kind not in MEMORY_TYPES:
        raise ConfigError(f"{path}: key 'memory-type' = {kind!r}: expected one of {', '.join(MEMORY_TYPES)}", "memory-type")
    if kind in SHARED_MEMORY_TYPES:
        # ASTRA-sim queues these requests one at a time per node (or across the pool); tracefabric
        # does not model that queue, so running them as PER_NPU would be silently shorter.
        raise ConfigError(f"{path}: key 'memory-type' = {kind!r}: {SHARED_MEMORY_TYPES[kind]} is not modelled; "
                          "expected PER_NPU_MEMORY_EXPANSION (no queueing) or NO_MEMORY_EXPANSION", "memory-type")
    for key in ("num-nodes", "num-npus-per-node"):
        # Read by ASTRA-sim (as an int) only for PER_NODE_MEMORY_EXPANSION; still a count.
        if key in raw and not 1 <= raw[key] <= 2**31 - 1:
            raise ConfigError(f"{path}: key {key!r} = {shown(raw[key])}: expected an integer in 1..2147483647", key)
    mem = RemoteMemory(kind, float(raw.get("remote-mem-latency", 0)), float(raw.get("remote-mem-bw", 0)), dict(raw))
    if kind != "NO_MEMORY_EXPANSION" and mem.bandwidth_gbps <= 0:
        raise ConfigError(f"{path}: {kind} needs a positive 'remote-mem-bw' (GB/s)", "remote-mem-bw")
    return mem


def read_comm_groups(path: str | Path) -> dict[str, list[int]]:
    """ASTRA-sim's comm-group JSON: {"<group id>": [rank, ...]}; nodes name a group by `pg_name`."""
    path = Path(path)
    raw = load_json(path, "comm group", "comm group")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object {{\"<group id>\": [ranks]}}", "comm group")
    for key, ranks in raw.items():
        if not isinstance(ranks, list) or not ranks or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
            raise ConfigError(f"{path}: group {key!r} = {ranks!r}: expected a non-empty list of rank numbers", key)
        twice = sorted({r for r in ranks if ranks.count(r) > 1})
        if twice:
            raise ConfigError(f"{path}: group {key!r} lists rank(s) {twice} more than once", key)
    return {str(k): list(v) for k, v in raw.items()}
