"""Whole training iterations at cluster scale: FSDP iterations of real models on GPUs in
servers (8 per server, random server placement, hierarchical rings), one process per point
so its peak RSS is its own. Prints a Markdown table: wall and CPU seconds, peak RSS, fabric
events, iteration time. Usage:

    python benchmarks/run_iteration_benchmark.py [--only a,b,c] [--reuse off,exact] [--timeout S]

Packet points run once per reuse mode (`--reuse`, default `off,exact`): `off` simulates every
packet, `exact` replays repeated busy periods bit-identically (docs/iterations.md), `fast` also
where the schemes' state differs. Each row after the first of a point gives its speed-up over
the first mode and its iteration time's difference from it.

Targets (issue "packet-fidelity iterations at real scale"): (b), (c) <= 60 s each on 2 cores;
(e) <= 5 minutes and 4 GiB; (g) reported. "events skipped": those of the replayed periods (the
full run's events are the sum of both columns).
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
    "g": ("Llama-3 405B FSDP, 1,024 GPUs, k=16, FP8, packet reps", "llama3-405b", 1024, "fp8", 16, "packet", "reps"),
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
    # 1,024 GPUs declare ~32 M ring-step flows (Llama-3 70B): they run on engines of
    # limits.max_flows flows each (docs/iterations.md); 405B's iteration takes 5.3 s.
    net = {"topology": {"kind": "fat_tree", "k": p["k"]}, "link": {"rate_gbps": 800, "latency_ns": 500}, "servers": {"gpus": 8},
           "limits": {"max_flows": p["max_flows"], "max_time_ms": 20000}}
    w0, c0 = time.perf_counter(), time.process_time()
    kw = {"scheme": p["scheme"], "reuse": p["reuse"]} if p["backend"] == "packet" else {}
    r = simulate(d, p["system"], net, backend=p["backend"], **kw)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
c = r.network_counters
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": rss, "events": c.get("events", 0), "skipped": c.get("events_skipped", 0),
                  "iteration_ms": r.iteration_ns / 1e6,
                  "fabric_gb": c["scale_out_bytes"] / 1e9,
                  "replayed": f"{c.get('reuse_replayed', 0)}/{c.get('reuse_periods', 0)}" if r.reuse else ""}))
"""


def child(code: str, spec: dict, timeout: float) -> dict | list | str:
    """Runs `code` in its own Python process (its peak RSS is its own) with `spec` as JSON on
    stdin; its JSON output, or why there is none."""
    try:
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(spec), capture_output=True, text=True,
                             timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f} s"
    except subprocess.CalledProcessError as e:
        lines = e.stderr.strip().splitlines()
        return f"failed: {lines[-1] if lines else e.returncode}"
    return json.loads(out.stdout) if out.stdout.strip() else {}


def run(point: tuple, reuse: str, max_flows: int, timeout: float) -> dict | str:
    _, model, world, precision, k, backend, scheme = point
    spec = {"model": model, "world": world, "precision": precision, "k": k, "backend": backend, "scheme": scheme, "system": SYSTEM,
            "reuse": reuse, "max_flows": max_flows}
    return child(CHILD, spec, timeout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(POINTS), help="points to run, e.g. a,b,c")
    ap.add_argument("--reuse", default="off,exact", help="reuse modes of the packet points, e.g. off,exact,fast")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per point before it is reported as too slow")
    ap.add_argument("--max-flows", type=int, default=1 << 22, help="flows per engine window (limits.max_flows)")
    args = ap.parse_args()
    print("| point | scenario | reuse | wall s | CPU s | peak RSS MiB | events | events skipped | periods replayed | "
          "iteration ms | fabric GB | speed-up | iteration diff |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.only.split(","):
        point = POINTS[name]
        first = None
        for mode in args.reuse.split(",") if point[5] == "packet" else [""]:
            r = run(point, mode or "exact", args.max_flows, args.timeout)
            if isinstance(r, str):
                print(f"| {name} | {point[0]} | {mode} | {r} | | | | | | | | | |", flush=True)
                continue
            speed = diff = ""
            if first is None:
                first = r
            else:
                speed = f"{first['cpu'] / r['cpu']:.1f}x"
                diff = f"{(r['iteration_ms'] / first['iteration_ms'] - 1) * 100:+.3f} %"
            print(f"| {name} | {point[0]} | {mode} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['rss_mib']:.0f} | {r['events']:,} | "
                  f"{r['skipped']:,} | {r['replayed']} | {r['iteration_ms']:.3f} | {r['fabric_gb']:.1f} | {speed} | {diff} |",
                  flush=True)


if __name__ == "__main__":
    main()
