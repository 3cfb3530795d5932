"""Parsing the short specs the CLI and API accept: `fat-tree:k=8`,
`permutation:size=1MiB,inter_pod=true`, `file:flows.csv`, sizes like `128KiB`."""

from __future__ import annotations

import json

import re
from fractions import Fraction
from typing import Any

from .errors import ConfigError

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
# A decimal number as a spec or file writes it: ASCII digits, no `_`, no nan/inf.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def shown(value: Any) -> str:
    """`repr(value)` for an error message, an integer of hundreds of digits summarized."""
    text = repr(value)
    return f"an integer of {len(text)} digits ({text[:6]}...)" if isinstance(value, int) and len(text) > 24 else text


def missing_ranks(ranks: Any, shown_at_most: int = 10) -> str:
    """The numbers below max(ranks) that `ranks` lacks, for a message ('' when none): the first
    few and a count of the rest, without listing them (one rank numbered 10^11 made a set of
    10^11 and hung)."""
    first: list[int] = []
    total = expected = 0
    for r in sorted(ranks):
        if r > expected:
            first.extend(range(expected, min(r, expected + max(0, shown_at_most - len(first)))))
            total += r - expected
        expected = r + 1
    return f"{first}{f' and {total - len(first):,} more' if total > len(first) else ''}" if total else ""


def plain(value: Any) -> Any:
    """`value` with numpy scalars and arrays as Python numbers and lists, in dicts and lists
    too: sweeps pass `np.arange` values and DataFrame cells, and the engine reads JSON."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return plain(value.tolist())
    return value


def parse_size(text: str | int, field: str = "size") -> int:
    """Bytes from `1048576`, `1MiB`, `800KB`, `4 KiB` (SI and binary prefixes, any case but a
    final lowercase `b`: `1Mb` is a megabit and refused)."""
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if m and m.group(2).endswith("b") and m.group(2)[:-1].upper() + "B" in _UNITS:
            # A lowercase b is a bit in networking (1 Mb = 125 KB): refused, not read as bytes.
            number, unit = m.group(1), m.group(2)[:-1].upper().replace("I", "i") + "B"
            hint = f"{number}{unit} or {number}{unit[0]}iB" if len(unit) == 2 else f"{number}{unit}"
            raise ConfigError(f"`{field}`: {text!r} would be bits (lowercase b); sizes are bytes: write {hint}", field)
        unit = m.group(2).upper() if m else None
        if not m or unit not in _UNITS:
            raise ConfigError(f"`{field}`: cannot read {text!r} as a size (expected e.g. 4096, 128KiB, 1MiB, 800KB; units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", field)
        number = m.group(1)
        # Exact decimal arithmetic: a float refused 16.1KB (16,100 B) and rounded 1.0000000000000001KB
        # to 1000 B and sizes past 2^53 to a neighbour.
        exact = Fraction(number) * _UNITS[unit]
        if exact.denominator != 1:
            raise ConfigError(f"`{field}`: {text!r} is not a whole number of bytes", field)
        value = int(exact)
    if not 0 < value <= 2**63:
        raise ConfigError(f"`{field}`: must be in 1..2^63 bytes, got {text!r}", field)
    return value


def split_spec(spec: str, what: str) -> tuple[str, dict[str, str]]:
    """`kind:key=value,key=value` -> (kind, {key: value})."""
    if not isinstance(spec, str):
        raise ConfigError(f"`{what}`: expected a spec string (e.g. fat-tree:k=8, permutation:size=1MiB) or a dict, "
                          f"got {type(spec).__name__}", what)
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower().replace("_", "-")
    if not kind:
        raise ConfigError(f"`{what}`: empty spec {spec!r}", what)
    if kind == "file":
        return kind, {"path": rest}
    params: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"`{what}`: expected key=value in {spec!r}, got {item!r}", what)
        key = key.strip().replace("-", "_")
        if key in params:
            raise ConfigError(f"`{what}.{key}`: given twice in {spec!r}", f"{what}.{key}")
        params[key] = value.strip()
    return kind, params


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
    """The engine's topology dict from `fat-tree:k=8` or `leaf-spine:leaves=8,spines=4,...`."""
    if isinstance(spec, dict):
        return spec
    kind, p = split_spec(spec, "topology")
    if kind == "fat-tree":
        _only(p, "topology", ["k"])
        return {"kind": "fat_tree", "k": _int(p, "k", "topology")}
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
            if not _DECIMAL.fullmatch(value) and value.lower().lstrip("+-") not in ("inf", "infinity", "nan"):
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
        if not p["path"].strip():  # Path("") is the current folder: "is a folder" misled
            raise ConfigError("`traffic`: `file:` has an empty path (expected file:PATH of a .csv, .json or .cm file)",
                              "traffic.path")
        from .network_backends.packet.traffic_files import read_traffic_file

        return read_traffic_file(p["path"])
    raise ConfigError(f"`traffic`: unknown kind {kind!r} (expected permutation, all-to-all, incast or file:PATH)", "traffic")
