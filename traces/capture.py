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

import datetime
import json
import logging
import os
import socket
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError, MissingDependencyError
from ..resources import MEMORY_SHARE, available_memory

BACKENDS = ("gloo", "nccl")
# One line, as every CLI error: what is missing and the command that adds it.
TORCH_HINT = 'trace capture needs PyTorch, which `pip install tracefabric` leaves out: pip install "tracefabric[capture]"'


def require_torch() -> None:
    """Raise MissingDependencyError (one line naming the extra to install) unless PyTorch imports.
    Every capture entry point calls it before touching torch."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name != "torch" and not (e.name or "").startswith("torch."):
            raise  # torch is there but one of its own imports is not: its message says which
        raise MissingDependencyError(TORCH_HINT, "torch", "capture") from None


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
        require_torch()
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
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as e:  # SystemExit too: sys.exit() in the script ended the CLI silently
            raise _import_error(str(path), e, path) from None
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ConfigError(f"capture: cannot import module {target!r} ({_first_line(e)})", "script") from None
        except (Exception, SystemExit) as e:
            raise _import_error(f"module {target!r}", e, None) from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ConfigError(f"capture: {target} has no function {func!r}", "script")
    return fn


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


def _import_error(what: str, e: BaseException, path: Path | None) -> ConfigError:
    """One line for a script or module that fails while it is imported: the file and line, and the error."""
    if isinstance(e, SyntaxError):
        return ConfigError(f"capture: {e.filename or what}, line {e.lineno}: syntax error: {e.msg}", "script")
    # The deepest frame inside the user's file says where it raised (not importlib's frames).
    frames = traceback.extract_tb(e.__traceback__)
    lines = [f.lineno for f in frames if path is not None and f.filename == str(path)]
    where = f"{what}, line {lines[-1]}" if lines else what
    detail = f"exit code {e.code}" if isinstance(e, SystemExit) else _first_line(e)
    return ConfigError(f"capture: {where}: importing it raised {type(e).__name__}: {detail}", "script")


def _name(build: Callable | str) -> str:
    return build if isinstance(build, str) else getattr(build, "__name__", repr(build))


def _rank_main(rank: int, world: int, backend: str, port: int, out: str, build: Callable | str, options: dict,
               warmup: int, steps: int, timeout_s: float, timed_out: Any) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # ranks share the machine's cores
    cuda = backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)  # one GPU per rank: checked before spawning
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    # The timeout ends a rank stuck in a collective or recv that no other rank matches (gloo's
    # default is 30 min): the capture otherwise hangs.
    dist.init_process_group(backend, rank=rank, world_size=world, device_id=device if cuda else None,
                            timeout=datetime.timedelta(seconds=timeout_s))
    try:
        ctx = RankContext(rank, world, backend, device, Path(out),
                          recorded_steps=tuple(range(warmup, warmup + steps)))
        step = resolve_build(build)(ctx, **options)
        if not callable(step):  # else every rank fails at its first step with "'NoneType' object is not callable"
            what = "None" if step is None else f"a value of type {type(step).__name__}"
            raise CaptureError(f"capture: {_name(build)} returned {what}: expected a callable that runs one training "
                               "step (build(ctx) -> step)", "script")
        with TraceCapture(out, rank, warmup, steps, cuda=cuda, records=ctx.records, meta=options) as cap:
            for i in cap.steps():
                ctx.step_index = i
                step()
                if cuda:
                    torch.cuda.synchronize()
        dist.barrier()
    except Exception as e:
        # gloo: "Timed out waiting 3000ms for recv operation to complete". Said before the process
        # group closes: its peers then fail with "Connection closed by peer" and may be reported first.
        if "timed out" in str(e).lower():
            timed_out.set()
        raise
    finally:
        dist.destroy_process_group()


# Every local rank is a process with its own copy of the model: past this one machine thrashes.
MAX_LOCAL_RANKS = 256
MAX_STEPS = 10_000
# Seconds a rank waits in one collective (or send/recv) for the other ranks before it fails.
COLLECTIVE_TIMEOUT_S = 300.0
MAX_COLLECTIVE_TIMEOUT_S = 86_400


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _check_memory(fn: Callable, world: int, backend: str, options: dict[str, Any]) -> None:
    """Refuse a built-in workload whose ranks cannot fit in memory, before they start (they would
    swap, or be killed one by one by the OOM killer)."""
    import torch

    per_rank = fn.memory_bytes(world, options)
    name, sizes = getattr(fn, "workload_name", fn.__name__), fn.size_options
    sizes = f"{', '.join(sizes[:-1])} or {sizes[-1]}" if len(sizes) > 1 else sizes[0]
    if backend == "nccl":  # one rank per GPU: its model lives in that GPU's memory
        total = torch.cuda.get_device_properties(0).total_memory
        if per_rank > MEMORY_SHARE * total:
            raise ConfigError(f"capture: {name} needs about {_size(per_rank)} per rank (parameters, gradients and "
                              f"activations), more than {MEMORY_SHARE:.0%} of the GPU's {_size(total)}; "
                              f"lower the options {sizes}", "option")
        return
    avail = available_memory()  # the share synthesis may take too
    if per_rank * world > MEMORY_SHARE * avail:
        raise ConfigError(f"capture: {name} needs about {_size(per_rank)} per rank (parameters, gradients and "
                          f"activations) x {world} local ranks = {_size(per_rank * world)}, more than "
                          f"{MEMORY_SHARE:.0%} of the {_size(avail)} of memory available; lower the options {sizes}, "
                          f"or the ranks", "option")


def capture(build: Callable | str, out: str | Path, world: int, backend: str = "gloo", warmup: int = 1,
            steps: int = 1, *, collective_timeout: float = COLLECTIVE_TIMEOUT_S, **options: Any) -> Path:
    """Run `build(ctx, **options)` -> step function on `world` local ranks and profile its steps.

    `build` is a module-level function (child processes import it) or its name as
    `script.py:func` / `module:func`. A rank waiting more than `collective_timeout` seconds in
    one collective or send/recv fails the capture (the ranks' steps do not match).
    Returns the absolute output directory.
    """
    require_torch()
    import torch
    import torch.multiprocessing as mp

    if backend not in BACKENDS:
        raise ConfigError(f"capture: unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})", "backend")
    if not 1 <= world <= MAX_LOCAL_RANKS:
        raise ConfigError(f"capture: world must be in 1..{MAX_LOCAL_RANKS} local ranks (got {world})", "world")
    if warmup < 0 or steps < 1:  # before spawning ranks, not in each of them
        raise ConfigError(f"capture: need warmup >= 0 and steps >= 1 (got warmup={warmup}, steps={steps})", "steps")
    if warmup > MAX_STEPS or steps > MAX_STEPS:  # each rank lists its steps: bounded memory
        raise ConfigError(f"capture: warmup and steps must be at most {MAX_STEPS:,} (got warmup={warmup}, steps={steps})", "steps")
    t = collective_timeout
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= MAX_COLLECTIVE_TIMEOUT_S:  # NaN fails too
        raise ConfigError(f"capture: collective_timeout = {t!r}: expected a number of seconds above 0 and at most "
                          f"{MAX_COLLECTIVE_TIMEOUT_S:,}", "collective_timeout")
    if backend == "nccl":
        gpus = torch.cuda.device_count()
        if gpus < 1:
            raise ConfigError("capture: backend nccl needs a CUDA GPU and none is visible (use --backend gloo on CPU)",
                              "backend")
        if world > gpus:  # else every rank fails in NCCL with "Duplicate GPU detected"
            raise ConfigError(f"capture: backend nccl needs one GPU per rank (NCCL refuses two ranks on one GPU): "
                              f"{world} ranks, {gpus} GPU{'s' if gpus > 1 else ''} visible", "world")
    fn = resolve_build(build)
    check_options(fn, options)  # fail here, not in every rank, on a bad name or option
    if check_values := getattr(fn, "check_values", None):  # a built-in workload's option values
        check_values(world, options)
    if getattr(fn, "memory_bytes", None):  # a built-in workload: its size follows from the options
        _check_memory(fn, world, backend, options)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # torch logs "Terminating process N via signal SIGTERM" per surviving rank when one fails:
    # the failure is reported below in one line.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    name = _name(build)
    timed_out = mp.get_context("spawn").Event()  # set by a rank whose collective timed out
    try:
        mp.spawn(_rank_main, args=(world, backend, _free_port(), str(out), build, options, warmup, steps, float(t),
                                   timed_out), nprocs=world, join=True)
    except mp.ProcessRaisedException as e:
        last = str(e).strip().splitlines()[-1]
        kind, _, message = last.partition(": ")
        if kind == f"{CaptureError.__module__}.{CaptureError.__qualname__}":  # a rank's own check: already one line
            raise CaptureError(message, "script") from None
        # The rank's own error says neither why it waited nor which option sets how long.
        if timed_out.is_set():
            raise CaptureError(f"capture: a rank of {name} waited longer than the collective timeout ({t:g} s) for "
                               f"another rank: the ranks' steps do not issue matching collectives or send/recv; if a "
                               f"step really takes that long, raise collective_timeout (--collective-timeout)",
                               "collective_timeout") from None
        raise CaptureError(f"capture: a rank of {name} failed: {last}", "script") from None
    except mp.ProcessExitedException as e:  # os._exit, a signal (NCCL aborts a rank whose collective timed out)
        how = f"was killed by {e.signal_name}" if e.signal_name else f"exited with code {e.exit_code}"
        hint = (f" (nccl also aborts a rank whose collective waited more than the collective timeout, {t:g} s)"
                if backend == "nccl" and e.signal_name else "")
        raise CaptureError(f"capture: rank {e.error_index} of {name} {how} before its steps ended{hint}",
                           "script") from None
    return out
