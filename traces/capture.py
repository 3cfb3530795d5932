"""Capture real PyTorch training steps as Chakra host (execution) and device (Kineto) traces.

One profiler session per rank records both traces for the chosen steps: PyTorch's
`ExecutionTraceObserver` (the Chakra host trace: every operator with its tensors) and Kineto
(the Chakra device trace: when each operator ran). Warm-up steps run under the profiler's
`warmup` phase so they are executed but not recorded.

Output directory layout (all paths absolute; `trace convert` reads it):

    OUT/capture.json              world size, backend, device, steps, torch version, process groups
    OUT/raw/rank<r>.host.json     host trace of rank r (ExecutionTraceObserver)
    OUT/raw/rank<r>.kineto.json   device trace of rank r (Kineto, Chrome trace format)
    OUT/records/rank<r>.json      what the workload itself recorded (token counts, ...) and the
                                  rank's process groups (`_process_groups`)
"""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

BACKENDS = ("gloo", "nccl")


class CaptureError(ConfigError):
    """The user's training step failed on a rank."""


@dataclass
class RankContext:
    """What a workload's `build` function gets on each rank."""

    rank: int
    world: int
    backend: str
    device: Any  # torch.device
    out: Path
    records: dict[str, Any] = field(default_factory=dict)
    step_index: int = -1  # the step now running (0 = first warm-up step)
    recorded_steps: tuple[int, ...] = ()

    def record(self, key: str, value: Any) -> None:
        """Keep a value the workload measured itself (tests compare traces against these)."""
        self.records.setdefault(key, []).append({"step": self.step_index, "value": value})


def process_groups() -> list[dict[str, Any]]:
    """Every process group this rank belongs to: name (as the trace's `pg_name` says it), description,
    backend and member ranks in group-rank order."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    groups = []
    for pg, name in c10d._world.pg_names.items():  # noqa: SLF001 (the only place torch keeps this map)
        ranks = c10d._world.pg_group_ranks.get(pg, {})  # noqa: SLF001
        ordered = [g for g, _ in sorted(ranks.items(), key=lambda kv: kv[1])]
        groups.append({"pg_name": name, "pg_desc": getattr(pg, "group_desc", ""),
                       "backend": dist.get_backend(pg), "ranks": ordered})
    return groups


class TraceCapture:
    """Profile `steps` training steps after `warmup` unrecorded ones, on this rank.

        with TraceCapture(out, rank, warmup=1, steps=1) as cap:
            for _ in cap.steps():
                train_step()

    On leaving, every rank writes `records/rank<r>.json` (`records`, plus the process groups it
    belongs to) and rank 0 writes `capture.json` (`meta`, plus world, backend, device, steps,
    torch version and process groups), so `tracefabric trace convert OUT` takes the folder.
    torch.distributed must be initialized, and `rank` be this process's rank (else ConfigError).
    """

    def __init__(self, out: str | Path, rank: int, warmup: int = 1, steps: int = 1, cuda: bool = False,
                 records: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> None:
        if warmup < 0 or steps < 1:
            raise ConfigError(f"capture: need warmup >= 0 and steps >= 1 (got warmup={warmup}, steps={steps})", "steps")
        self.out = Path(out).resolve()
        self.rank, self.warmup, self.n_steps, self.cuda = rank, warmup, steps, cuda
        self.records = records if records is not None else {}
        self.meta = meta or {}
        self.host_path = self.out / "raw" / f"rank{rank}.host.json"
        self.kineto_path = self.out / "raw" / f"rank{rank}.kineto.json"
        self._prof = None

    def __enter__(self) -> TraceCapture:
        import torch.distributed as dist
        from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

        # Checked here, not after the steps ran: the metadata written on leaving needs both.
        if not (dist.is_available() and dist.is_initialized()):
            raise ConfigError("capture: torch.distributed is not initialized; call "
                              "torch.distributed.init_process_group(...) before entering TraceCapture", "torch.distributed")
        if self.rank != dist.get_rank():
            raise ConfigError(f"capture: rank = {self.rank}, but this process is rank {dist.get_rank()} of "
                              f"{dist.get_world_size()} in torch.distributed", "rank")
        self._unpatch = _annotate_groups()

        self.host_path.parent.mkdir(parents=True, exist_ok=True)
        observer = ExecutionTraceObserver().register_callback(str(self.host_path))
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._prof = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=self.warmup, active=self.n_steps, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(self.kineto_path)),
            execution_trace_observer=observer,
            record_shapes=True,
            acc_events=True,
        )
        self._prof.__enter__()
        return self

    def steps(self):
        """Yield the index of each step (warm-up ones first); advances the profiler after each."""
        for i in range(self.warmup + self.n_steps):
            yield i
            self._prof.step()

    def __exit__(self, *exc: Any) -> None:
        try:
            self._prof.__exit__(*exc)
        finally:
            self._unpatch()
        if exc[0] is None:
            self._write_metadata()

    def _write_metadata(self) -> None:
        import torch
        import torch.distributed as dist

        groups = process_groups()
        # Every rank lists its own groups: c10d only knows the groups a rank belongs to.
        (self.out / "records").mkdir(exist_ok=True)
        (self.out / "records" / f"rank{self.rank}.json").write_text(json.dumps({**self.records, "_process_groups": groups}))
        if self.rank == 0:
            # The caller's entries first: they must not overwrite what the converter reads.
            meta = {**self.meta, "world": dist.get_world_size(), "backend": dist.get_backend(),
                    "device": "cuda" if self.cuda else "cpu", "warmup": self.warmup, "steps": self.n_steps,
                    "torch": torch.__version__, "process_groups": groups}
            (self.out / "capture.json").write_text(json.dumps(meta, indent=1))


#: Names the process group of a collective in the trace: gloo records none (NCCL's
#: record_param_comms does), and a collective's shape cannot always tell (an all-reduce of
#: the same buffer on any group looks the same). The converter reads and removes these nodes.
GROUP_MARK = "## tracefabric:pg:"
_ANNOTATED = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
              "all_to_all", "all_to_all_single", "broadcast", "reduce", "barrier", "gather", "scatter",
              "send", "recv", "isend", "irecv")


def _annotate_groups() -> Callable[[], None]:
    """Wrap torch.distributed's collectives so each call runs inside a profiler range naming its
    process group; returns the function that restores them."""
    import inspect

    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    from torch.profiler import record_function

    originals = {name: getattr(dist, name) for name in _ANNOTATED if hasattr(dist, name)}

    def wrap(fn: Callable) -> Callable:
        signature = inspect.signature(fn)

        def annotated(*args: Any, **kwargs: Any) -> Any:
            group = signature.bind_partial(*args, **kwargs).arguments.get("group") or c10d._get_default_group()  # noqa: SLF001
            name = c10d._world.pg_names.get(group, "?")  # noqa: SLF001
            with record_function(f"{GROUP_MARK}{name} ##"):
                return fn(*args, **kwargs)

        return annotated

    for name, fn in originals.items():
        setattr(dist, name, wrap(fn))

    def restore() -> None:
        for name, fn in originals.items():
            setattr(dist, name, fn)

    return restore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_options(fn: Callable, options: dict[str, Any]) -> None:
    """Refuse options the build function does not take: its `option_names` if it lists them,
    else its keyword parameters (anything goes if it takes **kwargs)."""
    import inspect

    names = getattr(fn, "option_names", None)
    if names is None:
        params = list(inspect.signature(fn).parameters.values())[1:]  # after ctx
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return
        names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise ConfigError(f"capture: {fn.__name__} takes no option {unknown[0]!r} (it takes: {', '.join(names) or 'none'})",
                          "option")


def resolve_build(build: Callable | str) -> Callable:
    """A build function, or its name: `path/to/script.py:func` or `package.module:func`."""
    if callable(build):
        return build
    import importlib
    import importlib.util

    target, _, func = str(build).rpartition(":")
    if not target or not func:
        raise ConfigError(f"capture: --script must be FILE.py:FUNCTION or MODULE:FUNCTION (got {build!r})", "script")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).resolve()
        if path.suffix != ".py":
            raise ConfigError(f"capture: script {path} is not a .py file", "script")
        if not path.is_file():
            raise ConfigError(f"capture: script {path} not found", "script")
        spec = importlib.util.spec_from_file_location(f"tracefabric_user_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ConfigError(f"capture: cannot import module {target!r} ({e})", "script") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ConfigError(f"capture: {target} has no function {func!r}", "script")
    return fn


def _rank_main(rank: int, world: int, backend: str, port: int, out: str, build: Callable | str, options: dict,
               warmup: int, steps: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # ranks share the machine's cores
    cuda = backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=world, device_id=device if cuda else None)
    try:
        ctx = RankContext(rank, world, backend, device, Path(out),
                          recorded_steps=tuple(range(warmup, warmup + steps)))
        step = resolve_build(build)(ctx, **options)
        with TraceCapture(out, rank, warmup, steps, cuda=cuda, records=ctx.records, meta=options) as cap:
            for i in cap.steps():
                ctx.step_index = i
                step()
                if cuda:
                    torch.cuda.synchronize()
        dist.barrier()
    finally:
        dist.destroy_process_group()


# Every local rank is a process with its own copy of the model: past this one machine thrashes.
MAX_LOCAL_RANKS = 256
MAX_STEPS = 10_000


def capture(build: Callable | str, out: str | Path, world: int, backend: str = "gloo", warmup: int = 1,
            steps: int = 1, **options: Any) -> Path:
    """Run `build(ctx, **options)` -> step function on `world` local ranks and profile its steps.

    `build` is a module-level function (child processes import it) or its name as
    `script.py:func` / `module:func`. Returns the absolute output directory.
    """
    import torch
    import torch.multiprocessing as mp

    if backend not in BACKENDS:
        raise ConfigError(f"capture: unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})", "backend")
    if not 1 <= world <= MAX_LOCAL_RANKS:
        raise ConfigError(f"capture: world must be in 1..{MAX_LOCAL_RANKS} local ranks (got {world})", "world")
    if warmup < 0 or steps < 1:  # before spawning ranks, not in each of them
        raise ConfigError(f"capture: need warmup >= 0 and steps >= 1 (got warmup={warmup}, steps={steps})", "steps")
    if warmup > MAX_STEPS or steps > MAX_STEPS:  # each rank lists its steps: 10^14 was a MemoryError in every rank
        raise ConfigError(f"capture: warmup and steps must be at most {MAX_STEPS:,} (got warmup={warmup}, steps={steps})", "steps")
    if backend == "nccl" and torch.cuda.device_count() < 1:
        raise ConfigError("capture: backend nccl needs a CUDA GPU and none is visible (use --backend gloo on CPU)",
                          "backend")
    fn = resolve_build(build)
    check_options(fn, options)  # fail here, not in every rank, on a bad name or option
    if check_values := getattr(fn, "check_values", None):  # a built-in workload's option values
        check_values(world, options)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # torch logs "Terminating process N via signal SIGTERM" per surviving rank when one fails:
    # the failure is reported below in one line.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    try:
        mp.spawn(_rank_main, args=(world, backend, _free_port(), str(out), build, options, warmup, steps),
                 nprocs=world, join=True)
    except mp.ProcessRaisedException as e:
        last = str(e).strip().splitlines()[-1]
        raise CaptureError(f"capture: a rank of {build if isinstance(build, str) else build.__name__} failed: {last}",
                           "script") from None
    return out
