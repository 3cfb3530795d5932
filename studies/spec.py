"""A study spec: shared defaults, per-axis lists, zip and exclude rules, expanded into points.

    name: schemes-by-model-size
    defaults: {world: 16, fabric: k4, backend: packet, seed: 1}
    fabrics: {k4: {topology: {kind: fat_tree, k: 4}, link: {rate_gbps: 400, latency_ns: 500}}}
    axes: {scheme: [ecmp, reps], model: [gpt2-small, gpt2-medium], seed: [1, 2]}
    zip: [[model, world]]            # optional: these axes vary together, entry by entry
    exclude: [{scheme: ecmp, seed: 2}]   # optional: drop points matching every given value

A point is one value per key (axes over defaults over the built-in defaults); `resolve`
checks every point (model, plan, fabric, scheme names, backend) before anything runs."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..jsonio import not_a_file

# The keys a point has, with the built-in defaults. Workload keys shape the synthesized
# trace; `trace` runs a captured one instead (an ET folder or prefix); `traffic` replaces
# the trace by a packet-level traffic matrix (a network-only run).
WORKLOAD_KEYS = {"model": None, "trace": None, "world": 16, "parallel": "fsdp", "gpus_per_server": 1, "precision": "bf16", "gpu": "h100",
                 "seq": 1024, "micro_batch": 1, "tp": 1, "ep": 1, "pp": 1, "microbatches": 1, "imbalance": 0.0,
                 "trace_seed": 1}
RUN_KEYS = {"traffic": None, "fabric": None, "placement": None, "failures": None, "system": "default", "backend": "packet",
            "scheme": "ecmp", "lb": None, "cc": None, "loss": None, "lb_params": None, "cc_params": None,
            "loss_params": None, "seed": 1, "reuse": "exact"}
DEFAULTS: dict[str, Any] = {**WORKLOAD_KEYS, **RUN_KEYS}
SPEC_KEYS = ("name", "description", "defaults", "axes", "zip", "exclude", "fabrics", "systems")

# ASTRA-sim system keys every study point uses unless the spec names its own `systems`:
# flat rings for AG/RS/AR and direct all-to-all, as the golden FSDP runs.
DEFAULT_SYSTEM = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 4,
                  "endpoint-delay": 10, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
                  "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
# Fabric used when a spec names none: the k = 4 fat tree (16 hosts) at the OFAN defaults.
DEFAULT_FABRIC = {"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 800, "latency_ns": 500},
                  "switch": {"buffer_bytes": 800_000}}


@dataclass
class StudySpec:
    name: str
    path: str
    description: str
    defaults: dict[str, Any]
    axes: dict[str, list[Any]]
    zips: list[list[str]]
    excludes: list[dict[str, Any]]
    fabrics: dict[str, dict[str, Any]]
    systems: dict[str, dict[str, Any]]

    def points(self) -> list[dict[str, Any]]:
        """Every point (one value per key) in axis order: the first axis varies slowest."""
        return expand(self)


def _err(path: str, where: str, message: str, field: str) -> ConfigError:
    return ConfigError(f"{path}: {where}: {message}", field)


def load_spec(path: str | Path) -> StudySpec:
    """Read and check a study spec YAML (keys, axis names, list shapes); point-level checks
    (models, schemes, fabrics) are `resolve`'s."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: {not_a_file(p, 'study spec')}", "spec")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML ({' '.join(str(e).split())})", "spec") from None
    return spec_from_dict(raw, str(p), default_name=p.stem)


def spec_from_dict(raw: Any, path: str = "<study spec>", default_name: str = "study") -> StudySpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with keys {', '.join(SPEC_KEYS)}", "spec")
    unknown = [k for k in raw if k not in SPEC_KEYS]
    if unknown:
        raise _err(path, f"key `{unknown[0]}`", f"unknown; expected one of {', '.join(SPEC_KEYS)}", str(unknown[0]))
    defaults = _mapping(raw.get("defaults"), path, "defaults")
    axes = _mapping(raw.get("axes"), path, "axes")
    for section, keys in (("defaults", defaults), ("axes", axes)):
        for key in keys:
            if key not in DEFAULTS:
                raise _err(path, f"{section}.{key}", f"unknown axis `{key}`; expected one of {', '.join(DEFAULTS)}", str(key))
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise _err(path, f"axes.{key}", f"expected a non-empty list of values, got {json.dumps(values)}", key)
        seen = [json.dumps(v, sort_keys=True) for v in values]
        if len(set(seen)) != len(seen):
            twice = next(v for i, v in enumerate(values) if seen[i] in seen[:i])
            raise _err(path, f"axes.{key}", f"lists {twice!r} twice (expected each value once)", key)
    zips = raw.get("zip") or []
    if not isinstance(zips, list) or not all(isinstance(z, list) and len(z) >= 2 for z in zips):
        raise _err(path, "zip", "expected a list of lists of at least two axis names, e.g. [[model, world]]", "zip")
    zipped: set[str] = set()
    for group in zips:
        for key in group:
            if key not in axes:
                raise _err(path, "zip", f"`{key}` is not one of the axes ({', '.join(axes) or 'none'})", str(key))
            if key in zipped:
                raise _err(path, "zip", f"`{key}` is in two zip groups (expected once)", str(key))
            zipped.add(key)
        lengths = {k: len(axes[k]) for k in group}
        if len(set(lengths.values())) != 1:
            raise _err(path, "zip", f"zipped axes must have equal lengths, got {lengths}", group[0])
    excludes = raw.get("exclude") or []
    if not isinstance(excludes, list) or not all(isinstance(e, dict) and e for e in excludes):
        raise _err(path, "exclude", "expected a list of mappings axis: value, e.g. [{scheme: ecmp, seed: 2}]", "exclude")
    for rule in excludes:
        for key in rule:
            if key not in DEFAULTS:
                raise _err(path, "exclude", f"unknown axis `{key}`; expected one of {', '.join(DEFAULTS)}", str(key))
    fabrics = _mapping(raw.get("fabrics"), path, "fabrics")
    systems = _mapping(raw.get("systems"), path, "systems")
    for section, table in (("fabrics", fabrics), ("systems", systems)):
        for name, value in table.items():
            if not isinstance(value, dict):
                raise _err(path, f"{section}.{name}", f"expected a mapping, got {json.dumps(value)}", section)
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name or "/" in name:
        raise _err(path, "name", f"expected a plain name, got {name!r}", "name")
    return StudySpec(name, path, str(raw.get("description", "")), defaults, axes, zips, excludes, fabrics, systems)


def _mapping(value: Any, path: str, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _err(path, key, f"expected a mapping of names, got {json.dumps(value, default=str)[:80]}", key)
    return value


def expand(spec: StudySpec) -> list[dict[str, Any]]:
    """The product of the axes (zip groups as one axis each) minus the excluded points."""
    groups: list[list[str]] = []
    for key in spec.axes:
        z = next((g for g in spec.zips if key in g), None)
        if z is None:
            groups.append([key])
        elif z[0] == key or key == next(k for k in spec.axes if k in z):
            groups.append([k for k in spec.axes if k in z])
    choices = [list(zip(*(spec.axes[k] for k in g))) for g in groups]
    base = {**DEFAULTS, **spec.defaults}
    points = []
    for combo in itertools.product(*choices):
        point = dict(base)
        for g, values in zip(groups, combo):
            point.update(zip(g, values))
        if not any(all(point.get(k) == v for k, v in rule.items()) for rule in spec.excludes):
            points.append(point)
    return points
