"""The ASTRA-sim adapter: write a tracefabric run as a directory a real ASTRA-sim 2.x
analytical binary runs as is, run such a binary, and parse what it prints.

Exported ETs carry exactly the attribute types ASTRA-sim's (strict) Chakra feeder
expects (comm_src/dst/tag as int32, tensor_size as uint64, ...), and communicator
groups get the positive integer ids ASTRA-sim's comm-group JSON needs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd

from ..astra_configs.formats import AstraNetwork, RemoteMemory, SystemConfig, write_network, write_system
from ..collectives.workload import Workload, check
from ..errors import ConfigError, TracefabricError
from ..specs import missing_ranks, shown
from ..traces.chakra_io import COMM_TYPES, framed, comm_kind, int_value, read_pb_trace
from ..traces.validate import ValidationError, deadlock_problems
from chakra.schema.protobuf import et_def_pb2 as pb

# One line: the CLI's errors are one line each.
HOW_TO_GET_ASTRA_SIM = (
    "ASTRA-sim is not bundled with tracefabric; build its analytical binaries (git clone --recurse-submodules "
    "https://github.com/astra-sim/astra-sim.git && cd astra-sim && ./build/astra_analytical/build.sh), "
    "then pass --binary astra-sim/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware "
    "(or ..._Congestion_Aware)"
)

# Attribute -> the protobuf field ASTRA-sim's feeder reads it from.
ASTRA_ATTR_FIELDS = {"is_cpu_op": "bool_val", "num_ops": "int64_val", "comm_type": "int64_val", "comm_size": "int64_val",
                     "tensor_size": "uint64_val", "comm_src": "int32_val", "comm_dst": "int32_val", "comm_tag": "int32_val",
                     "comm_priority": "int32_val", "pg_name": "string_val", "tensor_loc": "uint32_val"}


class AstraSimError(TracefabricError, RuntimeError):
    """A real ASTRA-sim binary failed or printed something tracefabric cannot read."""


def _scalar(a: pb.AttributeProto) -> Any:
    kind = a.WhichOneof("value")
    return None if kind is None or kind.endswith("_list") else getattr(a, kind)


# protobuf field -> the integers it holds, as an error message names them.
_INT_RANGES = {"int64_val": (-2**63, 2**63 - 1, "-2^63..2^63-1"), "uint64_val": (0, 2**64 - 1, "0..2^64-1"),
               "int32_val": (-2**31, 2**31 - 1, "-2^31..2^31-1"), "uint32_val": (0, 2**32 - 1, "0..2^32-1")}


def _astra_value(a: pb.AttributeProto, field: str, where: str) -> Any:
    """Attribute `a`'s value as `field` holds it, or a ConfigError naming `where` and the
    attribute: protobuf's own error ("Value out of range: -5") named neither."""
    value = _scalar(a)
    if value is None:
        raise ConfigError(f"{where}: attribute {a.name!r} is a list, expected one value", a.name)
    if a.name == "comm_type":  # `run` takes its name too ("ALL_REDUCE"); ASTRA-sim reads the number
        kind = comm_kind(value)
        if kind is None:
            raise ConfigError(f"{where}: attribute 'comm_type' = {shown(value)}: expected a Chakra CollectiveCommType "
                              f"name or number ({', '.join(COMM_TYPES)})", "comm_type")
        return COMM_TYPES[kind]
    if field == "bool_val":
        if not (isinstance(value, bool) or type(value) is int and value in (0, 1)):
            raise ConfigError(f"{where}: attribute {a.name!r} = {shown(value)}: expected a bool (true, false, 1 or 0)", a.name)
        return bool(value)
    if field in _INT_RANGES:
        n = int_value(value, a.name, where)
        low, high, text = _INT_RANGES[field]
        if not low <= n <= high:
            raise ConfigError(f"{where}: attribute {a.name!r} = {shown(n)}: expected an integer in {text} "
                              f"(ASTRA-sim reads it as {field[:-4]})", a.name)
        return n
    return str(value)


def _astra_node(m: pb.Node, group_ids: dict[str, str], path: Path) -> pb.Node:
    out = pb.Node()
    out.CopyFrom(m)
    del out.attr[:]
    where = f"{path}: node {m.id} ({m.name!r})"
    for a in m.attr:
        field = ASTRA_ATTR_FIELDS.get(a.name)
        if field is None:
            out.attr.append(a)
            continue
        if a.name == "pg_name":
            if _scalar(a) is None:
                raise ConfigError(f"{where}: attribute 'pg_name' is a list, expected one group name", "pg_name")
            value = group_ids.get(str(_scalar(a)), "")
            if not value:
                continue  # the world group: ASTRA-sim's default
        else:
            value = _astra_value(a, field, where)
        b = pb.AttributeProto(name=a.name)
        setattr(b, field, value)
        out.attr.append(b)
    return out


def export(workload: Workload, system: SystemConfig, network: AstraNetwork, memory: RemoteMemory,
           out: str | Path, prefix: str = "workload") -> dict[str, Path]:
    """Write ETs, system JSON, network YAML, memory JSON, comm-group JSON and run.sh."""
    out = Path(out)
    folders = {Path(t.path).resolve().parent for t in workload.traces}
    if out.resolve() in folders or (out / "workload").resolve() in folders:
        # Its comm_groups.json (which `run` reads beside the ETs) or the ETs themselves would be replaced.
        raise ConfigError(f"--out {out}: holds the input ETs, whose files the export would replace; "
                          "expected a new folder", "out")
    if network.npus != workload.ranks:
        raise ConfigError(f"{network.path}: the network has {network.npus} NPUs but the workload has {workload.ranks} ranks", "npus_count")
    # What `run` refuses, ASTRA-sim would too (or fail less clearly): check before writing.
    check(workload, system, memory, list(network.npus_count))
    if deadlocks := deadlock_problems(workload.traces, workload.groups):  # `run` finds these only when running
        raise ValidationError(deadlocks)
    # ASTRA-sim: group ids are positive integers; a group equal to the world is its default.
    world = list(range(workload.ranks))
    group_ids: dict[str, str] = {}
    astra_groups: dict[str, list[int]] = {}
    for name in sorted(workload.groups):
        if workload.groups[name] == world:
            continue
        group_ids[name] = str(len(astra_groups) + 1)
        astra_groups[group_ids[name]] = workload.groups[name]
    # Every ET converted (and so checked) before the first file is written: a refused value
    # leaves no half-written folder that ASTRA-sim would run.
    ets = {}
    for t in workload.traces:
        meta, nodes = read_pb_trace(t.path)
        if not meta.version:
            meta.version = "0.0.4"
        ets[f"{prefix}.{t.rank}.et"] = framed(meta) + b"".join(framed(_astra_node(m, group_ids, t.path)) for m in nodes)
    (out / "workload").mkdir(parents=True, exist_ok=True)
    for name, data in ets.items():
        (out / "workload" / name).write_bytes(data)
    files = {"system": out / "system.json", "network": out / "network.yml", "memory": out / "memory.json",
             "comm_groups": out / "comm_groups.json", "run": out / "run.sh"}
    write_system(system, files["system"])
    write_network(network, files["network"])
    files["memory"].write_text(json.dumps(memory.raw, indent=4) + "\n")
    files["comm_groups"].write_text(json.dumps(astra_groups, indent=4) + "\n")
    (out / "workload" / "comm_groups.json").write_text(json.dumps(astra_groups) + "\n")
    files["run"].write_text(
        "#!/bin/sh\n# Run this export with a real ASTRA-sim 2.x analytical binary:\n"
        "#   ./run.sh path/to/AstraSim_Analytical_Congestion_Unaware\n"
        'set -e\ncd "$(dirname "$0")"\n"${1:?usage: ./run.sh ASTRA_SIM_BINARY}" '
        + " ".join(shlex.quote(a) for a in command_args(prefix)) + "\n"
    )
    files["run"].chmod(0o755)
    files["workload"] = out / "workload" / prefix
    return files


def command_args(prefix: str = "workload") -> list[str]:
    """ASTRA-sim's flags for an export directory (paths relative to it)."""
    return [f"--workload-configuration=workload/{prefix}", "--system-configuration=system.json",
            "--remote-memory-configuration=memory.json", "--network-configuration=network.yml",
            "--comm-group-configuration=comm_groups.json"]


_PREFIX = re.compile(r"^(?:\[[^\]]*\] \[[^\]]*\] \[\w+\] )?")
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles(?:, exposed communication (\d+) cycles)?")
_STAT = re.compile(r"sys\[(\d+)\], ([A-Za-z -]+?)(?: time)?: (\d+(?:\.\d+)?)\s*$")


def _number(digits: str, source: str, line: int) -> int:
    if len(digits) > 30:  # past any rank or cycle count; int() refuses past 4300 digits anyway
        raise AstraSimError(f"{source}: line {line}: a number of {len(digits)} digits ({digits[:6]}...); "
                            "expected ASTRA-sim's rank numbers and cycle counts")
    return int(digits)


def parse_output(text: str, source: str = "ASTRA-sim output") -> pd.DataFrame:
    """Per-rank results from what ASTRA-sim printed: `sys[r] finished, T cycles, exposed
    communication E cycles` and the statistics lines (Wall/Comm/GPU/CPU time, overlap).
    Times in ns (1 cycle = 1 ns)."""
    rows: dict[int, dict[str, Any]] = {}
    given: dict[tuple[int, str], int] = {}  # (rank, column) -> the line that gave it
    for line_no, line in enumerate(text.splitlines(), start=1):
        msg = _PREFIX.sub("", line.strip(), count=1)
        m = _FINISHED.search(msg)
        if m:
            rank, what = _number(m.group(1), source, line_no), "`finished`"
            values: dict[str, Any] = {"finished_ns": _number(m.group(2), source, line_no)}
            if m.group(3) is not None:
                values["exposed_comm_ns"] = _number(m.group(3), source, line_no)
        elif m := _STAT.search(msg):
            rank, what = _number(m.group(1), source, line_no), f"`{msg[m.start(2):m.start(3)].rstrip(': ')}`"
            key = m.group(2).strip().lower().replace(" ", "_").replace("-", "_")
            key = {"total_compute_communication_overlap": "overlap"}.get(key, key)
            values = {f"{key}_ns": float(m.group(3))}
        else:
            continue
        for col in values:
            # One report per rank and column: two runs' output in one file (or sys[0] and sys[00]) is refused.
            if (rank, col) in given:
                raise AstraSimError(f"{source}: line {line_no}: sys[{m.group(1)}] reports {what} again (first on line "
                                    f"{given[rank, col]}); expected one report per rank")
            given[rank, col] = line_no
        rows.setdefault(rank, {"rank": rank}).update(values)
    if not rows:
        raise AstraSimError(f"{source}: no `sys[r] finished, T cycles` lines found")
    if missing := missing_ranks(rows):
        raise AstraSimError(f"{source}: ranks {missing} never reported `finished`")
    df = pd.DataFrame([rows[r] for r in sorted(rows)])
    if "finished_ns" not in df or df["finished_ns"].isna().any():
        bad = df.loc[df.get("finished_ns", pd.Series([None] * len(df))).isna(), "rank"].tolist()
        raise AstraSimError(f"{source}: ranks {bad} have statistics but no `finished` line")
    return df


def run(binary: str | Path | None, export_dir: str | Path, timeout_s: float = 3600) -> pd.DataFrame:
    """Run a real ASTRA-sim binary on an export directory and parse its output."""
    if binary is None:
        raise AstraSimError(f"no --binary given: {HOW_TO_GET_ASTRA_SIM}")
    path = Path(binary)
    exe = shutil.which(str(binary)) if not path.exists() else str(path.resolve())
    if exe is None:
        raise AstraSimError(f"{binary}: no such ASTRA-sim binary; {HOW_TO_GET_ASTRA_SIM}")
    if not Path(exe).is_file() or not os.access(exe, os.X_OK):  # a folder, or a file without +x
        raise AstraSimError(f"{binary}: not an executable file; expected an ASTRA-sim analytical binary "
                            "(AstraSim_Analytical_Congestion_Unaware or _Aware)")
    export_dir = Path(export_dir)
    if not (export_dir / "system.json").is_file():
        raise AstraSimError(f"{export_dir}: not an export directory (no system.json); run `tracefabric astra export` first")
    proc = subprocess.run([exe, *command_args()], cwd=export_dir, capture_output=True, text=True, timeout=timeout_s)
    (export_dir / "astra_stdout.txt").write_text(proc.stdout)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        tail = " | ".join(lines[-3:]) or "no output"  # one line; stdout is kept in astra_stdout.txt
        raise AstraSimError(f"{binary} exited with status {proc.returncode}: {tail}")
    source = f"{binary} (stdout saved to {export_dir / 'astra_stdout.txt'})"
    df = parse_output(proc.stdout, source)
    ranks = len(list((export_dir / "workload").glob("*.et")))
    if ranks and len(df) != ranks:  # the last ranks never reporting is not caught by the parser
        raise AstraSimError(f"{source}: {len(df)} ranks reported `finished`, but the export has {ranks}")
    return df
