"""The astra-* backends against what ASTRA-sim 2.x (518bd513) printed for every workload in
../shared/fixtures/astra-sim: per-rank finish and exposed-communication times to the ns, the
cases where it printed nothing refused (or warned) with the reason, and `astra export` ->
`astra run` -> `astra parse` agreeing with `tracefabric run` on the same folder."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from tracefabric.astra_configs.formats import read_memory, read_network, read_system
from tracefabric.collectives.workload import read_workload
from tracefabric.errors import ConfigError
from tracefabric.iteration import simulate
from tracefabric.network_backends import astra_sim

MODES = ("unaware", "aware")


def multi(shared: Path) -> Path:
    return shared / "fixtures" / "astra-sim" / "multi"


def astra_results(shared: Path) -> dict[tuple[str, str], dict[int, tuple[int, int] | None]]:
    """(folder, mode) -> rank -> (finished, exposed) ns, or None where ASTRA-sim printed nothing."""
    out: dict[tuple[str, str], dict[int, tuple[int, int] | None]] = {}
    with open(multi(shared) / "astra_results.csv") as f:
        for row in csv.DictReader(f):
            value = (int(row["astra_cycles"]), int(row["astra_exposed"])) if row["astra_cycles"] else None
            out.setdefault((row["workload"], row["mode"]), {})[int(row["rank"])] = value
    return out


FOLDERS = ["a_fsdp", "b_dp", "d_pp2", "j_tinymoe_roofline", "x_ag_world16", "x_ar_tpgroups16",
           "x_ar_world16_dim1", "x_mixed_seq8", "x_send_then_ar8", "x_two_groups8"]
# Why ASTRA-sim printed nothing: its congestion-aware binary exits 255 on a 2-D network; the
# roofline workload stalls it (nodes with num_ops 0).
NO_RESULT = {
    "aware-2d": r"network\.yml: 2 dimensions: ASTRA-sim 2\.x's congestion-aware backend takes one-dimensional "
                r"networks only \(it exits with status 255\), so analytical:astra-aware refuses this network",
    "roofline": r"workload\.0\.et: node 0 \('embedding\.fwd'\): num_ops = 0 with roofline-enabled: ASTRA-sim 2\.x "
                r"stalls on such a compute node and prints no result",
}


def run_folder(folder: Path, mode: str):
    return simulate(folder / "workload", folder / "system.json", folder / "network.yml",
                    memory=folder / "memory.json", backend=f"analytical:astra-{mode}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FOLDERS)
def test_every_multi_collective_fixture_gives_astra_sims_times_or_its_refusal(shared, name, mode):
    expected = astra_results(shared)[(name, mode)]
    folder = multi(shared) / name
    if all(v is None for v in expected.values()):
        why = NO_RESULT["roofline" if name.startswith("j_") else "aware-2d"]
        with pytest.raises(ConfigError, match=why):
            run_folder(folder, mode)
        return
    r = run_folder(folder, mode)
    got = {rank: (int(w), int(e)) for rank, w, e in zip(r.ranks["rank"], r.ranks["wall_ns"], r.ranks["exposed_comm_ns"])}
    assert got == expected  # every rank, to the ns (ASTRA-sim's arithmetic is integer here)


# README table: 64-NPU all-to-all of 1 MiB per rank on a 50 GB/s, 500 ns switch.
ALL_TO_ALL = {("sys_ring_4chunks.json", "unaware"): 8_757_544, ("sys_ring_4chunks.json", "aware"): 9_370_408,
              ("sys_ring_4chunks_a2a_direct.json", "unaware"): 4_384, ("sys_ring_4chunks_a2a_direct.json", "aware"): 23_536}


@pytest.mark.parametrize("system,mode", sorted(ALL_TO_ALL))
def test_all_to_all_fixture_ring_and_direct(shared, system, mode):
    f = shared / "fixtures" / "astra-sim"
    r = simulate(f / "workloads" / "all_to_all_64npus_1MB" / "all_to_all", f / "configs" / system,
                 f / "configs" / "switch_64npus.yml", memory=f / "configs" / "no_memory_expansion.json",
                 backend=f"analytical:astra-{mode}")
    assert r.ranks["wall_ns"].tolist() == [ALL_TO_ALL[system, mode]] * 64


def stub_binary(tmp_path: Path, lines: list[str], name: str) -> Path:
    """A stand-in for ASTRA-sim: checks the flags it takes, then prints `lines` as it prints them."""
    stub = tmp_path / name
    body = "\n".join(f"[2025-01-01 00:00:00.000] [workload] [info] {line}" for line in lines)
    stub.write_text(f"#!{sys.executable}\nimport sys, pathlib\n"
                    "args = dict(a.split('=', 1) for a in sys.argv[1:])\n"
                    "assert pathlib.Path(args['--workload-configuration'] + '.0.et').is_file(), args\n"
                    "assert pathlib.Path(args['--comm-group-configuration']).is_file(), args\n"
                    f"print({body!r})\n")
    stub.chmod(0o755)
    return stub


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [f for f in FOLDERS if not f.startswith("j_")])
def test_export_run_and_parse_agree_with_run_on_the_same_folder(shared, tmp_path, name, mode):
    folder = multi(shared) / name
    exp = tmp_path / "exp"
    astra_sim.export(read_workload(folder / "workload"), read_system(folder / "system.json"),
                     read_network(folder / "network.yml"), read_memory(folder / "memory.json"), exp)
    # The fixture is an export already: exporting it again changes no byte.
    for et in sorted((folder / "workload").glob("*.et")):
        assert (exp / "workload" / et.name).read_bytes() == et.read_bytes(), et.name
    for cfg in ("system.json", "network.yml", "memory.json", "comm_groups.json", "run.sh"):
        assert (exp / cfg).read_text() == (folder / cfg).read_text(), cfg
    expected = astra_results(shared)[(name, mode)]
    if None in expected.values():  # the aware binary refuses the 2-D networks (see above)
        return
    printed = [f"sys[{rank}] finished, {w} cycles, exposed communication {e} cycles." for rank, (w, e) in sorted(expected.items())]
    df = astra_sim.run(stub_binary(tmp_path, printed, f"AstraSim_Analytical_Congestion_{mode.title()}"), exp)
    ours = run_folder(exp, mode)
    assert df["finished_ns"].tolist() == ours.ranks["wall_ns"].tolist() == [w for _, (w, _) in sorted(expected.items())]
    assert df["exposed_comm_ns"].tolist() == ours.ranks["exposed_comm_ns"].tolist()


def test_export_refuses_a_workload_astra_sim_prints_nothing_for(shared, tmp_path):
    folder = multi(shared) / "j_tinymoe_roofline"
    with pytest.raises(ConfigError, match=NO_RESULT["roofline"]):
        astra_sim.export(read_workload(folder / "workload"), read_system(folder / "system.json"),
                         read_network(folder / "network.yml"), read_memory(folder / "memory.json"), tmp_path / "exp")
    assert not (tmp_path / "exp").exists()  # nothing half-written
    # The physical backends run it.
    r = simulate(folder / "workload", folder / "system.json", folder / "network.yml", memory=folder / "memory.json",
                 backend="analytical:flow")
    assert len(r.ranks) == 8 and (r.ranks["wall_ns"] > 0).all()
