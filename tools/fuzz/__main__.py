"""Fuzz every reader of outside input for long runs (the test suite runs the same targets with
Hypothesis, briefly):

    python -m tracefabric.tools.fuzz --inputs 1000000 --out runs/fuzz [--seed 1] [--targets et,spec]

Each input is a seed mutated by `mutate`; its outcome is "ok", one of tracefabric's own errors
(counted by class and field), or a crash (any other exception, a panic, an error naming neither
file nor field), whose input is saved under OUT/crashes/. The input being run is kept in
OUT/current.* so a hang or a killed process leaves it behind. Prints a report every
`--report-every` inputs and at the end, and writes it to OUT/report.json; Ctrl-C or SIGTERM
ends the run early with the report of the inputs tried so far.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from .mutate import mutate
from .targets import TARGETS, outcome

SLOW_S = 5.0  # an input taking longer is reported (a hang in the making)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tracefabric.tools.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=10_000, help="inputs to try in all")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--targets", default="all", help=f"comma-separated, of: {', '.join(TARGETS)}")
    p.add_argument("--out", type=Path, default=Path("runs/fuzz"))
    p.add_argument("--report-every", type=int, default=50_000)
    return p.parse_args(argv)


def _report(counts: dict[str, Counter], crashes: list[dict], slow: list[dict], tried: int, seconds: float) -> dict:
    return {"inputs": tried, "seconds": round(seconds, 1), "inputs_per_second": round(tried / max(seconds, 1e-9), 1),
            "crashes": len(crashes), "slow": len(slow),
            "by_target": {t: {"inputs": sum(c.values()), "ok": c.get("ok", 0),
                              "errors": dict(sorted((k, v) for k, v in c.items() if k not in ("ok", "crash")))}
                          for t, c in counts.items()},
            "crash_list": crashes[:50], "slow_list": slow[:50]}


def _print(report: dict) -> None:
    print(f"{report['inputs']:,} inputs in {report['seconds']:,} s ({report['inputs_per_second']:,}/s): "
          f"{report['crashes']} crashes, {report['slow']} slow", flush=True)
    for name, t in report["by_target"].items():
        errors = sum(t["errors"].values())
        top = ", ".join(f"{k} {v:,}" for k, v in sorted(t["errors"].items(), key=lambda kv: -kv[1])[:4])
        print(f"  {name:13} {t['inputs']:>9,} inputs  ok {t['ok']:>9,}  errors {errors:>9,}  ({top})", flush=True)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    names = list(TARGETS) if a.targets == "all" else a.targets.split(",")
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        print(f"error: unknown target {unknown[0]!r}; expected: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    work = a.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    (a.out / "crashes").mkdir(parents=True, exist_ok=True)
    seeds = {n: TARGETS[n].seeds(work / "seeds" / n) for n in names}
    rng = random.Random(a.seed)
    counts = {n: Counter() for n in names}
    crashes, slow, start = [], [], time.perf_counter()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill ends the run with its report
    try:
        tried = _loop(a, names, seeds, rng, counts, crashes, slow, work, start)
    except KeyboardInterrupt:
        tried = sum(sum(c.values()) for c in counts.values())
    finally:
        signal.signal(signal.SIGTERM, previous)
    report = _report(counts, crashes, slow, tried, time.perf_counter() - start)
    (a.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    _print(report)
    return 1 if crashes else 0


def _loop(a: argparse.Namespace, names: list[str], seeds: dict[str, list[bytes]], rng: random.Random,
          counts: dict[str, Counter], crashes: list[dict], slow: list[dict], work: Path, start: float) -> int:
    for i in range(1, a.inputs + 1):
        target = TARGETS[names[i % len(names)]]
        if target.edit is not None and rng.random() < 0.5:
            data = target.edit(rng.choice(seeds[target.name]), rng)
        else:
            data = mutate(seeds[target.name], rng)
        folder = work / target.name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (target.filename or "spec.txt")
        path.write_bytes(data)
        (a.out / f"current.{target.name}").write_bytes(data)
        t0 = time.perf_counter()
        kind, problem = outcome(target, path, work)
        took = time.perf_counter() - t0
        counts[target.name][kind] += 1
        if problem is not None:
            digest = hashlib.sha1(data).hexdigest()[:12]
            saved = a.out / "crashes" / f"{target.name}-{digest}-{target.filename or 'spec.txt'}"
            saved.write_bytes(data)
            crashes.append({"target": target.name, "input": str(saved), "problem": problem})
            print(f"CRASH {target.name}: {problem} (input {saved})", flush=True)
        if took > SLOW_S:
            slow.append({"target": target.name, "seconds": round(took, 1), "input_sha1": hashlib.sha1(data).hexdigest()})
        if i % a.report_every == 0:
            _print(_report(counts, crashes, slow, i, time.perf_counter() - start))
    return a.inputs


if __name__ == "__main__":
    sys.exit(main())
