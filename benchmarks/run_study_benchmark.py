"""Study overhead benchmark: per point, the study's own work (spec resolution, reading the
shared traces, writing the point's Parquet files, the executor's bookkeeping) against the
point's simulation time (target: at most 5 %), and trace synthesis counted per distinct
workload. One process (`jobs=1`), so every second is this point's. Usage:

    python benchmarks/run_study_benchmark.py [--spec examples/schemes_by_model_size.yaml] [--models 1]

`--models N` keeps the first N values of the spec's `model` axis (a shorter run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tracefabric.studies import StudyResults, load_spec, run_study
from tracefabric.studies.execute import plan_study

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default=str(HERE.parent / "examples" / "schemes_by_model_size.yaml"))
    ap.add_argument("--models", type=int, default=0, help="keep the first N models (0: all)")
    args = ap.parse_args()
    spec = load_spec(args.spec)
    if args.models and "model" in spec.axes:
        spec.axes["model"] = spec.axes["model"][: args.models]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        _, points, _ = plan_study(spec, Path(tmp) / "plan-only")
        resolve_s = (time.perf_counter() - t0) / len(points)
        run = run_study(spec, Path(tmp) / "study", jobs=1)
        timing = StudyResults(Path(tmp) / "study").table("timing")
        runs = StudyResults(Path(tmp) / "study").runs
    workloads = len({p["workload_key"] for p in points if p["kind"] == "iteration"})
    timing = timing.merge(runs[["point", "model", "scheme"]], on="point")
    # The executor's own time per point: the whole run's wall minus what the points account for.
    accounted = timing["total_s"].sum() + timing["store_s"].sum()
    executor_s = max(0.0, run.wall_s - accounted) / len(timing)
    print(f"# study overhead: {spec.name}, {len(points)} points, {workloads} distinct workload(s), "
          f"{run.synthesized} synthesized\n")
    print("| model | scheme | simulate (s) | read traces (s) | store (s) | other (s) | overhead |")
    print("|---|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    for row in timing.itertuples():
        other = row.total_s - row.sim_s - row.read_s - row.synth_s + resolve_s + executor_s
        overhead = (row.read_s + row.store_s + other) / row.sim_s
        worst = max(worst, overhead)
        print(f"| {row.model} | {row.scheme} | {row.sim_s:.2f} | {row.read_s:.3f} | {row.store_s:.3f} | {other:.3f} | "
              f"{100 * overhead:.2f} % |")
    sim, over = timing["sim_s"].sum(), (timing["read_s"] + timing["store_s"]).sum() + len(timing) * (resolve_s + executor_s)
    print(f"\nresolution {1e3 * resolve_s:.1f} ms/point; synthesis {run.synth_s + timing['synth_s'].sum():.2f} s for {run.synthesized} "
          f"workload(s) (once each, not per scheme); total overhead {100 * over / sim:.2f} % of {sim:.1f} s simulated; "
          f"worst point {100 * worst:.2f} %")


if __name__ == "__main__":
    main()
