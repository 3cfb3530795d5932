"""Resolve a study's points into fully specified runs, checked before any of them starts,
and key each by a hash of everything that decides its result.

A resolved point is plain JSON: `labels` (the axis values a table shows), `workload` (model
spec and synthesis plan) or `traffic`, `system` (ASTRA-sim system keys), `network` (packet
fabric or ASTRA-sim network, seed and failures in it), `scheme` (the simulate() options),
`engine_scheme` (the LB/CC/loss with parameters a preset resolves to), `backend`. Its key
hashes that, the code version and the seed; two points with equal keys give equal rows."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..astra_configs.formats import AstraNetwork, check_network, check_system
from ..collectives.iteration import BACKENDS, REUSE_MODES, backend_spec
from ..errors import ConfigError, SchemeParamError
from ..network_backends.packet import build_config, check_config
from ..network_backends.packet.specs import topology_config
from ..traces.models import get_model
from ..traces.synthesis import Plan
from .spec import DEFAULT_FABRIC, DEFAULT_SYSTEM, WORKLOAD_KEYS, StudySpec

PLAN_KEYS = ("parallel", "world", "gpus_per_server", "precision", "gpu", "seq", "micro_batch", "tp", "ep", "pp",
             "microbatches", "imbalance")
SCHEME_KEYS = ("scheme", "lb", "cc", "loss", "lb_params", "cc_params", "loss_params")
# Modules whose code decides a point's numbers: their source is part of the code version.
RESULT_MODULES = ("traces/synthesis.py", "traces/models.py", "traces/chakra_io.py", "collectives/iteration.py",
                  "collectives/workload.py", "collectives/placement.py", "astra_configs/servers.py",
                  "network_backends/packet/__init__.py", "network_backends/packet/specs.py",
                  "astra_configs/formats.py", "studies/run_point.py")


@lru_cache(maxsize=1)
def code_version() -> str:
    """The package version plus a hash of the engine binary and of the Python modules that
    compute results: a rebuilt engine or an edited system layer makes every point new."""
    from importlib.metadata import version

    from .. import _core

    h = hashlib.sha256(Path(_core.__file__).read_bytes())
    for rel in RESULT_MODULES:
        package, _, name = rel.rpartition("/")
        mod = resources.files(f"tracefabric.{package.replace('/', '.')}") / name
        h.update(rel.encode() + mod.read_bytes())
    return f"{version('tracefabric')}+{h.hexdigest()[:12]}"


def key_of(resolved: dict[str, Any]) -> str:
    """The point's key: 16 hex digits of the hash of its resolved spec and the code version."""
    text = json.dumps({"point": resolved, "code": code_version()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def workload_key(workload: dict[str, Any]) -> str:
    """Traces are shared by every point with the same workload (model and plan), whatever its
    scheme, fabric or seed."""
    text = json.dumps({"workload": workload, "code": code_version()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def scheme_label(point: dict[str, Any]) -> str:
    """How a table names the scheme: the preset, or `lb/cc/loss`, with any override or
    parameter in brackets: `mswift_sack[lb=ofan]`, `paralet/ideal/erasure[lb.m=4]`."""
    preset = point.get("scheme")
    names = {k: point[k] for k in ("lb", "cc", "loss") if point.get(k) is not None}
    if preset is None and not names and point["backend"] != "packet":
        return "none"
    if preset is None:
        base, extras = "/".join(str(names.get(k, d)) for k, d in (("lb", "ecmp"), ("cc", "ideal"), ("loss", "erasure"))), []
    else:
        base, extras = preset, [f"{k}={v}" for k, v in names.items()]
    for family in ("lb", "cc", "loss"):
        for k, v in sorted((point.get(f"{family}_params") or {}).items()):
            extras.append(f"{family}.{k}={v}")
    return base if not extras else f"{base}[{','.join(extras)}]"


def _split_scheme(value: Any) -> dict[str, Any]:
    """`scheme: ofan/mswift/sack` is the LB x CC x loss form; a plain name is a preset."""
    if isinstance(value, str) and "/" in value:
        parts = value.split("/")
        if len(parts) != 3 or not all(parts):
            raise ConfigError(f"scheme {value!r}: expected a preset name or LB/CC/LOSS (three names)", "scheme")
        return {"scheme": None, "lb": parts[0], "cc": parts[1], "loss": parts[2]}
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"scheme {value!r}: expected a preset name or LB/CC/LOSS", "scheme")
    return {"scheme": value}


def _named(table: dict[str, dict[str, Any]], value: Any, axis: str, builtin: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """(label, config) of a `fabric` / `system` value: a name from the spec's table, or a mapping."""
    if value is None or value == "default":
        return "default", dict(builtin or {})
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":")), value
    if isinstance(value, str) and value in table:
        return value, table[value]
    raise ConfigError(f"{axis} {value!r}: expected a name from the spec's `{axis}s` ({', '.join(table) or 'none given'}) "
                      "or a mapping", axis)


def _model_ref(model: Any, spec_dir: Path) -> Any:
    """A zoo name stays; a config path is read relative to the spec's folder."""
    if isinstance(model, str) and ("/" in model or model.endswith(".json")):
        p = Path(model)
        return str(p if p.is_absolute() else spec_dir / p)
    return model


@lru_cache(maxsize=64)
def _captured(path: str) -> tuple[int, str, str]:
    """(ranks, name, content hash) of a captured trace: its ETs and comm groups, read and
    checked once (the hash makes an edited trace a new workload)."""
    from ..collectives.workload import read_workload

    w = read_workload(path)
    h = hashlib.sha256()
    files = [t.path for t in w.traces]
    groups = Path(files[0]).parent / "comm_groups.json"
    for f in files + ([groups] if groups.exists() else []):
        h.update(Path(f).name.encode() + Path(f).read_bytes())
    name = Path(path).name if Path(path).is_dir() else Path(path).name.split(".")[0]
    return w.ranks, name, h.hexdigest()[:16]


def _axis_of(e: ConfigError, point: dict[str, Any]) -> str:
    """Which of the point's keys an error's field belongs to."""
    field = e.field
    if isinstance(e, SchemeParamError):  # a parameter of the scheme a family's params name
        params = f"{e.family}_params"
        return params if point.get(params) is not None else e.family if point.get(e.family) is not None else "scheme"
    if "." in field and field.split(".")[0] in point:  # `failures.prob`, `lb.buffer`
        field = field.split(".")[0]
    if field in ("preset", "lb", "cc", "loss", "lb_params", "cc_params", "loss_params") or field.startswith(("lb.", "cc.")):
        family = field.split(".")[0]
        return family if family in point and point.get(family) is not None else "scheme"
    if field in ("topology", "npus_count", "link", "switch", "packet", "limits", "network"):
        return "fabric"
    if field in ("heads", "kv_heads", "ffn", "layers", "experts"):
        return "model"
    return field if field in point else "model" if field == "workload" else field


def _check_engine_scheme(engine_spec: dict[str, Any]) -> None:
    """A packet-backend iteration's scheme names and parameters, checked before any trace
    is synthesized: the engine's own checks on its config with one stand-in flow."""
    cfg = engine_spec.get("config")
    if cfg is None or "scheme" not in cfg or _hosts(cfg) < 2:
        return
    fabric = {k: v for k, v in cfg.items() if k != "failures"}  # checked with the run's real flows
    check_config({**fabric, "traffic": {"kind": "flows", "src": [0], "dst": [1], "bytes": [1], "start_ps": [0]}})


def resolve_point(point: dict[str, Any], spec: StudySpec) -> dict[str, Any]:
    """Check one point and return its resolved form (raises ConfigError naming the field)."""
    spec_dir = Path(spec.path).parent
    fabric_label, fabric = _named(spec.fabrics, point["fabric"], "fabric", DEFAULT_FABRIC)
    system_label, system = _named(spec.systems, point["system"], "system", DEFAULT_SYSTEM)
    backend = point["backend"]
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; expected one of: {', '.join(BACKENDS)}", "backend")
    network = dict(fabric)
    if isinstance(network.get("topology"), str):
        network["topology"] = topology_config(network["topology"])
    if point["failures"] is not None:
        network["failures"] = point["failures"]
    scheme = _split_scheme(point["scheme"])
    for k in SCHEME_KEYS[1:]:
        if point[k] is not None:
            scheme[k] = point[k]
    seed = point["seed"]
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed {seed!r}: expected an integer >= 0", "seed")
    if point["reuse"] not in REUSE_MODES:
        raise ConfigError(f"reuse {point['reuse']!r}: expected one of {', '.join(REUSE_MODES)}", "reuse")
    reuse = point["reuse"] if backend == "packet" else None
    labels = {"model": None, **{k: None for k in PLAN_KEYS}, "trace_seed": None, "traffic": None, "fabric": fabric_label, "system": system_label, "scheme": scheme_label({**point, **scheme}),
              "lb": None, "cc": None, "loss": None,
              "placement": None if point["placement"] is None else json.dumps(point["placement"]).strip('"'),
              "failures": None if point["failures"] is None else json.dumps(point["failures"], sort_keys=True),
              "backend": backend, "seed": seed, "reuse": reuse}
    out: dict[str, Any] = {"labels": labels, "backend": backend, "seed": seed, "reuse": reuse}
    if point["traffic"] is not None:
        if point["model"] is not None:
            raise ConfigError(f"traffic {point['traffic']!r} and model {point['model']!r}: a point runs a traffic matrix "
                              "or a model's trace, give one", "traffic")
        if backend != "packet":
            raise ConfigError(f"traffic {point['traffic']!r}: traffic matrices run on the packet backend only, not {backend}",
                              "backend")
        if point["placement"] is not None:
            raise ConfigError(f"placement {point['placement']!r}: a traffic matrix names hosts, it has no ranks to place",
                              "placement")
        cfg = build_config(network["topology"], point["traffic"], seed=seed, link=network.get("link"),
                           switch=network.get("switch"), packet=network.get("packet"), limits=network.get("limits"),
                           failures=network.get("failures"), **scheme)
        check_config(cfg)
        labels["traffic"] = point["traffic"] if isinstance(point["traffic"], str) else json.dumps(point["traffic"], sort_keys=True)
        out.update(kind="traffic", traffic=point["traffic"], network=network, scheme=scheme,
                   engine=cfg, system=None)
        labels["world"] = _hosts(cfg)
        labels.update({k: cfg["scheme"][k] for k in ("lb", "cc", "loss")})
        return out
    if point["trace"] is not None:
        return _resolve_captured(point, spec_dir, out, labels, system, system_label, network, fabric_label, scheme)
    if point["model"] is None:
        raise ConfigError("no `model` (and no `trace` or `traffic`): every point needs one; set it in defaults or axes", "model")
    model = get_model(_model_ref(point["model"], spec_dir))
    plan = Plan(**{k: point[k] for k in PLAN_KEYS}, seed=point["trace_seed"])
    plan.check_model(model)
    sys_cfg = check_system(dict(system), f"system {system_label}")
    network["seed"] = seed
    net = check_network(network, f"fabric {fabric_label}")
    if not isinstance(net, AstraNetwork):
        hosts = _hosts({"topology": network["topology"]})
        if plan.world > hosts:  # the world axis is what is wrong here, not the fabric's file
            raise ConfigError(f"world {plan.world}: fabric `{fabric_label}` has {hosts} hosts (expected world <= hosts)", "world")
    # Names, fabric, servers, ranks vs hosts, and a given placement policy (the default, the
    # trace's own placement.json, is read when the point runs).
    engine_spec, *_ = backend_spec(backend, net, plan.world, scheme, point["placement"], None)
    _check_engine_scheme(engine_spec)
    del sys_cfg
    labels.update(model=model.name, **{k: getattr(plan, k) for k in PLAN_KEYS}, trace_seed=plan.seed)
    engine_scheme = engine_spec.get("config", {}).get("scheme")
    labels.update({k: engine_scheme[k] if engine_scheme else None for k in ("lb", "cc", "loss")})
    workload = {"model": dataclasses.asdict(model), "plan": dataclasses.asdict(plan)}
    out.update(kind="iteration", workload=workload, system=system, network=network, scheme=scheme, placement=point["placement"],
               engine=engine_spec.get("config", {"dims": engine_spec.get("dims")}) if not isinstance(net, AstraNetwork)
               else {"dims": engine_spec["dims"]})
    return out


def _resolve_captured(point: dict[str, Any], spec_dir: Path, out: dict[str, Any], labels: dict[str, Any],
                      system: dict[str, Any], system_label: str, network: dict[str, Any], fabric_label: str,
                      scheme: dict[str, Any]) -> dict[str, Any]:
    """A point that runs a captured trace as it is (no synthesis; plan keys do not apply)."""
    if point["model"] is not None:
        raise ConfigError(f"trace {point['trace']!r} and model {point['model']!r}: a point runs a captured trace or a "
                          "synthesized model, give one", "trace")
    p = Path(point["trace"])
    path = str(p if p.is_absolute() else spec_dir / p)
    ranks, name, digest = _captured(path)
    check_system(dict(system), f"system {system_label}")
    network["seed"] = point["seed"]
    net = check_network(network, f"fabric {fabric_label}")
    if not isinstance(net, AstraNetwork) and ranks > _hosts({"topology": network["topology"]}):
        raise ConfigError(f"trace {point['trace']!r} has {ranks} ranks: fabric `{fabric_label}` has fewer hosts", "trace")
    engine_spec, *_ = backend_spec(point["backend"], net, ranks, scheme, point["placement"], path)
    _check_engine_scheme(engine_spec)
    engine_scheme = engine_spec.get("config", {}).get("scheme")
    labels.update(model=name, world=ranks, **{k: engine_scheme[k] if engine_scheme else None for k in ("lb", "cc", "loss")})
    out.update(kind="iteration", workload={"trace": path, "digest": digest}, system=system, network=network,
               scheme=scheme, placement=point["placement"], engine=engine_spec.get("config", {"dims": engine_spec.get("dims")}))
    return out


def _hosts(cfg: dict[str, Any]) -> int:
    from ..network_backends.packet import fabric_hosts

    return fabric_hosts(cfg)


def resolve(spec: StudySpec) -> list[dict[str, Any]]:
    """Every point resolved and keyed, in spec order; the first bad point stops it all with
    an error naming the spec file, the point's axis values, the axis and its value."""
    out, seen = [], set()
    for i, point in enumerate(spec.points()):
        try:
            r = resolve_point(point, spec)
        except ConfigError as e:
            axis = _axis_of(e, point)
            shown = ", ".join(f"{k}={point[k]}" for k in spec.axes)
            if axis in point:
                value = point[axis] if point[axis] is not None or axis not in ("lb", "cc", "loss", "preset") else point.get("scheme")
                where = f"axis `{axis}` = {value!r}"
            else:  # not one of the point's keys: the error's own field says where
                where = f"`{e.field}`"
            raise ConfigError(f"{spec.path}: point {i + 1} ({shown}): {where}: {e}", axis) from None
        r["key"] = key_of(r)  # labels too: a renamed fabric is a new row
        if r["key"] not in seen:  # e.g. a scheme axis on a backend that ignores it twice: one run
            seen.add(r["key"])
            out.append(r)
    return out


def workload_keys(points: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The distinct workloads of the iteration points, by key (each synthesized once)."""
    found: dict[str, dict[str, Any]] = {}
    for p in points:
        if p["kind"] == "iteration":
            k = workload_key(p["workload"])
            p["workload_key"] = k
            found.setdefault(k, p["workload"])
    return found


__all__ = ["resolve", "resolve_point", "key_of", "workload_key", "workload_keys", "code_version", "scheme_label",
           "WORKLOAD_KEYS"]
