"""`tracefabric htsim`: write a traffic or a collective as htsim's connection matrix (with the
htsim_uec flags for the same fabric), and read htsim's per-flow output. Registered on the
`tracefabric` app by `cli.py`."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from .cli import (BufferBytes, LatencyNs, LinkGbps, Seed, Topology, _OneValueCommand, _common, _make_dir,
                  _prepare_frame_path, _write_frame, console)
from .errors import ConfigError, TracefabricError, not_a_file

htsim = typer.Typer(help="htsim interop: export a traffic or a collective as a connection matrix, parse htsim's output.",
                    no_args_is_help=True)


@htsim.command("export", cls=_OneValueCommand)
def htsim_export(
    out: Annotated[Path, typer.Option(help="Connection matrix to write (.cm).")],
    topology: Topology = "fat-tree:k=8",
    traffic: Annotated[Optional[str], typer.Option(help="A traffic as `net run` takes it (permutation:size=1MiB, file:PATH, ...).")] = None,
    collective: Annotated[Optional[str], typer.Option(help="ALGORITHM:KIND, e.g. ring:all_reduce; its step dependencies become triggers.")] = None,
    ranks: Annotated[Optional[int], typer.Option(help="Collective: ranks (hosts 0..ranks-1).")] = None,
    size: Annotated[Optional[str], typer.Option(help="Collective: bytes (the algorithms' convention: an all-gather's output), e.g. 1MiB.")] = None,
    scheme: Annotated[Optional[str], typer.Option(help="Scheme preset whose LB/CC the printed flags follow.")] = None,
    lb: Annotated[Optional[str], typer.Option(help="Load balancer (overrides the preset's).")] = None,
    cc: Annotated[Optional[str], typer.Option(help="Congestion control (overrides the preset's).")] = None,
    seed: Seed = 1,
    link_gbps: LinkGbps = 800.0,
    latency_ns: LatencyNs = 500.0,
    buffer: BufferBytes = "800KB",
) -> None:
    """Write flows as an htsim connection matrix and print the htsim_uec command for the same fabric."""
    from .network_backends.htsim.cm import format_cm
    from .network_backends.htsim.export import collective_matrix, traffic_matrix, uec_flags
    from .network_backends.packet import build_config, fabric_hosts
    from .specs import parse_size

    if (traffic is None) == (collective is None):
        raise ConfigError("give one of --traffic or --collective", "traffic")
    if out.suffix.lower() != ".cm":
        raise ConfigError(f"--out {out}: expected a connection-matrix file ending in .cm", "out")
    cfg = build_config(topology, traffic, scheme=scheme, lb=lb, cc=cc, seed=seed, **_common(link_gbps, latency_ns, buffer))
    if traffic is not None:
        if ranks is not None or size is not None:
            raise ConfigError("--ranks and --size describe a --collective, not a --traffic", "ranks")
        cm = traffic_matrix(cfg)
    else:
        algorithm, sep, kind = collective.partition(":")
        if not sep or ranks is None or size is None:
            raise ConfigError(f"--collective {collective!r}: expected ALGORITHM:KIND (ring:all_reduce) with --ranks and --size",
                              "collective")
        cm = collective_matrix(algorithm, kind, ranks, parse_size(size, "size"), nodes=fabric_hosts(cfg))
    _make_dir(out.parent)
    out.write_text(format_cm(cm))
    args, notes = uec_flags(cfg, str(out))
    console.print(f"wrote {len(cm.flows):,} flows and {len(cm.triggers):,} triggers on {cm.nodes} hosts to {out}")
    console.print("htsim_uec " + " ".join(shlex.quote(a) for a in args), soft_wrap=True)
    for note in notes:
        console.print(f"# {note}", soft_wrap=True)


@htsim.command("parse", cls=_OneValueCommand)
def htsim_parse(
    output: Annotated[Path, typer.Argument(help="A file holding what htsim printed.")],
    cm: Annotated[Optional[Path], typer.Option(help="The connection matrix of the run: sizes, starts and FCTs.")] = None,
    flows_out: Annotated[Optional[Path], typer.Option(help="Write the per-flow frame here (.csv or .parquet).")] = None,
) -> None:
    """Read htsim's per-flow completions into tracefabric's flow frame."""
    from .network_backends.htsim.cm import read_cm
    from .network_backends.htsim.output import parse_output

    if not output.is_file():
        raise TracefabricError(f"{output}: {not_a_file(output)}")
    _prepare_frame_path(flows_out, "--flows-out")
    frame = parse_output(output.read_text(errors="replace"), read_cm(cm) if cm else None, str(output))
    if flows_out:
        _write_frame(frame, flows_out)
    t = Table(title=f"{output}: {len(frame):,} flows finished")
    for col in ("flows", "last finish (us)", "max FCT (us)", "bytes"):
        t.add_column(col, justify="right")
    fct = frame["fct_ps"].max()
    t.add_row(f"{len(frame):,}", f"{frame['finish_ps'].max() / 1e6:,.3f}", "-" if fct != fct else f"{fct / 1e6:,.3f}",
              "-" if frame["bytes"].isna().any() else f"{int(frame['bytes'].sum()):,}")
    console.print(t)
