"""Studies (issue 41): a 2 x 2 x 2 study against `tracefabric run` point by point, resume
after a real SIGKILL, Ray against the local executor, DuckDB against pandas, the figures'
CSVs against the store, and bad specs refused before any run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from tracefabric.errors import ConfigError, TracefabricError
from tracefabric.studies import StudyResults, load_spec, run_study
from tracefabric.studies.plots import plot_study
from tracefabric.tools.cli import app
from tracefabric.tools.cli_study import ray_argv

# Schemes x models x seeds on the k = 4 fat tree (16 hosts, 800 Gbps); 8 ranks per model.
SPEC = {
    "name": "two-cubed",
    "defaults": {"world": 8, "seq": 256, "backend": "packet",
                 "fabric": {"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 800, "latency_ns": 500},
                            "switch": {"buffer_bytes": 800000}}},
    "axes": {"scheme": ["ecmp", "host_spray"], "model": ["tiny-llama", "gpt2-small"], "seed": [1, 2]},
}
ROW_TABLES = ("runs", "ranks", "collectives", "counters")


def write_spec(folder: Path, spec: dict = SPEC, name: str = "spec.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    """(spec, study folder) of the uninterrupted local run, two worker processes."""
    root = tmp_path_factory.mktemp("study")
    spec = write_spec(root)
    run = run_study(spec, root / "local", jobs=2)
    assert (run.ran, run.skipped, run.failed, run.synthesized) == (8, 0, [], 2)
    return spec, root / "local"


def point_bytes(folder: Path) -> dict[tuple[str, str], bytes]:
    """Every stored row file's bytes, by (point, table)."""
    out = {}
    for d in (folder / "points").iterdir():
        for t in ROW_TABLES:
            out[d.name, t] = (d / f"{t}.parquet").read_bytes()
    return out


def test_eight_runs_equal_tracefabric_run_point_by_point(study):
    _, folder = study
    runs = StudyResults(folder).runs
    assert len(runs) == 8 and runs["point"].nunique() == 8 and (runs["status"] == "ok").all()
    assert sorted(map(tuple, runs[["scheme", "model", "seed"]].to_numpy().tolist())) == sorted(
        (s, m, seed) for s in ("ecmp", "host_spray") for m in ("tiny-llama", "gpt2-small") for seed in (1, 2))
    ranks = StudyResults(folder).ranks
    for row in runs.itertuples():
        res = CliRunner().invoke(app, ["run", "--workload", str(folder / row.workload), "--system", str(folder / row.system_file),
                                       "--network", str(folder / row.network_file), "--backend", "packet",
                                       "--scheme", row.scheme, "--json"])
        assert res.exit_code == 0, res.output
        alone = json.loads(res.output)
        assert alone["summary"]["iteration_us"] == row.iteration_us
        assert alone["summary"]["flows"] == row.flows
        mine = ranks[ranks["point"] == row.point]
        assert [r["wall_ns"] for r in alone["ranks"]] == mine["wall_ns"].tolist()
        assert [r["exposed_comm_ns"] for r in alone["ranks"]] == mine["exposed_comm_ns"].tolist()
    # The seed reaches the engine: the two seeds of an ECMP point route differently.
    ecmp = runs[(runs["scheme"] == "ecmp") & (runs["model"] == "gpt2-small")]
    assert ecmp["digest"].nunique() == 2


def test_sigkill_mid_study_then_restart_loses_and_duplicates_nothing(study, tmp_path):
    spec, uninterrupted = study
    out = tmp_path / "killed"
    cmd = [sys.executable, "-c", "from tracefabric.tools.cli import main; main()", "study", str(spec), "--jobs", "1",
           "--out", str(out), "--no-plot"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    finished = 0
    while time.monotonic() < deadline and proc.poll() is None:
        finished = len(list((out / "points").glob("point=*"))) if (out / "points").is_dir() else 0
        if finished >= 2:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the study ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {d.name for d in (out / "points").iterdir()}
    assert 2 <= len(done_before) < 8
    before = {k: v for k, v in point_bytes_partial(out).items()}
    run = run_study(spec, out, jobs=1)
    assert run.skipped == len(done_before) and run.ran == 8 - len(done_before)
    runs = StudyResults(out).runs
    assert len(runs) == 8 and runs["point"].is_unique
    after = point_bytes(out)
    assert after == point_bytes(uninterrupted)  # every row byte for byte as the uninterrupted run's
    assert all(after[k] == v for k, v in before.items())  # finished points untouched by the restart
    assert not list((out / ".tmp").iterdir())


def point_bytes_partial(folder: Path) -> dict[tuple[str, str], bytes]:
    return {(d.name, t): (d / f"{t}.parquet").read_bytes() for d in (folder / "points").iterdir() for t in ROW_TABLES}


def test_ray_gives_the_same_rows_as_local_processes(study, tmp_path):
    pytest.importorskip("ray")  # a dependency of the test extra: present wherever the suite runs
    spec, local = study
    run = run_study(spec, tmp_path / "ray", jobs=2, ray=True)
    assert run.ran == 8 and not run.failed
    assert point_bytes(tmp_path / "ray") == point_bytes(local)


def test_duckdb_mean_iteration_per_scheme_equals_pandas(study):
    _, folder = study
    res = StudyResults(folder)
    sql = res.query("SELECT scheme, avg(iteration_us) AS mean_us, count(*) AS n FROM runs GROUP BY scheme ORDER BY scheme")
    pandas = res.runs.groupby("scheme")["iteration_us"].agg(["mean", "count"]).sort_index()
    assert sql["scheme"].tolist() == pandas.index.tolist()
    assert sql["n"].tolist() == pandas["count"].tolist() == [4, 4]
    assert sql["mean_us"].to_numpy() == pytest.approx(pandas["mean"].to_numpy(), rel=1e-12)
    # The per-rank view too: every point has one row per rank.
    per_point = res.query("SELECT point, count(*) AS ranks FROM ranks GROUP BY point")
    assert (per_point["ranks"] == 8).all() and len(per_point) == 8
    # An iteration study has no per-flow table: the error lists the tables it has.
    with pytest.raises(TracefabricError, match=r"this study's tables: runs, ranks, collectives, counters, stages, links"):
        res.query("SELECT count(*) FROM flows")


def test_figure_csvs_match_the_store(study, tmp_path):
    _, folder = study
    res = StudyResults(folder)
    files = plot_study(res, tmp_path / "fig")
    names = {f.name for f in files}
    assert {"iteration_vs_model.png", "iteration_vs_model.csv", "exposed_comm.csv", "cct_increase.csv", "cct_cdf.csv",
            "report.html"} <= names
    runs = res.runs
    head = pd.read_csv(tmp_path / "fig" / "iteration_vs_model.csv")
    assert len(head) == 4  # 2 models x 2 schemes, the seeds averaged
    for row in head.itertuples():
        g = runs[(runs["scheme"] == row.scheme) & (runs["model"] == row.model)]
        assert row.seeds == 2
        assert row.iteration_ms == pytest.approx(g["iteration_us"].mean() / 1e3, rel=1e-12)
        assert row.params_b == pytest.approx(g["params"].iloc[0] / 1e9)
    # Models ordered by size within the headline: tiny-llama (about 20 k parameters) first.
    assert head.groupby("scheme")["params_b"].apply(lambda s: s.is_monotonic_increasing).all()
    # CCT increase per collective kind, recomputed from the collectives table.
    colls = res.collectives.merge(runs[["point", "scheme"]], on="point")
    inc = pd.read_csv(tmp_path / "fig" / "cct_increase.csv")
    for row in inc.itertuples():
        c = colls[(colls["scheme"] == row.scheme) & (colls["kind"] == row.kind)]
        per_point = c.groupby("point").apply(lambda g: g["cct_ns"].sum() / g["bound_ns"].sum() - 1, include_groups=False)
        assert row.cct_increase_pct == pytest.approx(100 * per_point.mean(), rel=1e-9)
    # The bound is the NIC's: an all-gather of an s-byte shard on 8 ranks sends 7 s bytes at 100 B/ns.
    ag = colls[colls["kind"] == "all_gather"].iloc[0]
    assert ag["bound_ns"] == pytest.approx(7 * ag["bytes"] / 100.0)
    assert (colls["cct_ns"] >= colls["bound_ns"]).all()
    html = (tmp_path / "fig" / "report.html").read_text()
    assert all(f"src='{f.name}'" in html for f in files if f.suffix == ".png")


def test_rerun_skips_and_a_new_axis_value_adds_only_its_points(study, tmp_path):
    spec, _ = study
    first = run_study(spec, tmp_path / "s", jobs=1)
    again = run_study(spec, tmp_path / "s", jobs=1)
    assert (again.ran, again.skipped) == (0, 8)
    bigger = dict(SPEC, axes={**SPEC["axes"], "seed": [1, 2, 3]})
    grown = run_study(write_spec(tmp_path, bigger, "bigger.yaml"), tmp_path / "s", jobs=1)
    assert (grown.ran, grown.skipped) == (4, 8) and first.ran == 8
    assert len(StudyResults(tmp_path / "s").runs) == 12


def test_a_failing_point_is_recorded_and_the_others_run(tmp_path):
    # A 600-node clock limit of 1 us: every run stops, its error stored, the study goes on.
    spec = dict(SPEC, axes={"scheme": ["ecmp", "host_spray"]},
                defaults={**SPEC["defaults"], "model": "tiny-llama",
                          "fabric": {**SPEC["defaults"]["fabric"], "limits": {"max_time_ms": 0.0001}}})
    run = run_study(write_spec(tmp_path, spec), tmp_path / "out", jobs=1)
    runs = StudyResults(tmp_path / "out").runs
    assert run.ran == 2 and len(run.failed) == 2 and (runs["status"] == "error").all()
    assert runs["error"].str.contains("max_time_ms|did not finish|limit", regex=True).all(), runs["error"].tolist()


@pytest.mark.parametrize("change, axis, value", [
    ({"axes": {"modle": ["gpt2-small"]}}, "modle", None),
    ({"axes": {"scheme": ["ecmp", "no_such_scheme"]}}, "scheme", "no_such_scheme"),
    ({"axes": {"world": [8, 32]}}, "world", 32),  # 32 ranks on a 16-host fabric
    ({"axes": {"model": ["gpt2-small"]}, "defaults": {**SPEC["defaults"], "world": 10, "tp": 5}}, "tp", 5),  # 5 does not divide 12 heads
    ({"axes": {"backend": ["packet", "analytical:flow"], "scheme": ["reps"]}}, "scheme", "reps"),
    ({"axes": {"lb": ["reps"], "lb_params": [{"buffr": 8}]}}, "lb_params", {"buffr": 8}),  # a misspelt parameter, before synthesis
    ({"axes": {"failures": ["prob=0.01"]}}, "failures", "prob=0.01"),  # a misspelt failures key
])
def test_bad_specs_are_refused_before_any_run_naming_axis_and_value(tmp_path, change, axis, value):
    spec = {**SPEC, **change}
    if "model" not in spec["axes"] and "model" not in spec["defaults"]:
        spec["defaults"] = {**spec["defaults"], "model": "gpt2-small"}
    path = write_spec(tmp_path, spec)
    with pytest.raises(ConfigError) as e:
        run_study(path, tmp_path / "out", jobs=1)
    assert e.value.field == axis and f"`{axis}`" in str(e.value) and str(path) in str(e.value)
    if value is not None:
        assert repr(value) in str(e.value)
    assert not (tmp_path / "out").exists()  # nothing created, nothing run


def test_zip_and_exclude_shape_the_points(tmp_path):
    spec = {"axes": {"model": ["tiny-llama", "gpt2-small"], "world": [4, 8], "scheme": ["ecmp", "reps"]},
            "zip": [["model", "world"]], "exclude": [{"model": "gpt2-small", "scheme": "reps"}]}
    points = load_spec(write_spec(tmp_path, spec)).points()
    assert [(p["model"], p["world"], p["scheme"]) for p in points] == [
        ("tiny-llama", 4, "ecmp"), ("tiny-llama", 4, "reps"), ("gpt2-small", 8, "ecmp")]


def test_bare_ray_option_means_a_local_cluster():
    assert ray_argv(["study", "s.yaml", "--ray"]) == ["study", "s.yaml", "--ray", "local"]
    assert ray_argv(["study", "--ray", "s.yaml"]) == ["study", "--ray", "local", "s.yaml"]
    assert ray_argv(["study", "s.yaml", "--ray", "10.0.0.1:6379"]) == ["study", "s.yaml", "--ray", "10.0.0.1:6379"]


def test_every_example_spec_resolves_before_running(tmp_path):
    from tracefabric.studies.resolve import resolve

    examples = Path(__file__).resolve().parent.parent / "examples"
    sizes = {p.name: len(resolve(load_spec(p))) for p in sorted(examples.glob("*.yaml"))}
    # 3 models x 7 schemes x 2 seeds; 3 Llamas x 5 LBs; 3 EP degrees x 2 skews x 5 schemes.
    assert sizes == {"schemes_by_model_size.yaml": 42, "ofan_fsdp.yaml": 15, "moe_all_to_all.yaml": 30}


def test_replicate_quick_runs_every_figure_and_prints_paper_vs_ours(tmp_path, monkeypatch):
    from tracefabric.network_backends.packet import simulate
    from tracefabric.studies.replicate import FIGURES
    from tracefabric.tools import cli

    monkeypatch.setattr(cli.console, "width", 250)
    res = CliRunner().invoke(app, ["replicate", "all", "--scale", "quick", "--jobs", "2", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for fig in FIGURES.values():
        assert fig.paper in res.output, fig.name
        if fig.waits_for is not None:
            assert f"{fig.name}: waits for {fig.waits_for}" in res.output
            assert not (tmp_path / f"{fig.name}-quick").exists()  # nothing run for it
        else:
            assert (tmp_path / f"{fig.name}-quick" / "points").is_dir(), fig.name
    assert sum(f.waits_for is None for f in FIGURES.values()) == len(FIGURES)  # every figure's feature exists now
    # The last bundled figures measure what they claim: every row a finite number.
    for name, rows in (("mcc-toy", 3), ("ethereal-fig3", 6), ("ethereal-fig7", 2)):
        table = pd.DataFrame(FIGURES[name].evaluate(StudyResults(tmp_path / f"{name}-quick")))
        assert len(table) == rows and all(np.isfinite(float(v.rstrip(" %"))) for v in table["ours"]), (name, table)
    # OFAN Fig. 3-5 under 1 % link failures, 10 seeds: host packet AR beats switch packet AR
    # clearly (>= 1.1x) on both traffics when routes never converge, the two are within 5 %
    # once converged, and every scheme's CCT grows with the failure rate (G = 0).
    fig3 = pd.DataFrame(FIGURES["ofan-fig3"].evaluate(StudyResults(tmp_path / "ofan-fig3-quick"))).set_index("quantity")
    orderings = fig3[fig3.index.str.contains("switch_ar's CCT over reps'")]
    assert len(orderings) == 4 and (orderings["holds"] == "yes").all(), orderings
    # Fig. 4: switch AR within 5 % of host AR at G = 0 and 1 round trip, >= 1.1x at 100.
    fig4 = pd.DataFrame(FIGURES["ofan-fig4"].evaluate(StudyResults(tmp_path / "ofan-fig4-quick"))).set_index("quantity")
    checked = fig4[fig4["holds"] != ""]
    assert len(checked) == 3 and (checked["holds"] == "yes").all(), checked
    assert {"G = 0", "G = 1 RTT", "G = 100 RTT"} == {q.split(": ")[0].split(", ")[1] for q in checked.index}
    fig5 = pd.DataFrame(FIGURES["ofan-fig5"].evaluate(StudyResults(tmp_path / "ofan-fig5-quick")))
    grows = fig5[fig5["paper"] == "grows with p"]
    assert len(grows) == 3 and (grows["holds"] == "yes").all(), grows
    # Fig. 1's stored OFAN permutation equals a packet run of its own, and its CCT is the
    # last flow's completion.
    fig1 = StudyResults(tmp_path / "ofan-fig1-quick")
    row = fig1.runs.set_index(["traffic", "scheme"]).loc[("permutation:size=1MiB", "ofan")]
    alone = simulate("fat-tree:k=8", "permutation:size=1MiB", scheme="ofan", seed=1)
    assert row["cct_us"] == alone.cct_us and row["cct_increase"] == pytest.approx(alone.cct_increase, rel=1e-12)
    flows = fig1.table("flows")
    assert flows[flows["point"] == row["point"]]["fct_us"].max() == pytest.approx(row["cct_us"], rel=1e-12)
    # ParaLet: the printed model is eq. 1 with N = 128 hosts.
    assert "eq. 1: 2.209" in res.output and "eq. 1: 1.604" in res.output
    # Plots of a traffic study: the bars' CSV is the store's mean per traffic and scheme.
    plot_study(fig1, tmp_path / "fig1-plots")
    bars = pd.read_csv(tmp_path / "fig1-plots" / "cct_by_scheme.csv")
    runs = fig1.runs
    for b in bars.itertuples():
        g = runs[(runs["traffic"] == b.traffic) & (runs["scheme"] == b.scheme)]
        assert b.cct_increase_pct == pytest.approx(100 * g["cct_increase"].mean(), rel=1e-12)
    assert {"fct_cdf.csv", "stages.csv"} <= {p.name for p in (tmp_path / "fig1-plots").iterdir()}


def _exit_on_two(x: int) -> int:
    if x == 2:
        os._exit(3)  # the worker dies as if killed for memory
    if x == 1:
        time.sleep(1.0)  # still running when its neighbour dies
    return 10 * x


def test_a_dying_worker_fails_its_point_and_a_fresh_pool_runs_the_rest():
    from concurrent.futures.process import BrokenProcessPool

    from tracefabric.studies.execute import _LocalExecutor

    # Two in flight: b dies at once. a (1 s) is lost with the pool: it fails with b when the
    # pool reports both broken at once, else it runs again on the fresh pool (which of the
    # two depends on when the pool notices, so both are right). c and d wait for a slot.
    with _LocalExecutor(2) as ex:
        out = dict(ex.map_unordered(_exit_on_two, [(2,), (1,), (3,), (4,)], ["b", "a", "c", "d"]))
    assert isinstance(out["b"], BrokenProcessPool)
    assert isinstance(out["a"], BrokenProcessPool) or out["a"] == 10
    assert (out["c"], out["d"]) == (30, 40)


def test_a_captured_trace_runs_as_its_synthesized_twin(tmp_path):
    """`trace: FOLDER` runs ETs as they are: the same ETs as a `model` point synthesizes give
    the same iteration to the picosecond."""
    from tracefabric.traces.models import get_model
    from tracefabric.traces.synthesis import Plan, synthesize, write

    write(synthesize(get_model("tiny-llama"), Plan("fsdp", world=8, gpus_per_server=1, seq=256)), tmp_path / "cap", prefix="cap")
    spec = {"defaults": {**SPEC["defaults"], "scheme": "reps"},
            "axes": {"model": ["tiny-llama"]}}
    twin = {"defaults": {**SPEC["defaults"], "scheme": "reps", "trace": "cap"}, "axes": {"seed": [1]}}
    run_study(write_spec(tmp_path, spec, "synth.yaml"), tmp_path / "a", jobs=1)
    run = run_study(write_spec(tmp_path, twin, "captured.yaml"), tmp_path / "b", jobs=1)
    assert run.synthesized == 0 and not run.failed
    a, b = StudyResults(tmp_path / "a").runs.iloc[0], StudyResults(tmp_path / "b").runs.iloc[0]
    assert (b["model"], b["world"]) == ("cap", 8)
    assert b["iteration_us"] == a["iteration_us"] and b["digest"] == a["digest"]
    assert StudyResults(tmp_path / "b").ranks["wall_ns"].tolist() == StudyResults(tmp_path / "a").ranks["wall_ns"].tolist()


def test_a_second_study_on_a_busy_folder_is_refused(tmp_path):
    from tracefabric.studies.store import Store

    held = Store(tmp_path / "out").create().lock()
    with pytest.raises(ConfigError) as e:
        run_study(write_spec(tmp_path, dict(SPEC, axes={"model": ["tiny-llama"]})), tmp_path / "out", jobs=1)
    assert e.value.field == "out" and "another `tracefabric study`" in str(e.value)
    held.unlock()
    assert run_study(tmp_path / "spec.yaml", tmp_path / "out", jobs=1).ran == 1


HIERARCHICAL = {"scheduling-policy": "LIFO", "collective-optimization": "localBWAware", "preferred-dataset-splits": 4,
                "endpoint-delay": 10, "all-reduce-implementation": ["ring", "ring"],
                "all-gather-implementation": ["ring", "ring"], "reduce-scatter-implementation": ["ring", "ring"],
                "all-to-all-implementation": ["direct", "direct"]}


def test_placement_axis_and_servers_reach_the_run(tmp_path):
    """`placement` is passed to the system layer as `tracefabric run --placement` takes it; with
    `servers` a world all-gather's NIC bound counts only its cross-server phase."""
    from tracefabric.collectives.iteration import simulate

    fabric = {**SPEC["defaults"]["fabric"], "servers": {"gpus": 4}}
    spec = {"defaults": {**SPEC["defaults"], "model": "gpt2-small", "world": 16, "gpus_per_server": 4, "fabric": fabric,
                         "system": HIERARCHICAL, "scheme": "host_spray"},
            "axes": {"placement": ["packed", "random:3"]}}
    run_study(write_spec(tmp_path, spec), tmp_path / "out", jobs=1)
    res = StudyResults(tmp_path / "out")
    runs = res.runs.set_index("placement")
    assert runs.loc["packed", "digest"] != runs.loc["random:3", "digest"]
    row = runs.loc["packed"]
    alone = simulate(tmp_path / "out" / row["workload"], HIERARCHICAL, {**fabric, "seed": 1}, backend="packet",
                     placement="packed", scheme="host_spray")
    assert alone.iteration_ns / 1e3 == row["iteration_us"]
    colls = res.collectives[res.collectives["point"] == row["point"]]
    ag = colls[colls["kind"] == "all_gather"].iloc[0]  # FSDP's group: all 16 ranks, hierarchical
    assert ag["bound_ns"] == pytest.approx((16 // 4 - 1) * ag["bytes"] / 100.0)  # 3 other servers, 100 B/ns NICs
    assert (colls["cct_ns"] >= colls["bound_ns"]).all()
    assert len(res.table("stages")) > 0 and len(res.table("links")) > 0  # the packet run's per-stage tables


def test_reuse_axis_reaches_the_run_and_labels_its_rows(tmp_path):
    """`reuse` is a point key: exact and off give the same iteration, exact replays periods
    (its counters say how many), and a bad mode is refused naming the axis."""
    spec = {"defaults": {**SPEC["defaults"], "model": "gpt2-small", "scheme": "reps"}, "axes": {"reuse": ["exact", "off"]}}
    run_study(write_spec(tmp_path, spec), tmp_path / "out", jobs=1)
    res = StudyResults(tmp_path / "out")
    runs = res.runs.set_index("reuse")
    assert runs.loc["exact", "iteration_us"] == runs.loc["off", "iteration_us"]
    assert runs.loc["exact", "digest"] == runs.loc["off", "digest"]
    c = res.table("counters").pivot(index="point", columns="counter", values="value")
    replayed = {r: c.loc[runs.loc[r, "point"], "reuse_replayed"] for r in ("exact", "off")}
    assert replayed["off"] == 0 < replayed["exact"]
    with pytest.raises(ConfigError) as e:
        run_study(write_spec(tmp_path / "bad", {**spec, "axes": {"reuse": ["always"]}}), tmp_path / "bad-out", jobs=1)
    assert e.value.field == "reuse" and "'always'" in str(e.value)
