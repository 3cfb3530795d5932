"""Ethereal paper Fig. 3 / Fig. 4 (section 4.1): an all-reduce under DCTCP + PFC with 1 ms
timeouts (the `dctcp_pfc` preset), 400 Gbps, 500 ns links, by LB scheme and collective
algorithm, run through `tracefabric run` on a microbenchmark trace. Prints each scheme's
CCT and how much lower Ethereal's is, beside the paper's numbers (recursive doubling,
256 MB). Usage:

    python benchmarks/ethereal_allreduce.py [--topology leaf-spine|fat-tree] [--size-mb 256]
        [--algorithms recursiveDoubling,ring,doubleBinaryTree] [--lbs ethereal,host_spray,reps,ecmp]

Leaf-spine: the paper's 256 GPUs (16 leaves x 16 spines, one 400G link per pair). Fat tree:
the paper's 512-GPU fabric (32 ToRs of 16, 32 aggregation, 16 core, 4 x 400G between
switches) is not one of the engine's topologies; this runs 512 GPUs on a k = 16 fat tree
(pods 0-7 of 16, full bisection) instead.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PAPER = {  # % by which Ethereal's CCT is lower, recursive doubling, 256 MB (section 4.2)
    "leaf-spine": {"host_spray": 30.8, "reps": 40.65},
    "fat-tree": {"host_spray": 37.99, "reps": 38.76, "ecmp": 40.41},
}
NETWORKS = {
    "leaf-spine": (256, "topology: {kind: leaf_spine, leaves: 16, spines: 16, hosts_per_leaf: 16}\n"),
    "fat-tree": (512, "topology: {kind: fat_tree, k: 16}\n"),
}


def system(algorithm: str) -> dict:
    return {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 1, "all-reduce-implementation": [algorithm],
            "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
            "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
            "local-mem-bw": 1600, "boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900}


def cct_us(folder: Path, ranks: int, size: int, algorithm: str, lb: str, network: Path) -> float:
    from tracefabric.traces.microbenchmark import write_microbenchmark

    workload = write_microbenchmark(folder / f"ar{ranks}", ranks, "all_reduce", size)
    sys_file = folder / f"sys_{algorithm}.json"
    sys_file.write_text(json.dumps(system(algorithm)))
    out = subprocess.run(["tracefabric", "run", "--workload", str(workload), "--system", str(sys_file),
                          "--network", str(network), "--backend", "packet", "--scheme", "dctcp_pfc",
                          "--lb", lb, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["summary"]["iteration_us"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", choices=sorted(NETWORKS), default="leaf-spine")
    ap.add_argument("--size-mb", type=int, default=256, help="all-reduce size in MiB (the paper's largest: 256)")
    ap.add_argument("--algorithms", default="recursiveDoubling,ring,doubleBinaryTree")
    ap.add_argument("--lbs", default="ethereal,host_spray,reps,ecmp")
    args = ap.parse_args()
    ranks, topo = NETWORKS[args.topology]
    lbs = args.lbs.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        network = folder / "net.yml"
        network.write_text(topo + "link: {rate_gbps: 400, latency_ns: 500}\n")
        print(f"{args.topology}, {ranks} GPUs, all-reduce {args.size_mb} MiB, dctcp_pfc")
        print("| algorithm | lb | CCT us | Ethereal lower by | paper (RD, 256 MB) |")
        print("|---|---|---:|---:|---:|")
        for algorithm in args.algorithms.split(","):
            cct = {lb: cct_us(folder, ranks, args.size_mb << 20, algorithm, lb, network) for lb in lbs}
            for lb in lbs:
                lower = 100 * (1 - cct["ethereal"] / cct[lb]) if "ethereal" in cct else float("nan")
                paper = PAPER[args.topology].get(lb) if algorithm == "recursiveDoubling" else None
                print(f"| {algorithm} | {lb} | {cct[lb]:.1f} | {lower:.1f} % | {'' if paper is None else f'{paper} %'} |",
                      flush=True)


if __name__ == "__main__":
    main()
