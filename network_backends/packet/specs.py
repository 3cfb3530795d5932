"""The packet engine's topology and traffic specs, as the CLI and API accept them:
`fat-tree:k=8`, `leaf-spine:leaves=8,spines=4`, `permutation:size=1MiB,inter_pod=true`,
`all-to-all:size=1MiB`, `incast:senders=N,size=S`, `file:flows.csv`; failure specs
`probability=0.01,detection_us=5`."""

from __future__ import annotations

import json
import re
from typing import Any

from ...errors import ConfigError
from ...specs import DECIMAL, parse_size, split_spec
from .traffic_files import read_traffic_file


def _int(params: dict[str, str], key: str, what: str, default: int | None = None) -> int:
    if key not in params:
        if default is None:
            raise ConfigError(f"`{what}`: missing `{key}=`", f"{what}.{key}")
        return default
    value = params.pop(key)
    # ASCII digits only: Python's int() also reads `4_0` as 40 and other scripts' digits.
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ConfigError(f"`{what}.{key}`: expected an integer, got {value!r}", f"{what}.{key}")
    # Every such field is a u32 in the engine; past u64 serde would report the integer as a float.
    if not 0 <= int(value) < 1 << 32:
        raise ConfigError(f"`{what}.{key}`: expected an integer in 0..4294967295, got {value}", f"{what}.{key}")
    return int(value)


def _only(params: dict[str, str], what: str, allowed: list[str]) -> None:
    """Refuse an unknown key first, so a misspelt one is named, not reported as a missing one."""
    for key in params:
        if key not in allowed:
            raise ConfigError(f"`{what}`: unknown parameter `{key}` (expected: {', '.join(allowed)})", f"{what}.{key}")


def _size(params: dict[str, str], what: str) -> int:
    if "size" not in params:
        raise ConfigError(f"`{what}`: missing `size=` (e.g. size=1MiB)", f"{what}.size")
    return parse_size(params.pop("size"), f"{what}.size")


def _bool(value: str, field: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"`{field}`: expected true or false, got {value!r}", field)


def topology_config(spec: str | dict[str, Any]) -> dict[str, Any]:
    """The engine's topology dict from `fat-tree:k=8[,oversubscription=R]` or
    `leaf-spine:leaves=8,spines=4,...`."""
    if isinstance(spec, dict):
        return spec
    kind, p = split_spec(spec, "topology")
    if kind == "fat-tree":
        _only(p, "topology", ["k", "oversubscription"])
        cfg = {"kind": "fat_tree", "k": _int(p, "k", "topology")}
        if "oversubscription" in p:
            cfg["oversubscription"] = _int(p, "oversubscription", "topology")
        return cfg
    if kind == "leaf-spine":
        _only(p, "topology", ["leaves", "spines", "links_per_pair", "oversubscription", "hosts_per_leaf"])
        cfg: dict[str, Any] = {"kind": "leaf_spine", "leaves": _int(p, "leaves", "topology"), "spines": _int(p, "spines", "topology")}
        cfg["links_per_pair"] = _int(p, "links_per_pair", "topology", 1)
        if "hosts_per_leaf" in p:
            cfg["hosts_per_leaf"] = _int(p, "hosts_per_leaf", "topology")
        if "oversubscription" in p:
            value = p.pop("oversubscription")
            # ASCII decimal syntax only: float() also reads `1_0` as 10 and other scripts' digits
            # (nan and inf pass, to be named as not finite with the rest of the config).
            if not DECIMAL.fullmatch(value) and value.lower().lstrip("+-") not in ("inf", "infinity", "nan"):
                raise ConfigError(f"`topology.oversubscription`: expected a number such as 2 or 1.5, got {value!r}",
                                  "topology.oversubscription")
            cfg["oversubscription"] = float(value)
        return cfg
    raise ConfigError(f"`topology`: unknown kind {kind!r} (expected fat-tree or leaf-spine)", "topology")


def traffic_file_path(spec: str) -> str | None:
    """PATH of a `file:PATH` traffic spec, else None."""
    kind, params = split_spec(spec, "traffic")
    return params["path"] if kind == "file" else None


def failures_config(spec: str | dict[str, Any]) -> dict[str, Any]:
    """The engine's failure dict from `probability=0.01,detection_us=5,convergence_us=20`
    (numbers; the engine checks keys and ranges) or a JSON object (for `links`)."""
    if isinstance(spec, dict):
        return spec
    text = spec.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"`failures`: {e}", "failures") from None
        if not isinstance(value, dict):
            raise ConfigError("`failures`: expected a JSON object", "failures")
        return value
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"`failures`: expected KEY=VALUE, got {item!r}", "failures")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(f"`failures.{key.strip()}`: expected a number or true/false, got {value!r}",
                              f"failures.{key.strip()}") from None
    return out


def traffic_config(spec: str | dict[str, Any]) -> dict[str, Any]:
    """The engine's traffic dict from a spec; `file:PATH` reads a flow list or connection matrix."""
    if isinstance(spec, dict):
        return spec
    kind, p = split_spec(spec, "traffic")
    if kind == "permutation":
        _only(p, "traffic", ["size", "inter_pod"])
        cfg = {"kind": "permutation", "bytes": _size(p, "traffic")}
        if "inter_pod" in p:
            cfg["inter_pod"] = _bool(p.pop("inter_pod"), "traffic.inter_pod")
        return cfg
    if kind in ("all-to-all", "alltoall", "ata"):
        _only(p, "traffic", ["size", "staggered", "shuffled"])
        cfg = {"kind": "all_to_all", "bytes": _size(p, "traffic")}
        for key in ("staggered", "shuffled"):
            if key in p:
                cfg[key] = _bool(p.pop(key), f"traffic.{key}")
        return cfg
    if kind == "incast":
        _only(p, "traffic", ["dst", "senders", "size"])
        return {"kind": "incast", "dst": _int(p, "dst", "traffic", 0), "senders": _int(p, "senders", "traffic"),
                "bytes": _size(p, "traffic")}
    if kind == "file":
        if not p["path"].strip():  # Path("") would be the current folder
            raise ConfigError("`traffic`: `file:` has an empty path (expected file:PATH of a .csv, .json or .cm file)",
                              "traffic.path")
        return read_traffic_file(p["path"])
    raise ConfigError(f"`traffic`: unknown kind {kind!r} (expected permutation, all-to-all, incast or file:PATH)", "traffic")
