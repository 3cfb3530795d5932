"""Built-in training steps that `trace capture` can profile: real PyTorch code, small enough for
CPU/gloo with 2-4 ranks and unchanged on GPU/nccl."""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable

from ...errors import ConfigError, UnknownSchemeError
from ..capture import require_torch

require_torch()  # the workloads are PyTorch modules: without it, one line saying what to install

from . import moe, tiny_llama  # noqa: E402

# Option values are checked before any rank starts (`capture` calls `check_values`): in a rank
# a bad one fails as a torch error after seconds of spawning, behind a log line per rank.
MAX_SIZE = 1 << 20


def _whole(workload: str, options: dict, key: str, low: int, high: int = MAX_SIZE) -> int:
    value = options.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"capture: {workload} option {key} = {value!r}: expected an integer in {low}..{high}", "option")
    return value


def _llama_checker(workload: str) -> Callable[[int, dict], None]:
    """The option check of fsdp1-llama or fsdp2-llama, naming the workload the user chose."""

    def check(world: int, options: dict) -> None:
        for key in options:
            _whole(workload, options, key, 1)
        c = {**asdict(tiny_llama.TinyLlamaConfig()), **options}
        if c["dim"] % c["heads"] or c["heads"] % c["kv_heads"]:
            raise ConfigError(f"capture: {workload} options heads = {c['heads']} must divide dim = {c['dim']}, and "
                              f"kv_heads = {c['kv_heads']} must divide heads", "option")

    return check


def _llama_memory(world: int, options: dict) -> int:
    return tiny_llama.memory_bytes(tiny_llama.TinyLlamaConfig(**options), world)


def _check_moe(world: int, options: dict) -> None:
    for key in set(options) & {"tokens", "dim", "ffn"}:
        _whole("moe", options, key, 1)
    if "delay_rank" in options:
        _whole("moe", options, "delay_rank", -1, world - 1)
    if "delay_ms" in options:
        ms = options["delay_ms"]
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= 3.6e6:  # NaN fails too
            raise ConfigError(f"capture: moe option delay_ms = {ms!r}: expected a number of ms in 0..3600000", "option")
    if "ep" in options and (ep := _whole("moe", options, "ep", 0, world)) and world % ep:
        raise ConfigError(f"capture: moe option ep = {ep}: expected 0 (the world) or a divisor of the world ({world})", "option")


tiny_llama.build_fsdp2.check_values = _llama_checker("fsdp2-llama")
tiny_llama.build_fsdp1.check_values = _llama_checker("fsdp1-llama")
moe.build.check_values = _check_moe
# What `capture` needs to refuse a model too large for memory before ranks start (checked values only).
tiny_llama.build_fsdp2.workload_name, tiny_llama.build_fsdp1.workload_name, moe.build.workload_name = \
    "fsdp2-llama", "fsdp1-llama", "moe"
tiny_llama.build_fsdp2.memory_bytes = tiny_llama.build_fsdp1.memory_bytes = _llama_memory
moe.build.memory_bytes = lambda world, options: moe.memory_bytes(world, **options)
tiny_llama.build_fsdp2.size_options = tiny_llama.build_fsdp1.size_options = ["dim", "ffn", "layers", "vocab", "seq", "batch"]
moe.build.size_options = ["tokens", "dim", "ffn"]

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
