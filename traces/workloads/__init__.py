"""Built-in training steps that `trace capture` can profile: real PyTorch code, small enough for
CPU/gloo with 2-4 ranks and unchanged on GPU/nccl."""

from __future__ import annotations

from typing import Callable

from ...errors import UnknownSchemeError
from . import moe, tiny_llama

WORKLOADS: dict[str, Callable] = {
    "fsdp2-llama": tiny_llama.build_fsdp2,
    "fsdp1-llama": tiny_llama.build_fsdp1,
    "moe": moe.build,
}


def get_workload(name: str) -> Callable:
    if name not in WORKLOADS:
        known = sorted(WORKLOADS)
        raise UnknownSchemeError(f"unknown workload {name!r} (known: {', '.join(known)})", "workload", name, known)
    return WORKLOADS[name]
