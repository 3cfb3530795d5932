"""`tracefabric study`, `results` and `replicate`: thin compositions of `tracefabric.studies`."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import ConfigError

results = typer.Typer(help="A study's results: summary table, SQL (DuckDB), plots and HTML report.", no_args_is_help=True)

# `--ray` given without an address: a local Ray cluster (main() writes this for a bare --ray).
LOCAL_RAY = "local"
StudyDir = Annotated[Path, typer.Argument(help="A study folder written by `tracefabric study` (default runs/<name>).")]


def ray_argv(argv: list[str]) -> list[str]:
    """`--ray` takes an optional address: a bare `--ray` (last, or before another option or the
    spec path) becomes `--ray local`. An address has a colon or is `auto`."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--ray":
            nxt = out[i + 1] if i + 1 < len(out) else None
            if nxt is None or not (":" in nxt or nxt == "auto"):
                out.insert(i + 1, LOCAL_RAY)
            break
    return out


class StudyProgress:
    """A live bar: points done of all, points running, elapsed and ETA; errors printed as they come."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("running {task.fields[running]}"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), console=console)
        self.task = None
        self.running = 0

    def __enter__(self) -> "StudyProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()

    def __call__(self, kind: str, key: str, info: dict[str, Any]) -> None:
        if kind == "planned":
            self.task = self.bar.add_task("points", total=info["total"], completed=info["done"], running=0)
        elif kind == "synthesized":
            if "error" in info:
                self.bar.console.print(f"[red]workload {key} not synthesized: {info['error']}[/red]")
            else:
                self.bar.console.print(f"synthesized workload {key} ({info['seconds']:.1f} s, shared by its points)")
        elif kind == "started":
            self.running += 1
        elif kind == "finished":
            self.running -= 1
            self.bar.advance(self.task)
            if info["status"] != "ok":
                self.bar.console.print(f"[red]point {key} failed: {info['error']}[/red]")
        if self.task is not None:
            self.bar.update(self.task, running=self.running)


def register(app: typer.Typer, console: Any, err_console: Any, command_cls: Any) -> None:
    """Add `study`, `results ...` and `replicate` to the CLI."""

    @app.command("study", cls=command_cls)
    def study(
        spec: Annotated[Path, typer.Argument(help="Study spec YAML: defaults, axes, zip, exclude, fabrics, systems.")],
        jobs: Annotated[Optional[int], typer.Option(min=1, help="Processes (or local Ray CPUs); default every core.")] = None,
        ray: Annotated[Optional[str], typer.Option(help="Run each point as a Ray task: `--ray` starts a local cluster, `--ray ADDRESS` joins one.")] = None,
        out: Annotated[Optional[Path], typer.Option(help="Study folder (default runs/<spec name>).")] = None,
        retry_failed: Annotated[bool, typer.Option(help="Run points stored with an error again.")] = False,
        plot: Annotated[bool, typer.Option(help="Write the figures and report when done.")] = True,
    ) -> None:
        """Run every point of a study not yet stored; print the summary and write the headline figure."""
        from ..studies import StudyResults, run_study
        from ..studies.plots import plot_study

        t0 = time.perf_counter()
        with StudyProgress(err_console) as progress:
            run = run_study(spec, out, jobs=jobs, ray=ray is not None, ray_address=None if ray in (None, LOCAL_RAY) else ray,
                            retry_failed=retry_failed, on_event=progress)
        res = StudyResults(run.store.root)
        print_summary(console, res, f"{run.spec.name}: {len(run.points)} points ({run.ran} run, {run.skipped} already stored, "
                                    f"{len(run.failed)} failed) in {time.perf_counter() - t0:.1f} s")
        if plot and run.ran + run.skipped > len(run.failed):
            files = plot_study(res, run.store.root / "figures")
            console.print(f"wrote {files[0]} and {len(files) - 1} more figure file(s), report {run.store.root / 'figures' / 'report.html'}")
        console.print(f"results in {run.store.root} (tracefabric results show|query|plot {run.store.root})")
        if run.failed:
            raise typer.Exit(1)

    @results.command("show", cls=command_cls)
    def results_show(study_dir: StudyDir) -> None:
        """Summary per point over seeds: iteration time, exposed comm, CCT increase (mean ± 95 % interval)."""
        from ..studies import StudyResults

        print_summary(console, StudyResults(study_dir), str(study_dir))

    @results.command("query", cls=command_cls)
    def results_query(
        study_dir: StudyDir,
        sql: Annotated[str, typer.Argument(help="DuckDB SQL over the views runs, ranks, collectives, counters, flows, stages, timing.")],
        csv: Annotated[Optional[Path], typer.Option(help="Also write the result here as CSV.")] = None,
    ) -> None:
        """Run SQL over the study's Parquet store and print the result."""
        from ..studies import StudyResults

        df = StudyResults(study_dir).query(sql)
        if csv:
            df.to_csv(csv, index=False)
        print_frame(console, df, sql)

    @results.command("plot", cls=command_cls)
    def results_plot(study_dir: StudyDir,
                     out: Annotated[Optional[Path], typer.Option(help="Folder for PNGs, CSVs and report.html (default STUDY/figures).")] = None) -> None:
        """PNGs (with the CSV of each figure's data beside it) and an HTML report embedding them."""
        from ..studies import StudyResults
        from ..studies.plots import plot_study

        files = plot_study(StudyResults(study_dir), out or study_dir / "figures")
        for f in files:
            console.print(f"wrote {f}")

    @app.command("replicate", cls=command_cls)
    def replicate(
        name: Annotated[str, typer.Argument(help="A paper figure (`all` for every one); `tracefabric replicate list` lists them.")],
        scale: Annotated[str, typer.Option(help="quick (CI scale, seconds) or paper (the paper's setting).")] = "quick",
        jobs: Annotated[Optional[int], typer.Option(min=1, help="Processes; default every core.")] = None,
        out: Annotated[Path, typer.Option(help="Parent folder of each figure's study folder.")] = Path("runs/replicate"),
    ) -> None:
        """Regenerate a paper figure from its bundled study spec; print the paper's value beside ours."""
        from ..studies.replicate import FIGURES, replicate_figure

        if scale not in ("quick", "paper"):
            raise ConfigError(f"--scale {scale!r}: expected quick or paper", "scale")
        if name == "list":
            t = Table(title="paper figures")
            for col in ("name", "paper", "what", "status"):
                t.add_column(col)
            for fig in FIGURES.values():
                t.add_row(fig.name, fig.paper, fig.title, "runs" if fig.waits_for is None else f"waits for {fig.waits_for}")
            console.print(t)
            return
        names = list(FIGURES) if name == "all" else [name]
        for n in names:
            if n not in FIGURES:
                raise ConfigError(f"unknown figure `{n}`; expected one of: {', '.join(FIGURES)}, all, list", "name")
        for n in names:
            report = replicate_figure(n, scale, out, jobs=jobs)
            print_frame(console, report.table, f"{report.figure.paper} {report.figure.title} ({scale})")
            for line in report.notes:
                console.print(line)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:,.3f}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def print_frame(console: Any, df: Any, title: str) -> None:
    t = Table(title=title)
    for col in df.columns:
        t.add_column(str(col), justify="right")
    for row in df.itertuples(index=False):
        t.add_row(*(_fmt(v) for v in row))
    console.print(t)


def print_summary(console: Any, res: Any, title: str) -> None:
    """The summary table, with `±` intervals where there are several seeds."""
    s = res.summary()
    t = Table(title=title)
    keys = [c for c in s.columns if c not in ("seeds", "failed") and not c.endswith(("_ci95",))
            and c not in ("iteration_us", "exposed_comm_us", "cct_us", "cct_increase_pct")]
    metrics = [(c, u) for c, u in (("iteration_us", "iteration (ms)"), ("exposed_comm_us", "exposed comm (ms)"),
                                  ("cct_us", "CCT (us)"), ("cct_increase_pct", "CCT over bound (%)")) if c in s]
    for col in keys + ["seeds", "failed"]:
        t.add_column(col, justify="right")
    for _, label in metrics:
        t.add_column(label, justify="right")
    for _, row in s.iterrows():
        cells = [_fmt(row[c]) for c in keys] + [str(row["seeds"]), str(row["failed"])]
        for col, label in metrics:
            scale = 1e-3 if label.endswith("(ms)") else 1.0
            v, ci = row[col] * scale, row.get(f"{col}_ci95", math.nan) * scale
            cells.append("" if math.isnan(v) else f"{v:,.3f}" + ("" if math.isnan(ci) else f" ± {ci:,.3f}"))
        t.add_row(*cells)
    console.print(t)
