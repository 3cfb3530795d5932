"""System-layer benchmarks: one collective on many NPUs through the workload/system layers
and a network backend. Prints a Markdown table of wall/CPU seconds, peak RSS and flows per
CPU-second. Each scenario runs in a fresh process that imports only the engine (no pandas),
so peak RSS is the run's. Usage:

    python benchmarks/run_system_benchmark.py [--only f,g,h,i]

Reference (issue "workload and system layers"): ASTRA-sim 2.x needs about 7 s and 365 MB
for scenario (f); the target is >= 10x faster and <= 100 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

ASTRA_SWITCH = lambda n: [{"kind": "Switch", "npus": n, "bandwidth_gbps": 50.0, "latency_ns": 500.0}]  # noqa: E731
FAT_TREE_16 = {"topology": {"kind": "fat_tree", "k": 16}, "link": {"rate_gbps": 400, "latency_ns": 500},
               "scheme": {"lb": "host_spray"}, "seed": 1}

# name, ranks, bytes, splits, backend spec
SCENARIOS = {
    "f": ("1024-NPU ring all-reduce 64 MiB, astra-unaware, 4 chunks", 1024, 64 << 20, 4, {"kind": "analytical:astra-unaware", "dims": ASTRA_SWITCH(1024)}),
    "g": ("1024-NPU ring all-reduce 64 MiB, astra-aware, 4 chunks", 1024, 64 << 20, 4, {"kind": "analytical:astra-aware", "dims": ASTRA_SWITCH(1024)}),
    "h": ("1024-NPU ring all-reduce 64 MiB, flow, 1 chunk", 1024, 64 << 20, 1, {"kind": "analytical:flow", "dims": ASTRA_SWITCH(1024)}),
    "i": ("256-GPU ring all-reduce 64 MiB, packet (k=16 fat tree, host_spray)", 256, 64 << 20, 1, {"kind": "packet", "config": FAT_TREE_16}),
}

CHILD = r"""
import json, resource, sys, time
from tracefabric import _core
spec = json.loads(sys.stdin.read())
n, size, splits, backend = spec["ranks"], spec["bytes"], spec["splits"], spec["backend"]
workload = {"ranks": [{"file": f"all_reduce.{r}.et", "nodes": [{"id": 0, "kind": "collective", "collective": "all_reduce", "bytes": size}]}
                      for r in range(n)], "groups": [list(range(n))]}
system = {"scheduling_policy": "lifo", "endpoint_delay_ps": 10000, "active_chunks_per_dimension": 1, "preferred_dataset_splits": splits,
          "implementations": {"all-reduce-implementation": ["ring"]}, "local_bw_aware": True, "local_mem_bw_bytes_per_ns": 1600.0,
          "blocks": "truncate" if backend["kind"].startswith("analytical:astra") else "exact", "dims": [n]}
w0, c0 = time.perf_counter(), time.process_time()
r = _core.simulate_system(json.dumps(workload), json.dumps(system), json.dumps(backend))
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": rss, "flows": r["flows"], "iteration_us": max(r["ranks"]["wall_ps"]) / 1e6}))
"""


def run(ranks: int, size: int, splits: int, backend: dict, env: dict | None = None) -> dict:
    spec = {"ranks": ranks, "bytes": size, "splits": splits, "backend": backend}
    out = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(spec), capture_output=True, text=True, check=True,
                         env=env)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenario letters")
    args = ap.parse_args()
    print("| scenario | wall s | CPU s | peak RSS MiB | flows | M flows/CPU-s | iteration us |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key in args.only.split(","):
        name, ranks, size, splits, backend = SCENARIOS[key]
        r = run(ranks, size, splits, backend)
        print(f"| ({key}) {name} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mib']:.0f} | {r['flows']:,} | "
              f"{r['flows'] / r['cpu'] / 1e6:.2f} | {r['iteration_us']:,.1f} |", flush=True)


if __name__ == "__main__":
    main()
