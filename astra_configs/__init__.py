"""Configuration data: ASTRA-sim formats (later issues) and tracefabric's scheme presets.

A scheme preset (`schemes/<name>.json`) names one LB + CC + loss-recovery combination with
the reference paper's parameters, plus switch settings the scheme depends on (ECN thresholds), its
queue discipline (PFC) and limits (timeouts)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UnknownSchemeError
from ..jsonio import load_json

_ALLOWED = {"description", "source", "lb", "lb_params", "cc", "cc_params", "loss", "loss_params", "qdisc", "qdisc_params",
            "switch", "limits"}


def scheme_presets() -> list[str]:
    """Names of the bundled scheme presets."""
    folder = resources.files(__package__) / "schemes"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def load_scheme_preset(name: str) -> dict[str, Any]:
    """A preset as a dict; unknown names list the known ones."""
    known = scheme_presets()
    if name not in known:
        raise UnknownSchemeError(f"unknown scheme preset `{name}`; expected one of: {', '.join(known)}", "preset", name, known)
    return read_scheme_preset(Path(str(resources.files(__package__) / "schemes" / f"{name}.json")))


def read_scheme_preset(path: str | Path) -> dict[str, Any]:
    """A preset file, checked: an object of the allowed keys, `*_params` and `switch` objects,
    the rest strings (scheme names are checked against the registries when a config is built)."""
    path = Path(path)
    data = load_json(path, "scheme", "scheme preset")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object of preset settings, got a {type(data).__name__}", "scheme")
    extra = sorted(set(data) - _ALLOWED)
    if extra:
        raise ConfigError(f"{path}: unknown key `{extra[0]}` (expected one of: {', '.join(sorted(_ALLOWED))})", extra[0])
    # Checked here: build_config would fail on them with a TypeError, or hand them to the engine.
    for key, value in data.items():
        kind = dict if key.endswith("_params") or key in ("switch", "limits") else str
        if not isinstance(value, kind):
            expected = "an object" if kind is dict else "a string"
            raise ConfigError(f"{path}: `{key}` must be {expected}, got {json.dumps(value)}", key)
    return data
