"""The CLI's commands and htsim's connection-matrix fixture."""

from __future__ import annotations

import pandas as pd
from typer.testing import CliRunner

from tracefabric.cli import app
from tracefabric.network_backends.packet import simulate
from tracefabric.network_backends.packet.traffic_files import read_traffic_file

runner = CliRunner()


def test_every_command_has_help():
    # Each command's help lists what it offers: the subcommands of a group, the options of a leaf.
    expect = {(): ["net"], ("net",): ["run", "compare", "schemes"],
              ("net", "run"): ["--topology", "--traffic", "--scheme", "--lb", "--seed", "--flows-out"],
              ("net", "compare"): ["--topology", "--traffic", "--schemes", "--seeds", "--out"],
              ("net", "schemes"): []}
    for args, words in expect.items():
        res = runner.invoke(app, [*args, "--help"])
        assert res.exit_code == 0, res.output
        assert " ".join(["Usage: root", *args, "[OPTIONS]"]) in res.output, res.output[:200]
        missing = [w for w in words if w not in res.output]
        assert not missing, f"{' '.join(args)} --help lacks {missing}"


def test_htsim_connection_matrix_fixture_is_a_derangement_of_1MiB_flows(shared):
    t = read_traffic_file(shared / "fixtures/htsim/perm128_1MiB.cm")
    assert len(t["src"]) == 128 and set(t["bytes"]) == {1_048_576}
    assert sorted(t["src"]) == sorted(t["dst"]) == list(range(128))
    assert all(s != d for s, d in zip(t["src"], t["dst"]))
    # Run it: as a permutation its bound is App. B's, same as a generated permutation's.
    from_file = simulate("fat-tree:k=8", f"file:{shared / 'fixtures/htsim/perm128_1MiB.cm'}", lb="host_spray", seed=1)
    generated = simulate("fat-tree:k=8", "permutation:size=1MiB", lb="host_spray", seed=1)
    assert from_file.summary["lower_bound_ps"] == generated.summary["lower_bound_ps"]
    assert list(from_file.flows["dst"]) == t["dst"]
    assert from_file.summary["packets_alive_at_end"] == 0


def test_compare_writes_table_chart_and_matches_the_api(tmp_path):
    out = tmp_path / "cmp"
    res = runner.invoke(app, ["net", "compare", "--topology", "fat-tree:k=4", "--traffic", "permutation:size=256KiB",
                              "--schemes", "ecmp,host_spray", "--seeds", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    png = (out / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4
    for row in runs.itertuples():
        api = simulate("fat-tree:k=4", "permutation:size=256KiB", scheme=row.scheme, seed=int(row.seed))
        assert abs(api.cct_us - row.cct_us) < 1e-9
    summary = pd.read_csv(out / "summary.csv")
    mean_ecmp = runs[runs.scheme == "ecmp"].cct_increase_pct.mean()
    assert abs(summary.set_index("scheme").loc["ecmp", "cct_increase_pct"] - mean_ecmp) < 1e-9
    # The printed table carries the same numbers whole when output is not a terminal (it was
    # cut to 80 columns: "2002.…").
    for row in summary.itertuples():
        assert f" {row.cct_us:.2f} " in res.output and f" {row.cct_increase_pct:.2f} % " in res.output


def test_run_writes_per_flow_results(tmp_path):
    out = tmp_path / "flows.parquet"
    res = runner.invoke(app, ["net", "run", "--topology", "fat-tree:k=4", "--traffic", "all-to-all:size=16KiB",
                              "--scheme", "reps", "--flows-out", str(out)])
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out)
    assert len(df) == 16 * 15
    # The file holds the same run as the API (default seed 1), flow by flow.
    api = simulate("fat-tree:k=4", "all-to-all:size=16KiB", scheme="reps", seed=1).flows
    cols = ["src", "dst", "bytes", "start_ps", "finish_ps", "packets_sent", "hops"]
    pd.testing.assert_frame_equal(df[cols].reset_index(drop=True), api[cols].reset_index(drop=True), check_dtype=False)
    # All 240 flows start at t = 0, 4 packets each: no flow beats 4 back-to-back frames at
    # 800 Gbps ((4096 + 62 + 20) B x 10 ps/B = 41.78 ns each) plus two hops there and back.
    assert int(df["fct_ps"].min()) > 4 * 41_780 + 2 * 2 * 500_000
