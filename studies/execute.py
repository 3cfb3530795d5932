"""Run a study: resolve and check every point, synthesize each distinct workload once, run
the points not yet stored (local processes, one per core, or Ray tasks) and store each
point's rows as it finishes.

    >>> from tracefabric.studies import run_study
    >>> res = run_study("examples/schemes_by_model_size.yaml", jobs=2)
    >>> res.runs.groupby("scheme").iteration_us.mean()
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import ConfigError, MissingDependencyError
from .resolve import resolve, workload_keys
from .run_point import ensure_workload, error_result, run_point
from .spec import StudySpec, load_spec
from .store import Store

# on_event(kind, point key or workload key, info): "planned" (total, done), "synthesized",
# "started", "finished" (status) — what a progress display needs.
Events = Callable[[str, str, dict[str, Any]], None]


@dataclass
class StudyRun:
    """What one `run_study` did: the store, how many points it ran, skipped and saw fail."""

    store: Store
    spec: StudySpec
    points: list[dict[str, Any]]
    ran: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    synthesized: int = 0
    synth_s: float = 0.0
    wall_s: float = 0.0

    @property
    def runs(self):
        from .results import StudyResults

        return StudyResults(self.store.root).runs


def plan_study(spec: StudySpec | str | Path, out: str | Path | None = None) -> tuple[StudySpec, list[dict[str, Any]], Store]:
    """Resolve every point (all checks, no run) and prepare the store and config files."""
    spec = spec if isinstance(spec, StudySpec) else load_spec(spec)
    points = resolve(spec)
    store = Store(out if out is not None else Path("runs") / spec.name).create().lock()
    store.clean_tmp()
    workload_keys(points)
    for p in points:
        if p["kind"] == "iteration":
            p["labels"]["system_file"] = store.write_config("system", p["system"])
            p["labels"]["network_file"] = store.write_config("fabric", p["network"])
            p["labels"]["workload"] = p["workload"].get("trace") or f"traces/{p['workload_key']}/trace"
    if Path(spec.path).is_file():
        (store.root / "spec.yaml").write_text(Path(spec.path).read_text())
    store.write_plan([p["key"] for p in points])
    return spec, points, store


def run_study(spec: StudySpec | str | Path, out: str | Path | None = None, *, jobs: int | None = None,
              ray: bool = False, ray_address: str | None = None, retry_failed: bool = False,
              on_event: Events | None = None) -> StudyRun:
    """Run the points of a study not yet in its store. `jobs`: processes (local) or CPUs of
    the local Ray cluster (default: every core). `ray`: run each point as a Ray task, on the
    cluster at `ray_address` or a local one started here."""
    t0 = time.perf_counter()
    if jobs is not None and jobs < 1:
        raise ConfigError(f"jobs = {jobs}: expected at least 1", "jobs")
    spec, points, store = plan_study(spec, out)
    try:
        return _run(spec, points, store, t0, jobs or os.cpu_count() or 1, ray, ray_address, retry_failed, on_event)
    finally:
        store.unlock()


def _run(spec: StudySpec, points: list[dict[str, Any]], store: Store, t0: float, jobs: int, ray: bool,
         ray_address: str | None, retry_failed: bool, on_event: Events | None) -> StudyRun:
    stored = store.statuses()
    todo = [p for p in points if p["key"] not in stored or (retry_failed and stored[p["key"]] != "ok")]
    run = StudyRun(store, spec, points, skipped=len(points) - len(todo))
    emit = on_event or (lambda *a: None)
    emit("planned", "", {"total": len(points), "done": run.skipped, "todo": len(todo)})
    workloads = {p["workload_key"]: p["workload"] for p in todo if p["kind"] == "iteration"}
    missing = {k: w for k, w in workloads.items()
               if "trace" not in w and not (store.traces_dir / k / "summary.json").exists()}
    executor = _RayExecutor(jobs, ray_address) if ray else _LocalExecutor(jobs)
    with executor:
        # Phase 1: each distinct workload synthesized once, into the shared trace cache.
        for key, made in executor.map_unordered(ensure_workload, [(w, k, str(store.traces_dir)) for k, w in missing.items()],
                                             list(missing)):
            if isinstance(made, BaseException):  # its points will try again, and record why they fail
                emit("synthesized", key, {"error": str(made)})
                continue
            run.synthesized += 1
            run.synth_s += made[1]
            emit("synthesized", key, {"seconds": made[1]})
        # Phase 2: the points; each one's rows stored the moment it finishes.
        by_key = {p["key"]: p for p in todo}
        for key, result in executor.map_unordered(run_point, [(p, str(store.traces_dir)) for p in todo], list(by_key),
                                                  on_start=lambda k: emit("started", k, {})):
            if isinstance(result, BaseException):  # its worker died: recorded, the rest go on
                result = error_result(by_key[key], result)
            store.write_point(key, result["tables"], result["timing"])
            status = str(result["tables"]["runs"]["status"].iloc[0])
            run.ran += 1
            if status != "ok":
                run.failed.append(key)
            emit("finished", key, {"status": status, "error": str(result["tables"]["runs"]["error"].iloc[0])})
    run.wall_s = time.perf_counter() - t0
    return run


class _LocalExecutor:
    """`jobs` worker processes (in-process for one job); at most `jobs` tasks in flight, so
    `started` means running."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "_LocalExecutor":
        if self.jobs > 1:
            self.ctx = multiprocessing.get_context("forkserver" if os.name == "posix" else "spawn")
            if os.name == "posix":  # workers fork from a server that already holds this package
                self.ctx.set_forkserver_preload(["tracefabric.studies.run_point"])
            self.pool = ProcessPoolExecutor(self.jobs, mp_context=self.ctx)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def map_unordered(self, fn: Callable[..., Any], args: list[tuple], keys: list[str],
                      on_start: Callable[[str], None] | None = None) -> Iterable[tuple[str, Any]]:
        if self.pool is None:
            for key, a in zip(keys, args):
                if on_start:
                    on_start(key)
                try:
                    value = fn(*a)
                except Exception as e:  # recorded as the point's error by the caller
                    value = e
                yield key, value
            return
        self._args = dict(zip(keys, args))
        pending = list(zip(keys, args))[::-1]
        running: dict[Future, str] = {}
        while pending or running:
            while pending and len(running) < self.jobs:
                key, a = pending.pop()
                running[self.pool.submit(fn, *a)] = key
                if on_start:
                    on_start(key)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            broken = False
            for f in done:
                key = running.pop(f)
                try:
                    value = f.result()
                except BrokenProcessPool as e:  # a worker died (signal, out of memory): every task in flight is lost
                    broken, value = True, e
                except Exception as e:
                    value = e
                yield key, value
            if broken:  # a fresh pool; the other lost tasks run again
                self.pool.shutdown(wait=False, cancel_futures=True)
                self.pool = ProcessPoolExecutor(self.jobs, mp_context=self.ctx)
                pending += [(k, self._args[k]) for k in running.values()]
                running.clear()


class _RayExecutor:
    """Each call one Ray task (1 CPU); results come back to this process, which stores them."""

    def __init__(self, jobs: int, address: str | None) -> None:
        self.jobs, self.address = jobs, address
        self.started_here = False

    def __enter__(self) -> "_RayExecutor":
        try:
            import ray
        except ImportError:
            raise MissingDependencyError("--ray needs Ray: pip install 'tracefabric[ray]'", "ray", "ray") from None
        self.ray = ray
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:  # a local cluster on this machine, stopped when the study ends
                ray.init(num_cpus=self.jobs, include_dashboard=False, log_to_driver=False)
                self.started_here = True
        self.slots = max(1, int(ray.cluster_resources().get("CPU", self.jobs)))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.started_here:
            self.ray.shutdown()

    def map_unordered(self, fn: Callable[..., Any], args: list[tuple], keys: list[str],
                      on_start: Callable[[str], None] | None = None) -> Iterable[tuple[str, Any]]:
        remote = self.ray.remote(num_cpus=1, max_retries=0)(fn)
        pending = list(zip(keys, args))[::-1]
        running: dict[Any, str] = {}
        while pending or running:
            while pending and len(running) < self.slots:
                key, a = pending.pop()
                running[remote.remote(*a)] = key
                if on_start:
                    on_start(key)
            done, _ = self.ray.wait(list(running), num_returns=1)
            for ref in done:
                key = running.pop(ref)
                try:
                    value = self.ray.get(ref)
                except self.ray.exceptions.RayError as e:  # the task's worker or node died
                    value = e
                yield key, value
