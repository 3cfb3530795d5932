"""Property tests of every reader of outside input (Chakra ETs, system JSON, network and fabric
YAML, remote memory, comm-group JSON, htsim .cm and output, flow CSV/JSON, scheme presets, model
configs, routing matrices, ASTRA-sim's printed output, command-line size, spec and failure strings): whatever the
input, it runs or raises tracefabric's own error naming the file and the field, never another
exception or a panic. The targets and mutations are those of `python -m tracefabric.tools.fuzz`, which
runs them for millions of inputs; here Hypothesis drives them for a bounded number each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracefabric.errors import ConfigError
from tracefabric.tools.fuzz.__main__ import main as fuzz_main
from tracefabric.tools.fuzz.mutate import INTERESTING, mutate
from tracefabric.tools.fuzz.targets import TARGETS, Target, outcome

BOUNDED = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> tuple[Path, dict[str, list[bytes]]]:
    folder = tmp_path_factory.mktemp("fuzz")
    return folder, {name: t.seeds(folder / "seeds" / name) for name, t in TARGETS.items()}


def _check(name: str, data: bytes, folder: Path) -> str:
    target = TARGETS[name]
    case = folder / name
    case.mkdir(parents=True, exist_ok=True)
    path = case / (target.filename or "spec.txt")
    path.write_bytes(data)
    kind, problem = outcome(target, path, folder)
    assert problem is None, f"{name} input {data[:300]!r}: {problem}"
    return kind


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_seed_runs(name, work):
    """The valid examples the mutations start from run without error (else the fuzzing would
    only ever test the first check)."""
    folder, seeds = work
    assert len(seeds[name]) >= 2
    assert [_check(name, s, folder) for s in seeds[name]] == ["ok"] * len(seeds[name])


@pytest.mark.parametrize("name", sorted(TARGETS))
@BOUNDED
@given(rng=st.randoms(use_true_random=False))
def test_mutated_inputs_run_or_raise_a_named_error(name, work, rng):
    folder, seeds = work
    target = TARGETS[name]
    data = target.edit(rng.choice(seeds[name]), rng) if target.edit and rng.random() < 0.5 else mutate(seeds[name], rng)
    _check(name, data, folder)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.sampled_from(INTERESTING),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
JSON_TARGETS = [n for n, t in TARGETS.items() if t.filename.endswith(".json")]


@pytest.mark.parametrize("name", JSON_TARGETS)
@BOUNDED
@given(value=JSON_VALUES)
def test_any_json_document_runs_or_raises_a_named_error(name, work, value):
    _check(name, json.dumps(value).encode(), work[0])


@BOUNDED
@given(value=JSON_VALUES)
def test_any_yaml_network_runs_or_raises_a_named_error(work, value):
    _check("network", yaml.safe_dump(value).encode(), work[0])


@pytest.mark.parametrize("name", ["et", "flows_csv", "htsim_cm", "htsim_matrix", "htsim_output", "astra_output", "network"])
@BOUNDED
@given(data=st.binary(max_size=200))
def test_any_bytes_run_or_raise_a_named_error(name, work, data):
    _check(name, data, work[0])


SPEC_WORDS = st.sampled_from(["fat-tree", "leaf-spine", "permutation", "all-to-all", "incast", "file", "k", "size",
                              "leaves", "spines", "senders", "dst", "inter_pod", "staggered", ":", ",", "=", "KiB"])


@BOUNDED
@given(parts=st.lists(SPEC_WORDS | st.sampled_from(INTERESTING) | st.text(max_size=4), max_size=8))
def test_any_spec_string_runs_or_raises_a_named_error(work, parts):
    _check("spec", "".join(parts).encode("utf-8", "surrogateescape"), work[0])


def test_the_contract_counts_foreign_exceptions_and_unnamed_errors_as_crashes(tmp_path):
    def raiser(exc):
        def run(path, work):
            raise exc
        return run

    path = tmp_path / "x.json"
    path.write_text("{}")
    cases = [(KeyError("k"), "crash"), (ConfigError(f"{path}: bad", "k"), None),
             (ConfigError(f"{path}: no field"), "without a field"), (ConfigError("elsewhere", "k"), "does not name the file"),
             (ConfigError(f"{path}: bad", f"{path}: k"), "whose field is a path")]
    for exc, expected in cases:
        kind, problem = outcome(Target("t", "x.json", lambda w: [], raiser(exc)), path, tmp_path)
        if expected is None:
            assert (kind, problem) == ("ConfigError:k", None)
        else:
            assert expected in f"{kind} {problem}"
    assert outcome(Target("t", "x.json", lambda w: [], lambda p, w: None), path, tmp_path) == ("ok", None)


def test_the_fuzz_script_reports_inputs_errors_by_kind_and_crashes(tmp_path, capsys):
    assert fuzz_main(["--inputs", "260", "--seed", "3", "--out", str(tmp_path), "--report-every", "1000"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["inputs"] == 260 and report["crashes"] == 0
    assert sorted(report["by_target"]) == sorted(TARGETS)
    for t in report["by_target"].values():  # inputs go round the targets in turn
        assert t["inputs"] in (260 // len(TARGETS), 260 // len(TARGETS) + 1)
        assert t["ok"] + sum(t["errors"].values()) == t["inputs"]
    assert "260 inputs" in capsys.readouterr().out
    # The same seed gives the same inputs, so a reported crash is replayed with --seed.
    assert fuzz_main(["--inputs", "260", "--seed", "3", "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    assert again["by_target"] == report["by_target"]


# Inputs the fuzzing found, each once a raw exception or an error naming no file or field.

def test_an_empty_csv_column_is_named_as_such(tmp_path):
    from tracefabric.errors import TrafficFileError
    from tracefabric.network_backends.packet.traffic_files import read_traffic_file

    path = tmp_path / "f.csv"
    path.write_text("src,dst,,bytes,\n0,1,,5,\n")
    with pytest.raises(TrafficFileError, match=r"f\.csv:1: column '' appears twice in the header") as e:
        read_traffic_file(path)
    assert (e.value.field, e.value.line) == ("''", 1)


def test_a_network_key_that_is_not_a_string_is_refused_by_name(tmp_path):
    from tracefabric.astra_configs.formats import read_network

    path = tmp_path / "n.yml"
    path.write_text("topology: [ Ring ]\n~: 3\n")
    with pytest.raises(ConfigError, match=r"n\.yml: key None: expected a string naming a network key") as e:
        read_network(path)
    assert e.value.field == "network"


def test_a_collective_too_large_for_the_clock_is_named_by_its_et_file_and_node(tmp_path):
    from tracefabric.traces.microbenchmark import write_microbenchmark
    from tracefabric.collectives.iteration import simulate
    from tracefabric.tools.fuzz.targets import NETWORK, SYSTEM

    prefix = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 60)
    # 4 chunks of 2^58 B, ring messages of 2^56 B, each up to 2.684e6 s at 50 GB/s (two hops): the
    # ring's later steps would end past the 2^62 ps clock (4.6e6 s), and are refused when they start.
    with pytest.raises(ConfigError) as e:
        simulate(prefix, SYSTEM, NETWORK, backend="analytical:astra-unaware")
    assert re.fullmatch(rf"{tmp_path}/all_reduce\.[0-3]\.et: node 0: all_reduce on group `world`: its transfer of "
                        rf"{1 << 56} bytes from rank [0-3] to rank [0-3] is refused by the network backend: a message "
                        rf"of {1 << 56} B could take up to 2\.684e6 s on this network .* past the simulators' picosecond "
                        r"clock \(2\^62 ps, 53 days\)", str(e.value))
    assert e.value.field == "workload"


def test_a_config_error_moves_into_a_file():
    e = ConfigError("invalid config field `topology.k`", "topology.k").in_file("fabric.yml")
    assert (str(e), e.field) == ("fabric.yml: invalid config field `topology.k`", "topology.k")
    assert ConfigError("m", "").field == "''" and ConfigError("m").field == "" and ConfigError("m", 0).field == "0"


def test_a_killed_fuzz_run_still_reports_what_it_tried(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "tracefabric.tools.fuzz", "--inputs", "10000000", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    while not list(tmp_path.glob("current.*")):  # seeds built, inputs running
        time.sleep(0.1)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    report = json.loads((tmp_path / "report.json").read_text())
    assert proc.returncode == 0 and report["crashes"] == 0
    assert 0 < report["inputs"] < 10_000_000
    assert report["inputs"] == sum(t["inputs"] for t in report["by_target"].values())
    assert f"{report['inputs']:,} inputs" in out


def test_an_integer_past_the_engines_range_is_named_with_its_file_and_field(tmp_path):
    from tracefabric.astra_configs.formats import read_network
    from tracefabric.collectives.iteration import backend_spec
    from tracefabric.network_backends.packet import build_config

    path = tmp_path / "fabric.yml"
    path.write_text(f"topology: {{kind: fat_tree, k: 4}}\nlink: {{rate_gbps: {10**40}, latency_ns: 500}}\n")
    with pytest.raises(ConfigError) as e:  # serde reported "number out of range at line 1 column 593"
        backend_spec("packet", read_network(path), 1, {})
    assert str(e.value) == (f"{path}: `link.rate_gbps`: expected a number in -2^63..2^64-1, got an integer of 41 "
                            "digits (100000...)")
    assert e.value.field == "link.rate_gbps"
    assert build_config("fat-tree:k=4", None, seed=2**64 - 1)["seed"] == 2**64 - 1  # the top of the range is taken


def test_a_connection_matrix_that_is_not_utf8_or_not_a_file_is_named(tmp_path):
    from tracefabric.errors import TrafficFileError
    from tracefabric.network_backends.packet.cm import read_cm

    path = tmp_path / "m.cm"
    path.write_bytes(b"Nodes 4\nConnections 1\n0->1 id 1 start 0 size \x87\n")
    with pytest.raises(TrafficFileError, match=r"m\.cm: not UTF-8 text \(byte 45\)") as e:  # was a UnicodeDecodeError
        read_cm(path)
    assert e.value.field == "path"
    with pytest.raises(TrafficFileError, match=r": is a folder; expected a connection matrix file"):
        read_cm(tmp_path)


def test_htsim_output_with_times_or_numbers_past_any_run_is_refused_by_line():
    from tracefabric.interop.htsim.output import HtsimOutputError, parse_output

    assert parse_output("Flow ndp_2_3 2 finished at 2.5 total bytes 100").finish_ps.tolist() == [2_500_000]
    for text, why in [("Flow ndp_2_3 2 finished at 1e309 total bytes 100", "finished at 1e309 us, past the simulators' "
                       "picosecond clock"),  # was an OverflowError
                      ("Flow ndp_2_3 2 finished at 1e99999999 total bytes 100", "finished at 1e99999999 us, past"),
                      ("Flow ndp_2_3 " + "9" * 5000 + " finished at 2 total bytes 100", "a number of 5000 digits")]:
        with pytest.raises(HtsimOutputError, match=rf"^out\.txt: line 1: {re.escape(why)}"):
            parse_output(text, source="out.txt")
