"""The CLI's commands and htsim's connection-matrix fixture."""

from __future__ import annotations

import pandas as pd
from typer.testing import CliRunner

from tracefabric.tools.cli import app
from tracefabric.network_backends.packet import simulate
from tracefabric.network_backends.packet.traffic_files import read_traffic_file

runner = CliRunner()


def test_every_command_has_help():
    # Each command's help lists what it offers: the subcommands of a group, the options of a leaf.
    expect = {(): ["net", "htsim"], ("net",): ["run", "compare", "schemes"],
              ("htsim",): ["export", "parse"],
              ("htsim", "export"): ["--traffic", "--collective", "--ranks", "--size", "--out"],
              ("htsim", "parse"): ["--cm", "--flows-out"],
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


def test_compare_keeps_the_order_traffics_and_schemes_were_given_in():
    # Traffics were sorted alphabetically: the chart's panels came out in another order.
    from tracefabric.tools.compare import compare, summarize

    traffics, schemes = ["permutation:size=64KiB", "all-to-all:size=4KiB"], ["reps", "ecmp"]
    summary = summarize(compare(schemes, traffics, topology="fat-tree:k=4", seeds=[1, 2]))
    assert list(zip(summary.traffic, summary.scheme)) == [(t, s) for t in traffics for s in schemes]
    for row in summary.itertuples():
        mean = sum(simulate("fat-tree:k=4", row.traffic, scheme=row.scheme, seed=seed).cct_us for seed in (1, 2)) / 2
        assert row.seeds == 2 and abs(row.cct_us - mean) < 1e-9


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


def test_spec_numbers_are_read_exactly_and_in_ascii():
    import pytest
    from tracefabric.errors import ConfigError
    from tracefabric.network_backends.packet.specs import topology_config, traffic_config
    from tracefabric.specs import parse_size

    # Decimals are exact: 16.1KB is 16,100 B; a float refused it and rounded the others.
    assert parse_size("16.1KB", "traffic.size") == 16_100
    assert parse_size("9007199254740993.0") == 9_007_199_254_740_993
    with pytest.raises(ConfigError) as e:
        parse_size("1.0000000000000001KB", "traffic.size")
    assert str(e.value) == "`traffic.size`: '1.0000000000000001KB' is not a whole number of bytes"
    for bad in ("1_0", "１", "2e"):
        with pytest.raises(ConfigError) as e:
            topology_config(f"leaf-spine:leaves=2,spines=2,oversubscription={bad}")
        assert str(e.value) == f"`topology.oversubscription`: expected a number such as 2 or 1.5, got {bad!r}"
        assert e.value.field == "topology.oversubscription"
    assert topology_config("leaf-spine:leaves=2,spines=2,oversubscription=1.5")["oversubscription"] == 1.5
    with pytest.raises(ConfigError) as e:
        traffic_config("file:")
    assert str(e.value) == "`traffic`: `file:` has an empty path (expected file:PATH of a .csv, .json or .cm file)"


def test_traffic_files_refuse_what_htsim_or_a_reader_would_read_otherwise(tmp_path):
    import pytest
    from tracefabric.errors import TrafficFileError

    cases = {
        "sup.cm": ("Nodes \u00b2\n0->1 id 1 start 0 size 10\n", ":1: expected `Nodes <count>`, got 'Nodes \u00b2'", "Nodes"),
        "late.cm": ("0->1 id 1 start 0 size 10\nNodes 2\n",
                    ":2: `Nodes` after the first flow (line 1); headers come before flows", "Nodes"),
        "under.cm": ("0->1 id 1 start 1_0 size 10\n", ":1: field `start` must be a non-negative integer, got '1_0'", "start"),
        "big.cm": ("0->1 id 1 start 0 size 2147483648\n", ":1: field `size` must be in 0..2147483647, got 2147483648", "size"),
        "id0.cm": ("0->1 id 0 start 0 size 10\n", ":1: flow id 0 is not allowed (htsim's ids start at 1)", "id"),
        "long.json": ('[{"src": 0, "dst": 1, "bytes": 10, "start_us": 1' + "0" * 400 + "}]",
                      ": flow 1: field `start_us` must be at most 4611686018427 (2^62 ps), got an integer of 401 digits (100000...)",
                      "start_us"),
        "extra.json": ('{"flows": [{"src": 0, "dst": 1, "bytes": 10}], "extra": 1}',
                       ": unknown key 'extra' (expected a list of flows or {\"flows\": [...]})", "extra"),
        "subps.json": ('[{"src": 0, "dst": 1, "bytes": 10, "start_us": 0.0000004}]',
                       ": flow 1: field `start_us` must be a whole number of picoseconds (at most 6 decimals), got 4e-07",
                       "start_us"),
        "under.csv": ("src,dst,bytes\n0,1,1_000\n", ":2: field `bytes` must be a non-negative integer, got '1_000'", "bytes"),
        "arabic.csv": ("src,dst,bytes\n0,1,\u0661\u0660\n", ":2: field `bytes` must be a non-negative integer, got '\u0661\u0660'", "bytes"),
        "under_us.csv": ("src,dst,bytes,start_us\n0,1,10,1_0\n", ":2: field `start_us` must be a number, got '1_0'", "start_us"),
    }
    for name, (text, message, field) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(TrafficFileError) as e:
            read_traffic_file(path)
        assert (str(e.value), e.value.field) == (f"{path}{message}", field), name
    # One picosecond is the smallest start, read exactly.
    (tmp_path / "ps.csv").write_text("src,dst,bytes,start_us\n0,1,10,0.000001\n")
    assert read_traffic_file(tmp_path / "ps.csv")["start_ps"] == [1]


def test_a_late_start_is_named_in_the_files_own_field_and_unit(tmp_path):
    import pytest
    from tracefabric.errors import TrafficFileError

    files = {"late.csv": ("src,dst,bytes,start_us\n0,1,4096,2000000.5\n", "start_us", "2000000.5 µs"),
             "late.json": ('[{"src": 0, "dst": 1, "bytes": 4096, "start_ps": 2000000000000}]', "start_ps", "2000000000000 ps"),
             "late.cm": ("Nodes 16\n0->1 id 1 start 2000000 size 4096\n", "start", "2000000 µs")}
    for name, (text, field, when) in files.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(TrafficFileError) as e:
            simulate("fat-tree:k=4", f"file:{path}", seed=1, limits={"max_time_ms": 1})
        where = f"{path}: flow 1" if name.endswith(".json") else f"{path}:2"
        assert str(e.value) == f"{where}: field `{field}` starts at {when}, after limits.max_time_ms = 1", name
        assert e.value.field == field


def test_a_bad_scheme_preset_is_named_with_its_file_and_key(tmp_path, monkeypatch):
    import pytest
    import tracefabric.astra_configs as ac
    from tracefabric.errors import ConfigError
    from tracefabric.network_backends.packet import build_config

    (tmp_path / "schemes").mkdir()
    monkeypatch.setattr(ac.resources, "files", lambda package: tmp_path)
    presets = {"corrupt": ('{"lb": "reps",', "not valid JSON (Expecting property name enclosed in double quotes: "
                                             "line 1 column 15 (char 14))", "scheme"),
               "twice": ('{"lb": "reps", "lb": "ecmp"}', "key 'lb' appears twice in one object", "lb"),
               "listed": ('["reps"]', "expected an object of preset settings, got a list", "scheme"),
               "typo": ('{"lb": "reps", "lb_parms": {}}', "unknown key `lb_parms` (expected one of: cc, cc_params, "
                        "description, lb, lb_params, limits, loss, loss_params, qdisc, qdisc_params, source, switch)",
                        "lb_parms"),
               "switch": ('{"lb": "reps", "switch": [1]}', "`switch` must be an object, got [1]", "switch"),
               "lbnum": ('{"lb": 3}', "`lb` must be a string, got 3", "lb")}
    for name, (text, message, field) in presets.items():
        path = tmp_path / "schemes" / f"{name}.json"
        path.write_text(text)
        with pytest.raises(ConfigError) as e:
            build_config("fat-tree:k=4", "permutation:size=8KiB", scheme=name)
        assert (str(e.value), e.value.field) == (f"{path}: {message}", field), name


def test_run_takes_scheme_parameters_and_a_seed_as_the_python_api_does(tmp_path):
    # An 8-rank all-to-all over REPS with its recycling ring, seed 3 over the file's 0: the
    # CLI's iteration is the API's to the picosecond; a misspelt parameter and a seed for
    # ASTRA-sim's analytical dimensions are refused by name.
    import json

    import yaml

    from tracefabric.collectives.iteration import simulate as run_iteration
    from tracefabric.traces.microbenchmark import write_microbenchmark

    ets = write_microbenchmark(tmp_path / "ets", 8, "all_to_all", 1 << 20)
    system = {"scheduling-policy": "LIFO", "endpoint-delay": 0, "preferred-dataset-splits": 1,
              "collective-optimization": "baseline", "all-reduce-implementation": ["ring"],
              "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
              "all-to-all-implementation": ["direct"]}
    fabric = {"topology": {"kind": "fat_tree", "k": 4}, "link": {"rate_gbps": 400, "latency_ns": 500}, "seed": 0}
    (tmp_path / "sys.json").write_text(json.dumps(system))
    (tmp_path / "net.yml").write_text(yaml.safe_dump(fabric))
    base = ["run", "--workload", str(ets), "--system", str(tmp_path / "sys.json"), "--network", str(tmp_path / "net.yml"),
            "--backend", "packet", "--lb", "reps"]
    res = CliRunner().invoke(app, base + ["--param", "lb.buffer=8", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    want = run_iteration(ets, system, {**fabric, "seed": 3}, backend="packet", lb="reps", lb_params={"buffer": 8})
    assert json.loads(res.stdout)["summary"]["iteration_us"] == want.iteration_ns / 1e3
    bad = CliRunner().invoke(app, base + ["--param", "lb.buffr=8"])
    assert bad.exit_code != 0 and "buffr" in bad.output + str(bad.exception or "")
    astra = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
    (tmp_path / "astra.yml").write_text(yaml.safe_dump(astra))
    seeded = CliRunner().invoke(app, ["run", "--workload", str(ets), "--system", str(tmp_path / "sys.json"),
                                      "--network", str(tmp_path / "astra.yml"), "--seed", "3"])
    assert seeded.exit_code != 0 and "packet fabrics only" in seeded.output + str(seeded.exception or "")
