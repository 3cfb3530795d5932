"""Old vs new engine, in paired runs on the same machine: each pair runs a scenario once with
each build, in alternating order, and the table gives the median of the pairs' CPU-time
ratios (new / old; below 1 is faster). A VM's speed drifts over minutes, so pairs, not
separate benchmark runs, are compared. The old build is a folder holding `tracefabric/` with
only its `_core*.so` (the benchmark children import nothing else). Usage:

    python benchmarks/compare_builds.py --old /path/to/old [--suite packet|system]
        [--only a,c] [--lb host_spray,reps] [--cc dctcp] [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_benchmarks  # noqa: E402
import run_system_benchmark  # noqa: E402

# Builds from before the engine listed the backends took their short kinds.
LEGACY_KINDS = {"analytical:astra-unaware": "astra-unaware", "analytical:astra-aware": "astra-aware",
                "analytical:flow": "flow"}


def runner(args: argparse.Namespace):
    """(case names, run(case, env, old) -> result dict)"""
    if args.suite == "packet":
        cases = [(key, lb) for key in args.only.split(",") for lb in args.lb.split(",")]

        def run(case, env, old):
            _, topo, traffic = run_benchmarks.SCENARIOS[case[0]]
            return run_benchmarks.run(topo, traffic, case[1], args.cc, {}, env=env)
        return cases, run
    cases = [(key, "") for key in args.only.split(",")]

    legacy: dict[bool, bool] = {}

    def run(case, env, old):
        _, ranks, size, splits, backend = run_system_benchmark.SCENARIOS[case[0]]
        if old not in legacy:  # a build without backend_names takes the short kinds
            probe = "from tracefabric import _core; print(hasattr(_core, 'backend_names'))"
            out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
            legacy[old] = out.stdout.strip() == "False"
        if legacy[old]:
            backend = {**backend, "kind": LEGACY_KINDS.get(backend["kind"], backend["kind"])}
        return run_system_benchmark.run(ranks, size, splits, backend, env=env)
    return cases, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="folder holding tracefabric/_core*.so of the old build")
    ap.add_argument("--suite", choices=("packet", "system"), default="packet")
    ap.add_argument("--only", default=None, help="scenario letters (default: the suite's all)")
    ap.add_argument("--lb", default="host_spray,reps", help="LB schemes (packet suite)")
    ap.add_argument("--cc", default="ideal", help="CC scheme (packet suite)")
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    suite = run_benchmarks.SCENARIOS if args.suite == "packet" else run_system_benchmark.SCENARIOS
    args.only = args.only or ",".join(suite)
    cases, run = runner(args)
    old_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [args.old, os.environ.get("PYTHONPATH")]))}
    cpu: dict[tuple, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in cases}
    checks: dict[tuple, set] = {c: set() for c in cases}
    for i in range(args.pairs):
        for case in cases:
            order = ("old", "new") if i % 2 == 0 else ("new", "old")
            for which in order:
                r = run(case, old_env if which == "old" else None, which == "old")
                cpu[case][which].append(r["cpu"])
                checks[case].add(r.get("hops", r.get("flows")))
        print(f"pair {i + 1}/{args.pairs} done", file=sys.stderr, flush=True)
    print(f"suite {args.suite}, cc {args.cc}, {args.pairs} pairs")
    print("| scenario | lb | old CPU s (median) | new CPU s (median) | median new/old | same work |")
    print("|---|---|---:|---:|---:|---|")
    for case in cases:
        o, n = cpu[case]["old"], cpu[case]["new"]
        ratio = statistics.median(b / a for a, b in zip(o, n))
        print(f"| ({case[0]}) {suite[case[0]][0]} | {case[1]} | {statistics.median(o):.3f} | {statistics.median(n):.3f} | "
              f"{ratio:.3f} | {'yes' if len(checks[case]) == 1 else 'NO'} |")


if __name__ == "__main__":
    main()
