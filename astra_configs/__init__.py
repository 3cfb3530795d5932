"""Configuration data: ASTRA-sim formats (later issues) and tracefabric's scheme presets.

A scheme preset (`schemes/<name>.json`) names one LB + CC + loss-recovery combination with
the reference paper's parameters, plus switch settings the scheme depends on (ECN thresholds)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..errors import UnknownSchemeError

_ALLOWED = {"description", "source", "lb", "lb_params", "cc", "cc_params", "loss", "loss_params", "switch"}


def scheme_presets() -> list[str]:
    """Names of the bundled scheme presets."""
    folder = resources.files(__package__) / "schemes"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def load_scheme_preset(name: str) -> dict[str, Any]:
    """A preset as a dict; unknown names list the known ones."""
    known = scheme_presets()
    if name not in known:
        raise UnknownSchemeError(f"unknown scheme preset `{name}`; expected one of: {', '.join(known)}", "preset", name, known)
    data = json.loads((resources.files(__package__) / "schemes" / f"{name}.json").read_text())
    extra = set(data) - _ALLOWED
    if extra:
        raise ValueError(f"astra_configs/schemes/{name}.json: unknown key `{sorted(extra)[0]}` (expected {sorted(_ALLOWED)})")
    return data
