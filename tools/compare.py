"""Scheme comparisons: run several schemes over one or more traffic matrices and
seeds, tabulate CCT against the lower bound, and draw the OFAN paper's Fig. 1 style chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..errors import ConfigError
from ..network_backends.packet import build_config, check_config, run_config, traffic_file_errors

DEFAULT_SCHEMES = ["ecmp", "host_spray", "switch_rr", "reps", "switch_ar"]


def compare(
    schemes: list[str],
    traffics: list[str],
    *,
    topology: str = "fat-tree:k=8",
    seeds: list[int] | None = None,
    on_run: Callable[[str, str, int], Callable[[int, int], bool] | None] | None = None,
    before_runs: Callable[[], Any] | None = None,
    **config: Any,
) -> pd.DataFrame:
    """One row per (traffic, scheme, seed). Every config is built (and so checked)
    before the first run starts, so a typo fails in a second, not after an hour;
    `before_runs` is called then (the CLI creates its output folder only for a valid plan)."""
    seeds = [1] if seeds is None else seeds
    for name, given in (("schemes", schemes), ("traffic", traffics), ("seeds", seeds)):
        if not given:
            raise ConfigError(f"compare: `{name}` is empty (expected at least one)", name)
        # A repeat would be averaged in as an extra seed: the summary's `seeds` and means go wrong.
        if twice := next((x for i, x in enumerate(given) if x in given[:i]), None):
            raise ConfigError(f"compare: `{name}` lists {twice!r} twice (expected each once)", name)
    # Each traffic is read once (a flow file may be large) and, per scheme, built by the
    # engine (incast senders, a file's hosts, scheme parameters) before the first run.
    plan, seen = [], {}
    for t in traffics:
        first = build_config(topology, t, scheme=schemes[0], seed=seeds[0], **config)["traffic"]
        key = json.dumps(first, sort_keys=True)
        if key in seen:  # `size=8KiB` and `size=8192`: one panel twice
            raise ConfigError(f"compare: `traffic` lists {seen[key]!r} and {t!r}, the same traffic (expected each once)", "traffic")
        seen[key] = t
        for s in schemes:
            cfgs = [build_config(topology, first, scheme=s, seed=seed, **config) for seed in seeds]
            with traffic_file_errors(t):
                check_config(cfgs[0])
            plan += [(t, s, seed, cfg) for seed, cfg in zip(seeds, cfgs)]
    if before_runs:
        before_runs()
    rows = []
    for traffic, scheme, seed, cfg in plan:
        progress = on_run(traffic, scheme, seed) if on_run else None
        with traffic_file_errors(traffic):
            r = run_config(cfg, progress=progress)
        rows.append({"traffic": traffic, "scheme": scheme, **r.summary_row()})
    return pd.DataFrame(rows)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (traffic, scheme), in the order the traffics and schemes were given."""
    order = {c: {v: i for i, v in enumerate(dict.fromkeys(runs[c]))} for c in ("traffic", "scheme")}
    g = runs.groupby(["traffic", "scheme"], sort=False)
    out = g.agg(
        seeds=("seed", "count"),
        cct_us=("cct_us", "mean"),
        lower_bound_us=("lower_bound_us", "first"),
        cct_increase_pct=("cct_increase_pct", "mean"),
        increase_min_pct=("cct_increase_pct", "min"),
        increase_max_pct=("cct_increase_pct", "max"),
        max_queue_bytes=("max_queue_bytes", "max"),
        drops=("drops", "mean"),
        queue_pairs=("queue_pairs", "max"),
        pointers=("pointers", "max"),
    ).reset_index()
    return out.sort_values(["traffic", "scheme"], key=lambda c: c.map(order[c.name]), kind="stable").reset_index(drop=True)


def plot(summary: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Bar chart of CCT increase over the lower bound, one panel per traffic matrix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traffics = list(dict.fromkeys(summary["traffic"]))
    fig, axes = plt.subplots(1, len(traffics), figsize=(4.5 * len(traffics), 3.6), squeeze=False)
    for ax, traffic in zip(axes[0], traffics):
        d = summary[summary["traffic"] == traffic]
        y = d["cct_increase_pct"].to_numpy()
        err = [y - d["increase_min_pct"].to_numpy(), d["increase_max_pct"].to_numpy() - y]
        ax.bar(d["scheme"], y, yerr=err, capsize=3, color="#4C72B0")
        ax.set_title(traffic, fontsize=10)
        ax.set_ylabel("CCT increase over lower bound (%)")
        ax.tick_params(axis="x", rotation=35)
        for x, v in enumerate(y):
            ax.annotate(f"{v:.1f}", (x, v), ha="center", va="bottom", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
