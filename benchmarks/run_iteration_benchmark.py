"""Whole training iterations at cluster scale: FSDP iterations of real models on GPUs in
servers (8 per server, random server placement, hierarchical rings), one process per point
so its peak RSS is its own. Prints a Markdown table: wall and CPU seconds, peak RSS, fabric
events, iteration time. Usage:

    python benchmarks/run_iteration_benchmark.py [--only a,b,c] [--timeout S]

Targets (issue "packet-fidelity iterations at real scale"): (b), (c) <= 60 s each on 2 cores;
(e) <= 5 minutes and 4 GiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

# name: (what, model, world, precision, k, backend, scheme)
POINTS = {
    "a": ("Llama-3 8B FSDP, 128 GPUs, k=8, flow model", "llama3-8b", 128, "bf16", 8, "analytical:flow", None),
    "b": ("Llama-3 8B FSDP, 128 GPUs, k=8, packet reps", "llama3-8b", 128, "bf16", 8, "packet", "reps"),
    "c": ("Llama-3 8B FSDP, 128 GPUs, k=8, packet ecmp", "llama3-8b", 128, "bf16", 8, "packet", "ecmp"),
    "d": ("Llama-3 70B FSDP, 1,024 GPUs, k=16, FP8, flow model", "llama3-70b", 1024, "fp8", 16, "analytical:flow", None),
    "e": ("Llama-3 70B FSDP, 1,024 GPUs, k=16, FP8, packet reps", "llama3-70b", 1024, "fp8", 16, "packet", "reps"),
    "f": ("GPT-2 small FSDP, 128 GPUs, k=8, FP8, packet ecmp", "gpt2-small", 128, "fp8", 8, "packet", "ecmp"),
}

SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 0, "active-chunks-per-dimension": 1, "preferred-dataset-splits": 1,
          "collective-optimization": "localBWAware", "local-mem-bw": 1600,
          **{f"{k}-implementation": ["ring", "ring"] for k in ("all-reduce", "all-gather", "reduce-scatter")},
          "all-to-all-implementation": ["direct", "direct"]}

CHILD = r"""
import json, resource, sys, tempfile, time
from tracefabric.collectives.iteration import simulate
from tracefabric.traces.models import ZOO
from tracefabric.traces.synthesis import Plan, synthesize, write
p = json.loads(sys.stdin.read())
with tempfile.TemporaryDirectory() as d:
    write(synthesize(ZOO[p["model"]], Plan("fsdp", world=p["world"], gpus_per_server=8, precision=p["precision"])), d)
    net = {"topology": {"kind": "fat_tree", "k": p["k"]}, "link": {"rate_gbps": 800, "latency_ns": 500}, "servers": {"gpus": 8}}
    w0, c0 = time.perf_counter(), time.process_time()
    r = simulate(d, p["system"], net, backend=p["backend"], **({"scheme": p["scheme"]} if p["scheme"] else {}))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
c = r.network_counters
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": rss, "events": c.get("events", 0), "iteration_ms": r.iteration_ns / 1e6,
                  "fabric_gb": c["scale_out_bytes"] / 1e9}))
"""


def run(point: tuple, timeout: float) -> dict | str:
    _, model, world, precision, k, backend, scheme = point
    spec = {"model": model, "world": world, "precision": precision, "k": k, "backend": backend, "scheme": scheme, "system": SYSTEM}
    try:
        out = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(spec), capture_output=True, text=True,
                             timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f} s"
    except subprocess.CalledProcessError as e:
        return f"failed: {e.stderr.strip().splitlines()[-1]}"
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(POINTS), help="points to run, e.g. a,b,c")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per point before it is reported as too slow")
    args = ap.parse_args()
    print("| point | scenario | wall s | CPU s | peak RSS MiB | events | iteration ms | fabric GB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.only.split(","):
        point = POINTS[name]
        r = run(point, args.timeout)
        if isinstance(r, str):
            print(f"| {name} | {point[0]} | {r} | | | | | |", flush=True)
            continue
        print(f"| {name} | {point[0]} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['rss_mib']:.0f} | {r['events']:,} | "
              f"{r['iteration_ms']:.2f} | {r['fabric_gb']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
