"""A study's figures: PNGs with the CSV of each figure's data beside it, and an HTML report.

- `iteration_vs_model.png`: iteration time vs model size, one line per scheme (the headline);
  traffic studies: CCT increase over the bound per scheme and traffic instead
- `exposed_comm.png`: compute and exposed communication per model and scheme
- `cct_increase.png`: per collective kind, CCT over its NIC bound (%) per scheme
- `cct_cdf.png`: CDF of collective completion times (iterations) or flow completion times (traffic)
- `stages.png`: per-stage max queue (packet runs; the packet engine's stage table)

A scheme keeps its colour in every figure of every study (its place among the presets)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..astra_configs import scheme_presets
from .results import StudyResults, ci95, varying


def scheme_colours(schemes: list[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    known = scheme_presets()
    out = {}
    for s in schemes:
        base = s.split("[")[0]
        i = known.index(base) if base in known else len(known) + sum(map(ord, s))
        out[s] = cmap(i % 20)
    return out


# A scheme's LB, CC and loss recovery follow from its name: they never split a figure.
DERIVED = ("lb", "cc", "loss")


def _panels(runs: pd.DataFrame, exclude: tuple[str, ...]) -> tuple[list[str], list[tuple]]:
    """Axes other than `exclude` and seed that vary: one panel per combination of them."""
    cols = [c for c in varying(runs, ("seed", *exclude, *DERIVED))]
    combos = list(dict.fromkeys(map(tuple, runs[cols].astype(str).to_numpy()))) if cols else [()]
    return cols, combos


def _pick(df: pd.DataFrame, cols: list[str], combo: tuple) -> pd.DataFrame:
    mask = np.ones(len(df), dtype=bool)
    for c, v in zip(cols, combo):
        mask &= df[c].astype(str).to_numpy() == v
    return df[mask]


def _title(cols: list[str], combo: tuple) -> str:
    return ", ".join(f"{c} {v}" for c, v in zip(cols, combo))


def _figure(n: int, width: float = 5.0, height: float = 3.6):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return plt, fig, axes[0]


def _save(plt: Any, fig: Any, path: Path, data: pd.DataFrame) -> list[Path]:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    csv = path.with_suffix(".csv")
    data.to_csv(csv, index=False)
    return [path, csv]


def headline_axis(runs: pd.DataFrame) -> str:
    """The headline's x axis: the model when it varies (by size), else the first other axis
    that varies (e.g. `ep`), else the model."""
    ok = runs[runs["status"] == "ok"]
    others = varying(ok, ("seed", "scheme", *DERIVED))
    return "model" if "model" in others or not others else others[0]


def headline_data(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean iteration time (ms) and its 95 % interval over seeds, per x value (model, by size)
    and scheme, and any other varying axis (a panel each)."""
    ok = runs[runs["status"] == "ok"]
    x = headline_axis(runs)
    panel_cols, _ = _panels(ok, (x, "scheme"))
    keys = [*panel_cols, x, "scheme"] if x == "model" else [*panel_cols, x, "model", "scheme"]
    rows = []
    for values, g in ok.groupby(keys, sort=False, dropna=False):
        rows.append({**dict(zip(keys, values)), "params_b": float(g["params"].iloc[0]) / 1e9, "seeds": len(g),
                     "iteration_ms": float(g["iteration_us"].mean()) / 1e3, "iteration_ms_ci95": ci95(g["iteration_us"]) / 1e3})
    sort = "params_b" if x == "model" else x
    return pd.DataFrame(rows).sort_values([*panel_cols, sort], kind="stable").reset_index(drop=True)


def plot_headline(runs: pd.DataFrame, out: Path) -> list[Path]:
    data = headline_data(runs)
    x = headline_axis(runs)
    cols, combos = _panels(runs[runs["status"] == "ok"], (x, "scheme"))
    colours = scheme_colours(list(dict.fromkeys(runs["scheme"])))
    # Model size on x when known; captured traces (no parameter count) and non-numeric axes
    # stand side by side in the order given.
    if x == "model" and data["params_b"].notna().all():
        xs, label = data["params_b"], "model size (billion parameters)"
    elif x != "model" and pd.api.types.is_numeric_dtype(data[x]):
        xs, label = data[x].astype(float), x
    else:
        order = {m: i for i, m in enumerate(dict.fromkeys(data[x].astype(str)))}
        xs, label = data[x].astype(str).map(order), "model (captured trace)" if x == "model" else x
    data = data.assign(_x=xs)
    plt, fig, axes = _figure(len(combos))
    for ax, combo in zip(axes, combos):
        d = _pick(data, cols, combo)
        for scheme in dict.fromkeys(runs["scheme"]):
            s = d[d["scheme"] == scheme]
            if len(s):
                ax.errorbar(s["_x"], s["iteration_ms"], yerr=s["iteration_ms_ci95"].fillna(0), marker="o", capsize=3,
                            label=scheme, color=colours[scheme])
        if label in ("model (captured trace)", x) and not pd.api.types.is_numeric_dtype(data[x]):
            ax.set_xticks(sorted(set(d["_x"])), list(dict.fromkeys(d.sort_values("_x")[x].astype(str))))
        ax.set_xlabel(label)
        ax.set_ylabel("iteration time (ms)")
        ax.set_title(_title(cols, combo) or f"iteration time by {x}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8)
    return _save(plt, fig, out / "iteration_vs_model.png", data.drop(columns="_x"))


def exposed_data(runs: pd.DataFrame) -> pd.DataFrame:
    ok = runs[runs["status"] == "ok"]
    keys = [c for c in varying(ok, ("seed", "scheme", *DERIVED))] + ["scheme"]
    g = ok.groupby(keys, sort=False)
    out = g.agg(compute_ms=("compute_us", "mean"), exposed_comm_ms=("exposed_comm_us", "mean"),
                iteration_ms=("iteration_us", "mean"), seeds=("seed", "count")).reset_index()
    for c in ("compute_ms", "exposed_comm_ms", "iteration_ms"):
        out[c] = out[c] / 1e3
    return out


def plot_exposed(runs: pd.DataFrame, out: Path) -> list[Path]:
    data = exposed_data(runs)
    labels = [" | ".join(str(v) for v in row) for row in data[[c for c in data.columns if c not in
                                                                ("compute_ms", "exposed_comm_ms", "iteration_ms", "seeds")]].to_numpy()]
    plt, fig, (ax,) = _figure(1, width=max(5.0, 0.45 * len(data)), height=4.2)
    x = np.arange(len(data))
    ax.bar(x, data["compute_ms"], label="compute (max over ranks)", color="#8c8c8c")
    colours = scheme_colours(list(dict.fromkeys(data["scheme"])))
    ax.bar(x, data["exposed_comm_ms"], bottom=data["compute_ms"], label="exposed communication",
           color=[colours[s] for s in data["scheme"]])
    ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("time per iteration (ms)")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "exposed_comm.png", data)


def cct_increase_data(runs: pd.DataFrame, colls: pd.DataFrame) -> pd.DataFrame:
    """Per scheme and collective kind: all CCTs over all bounds − 1, averaged over points."""
    ok = runs[runs["status"] == "ok"][["point", "scheme"]]
    c = colls[colls["bound_ns"].notna()].merge(ok, on="point")
    per_point = c.groupby(["scheme", "kind", "point"], sort=False).agg(cct=("cct_ns", "sum"), bound=("bound_ns", "sum"),
                                                                        count=("cct_ns", "count")).reset_index()
    per_point["increase_pct"] = 100 * (per_point["cct"] / per_point["bound"] - 1)
    return per_point.groupby(["scheme", "kind"], sort=False).agg(
        cct_increase_pct=("increase_pct", "mean"), collectives_per_run=("count", "mean"), runs=("point", "count")).reset_index()


def plot_cct_increase(runs: pd.DataFrame, colls: pd.DataFrame, out: Path) -> list[Path]:
    data = cct_increase_data(runs, colls)
    kinds = list(dict.fromkeys(data["kind"]))
    schemes = list(dict.fromkeys(data["scheme"]))
    colours = scheme_colours(schemes)
    plt, fig, (ax,) = _figure(1, width=max(5.0, 1.2 * len(kinds) * max(1, len(schemes)) / 3))
    w = 0.8 / max(1, len(schemes))
    for i, s in enumerate(schemes):
        d = data[data["scheme"] == s].set_index("kind").reindex(kinds)
        ax.bar(np.arange(len(kinds)) + i * w, d["cct_increase_pct"], w, label=s, color=colours[s])
    ax.set_xticks(np.arange(len(kinds)) + 0.4 - w / 2, kinds)
    ax.set_ylabel("CCT increase over NIC bound (%)")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "cct_increase.png", data)


def cdf_data(runs: pd.DataFrame, table: pd.DataFrame, column: str, scale: float) -> pd.DataFrame:
    """Per scheme, the 0th..100th percentiles of `column` over every ok point's rows."""
    ok = runs[runs["status"] == "ok"][["point", "scheme"]]
    d = table.merge(ok, on="point")
    rows = []
    for s, g in d.groupby("scheme", sort=False):
        qs = np.percentile(g[column].to_numpy(dtype=float) * scale, np.arange(101))
        rows += [{"scheme": s, "percentile": int(p), "value_us": float(v)} for p, v in zip(range(101), qs)]
    return pd.DataFrame(rows)


def plot_cdf(runs: pd.DataFrame, table: pd.DataFrame, column: str, scale: float, what: str, out: Path) -> list[Path]:
    data = cdf_data(runs, table, column, scale)
    colours = scheme_colours(list(dict.fromkeys(data["scheme"])))
    plt, fig, (ax,) = _figure(1)
    for s, g in data.groupby("scheme", sort=False):
        ax.plot(g["value_us"], g["percentile"] / 100, label=s, color=colours[s])
    ax.set_xscale("log")
    ax.set_xlabel(f"{what} (µs)")
    ax.set_ylabel("fraction of " + ("collectives" if what.startswith("collective") else "flows"))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(plt, fig, out / "cct_cdf.png" if what.startswith("collective") else out / "fct_cdf.png", data)


def traffic_data(runs: pd.DataFrame) -> pd.DataFrame:
    ok = runs[runs["status"] == "ok"]
    keys = [c for c in varying(ok, ("seed", "scheme", *DERIVED))] + ["scheme"]
    rows = []
    for values, g in ok.groupby(keys, sort=False):
        rows.append({**dict(zip(keys, values if isinstance(values, tuple) else (values,))), "seeds": len(g),
                     "cct_increase_pct": 100 * float(g["cct_increase"].mean()), "ci95_pct": 100 * ci95(g["cct_increase"]),
                     "cct_us": float(g["cct_us"].mean()), "lower_bound_us": float(g["lower_bound_us"].mean())})
    return pd.DataFrame(rows)


def plot_traffic(runs: pd.DataFrame, out: Path) -> list[Path]:
    data = traffic_data(runs)
    cols, combos = _panels(runs[runs["status"] == "ok"], ("scheme",))
    colours = scheme_colours(list(dict.fromkeys(data["scheme"])))
    plt, fig, axes = _figure(len(combos), width=4.5)
    for ax, combo in zip(axes, combos):
        d = _pick(data, cols, combo)
        ax.bar(d["scheme"], d["cct_increase_pct"], yerr=d["ci95_pct"].fillna(0), capsize=3,
               color=[colours[s] for s in d["scheme"]])
        ax.set_ylabel("CCT increase over lower bound (%)")
        ax.set_title(_title(cols, combo), fontsize=8)
        ax.tick_params(axis="x", rotation=40)
    return _save(plt, fig, out / "cct_by_scheme.png", data)


def plot_stages(runs: pd.DataFrame, stages: pd.DataFrame, out: Path) -> list[Path]:
    ok = runs[runs["status"] == "ok"][["point", "scheme"]]
    data = (stages.merge(ok, on="point").groupby(["scheme", "stage"], sort=False)
            .agg(max_queue_bytes=("max_queue_bytes", "max"), max_link_load=("max_link_load", "mean")).reset_index())
    stage_names = list(dict.fromkeys(data["stage"]))
    schemes = list(dict.fromkeys(data["scheme"]))
    colours = scheme_colours(schemes)
    plt, fig, (ax,) = _figure(1, width=6)
    w = 0.8 / max(1, len(schemes))
    for i, s in enumerate(schemes):
        d = data[data["scheme"] == s].set_index("stage").reindex(stage_names)
        ax.bar(np.arange(len(stage_names)) + i * w, d["max_queue_bytes"] / 1e3, w, label=s, color=colours[s])
    ax.set_xticks(np.arange(len(stage_names)) + 0.4 - w / 2, stage_names)
    ax.set_ylabel("max queue (KB)")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "stages.png", data)


def plot_study(res: StudyResults, out: str | Path) -> list[Path]:
    """Every figure the study's data supports, and report.html; the headline figure first."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = res.runs
    files: list[Path] = []
    iteration = runs[runs["kind"] == "iteration"] if "kind" in runs else runs.iloc[0:0]
    traffic = runs[runs["kind"] == "traffic"] if "kind" in runs else runs.iloc[0:0]
    if (iteration["status"] == "ok").any():
        files += plot_headline(iteration, out)
        files += plot_exposed(iteration, out)
        colls = res.collectives
        files += plot_cct_increase(iteration, colls, out)
        files += plot_cdf(iteration, colls, "cct_ns", 1e-3, "collective completion time", out)
        stages = res.table("stages")
        if len(stages):  # packet iterations: per-stage queues over the whole iteration
            files += plot_stages(iteration, stages, out)
    if (traffic["status"] == "ok").any():
        files += plot_traffic(traffic, out)
        files += plot_cdf(traffic, res.table("flows"), "fct_us", 1.0, "flow completion time", out)
        files += plot_stages(traffic, res.table("stages"), out)
    files.append(write_report(res, out, [f for f in files if f.suffix == ".png"]))
    return files


def write_report(res: StudyResults, out: Path, pngs: list[Path]) -> Path:
    summary = res.summary()
    parts = [f"<html><head><meta charset='utf-8'><title>{html.escape(res.path.name)}</title></head><body>",
             f"<h1>Study {html.escape(res.path.name)}</h1>", summary.to_html(index=False, float_format=lambda v: f"{v:,.3f}")]
    for png in pngs:
        parts.append(f"<h2>{html.escape(png.stem.replace('_', ' '))}</h2><img src='{png.name}' style='max-width:100%'>"
                     f"<p><a href='{png.with_suffix('.csv').name}'>data (CSV)</a></p>")
    parts.append("</body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts))
    return path
