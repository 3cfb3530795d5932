"""GPUs in servers on a packet fabric: the network file's `servers` section.

    servers:
      gpus: 8                      # GPUs per server, each with its own NIC into the fabric
      scale_up:                    # the server's NVSwitch-like domain, per GPU and direction
        bandwidth_gbps: 3600       # H100 NVLink 4: 18 links x 25 GB/s
        latency_ns: 250            # GPU to GPU through the switch
      nics: packed                 # or rail: GPU i of neighbouring servers on one edge switch

The scale-up domain is modelled at flow level (a non-blocking switch whose GPU ports are
shared max-min fairly); the fabric between the NICs at the backend's own level.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError
from ..specs import shown

SCALE_UP_DEFAULTS = {"bandwidth_gbps": 3600.0, "latency_ns": 250.0}
NIC_LAYOUTS = ("packed", "rail")
SERVER_KEYS = ("gpus", "scale_up", "nics")


def check_servers(raw: Any, path: str = "<network config>") -> dict[str, Any]:
    """The backend's `servers` spec (flat, defaults filled in) from a network file's section."""
    where = f"{path}: servers"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} = {shown(raw)}: expected a mapping with keys {', '.join(SERVER_KEYS)}", "servers")
    for key in raw:
        if key not in SERVER_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}; expected one of: {', '.join(SERVER_KEYS)}", f"servers.{key}")
    gpus = raw.get("gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 1024:
        raise ConfigError(f"{where}.gpus = {shown(gpus)}: expected an integer of GPUs per server in 1..1024", "servers.gpus")
    up = raw.get("scale_up", {})
    if not isinstance(up, dict):
        raise ConfigError(f"{where}.scale_up = {shown(up)}: expected a mapping with bandwidth_gbps, latency_ns", "servers.scale_up")
    spec: dict[str, Any] = {"gpus": gpus}
    for key, default in SCALE_UP_DEFAULTS.items():
        value = up.get(key, default)
        low = 1e-3 if key == "bandwidth_gbps" else 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and low <= value <= 1e9):
            raise ConfigError(f"{where}.scale_up.{key} = {shown(value)}: expected a number in {low:g}..1e9",
                              f"servers.scale_up.{key}")
        spec[key] = float(value)
    for key in up:
        if key not in SCALE_UP_DEFAULTS:
            raise ConfigError(f"{where}.scale_up: unknown key {key!r}; expected one of: {', '.join(SCALE_UP_DEFAULTS)}",
                              f"servers.scale_up.{key}")
    nics = raw.get("nics", "packed")
    if nics not in NIC_LAYOUTS:
        raise ConfigError(f"{where}.nics = {shown(nics)}: expected one of {', '.join(NIC_LAYOUTS)}", "servers.nics")
    spec["nics"] = nics
    return spec
