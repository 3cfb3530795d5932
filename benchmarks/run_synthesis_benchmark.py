"""Trace-synthesis benchmark: wall/CPU seconds, peak RSS and output size for generating
one Chakra ET per rank. Each case runs in a fresh process. Usage:

    python benchmarks/run_synthesis_benchmark.py [--only llama3-70b,deepseek-v3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CASES = [  # model, parallel, world, GPUs per server, precision, tp, ep
    ("llama3-405b", "fsdp", 1024, 8, "fp8", 1, 1),
    ("llama3-405b", "fsdp", 1024, 8, "bf16", 8, 1),
    ("llama3-70b", "fsdp", 1024, 8, "fp8", 1, 1),
    ("deepseek-v3", "fsdp", 1024, 8, "bf16", 1, 8),
]

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from tracefabric.traces.models import get_model
from tracefabric.traces.synthesis import Plan, synthesize, write
model, parallel, world, gps, precision, tp, ep, out = sys.argv[1:]
w0, c0 = time.perf_counter(), time.process_time()
s = synthesize(get_model(model), Plan(parallel, int(world), int(gps), precision, tp=int(tp), ep=int(ep)))
write(s, out)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
size = sum(p.stat().st_size for p in Path(out).iterdir())
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": rss, "mib": size / 2**20, "nodes": len(s.nodes)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(m for m, *_ in CASES),
                    help="comma-separated models among the cases (a model may have several)")
    args = ap.parse_args()
    wanted = args.only.split(",")
    unknown = sorted(set(wanted) - {m for m, *_ in CASES})
    if unknown:
        ap.error(f"--only: unknown model(s) {', '.join(unknown)}")
    print("| model | plan | ranks | nodes per rank | wall s | CPU s | peak RSS MiB | output MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for model, parallel, world, gps, precision, tp, ep in CASES:
        if model not in wanted:
            continue
        with tempfile.TemporaryDirectory() as out:
            args = [model, parallel, str(world), str(gps), precision, str(tp), str(ep), out]
            r = json.loads(subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, check=True).stdout)
        print(f"| {model} | {parallel} {precision}, tp {tp}, ep {ep}, {gps} GPUs/server | {world} | {r['nodes']} | {r['wall']:.2f} | {r['cpu']:.2f} | "
              f"{r['rss_mib']:.0f} | {r['mib']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
