"""OFAN §8.4 / Fig. 14: FSDP iterations on servers of 8 GPUs (random server placement, FP8,
hierarchical rings), each world all-gather's and reduce-scatter's CCT increase over its
fluid-ideal bound (studies/fig14.py) for REPS, SWITCH PKT AR and OFAN under MSwift + SACK.
One process per point (its peak RSS its own); the bounds are computed once per model, in a
process of their own. Prints a Markdown table. Usage:

    python benchmarks/run_fig14_benchmark.py                       # the paper: 1,024 GPUs, k = 16
    python benchmarks/run_fig14_benchmark.py --world 128 --k 8 --models gpt2-small
    python benchmarks/run_fig14_benchmark.py --world 128 --k 8 --models llama3-8b --layers 4

Mean and max are over the collectives that met no other in flight (the others' CCT can hold
waiting for the system layer's network dimension) and whose ring steps fill a frame; `n`
counts them, `x OFAN` is the mean over OFAN's; `min, all` is the least increase of any of
them (below zero: a run ended under its bound). Wall and CPU seconds are the packet run's (synthesis and bounds excluded). The paper's
scale needs far more memory and CPU than a small machine has (Llama-3 70B: ~32 M flows).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_iteration_benchmark import child  # noqa: E402

PRELUDE = r"""
import json, resource, sys, time
from tracefabric.studies import fig14
p = json.loads(sys.stdin.read())
net = fig14.network(p["k"], gpus=p["gpus"], limits={"max_flows": 1 << 27})  # ~8 M flows and more
"""

SYNTH = r"""
import dataclasses, json, sys
from tracefabric.traces.models import ZOO
from tracefabric.traces.synthesis import Plan, synthesize, write
p = json.loads(sys.stdin.read())
m = ZOO[p["model"]] if not p["layers"] else dataclasses.replace(ZOO[p["model"]], layers=p["layers"])
write(synthesize(m, Plan("fsdp", world=p["world"], gpus_per_server=p["gpus"], precision=p["precision"], seed=p["seed"])),
      p["trace"])
"""

BOUNDS = PRELUDE + r"""
from tracefabric.collectives.workload import read_workload
w = read_workload(p["trace"])
b = fig14.bounds(fig14.collective_keys(w), w.ranks, net, placement=p["trace"] + "/placement.json")
print(json.dumps([[k, s, v] for (k, s), v in b.items()]))
"""

POINT = PRELUDE + r"""
from tracefabric.collectives.workload import read_workload
w = read_workload(p["trace"])
cache = {(k, s): v for k, s, v in p["bounds"]}
w0, c0 = time.perf_counter(), time.process_time()
table, r = fig14.cct_increase(w, net, p["lb"], reuse=p["reuse"], bound_cache=cache)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
c = r.network_counters
print(json.dumps({**fig14.summary(table), "wall": wall, "cpu": cpu, "min": float(table["increase"].min()),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "replayed": f"{c.get('reuse_replayed', 0)}/{c.get('reuse_periods', 0)}", "drops": c.get("data_packets_dropped", 0)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="llama3-8b,llama3-70b,llama3-405b", help="zoo models, comma-separated")
    ap.add_argument("--layers", type=int, default=0, help="cut every model to this many layers (0: as the zoo has it)")
    ap.add_argument("--world", type=int, default=1024, help="GPUs (whole servers)")
    ap.add_argument("--k", type=int, default=16, help="fat tree arity: k^3/4 NICs, at least --world")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per server")
    ap.add_argument("--schemes", default="ofan,switch_ar,reps", help="LBs under MSwift + SACK; ofan first gives 'x OFAN'")
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--seed", type=int, default=1, help="synthesis seed: the random server placement")
    ap.add_argument("--reuse", default="fast", help="reuse of busy periods (docs/iterations.md)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per process before it is reported as too slow")
    args = ap.parse_args()
    print(f"{args.world} GPUs ({args.world // args.gpus} servers x {args.gpus}), k = {args.k} fat tree, 800 Gbit/s, "
          f"{args.precision}, placement seed {args.seed}, reuse {args.reuse}" + (f", {args.layers} layers" if args.layers else ""))
    print()
    print("| model | scheme | n | mean CCT increase | max CCT increase | min, all | x OFAN | wall s | CPU s | peak RSS MiB | "
          "periods replayed | drops |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in args.models.split(","):
        with tempfile.TemporaryDirectory() as d:
            base = {"model": model, "layers": args.layers, "world": args.world, "gpus": args.gpus, "k": args.k,
                    "precision": args.precision, "seed": args.seed, "trace": d}
            made = child(SYNTH, base, args.timeout)
            bounds = child(BOUNDS, base, args.timeout) if not isinstance(made, str) else made
            if isinstance(bounds, str):
                print(f"| {model} | (bounds) | | {bounds} | | | | | | | | |", flush=True)
                continue
            ofan = None
            for lb in args.schemes.split(","):
                r = child(POINT, {**base, "lb": lb, "reuse": args.reuse, "bounds": bounds}, args.timeout)
                if isinstance(r, str):
                    print(f"| {model} | {lb} | | {r} | | | | | | | | |", flush=True)
                    continue
                ofan = r["mean"] if lb == "ofan" else ofan
                ratio = f"{r['mean'] / ofan:.1f}" if ofan and ofan > 0 and lb != "ofan" else ""
                print(f"| {model} | {lb} | {r['n']} | {100 * r['mean']:.2f} % | {100 * r['max']:.2f} % | {100 * r['min']:.2f} % | {ratio} | "
                      f"{r['wall']:.1f} | {r['cpu']:.1f} | {r['rss_mib']:.0f} | {r['replayed']} | {r['drops']:,} |", flush=True)


if __name__ == "__main__":
    main()
