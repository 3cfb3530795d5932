"""The `tracefabric` command line: thin compositions of library calls."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperCommand

try:  # recent typer vendors its own click: its usage errors are these classes, not `click`'s
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # older typer (>= 0.12, as pyproject allows) runs on the click package
    import click.exceptions

    ClickException, UsageError = click.exceptions.ClickException, click.exceptions.UsageError
    # Click < 8.2 prints the help and exits 0 itself, raising nothing to catch here.
    NoArgsIsHelpError = getattr(click.exceptions, "NoArgsIsHelpError", ())

from .. import _core
from ..astra_configs import load_scheme_preset, scheme_presets
from ..errors import ConfigError, TracefabricError
from ..jsonio import not_a_file


class OneValueCommand(TyperCommand):
    """Refuses an option given twice (click would keep the last value without a word).
    Repeatable options (--param, --traffic of compare, --option) are exempt."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            seen = set()
            for param in order:
                if getattr(param, "multiple", True) or getattr(param, "count", False):
                    continue
                if param.name in seen:
                    given = _given_values(args, param)
                    raise UsageError(f"{param.opts[0]}: given twice ({', then '.join(given)}); give it once", ctx=ctx)
                seen.add(param.name)
        return super().parse_args(ctx, args)


def _given_values(args: list[str], param) -> list[str]:
    """What the user wrote for an option, occurrence by occurrence (`--x v`, `--x=v`, `--flag`)."""
    names = [*param.opts, *param.secondary_opts]
    found = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in names:
            found.append(arg if param.is_flag else repr(value) if eq else repr(args[i + 1]) if i + 1 < len(args) else "")
    return found


app = typer.Typer(help="tracefabric: compare load-balancing and congestion-control schemes for AI training fabrics.", no_args_is_help=True)
net = typer.Typer(help="Packet-level network runs: one scheme, or a comparison of several.", no_args_is_help=True)
app.add_typer(net, name="net")
trace = typer.Typer(help="Chakra execution traces: capture real PyTorch runs, convert, inspect, validate, synthesize.", no_args_is_help=True)
app.add_typer(trace, name="trace")
astra = typer.Typer(help="ASTRA-sim interop: export a run for a real ASTRA-sim, run one, parse its output.", no_args_is_help=True)
app.add_typer(astra, name="astra")
# Piped into a file or a CI log, rich would cut tables to 80 columns ("2002.…"): print them
# whole there, unless COLUMNS says otherwise.
_PIPE_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
console = Console(width=_PIPE_WIDTH)
err_console = Console(stderr=True)

Topology = Annotated[str, typer.Option(help="fat-tree:k=8 | leaf-spine:leaves=8,spines=4[,links_per_pair=1][,oversubscription=1 | ,hosts_per_leaf=H]")]
Seed = Annotated[int, typer.Option(help="Master seed: same inputs + seed give identical results.")]
LinkGbps = Annotated[float, typer.Option(help="Link rate in Gbps (every link).")]
LatencyNs = Annotated[float, typer.Option(help="Propagation latency per link, ns.")]
BufferBytes = Annotated[str, typer.Option(help="Output buffer per switch port, e.g. 800KB.")]


Failures = Annotated[Optional[str], typer.Option(help="Link failures: probability=P,detection_us=D,convergence_us=G or convergence_rtts=G in round trips across the fabric (unset G: never), or a JSON object with links: [{nodes: [a, b], down_at_us, up_at_us, rate_fraction}].")]


def fabric_settings(link_gbps: float, latency_ns: float, buffer: str) -> dict:
    """The engine's link and switch settings from the common options of `net` and `htsim`."""
    from ..specs import parse_size

    return {"link": {"rate_gbps": link_gbps, "latency_ns": latency_ns}, "switch": {"buffer_bytes": parse_size(buffer, "buffer")}}


class _LazyProgress(Progress):
    """A progress display that appears on the engine's first progress report, so bad
    input fails with a clean one-line error and short runs print nothing extra."""

    def __init__(self) -> None:
        super().__init__(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err_console)
        self._shown = False

    def __enter__(self) -> "_LazyProgress":
        return self

    def show(self) -> None:
        if not self._shown:
            self._shown = True
            self.start()

    def __exit__(self, *exc) -> None:
        if self._shown:
            self.stop()


def _progress() -> _LazyProgress:
    return _LazyProgress()


@net.command("run", cls=OneValueCommand)
def net_run(
    topology: Topology = "fat-tree:k=8",
    traffic: Annotated[str, typer.Option(help="permutation:size=1MiB[,inter_pod=true] | all-to-all:size=1MiB[,staggered=true][,shuffled=true] | incast:senders=N,size=S[,dst=0] | file:PATH (.csv/.json/.cm)")] = "permutation:size=1MiB",
    scheme: Annotated[Optional[str], typer.Option(help="Scheme preset from astra_configs/schemes (LB + CC + loss with paper parameters).")] = None,
    lb: Annotated[Optional[str], typer.Option(help="Load balancer (overrides the preset's).")] = None,
    cc: Annotated[Optional[str], typer.Option(help="Congestion control (overrides the preset's).")] = None,
    loss: Annotated[Optional[str], typer.Option(help="Loss recovery: erasure | sack | trim | gbn | rto.")] = None,
    qdisc: Annotated[Optional[str], typer.Option(help="Switch queue discipline: red (default) | pfc (lossless).")] = None,
    param: Annotated[Optional[list[str]], typer.Option(help="Scheme parameter FAMILY.NAME=VALUE (FAMILY lb, cc, loss or qdisc), e.g. loss.threshold=6; repeatable.")] = None,
    seed: Seed = 1,
    link_gbps: LinkGbps = 800.0,
    latency_ns: LatencyNs = 500.0,
    buffer: BufferBytes = "800KB",
    failures: Failures = None,
    flows_out: Annotated[Optional[Path], typer.Option(help="Write per-flow results here (.csv or .parquet).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Run one packet-level simulation and print CCT, its lower bound and per-stage queues."""
    from ..network_backends.packet import simulate

    prepare_frame_path(flows_out, "--flows-out")
    params = _parse_params(param or [])
    with _progress() as bar:
        task = bar.add_task("simulating", total=None)

        def progress(done: int, total: int) -> bool:
            bar.show()
            bar.update(task, completed=done, total=total)
            return True

        r = simulate(topology, traffic, progress=progress, scheme=scheme, lb=lb, cc=cc, loss=loss, qdisc=qdisc, seed=seed,
                     failures=failures,
                     **{f"{k}_params": v for k, v in params.items()}, **fabric_settings(link_gbps, latency_ns, buffer))
    if flows_out:
        write_frame(r.flows, flows_out)
    if as_json:  # every engine count (failures' rho_max and blackholed bytes, scheme counters), then the row's names
        print(json.dumps({**r.summary, **r.summary_row(), "stages": r.stages.to_dict(orient="records")}, indent=2))
        return
    t = Table(title=f"{r.config['scheme']['lb']} / {r.config['scheme']['cc']} / {r.config['scheme']['loss']} on {topology}, {traffic}")
    cols = ["CCT (us)", "lower bound (us)", "increase", "drops", "ECN marks", "flows"]
    row = [f"{r.cct_us:.3f}", f"{r.lower_bound_us:.3f}", f"{100 * r.cct_increase:.2f} %", str(r.summary["data_packets_dropped"]),
           str(r.summary["ecn_marks"]), str(len(r.flows))]
    if failures:  # the failure-aware bound (the lower bound above is the intact fabric's) and what the failures cost
        cols += ["rho_max", "blackholed frames", "reroutes"]
        row += [f"{r.summary['rho_max']:.4f}", str(r.summary["frames_blackholed"]), str(r.summary["reroutes"])]
    for col in cols:
        t.add_column(col, justify="right")
    t.add_row(*row)
    console.print(t)
    s = Table(title="per stage")
    for col in ("stage", "ports", "max queue (B)", "mean queue (B)", "utilization", "max link load", "drops", "ECN marks"):
        s.add_column(col, justify="right")
    for row in r.stages.itertuples():
        s.add_row(row.stage, str(row.ports), str(row.max_queue_bytes), f"{row.mean_queue_bytes:.0f}", f"{row.utilization:.3f}",
                  f"{row.max_link_load:.3f}", str(row.drops), str(row.ecn_marks))
    console.print(s)


@net.command("compare", cls=OneValueCommand)
def net_compare(
    topology: Topology = "fat-tree:k=8",
    traffic: Annotated[Optional[list[str]], typer.Option(help="Traffic matrix; repeat for one chart panel each.")] = None,
    schemes: Annotated[str, typer.Option(help="Comma-separated scheme presets, or 'all'.")] = "ecmp,host_spray,switch_rr,reps,switch_ar",
    seeds: Annotated[int, typer.Option(min=1, max=10_000, help="Seeds per scheme (1..N); bars show the mean, whiskers min and max.")] = 1,
    link_gbps: LinkGbps = 800.0,
    latency_ns: LatencyNs = 500.0,
    buffer: BufferBytes = "800KB",
    out: Annotated[Path, typer.Option(help="Output folder: runs.csv, summary.csv, compare.png.")] = Path("runs/compare"),
) -> None:
    """Compare schemes (OFAN paper Fig. 1): CCT increase over the lower bound, a table and a PNG chart."""
    from .compare import compare, plot, summarize

    traffics = traffic or ["all-to-all:size=1MiB", "permutation:size=1MiB"]
    names = scheme_presets() if schemes == "all" else [s.strip() for s in schemes.split(",")]
    if "" in names:  # `ecmp,,reps`: a name lost to a typo, not one to skip
        raise ConfigError(f"--schemes {schemes!r}: entry {names.index('') + 1} is empty (expected comma-separated scheme names)", "schemes")
    for name in names:
        load_scheme_preset(name)  # unknown names fail before any run
    with _progress() as bar:
        overall = bar.add_task("runs", total=len(traffics) * len(names) * seeds)
        current = bar.add_task("", total=None)

        def on_run(t: str, s: str, seed: int):
            bar.update(current, description=f"{s} | {t} | seed {seed}", completed=0, total=None)

            def progress(done: int, total: int) -> bool:
                bar.show()
                bar.update(current, completed=done, total=total)
                if done == total:
                    bar.advance(overall)
                return True

            return progress

        runs = compare(names, traffics, topology=topology, seeds=list(range(1, seeds + 1)), on_run=on_run,
                       before_runs=lambda: make_output_dir(out), **fabric_settings(link_gbps, latency_ns, buffer))
    summary = summarize(runs)
    runs.to_csv(out / "runs.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    png = plot(summary, out / "compare.png", title=f"{topology}, {link_gbps:g} Gbps, {latency_ns:g} ns links, buffer {buffer}")
    t = Table(title=f"CCT by scheme on {topology} (mean of {seeds} seed(s))")
    for col in ("traffic", "scheme", "CCT (us)", "lower bound (us)", "increase", "max queue (B)", "drops", "QPs", "pointers"):
        t.add_column(col, justify="right")
    for row in summary.itertuples():
        t.add_row(row.traffic, row.scheme, f"{row.cct_us:.2f}", f"{row.lower_bound_us:.2f}", f"{row.cct_increase_pct:.2f} %",
                  str(row.max_queue_bytes), f"{row.drops:.0f}", str(row.queue_pairs), str(row.pointers))
    console.print(t)
    console.print(f"wrote {out / 'runs.csv'}, {out / 'summary.csv'}, {png}")


@net.command("schemes", cls=OneValueCommand)
def net_schemes() -> None:
    """List scheme presets and the registered LB / CC / loss-recovery names."""
    from ..network_backends.packet import scheme_names

    t = Table(title="scheme presets (astra_configs/schemes)")
    for col in ("preset", "lb", "cc", "loss", "source"):
        t.add_column(col)
    for name in scheme_presets():
        p = load_scheme_preset(name)
        t.add_row(name, p["lb"], p["cc"], p["loss"], p.get("source", ""))
    console.print(t)
    for family, names in scheme_names().items():
        console.print(f"{family}: {', '.join(names)}")


@trace.command("synthesize", cls=OneValueCommand)
def trace_synthesize(
    model: Annotated[str, typer.Option(help="Zoo model (llama3-8b|70b|405b, gpt2-small..xl, mixtral-8x7b, deepseek-v3; tiny-llama, tiny-moe: the captured workloads), a config.json path or a Hugging Face model folder holding one.")] = "llama3-8b",
    world: Annotated[int, typer.Option(help="Number of ranks (GPUs).")] = 1024,
    parallel: Annotated[str, typer.Option(help="fsdp (ZeRO-3, per-layer units) or dp (all-reduce per unit).")] = "fsdp",
    gpus_per_server: Annotated[int, typer.Option(help="GPUs per server (NVLink domain); 1 = flat rings.")] = 8,
    precision: Annotated[str, typer.Option(help="fp8, bf16, fp16 or fp32.")] = "bf16",
    gpu: Annotated[str, typer.Option(help="Roofline for compute: h100, h200 or b200.")] = "h100",
    seq: Annotated[int, typer.Option(help="Sequence length.")] = 4096,
    micro_batch: Annotated[int, typer.Option(help="Sequences per rank per step.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the random server placement and of EP routing skew.")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree (consecutive ranks: inside a server up to --gpus-per-server, across servers past it).")] = 1,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree inside the data-parallel dimension (MoE models).")] = 1,
    imbalance: Annotated[float, typer.Option(help="EP routing skew: per-peer token shares vary by up to +-this fraction.")] = 0.0,
    pp: Annotated[int, typer.Option(help="Pipeline stages (1F1B schedule; stages are the slowest rank index).")] = 1,
    microbatches: Annotated[int, typer.Option(help="Microbatches per iteration with --pp > 1.")] = 1,
    root_unit: Annotated[bool, typer.Option(help="FSDP2-style root unit: embedding, final norm and head gathered once, not resharded after forward.")] = False,
    routing: Annotated[Optional[Path], typer.Option(help="EP routing: a JSON ep x ep matrix, tokens member i of an EP group sends to member j (every MoE layer).")] = None,
    durations_from: Annotated[Optional[Path], typer.Option(help="Folder of a captured trace of the same model: compute durations measured there, not the roofline.")] = None,
    out: Annotated[Path, typer.Option(help="Output folder: <model>.<rank>.et, comm_groups.json, placement.json, summary.json.")] = Path("runs/traces"),
) -> None:
    """Write one Chakra ET per rank for a model and parallelism plan, and print its summary."""
    from ..traces.measured import measured_durations
    from ..traces.models import get_model
    from ..traces.synthesis import Plan, read_routing, synthesize, write

    make_output_dir(out)
    rows = read_routing(routing) if routing else None
    try:
        s = synthesize(get_model(model), Plan(parallel, world, gpus_per_server, precision, gpu, seq, micro_batch, seed, tp, ep,
                                              imbalance, pp, microbatches, root_unit, rows))
    except ConfigError as e:
        if routing and e.field == "routing":  # the matrix's shape or sums: name its file
            raise ConfigError(f"{routing}: {e}", "routing") from None
        raise
    if durations_from is not None:
        s, report = measured_durations(s, durations_from)
        total = sum(r["compute_us"] for r in report["ranks"]) / len(report["ranks"])
        console.print(f"compute durations measured in {durations_from}: {total / 1e3:,.1f} ms per rank on average")
    summary = write(s, out)
    t = Table(title=f"{s.model.name}: {parallel} on {world} ranks ({summary['params'] / 1e9:.2f} B parameters, {precision})")
    for col in ("collective", "buffer bytes", "comm_size (per rank)", "per iteration"):
        t.add_column(col, justify="right")
    for row in summary["collectives_by_size"]:
        t.add_row(row["type"], f"{row['bytes']:,}", f"{row['comm_size']:,}", str(row["count"]))
    console.print(t)
    sent = summary["bytes_sent_per_rank"]
    console.print("bytes sent per rank per iteration: " + ", ".join(f"{k} {v / 1e9:.3f} GB" for k, v in sent.items()))
    qps = summary["queue_pairs_per_rank"]
    console.print(f"queue pairs per rank (peers it sends to): {qps['scale_up']} inside its server, {qps['scale_out']} across servers")
    if "inter_server_ring" in summary:
        ring = summary["inter_server_ring"]
        console.print(f"inter-server rings: {ring['rings']} x {ring['members']} servers; backward ring flow per layer "
                      f"{ring['backward_flow_bytes']:,.0f} B = {ring['backward_flow_packets']:.0f} packets of 4 KiB")
    console.print(f"wrote {world} traces to {out}")


@trace.command("capture", cls=OneValueCommand)
def trace_capture(
    out: Annotated[Path, typer.Option(help="Capture folder: capture.json, raw/rank<r>.{host,kineto}.json, records/, et/.")] = Path("runs/capture"),
    workload: Annotated[Optional[str], typer.Option(help="Built-in workload: fsdp2-llama (default), fsdp1-llama or moe.")] = None,
    script: Annotated[Optional[str], typer.Option(help="Your own step instead: FILE.py:FUNCTION or MODULE:FUNCTION; FUNCTION(ctx) returns the step callable.")] = None,
    ranks: Annotated[int, typer.Option(help="Number of local ranks (processes).")] = 2,
    backend: Annotated[str, typer.Option(help="gloo (CPU) or nccl (one GPU per rank).")] = "gloo",
    warmup: Annotated[int, typer.Option(help="Steps run before recording (not in the trace).")] = 1,
    steps: Annotated[int, typer.Option(help="Steps recorded.")] = 1,
    convert: Annotated[bool, typer.Option(help="Also convert to Chakra ETs (out/et/).")] = True,
    option: Annotated[Optional[list[str]], typer.Option(help="KEY=VALUE passed to the workload's build function (repeatable), e.g. ep=3 for moe.")] = None,
    collective_timeout: Annotated[float, typer.Option(help="Seconds a rank waits in one collective or send/recv for the other ranks before the capture fails (the ranks' steps do not match).")] = 300.0,
) -> None:
    """Profile training steps on every rank (ExecutionTraceObserver + Kineto) and convert them to Chakra ETs."""
    from ..traces.capture import capture, require_torch

    require_torch()
    from ..traces.workloads import get_workload

    if script and workload:  # one would be ignored without a word
        raise ConfigError(f"--script {script!r} and --workload {workload!r}: give one (a script replaces the built-in workload)", "script")
    options, written = {}, {}
    for item in option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option must be KEY=VALUE (got {item!r})", "option")
        if key in options:  # not silently the last one
            raise ConfigError(f"--option {key}: given twice ({written[key]!r}, then {value!r}); give it once", "option")
        written[key] = value
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    build = script if script else get_workload(workload or "fsdp2-llama")
    folder = capture(build, out, ranks, backend, warmup, steps, collective_timeout=collective_timeout, **options)
    console.print(f"captured {ranks} ranks into {folder}")
    if convert:
        _convert_and_report(folder)


@trace.command("convert", cls=OneValueCommand)
def trace_convert(
    capture_dir: Annotated[Path, typer.Argument(help="A folder written by `trace capture`.")],
    out: Annotated[Optional[Path], typer.Option(help="Where linked/, chakra/ and et/ go (default: the capture folder).")] = None,
) -> None:
    """Link and convert with Chakra's tools, then make collectives COMM nodes with sizes, groups and completion edges."""
    _convert_and_report(capture_dir, out)


def _convert_and_report(capture_dir: Path, out: Optional[Path] = None) -> None:
    from ..traces import validate as v
    from ..traces.convert import convert

    et = convert(capture_dir, out)
    traces, groups = v.load(et)
    found = v.problems(traces, groups)
    console.print(f"wrote {len(traces)} Chakra ETs to {et}: " + ("valid" if not found else f"{len(found)} problem(s):"))
    for p in found:
        console.print(f"[red]{p}[/red]")
    if found:  # a script chaining capture -> run stops here, as after `trace validate`
        raise typer.Exit(1)


@trace.command("inspect", cls=OneValueCommand)
def trace_inspect(
    et: Annotated[Path, typer.Argument(help="Folder of <prefix>.<rank>.et files, a prefix (dir/trace) or one of its files (dir/trace.0.et).")],
    ranks: Annotated[int, typer.Option(min=1, help="Show at most this many ranks.")] = 8,
) -> None:
    """Node counts by type, collectives per group in order with sizes, and each rank's critical path."""
    from ..traces import validate as v

    traces, groups = v.load(et)
    t = Table(title=f"{len(traces)} ranks in {et}")
    for col in ("rank", "nodes", "COMP", "COMM", "compute µs", "critical path µs"):
        t.add_column(col, justify="right")
    rows = v.inspect(traces)
    for row in rows[:ranks]:
        n = row["nodes"]
        comm = sum(k for name, k in n.items() if name.startswith("COMM"))
        t.add_row(str(row["rank"]), str(sum(n.values())), str(n.get("COMP_NODE", 0)), str(comm),
                  f"{row['compute_us']:,}",
                  "cycle (see trace validate)" if row["critical_path_us"] is None else f"{row['critical_path_us']:,}")
    console.print(t)
    for row in rows[:ranks]:
        for g, seq in row["collectives"].items():
            members = groups.get(g)
            console.print(f"rank {row['rank']} group {g}{' ' + str(members) if members else ''}: " + ", ".join(seq))


@trace.command("rescale", cls=OneValueCommand)
def trace_rescale(
    et: Annotated[Path, typer.Argument(help="Folder of a captured (converted) trace: trace.<r>.et + comm_groups.json.")],
    ranks: Annotated[int, typer.Option(help="New number of ranks.")],
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("runs/rescaled"),
) -> None:
    """Rescale a data-parallel / FSDP / expert-parallel trace from N to M ranks (groups and sizes recomputed; refuses what would not be faithful)."""
    from ..traces.rescale import rescale

    r = rescale(et, ranks, out)
    console.print(f"rescaled {r['from_ranks']} -> {r['to_ranks']} ranks into {out}; "
                  f"{len(r['resized_on_rank0'])} collective size(s) changed by padding")


@trace.command("validate", cls=OneValueCommand)
def trace_validate(
    et: Annotated[Path, typer.Argument(help="Folder of <prefix>.<rank>.et files, a prefix (dir/trace) or one of its files (dir/trace.0.et).")],
) -> None:
    """Check schema version, dependencies (missing, self, cycles) and that every group's ranks issue the same collectives."""
    from ..traces import validate as v

    traces, groups = v.load(et)
    found = v.problems(traces, groups)
    for p in found:
        console.print(f"[red]{p}[/red]")
    if found:
        raise typer.Exit(1)
    console.print(f"{len(traces)} ranks valid: schema {traces[0].meta.get('version')}, acyclic, collectives match across every group, no deadlock")


Backend = Annotated[str, typer.Option(help=" | ".join(_core.backend_names()))]


@app.command("run", cls=OneValueCommand)
def run_iteration(
    workload: Annotated[Path, typer.Option(help="ET prefix (dir/name for dir/name.<rank>.et), one of its files (dir/name.0.et) or a directory of ETs.")],
    system: Annotated[Path, typer.Option(help="ASTRA-sim system JSON.")],
    network: Annotated[Path, typer.Option(help="ASTRA-sim analytical network YAML, or a packet-fabric YAML (topology: {kind: fat_tree, k: 8}, link, switch, packet).")],
    backend: Backend = "analytical:astra-unaware",
    memory: Annotated[Optional[Path], typer.Option(help="ASTRA-sim remote memory JSON (default NO_MEMORY_EXPANSION).")] = None,
    comm_groups: Annotated[Optional[Path], typer.Option(help="ASTRA-sim comm-group JSON (default: comm_groups.json beside the ETs).")] = None,
    scheme: Annotated[Optional[str], typer.Option(help="Packet backend: scheme preset (LB + CC + loss).")] = None,
    lb: Annotated[Optional[str], typer.Option(help="Packet backend: load balancer.")] = None,
    cc: Annotated[Optional[str], typer.Option(help="Packet backend: congestion control.")] = None,
    loss: Annotated[Optional[str], typer.Option(help="Packet backend: loss recovery.")] = None,
    placement: Annotated[Optional[str], typer.Option(help="Packet fabrics: rank -> GPU slot: packed, random[:SEED] or a placement.json (default: the workload's placement.json, else packed).")] = None,
    qdisc: Annotated[Optional[str], typer.Option(help="Packet backend: switch queue discipline (pfc: lossless).")] = None,
    param: Annotated[Optional[list[str]], typer.Option(help="Packet backend: scheme parameter FAMILY.NAME=VALUE (FAMILY lb, cc, loss or qdisc), e.g. lb.buffer=8; repeatable.")] = None,
    seed: Annotated[Optional[int], typer.Option(min=0, help="Packet fabrics: the run's seed (default: the network file's `seed`, else 0).")] = None,
    reuse: Annotated[str, typer.Option(help="Packet backend: replay repeated busy periods: exact (bit-identical to simulating them), fast (approximate, measured error) or off.")] = "exact",
    out: Annotated[Optional[Path], typer.Option(help="Write ranks.parquet and collectives.parquet here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print per-rank results as JSON.")] = False,
) -> None:
    """Simulate one iteration of a workload: per-rank wall, compute, comm, exposed comm; per-collective CCT."""
    from ..collectives.iteration import simulate

    params = {f"{k}_params": v for k, v in _parse_params(param or []).items()}
    if out:
        make_output_dir(out)
    with err_console.status(f"simulating on {backend}"):
        r = simulate(workload, system, network, backend=backend, memory=memory, comm_groups=comm_groups,
                     placement=placement, reuse=reuse, seed=seed, scheme=scheme, lb=lb, cc=cc, loss=loss, qdisc=qdisc, **params)
    if out:
        r.to_parquet(out)
    if as_json:
        print(json.dumps({"summary": r.summary_row(), "placement": r.placement, "reuse": r.reuse,
                          "ranks": r.ranks.to_dict(orient="records")}, indent=2))
        return
    mode = ""
    if r.reuse:
        n = r.network_counters
        mode = f", reuse: {r.reuse} ({n.get('reuse_replayed', 0)} of {n.get('reuse_periods', 0)} busy periods replayed)"
    t = Table(title=f"{workload} on {backend}: iteration {r.iteration_ns / 1e3:.3f} us (placement: {r.placement}{mode})")
    for col in ("rank", "wall (ns)", "compute (ns)", "comm (ns)", "exposed comm (ns)", "overlap (ns)"):
        t.add_column(col, justify="right")
    rows = r.ranks.itertuples()
    for row in list(rows)[:16]:
        t.add_row(str(row.rank), f"{row.wall_ns:,.0f}", f"{row.compute_ns:,.0f}", f"{row.comm_ns:,.0f}", f"{row.exposed_comm_ns:,.0f}", f"{row.overlap_ns:,.0f}")
    if len(r.ranks) > 16:
        t.add_row("...", "", "", "", "", "")
    console.print(t)
    c = Table(title=f"{len(r.collectives)} collectives ({r.flows:,} flows)")
    for col in ("group", "kind", "bytes", "algorithm", "chunks", "start (ns)", "CCT (ns)"):
        c.add_column(col, justify="right")
    for row in r.collectives.head(20).itertuples():
        c.add_row(row.group_name, row.kind, f"{row.bytes:,}", row.algorithm, str(row.chunks), f"{row.start_ns:,.0f}", f"{row.cct_ns:,.0f}")
    console.print(c)


@astra.command("export", cls=OneValueCommand)
def astra_export(
    workload: Annotated[Path, typer.Option(help="ET prefix or directory.")],
    system: Annotated[Path, typer.Option(help="ASTRA-sim system JSON.")],
    network: Annotated[Path, typer.Option(help="ASTRA-sim analytical network YAML.")],
    out: Annotated[Path, typer.Option(help="Directory to write.")],
    memory: Annotated[Optional[Path], typer.Option(help="Remote memory JSON (default NO_MEMORY_EXPANSION).")] = None,
    comm_groups: Annotated[Optional[Path], typer.Option(help="Comm-group JSON (default: comm_groups.json beside the ETs).")] = None,
) -> None:
    """Write a directory a real ASTRA-sim 2.x analytical binary runs as is (ETs, configs, run.sh)."""
    from ..astra_configs.formats import AstraNetwork, read_memory, read_network, read_system
    from ..collectives.workload import read_workload
    from ..interop.astra_sim import export

    net = read_network(network)
    if not isinstance(net, AstraNetwork):
        raise TracefabricError(f"{network}: ASTRA-sim's analytical backends need topology/npus_count/bandwidth/latency lists, not a packet fabric")
    w = read_workload(workload, comm_groups)
    files = export(w, read_system(system), net, read_memory(memory), out)
    console.print(f"wrote {w.ranks} ETs and configs to {out}; run it with: {files['run']} PATH/TO/AstraSim_Analytical_Congestion_Unaware")


@astra.command("run", cls=OneValueCommand)
def astra_run(
    export_dir: Annotated[Path, typer.Argument(help="A directory written by `tracefabric astra export`.")],
    binary: Annotated[Optional[Path], typer.Option(help="ASTRA-sim analytical binary (AstraSim_Analytical_Congestion_Unaware or _Aware).")] = None,
) -> None:
    """Run a real ASTRA-sim on an export and print its per-rank results."""
    from ..interop.astra_sim import run

    with err_console.status("running ASTRA-sim"):
        df = run(binary, export_dir)
    _print_astra(df, f"ASTRA-sim ({binary})")


@astra.command("parse", cls=OneValueCommand)
def astra_parse(output: Annotated[Path, typer.Argument(help="A file holding what ASTRA-sim printed.")]) -> None:
    """Parse ASTRA-sim's printed results (sys[r] finished, ... cycles) into a table."""
    from ..interop.astra_sim import parse_output

    if not output.is_file():
        raise TracefabricError(f"{output}: {not_a_file(output)}")
    # Not UTF-8 (a binary file): the parser then names it as text ASTRA-sim did not print.
    _print_astra(parse_output(output.read_text(errors="replace"), str(output)), str(output))


def _print_astra(df, title: str) -> None:
    t = Table(title=title)
    for col in df.columns:
        t.add_column(col, justify="right")
    for row in df.itertuples(index=False):
        t.add_row(*(f"{v:,.0f}" if isinstance(v, float) else str(v) for v in row))
    console.print(t)


def _parse_params(items: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in items:
        key, eq, value = item.partition("=")
        family, dot, name = key.partition(".")
        if not eq or not dot or family not in ("lb", "cc", "loss", "qdisc"):
            raise typer.BadParameter(f"expected FAMILY.NAME=VALUE with FAMILY one of lb, cc, loss, qdisc; got {item!r}",
                                     param_hint="--param")
        if name in out.get(family, {}):
            raise typer.BadParameter(f"{key} is given twice", param_hint="--param")
        try:
            out.setdefault(family, {})[name] = json.loads(value)
        except json.JSONDecodeError:
            out.setdefault(family, {})[name] = value
    return out


FRAME_SUFFIXES = (".csv", ".parquet")


def prepare_frame_path(path: Optional[Path], option: str) -> None:
    """Before any simulation runs: refuse an output file whose format we would have to guess,
    and create its folder (so a path that cannot be written fails now, not after the run)."""
    if path is None:
        return
    if path.suffix.lower() not in FRAME_SUFFIXES:
        raise typer.BadParameter(f"{path}: expected a file ending in {' or '.join(FRAME_SUFFIXES)}", param_hint=option)
    if path.is_dir():
        raise typer.BadParameter(f"{path}: is a folder; give a file name", param_hint=option)
    make_output_dir(path.parent)


def make_output_dir(path: Path) -> Path:
    """Create an output folder up front and check it takes files, so a bad path fails before
    the runs, not after (an existing folder may be read-only)."""
    path.mkdir(parents=True, exist_ok=True)
    probe = path / f".tracefabric-write-check-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError as e:  # name the user's folder, not our probe file
        raise OSError(e.errno, f"cannot write files in this folder ({e.strerror})", str(path)) from None
    return path


def write_frame(df, path: Path) -> None:
    make_output_dir(path.parent)
    if path.suffix.lower() == ".parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    err_console.print(f"wrote {path} ({len(df)} rows)")


def _empty_argument(argv: list[str]) -> str | None:
    """The option given an empty value, if any: a path option reads '' as the current folder
    (`--out "$DIR"` with DIR unset would write there), and no option here means anything by ''."""
    for i, arg in enumerate(argv):
        if arg == "":
            prev = argv[i - 1] if i else ""
            return prev if prev.startswith("-") and "=" not in prev else f"argument {i + 1}"
        if arg.startswith("--") and arg.endswith("=") and arg.count("=") == 1:  # not `--option=KEY=`
            return arg[:-1]
    return None


def main() -> None:
    """Entry point: readable one-line errors instead of tracebacks for bad input."""
    sys.argv[1:] = ray_argv(sys.argv[1:])
    if (empty := _empty_argument(sys.argv[1:])) is not None:
        print(f"error: {empty}: empty value (an unset shell variable?)", file=sys.stderr)
        sys.exit(2)
    try:
        # Not standalone: click's own usage errors come here too, to be printed as one line
        # rather than a usage line, a hint and a boxed, wrapped message.
        code = app(standalone_mode=False, prog_name="tracefabric")
    except TracefabricError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # a path that cannot be read, created or written (a file in the way, no permission)
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    except NoArgsIsHelpError:  # the help is already printed
        sys.exit(2)
    except ClickException as e:
        print(f"error: {_usage_message(e)}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


# Registered last: its module takes the option types and helpers above.
from .cli_htsim import htsim  # noqa: E402
from .cli_study import ray_argv, register, results  # noqa: E402

app.add_typer(htsim, name="htsim")
app.add_typer(results, name="results")
register(app, console, err_console, OneValueCommand)


def _usage_message(e: ClickException) -> str:
    """Click's message, with the value the user gave where it does not name it (typer's type
    checks say `Input should be a valid integer` without the input), and the help to read."""
    msg = " ".join(e.format_message().split())
    param, ctx = getattr(e, "param", None), getattr(e, "ctx", None)
    if param is not None and getattr(param, "opts", None) and not getattr(param, "is_flag", False):
        given = _given_values(sys.argv[1:], param)
        if given and given[-1] and given[-1].strip("'") not in msg:
            msg = f"{msg} (got {given[-1]})"
    if ctx is not None:
        msg = f"{msg.rstrip('.')}; see `{ctx.command_path} --help`"
    return msg
