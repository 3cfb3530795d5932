"""Bad input gets a one-line error that names the field (issue: packet-level engine, acceptance 5)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import LINK, T_ACK, T_DATA, needs_torch

from tracefabric import ConfigError, FlowError, SchemeParamError, SimulationDidNotFinish, TrafficFileError, UnknownSchemeError
from tracefabric.network_backends.packet import simulate
from tracefabric.network_backends.packet.traffic_files import read_traffic_file


def test_unknown_scheme_lists_the_known_ones():
    with pytest.raises(UnknownSchemeError) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", lb="spray_and_pray")
    assert e.value.name == "spray_and_pray" and "host_spray" in e.value.known
    with pytest.raises(UnknownSchemeError, match="unknown scheme preset `nope`"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", scheme="nope")


def test_unknown_or_bad_scheme_parameter_names_it():
    with pytest.raises(SchemeParamError, match="parameter `permute_evry`") as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", lb="switch_rr", lb_params={"permute_evry": 5})
    assert e.value.param == "permute_evry"
    with pytest.raises(SchemeParamError, match=r"`quantum1` must be in \[0, 1\]"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", lb="switch_ar", lb_params={"quantum1": 2})
    # Counts past 32 bits wrapped: 2^32 subflows was 0 (a division by zero, a Rust panic) and
    # 2^32 + 1 ran as 1; 2^32 DRILL samples ran for ever.
    for lb, param, top in (("subflow", "subflows", 4096), ("switch_rr", "permute_every", 2**32 - 1),
                           ("drill", "samples", 64), ("paralet", "m", 4096)):
        with pytest.raises(SchemeParamError, match=rf"`{param}` must be in 1\.\.={top}, got {top + 1}$"):
            simulate("fat-tree:k=4", "permutation:size=4KiB", lb=lb, lb_params={param: top + 1})
    with pytest.raises(SchemeParamError, match=r"`threshold` must be in 1\.\.=4294967295, got 4294967297$"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", loss="sack", loss_params={"threshold": 2**32 + 1})
    # Bin edges out of order blame the one the user set, not a default left alone.
    for given, blamed, message in (({"quantum1": 0.5}, "quantum1", "quantum1 <= quantum2, got 0.5 > 0.1"),
                                   ({"quantum2": 0.3}, "quantum2", "quantum2 <= quantum3, got 0.3 > 0.2"),
                                   ({"quantum1": 0.5, "quantum2": 0.2}, "quantum2", "quantum1 <= quantum2, got 0.5 > 0.2")):
        with pytest.raises(SchemeParamError, match=re.escape(f"`{blamed}` must satisfy {message}")) as e:
            simulate("fat-tree:k=4", "permutation:size=4KiB", lb="switch_ar", lb_params=given)
        assert e.value.param == blamed


def test_numpy_numbers_read_as_python_ones():
    # Sweeps pass np.arange values and DataFrame cells: json refused them ("int64 is not JSON serializable").
    import numpy as np

    from tracefabric.traces.synthesis import Plan

    plain = simulate("fat-tree:k=4", "permutation:size=4KiB", lb="reps", lb_params={"num_entropies": 4}, seed=1,
                     link={"rate_gbps": 400.0})
    numpy = simulate({"kind": "fat_tree", "k": np.int64(4)}, "permutation:size=4KiB", lb="reps",
                     lb_params={"num_entropies": np.int64(4)}, seed=np.int64(1), link={"rate_gbps": np.float64(400)})
    assert numpy.summary["digest"] == plain.summary["digest"]
    flows = {"kind": "flows", "src": np.array([0]), "dst": np.array([15]), "bytes": np.array([4096]), "start_ps": np.zeros(1, int)}
    assert simulate("fat-tree:k=4", flows).flows["fct_ps"].iloc[0] == 6 * (T_DATA + LINK) + 6 * (T_ACK + LINK)
    assert type(Plan("dp", world=np.int64(2), gpus_per_server=2).world) is int
    with pytest.raises(ConfigError, match=r"`seed`: expected an integer in 0\.\.2\^64-1, got True"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", seed=True)


@pytest.mark.parametrize("topology,field", [
    ("fat-tree:k=7", "topology.k"),
    ("fat-tree:k=0", "topology.k"),
    ("leaf-spine:leaves=2,spines=3,oversubscription=0.5", "topology.oversubscription"),
    ("torus:x=4", "topology"),
    ("fat-tree:k=4,pods=2", "topology.pods"),
    # 10^10 hosts: past u32 and past the 2^24 packets can address
    ("leaf-spine:leaves=100000,spines=1,hosts_per_leaf=100000", "topology"),
    # Each count by its own name (all three were `topology`), and an integer past u64 (which
    # serde read as the float 1e+20) by its field.
    ("leaf-spine:leaves=0,spines=2", "topology.leaves"),
    ("leaf-spine:leaves=2,spines=0", "topology.spines"),
    ("leaf-spine:leaves=2,spines=2,links_per_pair=0", "topology.links_per_pair"),
    ("fat-tree:k=99999999999999999999", "topology.k"),
])
def test_impossible_topology_names_the_field(topology, field):
    with pytest.raises(ConfigError) as e:
        simulate(topology, "permutation:size=4KiB")
    assert e.value.field == field
    assert "\n" not in str(e.value)


def test_a_leaf_spine_past_the_host_limit_is_refused_before_it_is_built():
    # 69,920 leaves x 240 hosts = 16,780,800 > 2^24 = 16,777,216 (packets address hosts with 24 bits).
    with pytest.raises(ConfigError) as e:
        simulate("leaf-spine:leaves=69920,spines=1,hosts_per_leaf=240", "permutation:size=4KiB")
    assert str(e.value) == ("invalid config field `topology`: leaves x hosts per leaf = 16780800 "
                            "exceeds the supported maximum of 16777216 hosts")


@pytest.mark.parametrize("traffic,field", [
    ({"kind": "flows", "src": [1], "dst": [1], "bytes": [10], "start_ps": [0]}, "dst"),
    ({"kind": "flows", "src": [1], "dst": [2], "bytes": [0], "start_ps": [0]}, "bytes"),
    ({"kind": "flows", "src": [99], "dst": [2], "bytes": [10], "start_ps": [0]}, "src"),
])
def test_self_addressed_zero_size_and_unknown_hosts_are_refused(traffic, field):
    with pytest.raises(FlowError) as e:
        simulate("fat-tree:k=4", traffic)
    assert e.value.index == 0 and e.value.field == field


def test_bad_sizes_and_config_fields():
    with pytest.raises(ConfigError, match="traffic.size"):
        simulate("fat-tree:k=4", "permutation:size=12parsecs")
    with pytest.raises(ConfigError, match="traffic.staggered.*expected true or false, got 'sometimes'"):
        simulate("fat-tree:k=4", "all-to-all:size=4KiB,staggered=sometimes")
    with pytest.raises(ConfigError, match="traffic.shuffled.*expected true or false, got 'maybe'"):
        simulate("fat-tree:k=4", "all-to-all:size=4KiB,shuffled=maybe")
    with pytest.raises(ConfigError, match="switch.buffer_bytes"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", switch={"buffer_bytes": 100})
    with pytest.raises(ConfigError, match="unknown field `rate_gbs`"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"rate_gbs": 400})


def test_a_huge_buffer_is_refused_and_the_default_timeout_holds_to_2_to_40_bytes():
    # The default timeout adds two drains of a buffer: 2^62 B wrapped the u64 sum, the timeout
    # fell back to 100 us and a lossless incast took 10 timeouts (157.393 us, 40,960 B resent).
    # Up to 2^40 B a 15-to-1 incast of 1 MB never times out and ends where 1 TB ends.
    runs = [simulate("fat-tree:k=4", "incast:senders=15,size=1MB", seed=1, switch={"buffer_bytes": b})
            for b in (10**12, 1 << 40)]
    for r in runs:
        assert r.flows["timeouts"].sum() == 0 and r.summary["data_bytes_sent"] == 15 * 10**6
    assert runs[0].cct_us == runs[1].cct_us
    with pytest.raises(ConfigError, match=r"`switch\.buffer_bytes`: = 1099511627777 B: expected at most 2\^40 B") as e:
        simulate("fat-tree:k=4", "incast:senders=15,size=1MB", switch={"buffer_bytes": (1 << 40) + 1})
    assert e.value.field == "switch.buffer_bytes"


@pytest.mark.parametrize("switch,field,message", [
    ({"ecn_kmax": 1.5}, "switch.ecn_kmax", r"= 1\.5: expected a fraction of the buffer in 0\.\.1"),
    ({"ecn_kmin": -0.1}, "switch.ecn_kmin", r"= -0\.1: expected a fraction of the buffer in 0\.\.1"),
    # ecn_kmin used to be blamed, without the values, for an ecn_kmax below it.
    ({"ecn_kmax": 0.1}, "switch.ecn_kmax", r"= 0\.1 is below ecn_kmin = 0\.2: need ecn_kmin <= ecn_kmax"),
])
def test_ecn_thresholds_name_the_field_and_value(switch, field, message):
    with pytest.raises(ConfigError, match=message) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", switch=switch)
    assert e.value.field == field


@pytest.mark.parametrize("body,line,field", [
    ("Nodes 16\nConnections 1\n0->3 id 1 start 0 size 4096 trigger 2\n", 3, "trigger"),
    ("Nodes 16\nConnections 1\nTriggers 1\n0->3 id 1 start 0 size 4096\n", 3, "Triggers"),
    ("Nodes 16\nConnections 1\n0->3 id 1 start 0 size 4096\nfailure switch_type AGG switch_id 0 link_id 1\n", 4, "failure"),
    ("Nodes 16\nConnections 1\n0 3 4096\n", 3, "flow"),
    ("Nodes 16\nConnections 1\n0->3 id 1 start 0\n", 3, "size"),
    ("Nodes 16\nConnections 1\n0->3 id 1 start 0 size big\n", 3, "size"),
    ("Nodes 4\nConnections 1\n0->9 id 1 start 0 size 10\n", 3, "Nodes"),
    ("Nodes 16\nConnections 2\n0->3 id 1 start 0 size 10\n", None, "Connections"),
    # Headers and flow ids given twice (the last header silently won; htsim's triggers name flows by id).
    ("Nodes 16\nConnections 1\nNodes 128\n0->3 id 1 start 0 size 10\n", 3, "Nodes"),
    ("Nodes 16\nConnections 2\n0->3 id 7 start 0 size 10\n1->2 id 7 start 0 size 10\n", 4, "id"),
    ("Nodes 16\nConnections 2\n0->3 id 1 start 0 size 10\n1->2 id 01 start 0 size 10\n", 4, "id"),  # one integer
])
def test_malformed_connection_matrix_names_line_and_field(tmp_path, body, line, field):
    p = tmp_path / "bad.cm"
    p.write_text(body)
    with pytest.raises(TrafficFileError) as e:
        read_traffic_file(p)
    assert (e.value.line, e.value.field) == (line, field)
    assert str(p) in str(e.value)


def test_csv_and_json_flow_lists(tmp_path):
    good = tmp_path / "f.csv"
    good.write_text("src,dst,bytes,start_us\n0,5,8192,1.5\n5,0,4096,0\n")
    t = read_traffic_file(good)
    assert t["start_ps"] == [1_500_000, 0] and t["bytes"] == [8192, 4096]
    bad = tmp_path / "g.csv"
    bad.write_text("src,dest,bytes\n0,5,10\n")
    with pytest.raises(TrafficFileError, match="missing column"):
        read_traffic_file(bad)
    j = tmp_path / "f.json"
    j.write_text('[{"src": 0, "dst": 1, "bytes": -5}]')
    with pytest.raises(TrafficFileError, match=r"`bytes` must be in 0\.\.9223372036854775808, got -5") as e:
        read_traffic_file(j)
    assert e.value.line == 1


def test_cli_prints_one_line_errors_and_exits_2():
    proc = subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", "net", "run", "--topology", "fat-tree:k=5"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: invalid config field `topology.k`: a k-ary fat tree needs an even k >= 2, got 5"]


def test_engine_limits_on_frame_size_run_length_and_late_flows():
    # Packets keep sizes in 16 bits and event times in 48-bit picoseconds: both are checked up front.
    with pytest.raises(ConfigError, match=r"packet.payload_bytes.*limited to 65535 B"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", packet={"payload_bytes": 70000}, switch={"buffer_bytes": 10**6})
    with pytest.raises(ConfigError, match=r"limits.max_time_ms.*limited to 100000 ms, got 2\.000e5 ms"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", limits={"max_time_ms": 200000})
    with pytest.raises(ConfigError, match=r"`limits.rto_us`: simulated time is limited to 100000 ms, got 1\.000e297 ms") as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", limits={"rto_us": 1e300})  # it blamed max_time_ms
    assert e.value.field == "limits.rto_us"
    for bad in (0, 1 << 32):
        with pytest.raises(ConfigError, match=rf"limits.max_flows.*= {bad}: expected 1..=2\^32-1 flows") as e:
            simulate("fat-tree:k=4", "permutation:size=4KiB", limits={"max_flows": bad})
        assert e.value.field == "limits.max_flows"
    with pytest.raises(ConfigError, match=r"16 flows exceeds the maximum of 8 flows per run \(limits.max_flows\)"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", limits={"max_flows": 8})
    late = {"kind": "flows", "src": [0], "dst": [1], "bytes": [4096], "start_ps": [2 * 10**12]}
    with pytest.raises(FlowError, match=r"flow 0: field `start_ps`.*after limits.max_time_ms = 1000"):
        simulate("fat-tree:k=4", late)


@pytest.mark.parametrize("name,body,line,field", [
    ("nan.csv", "src,dst,bytes,start_us\n0,1,4096,0\n0,2,4096,nan\n", 3, "start_us"),
    ("inf.csv", "src,dst,bytes,start_us\n0,1,4096,inf\n", 2, "start_us"),
    ("typo.csv", "src,dst,bytes,start_usec\n0,1,4096,3\n", 2, "start_usec"),
    ("ragged.csv", "src,dst,bytes\n0,1,4096,7\n", 2, "(a value past the last column)"),
    ("extra.json", '[{"src": 0, "dst": 1, "bytes": 4096}, {"src": 1, "dst": 0, "bytes": 1, "prio": 2}]', 2, "prio"),
    ("nan.json", '[{"src": 0, "dst": 1, "bytes": 4096, "start_us": NaN}]', 1, "start_us"),
    # Past the engine's integers or its 2^62 ps clock: named here, not by the engine's JSON
    # reader at a column of JSON the user never wrote.
    ("late.csv", "src,dst,bytes,start_us\n0,1,4096,1e300\n", 2, "start_us"),
    ("late.json", '[{"src": 0, "dst": 1, "bytes": 4096, "start_ps": 4611686018427387904}]', 1, "start_ps"),
    ("host.csv", "src,dst,bytes\n0,4294967296,4096\n", 2, "dst"),
    ("late.cm", "Nodes 16\nConnections 1\n0->1 id 0 start 4611686018428 size 10\n", 3, "start"),
    # A value given twice would silently keep the last one.
    ("twice.csv", "src,dst,src,bytes\n0,1,2,4096\n", 1, "src"),
    ("twice.cm", "Nodes 16\nConnections 1\n0->1 id 0 start 0 size 10 size 4096\n", 3, "size"),
])
def test_flow_files_refuse_bad_numbers_repeats_and_unknown_fields(tmp_path, name, body, line, field):
    # Each would otherwise be a traceback (NaN start) or a misspelt start time silently read as 0.
    p = tmp_path / name
    p.write_text(body)
    with pytest.raises(TrafficFileError) as e:
        read_traffic_file(p)
    assert (e.value.line, e.value.field) == (line, field)
    # JSON keeps no lines: its flows are named by position ("flow 2"), not as a wrong line.
    where = f"{p}: flow {line}: " if name.endswith(".json") else f"{p}:{line}: "
    assert str(e.value).startswith(where) and "\n" not in str(e.value)


def test_a_connection_matrix_for_fewer_hosts_runs(tmp_path):
    # htsim rounds its fabric up from `Nodes`: 100 hosts on k = 8's 128 is fine; only more is refused.
    p = tmp_path / "m.cm"
    p.write_text("Nodes 100\nConnections 1\n0->99 id 1 start 0 size 4096\n")
    r = simulate("fat-tree:k=8", f"file:{p}")
    # Hosts 0 and 99 sit in pods 0 and 6: one frame over 6 links, its ACK over 6 back.
    assert len(r.flows) == 1 and r.flows["fct_ps"].iloc[0] == 6 * (T_DATA + LINK) + 6 * (T_ACK + LINK)


@pytest.mark.parametrize("name,body,line,field,message", [
    # Host 500 does not exist on k=4 (hosts 0..15): only the engine knows; it names flow 1.
    ("oob.csv", "src,dst,bytes\n0,1,4096\n2,500,4096\n", 3, "dst", "field `dst` is host 500, but the topology has hosts 0..15"),
    ("self.csv", "src,dst,bytes\n0,1,4096\n3,3,4096\n", 3, "dst", "field `dst` equals src"),
    # The engine's `bytes` is a connection matrix's `size` (it was named `bytes`).
    ("zero.cm", "Nodes 16\nConnections 1\n5->6 id 1 start 0 size 0\n", 3, "size", "field `size` must be > 0"),
    # htsim builds its fabric from `Nodes`: a matrix written for 128 hosts is not run on k=4's 16.
    ("big.cm", "# written for k=8\nNodes 128\nConnections 1\n5->6 id 1 start 0 size 10\n", 2, "Nodes",
     "`Nodes 128`, but the fabric has 16 hosts"),
])
def test_engine_errors_about_a_file_flow_name_the_file_and_line(tmp_path, name, body, line, field, message):
    p = tmp_path / name
    p.write_text(body)
    with pytest.raises(TrafficFileError) as e:
        simulate("fat-tree:k=4", f"file:{p}")
    assert (e.value.path, e.value.line, e.value.field) == (str(p), line, field)
    assert str(e.value).startswith(f"{p}:{line}: {message}") and "\n" not in str(e.value)


def test_seed_out_of_range_non_finite_numbers_and_conflicting_leaf_spine_options_name_the_field():
    with pytest.raises(ConfigError) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", seed=1 << 64)
    assert e.value.field == "seed"
    with pytest.raises(ConfigError, match=r"`link.rate_gbps`: expected a finite number, got nan") as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"rate_gbps": float("nan")})
    assert e.value.field == "link.rate_gbps"
    with pytest.raises(ConfigError, match="not both") as e:
        simulate("leaf-spine:leaves=4,spines=4,hosts_per_leaf=2,oversubscription=2", "permutation:size=4KiB")
    assert e.value.field == "topology.oversubscription"


def test_compare_refuses_an_empty_scheme_list_and_zero_seeds():
    from typer.testing import CliRunner

    from tracefabric.tools.cli import app
    from tracefabric.tools.compare import compare

    with pytest.raises(ConfigError, match="`schemes` is empty") as e:
        compare([], ["permutation:size=4KiB"], topology="fat-tree:k=4")
    assert e.value.field == "schemes"
    with pytest.raises(ConfigError, match="`seeds` is empty"):
        compare(["ecmp"], ["permutation:size=4KiB"], topology="fat-tree:k=4", seeds=[])
    res = CliRunner().invoke(app, ["net", "compare", "--topology", "fat-tree:k=4", "--seeds", "0", "--schemes", "ecmp"])
    assert res.exit_code == 2 and "--seeds" in res.output


def test_unknown_or_ill_typed_config_keys_are_named_by_their_path():
    # Not `config` with a column number of the JSON the API generated: the key the user wrote.
    with pytest.raises(ConfigError) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"bogus": 1})
    assert e.value.field == "link.bogus"
    assert str(e.value) == "invalid config field `link.bogus`: unknown field `bogus`, expected one of `rate_gbps`, `latency_ns`, `loss_rate`"
    with pytest.raises(ConfigError, match=r"`switch.buffer_bytes`: invalid type: string \"x\", expected u64$") as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", switch={"buffer_bytes": "x"})
    assert e.value.field == "switch.buffer_bytes"


@pytest.mark.parametrize("topology,traffic,field,message", [
    ({"kind": "fat_tree", "k": "4"}, "permutation:size=4KiB", "topology.k", 'invalid type: string "4", expected u32'),
    ({"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": -1}, "permutation:size=4KiB",
     "topology.hosts_per_leaf", "invalid value: integer `-1`, expected u32"),
    ("fat-tree:k=4", {"kind": "incast", "dst": 0, "senders": 3, "bytes": "x"}, "traffic.bytes", 'invalid type: string "x", expected u64'),
    ("fat-tree:k=4", {"kind": "all_to_all", "bytes": 5, "staggered": 1}, "traffic.staggered",
     "invalid type: integer `1`, expected a boolean"),
    ("fat-tree:k=4", {"kind": "all_to_all", "bytes": 5, "shuffled": "yes"}, "traffic.shuffled",
     'invalid type: string "yes", expected a boolean'),
    # A missing key is named, not the first key present (`traffic.senders` before).
    ("fat-tree:k=4", {"kind": "incast", "senders": 2, "bytes": 1000}, "traffic.dst", "missing field `dst`"),
    ({"kind": "fat_tree"}, "permutation:size=4KiB", "topology.k", "missing field `k`"),
])
def test_keys_inside_the_kind_tagged_sections_are_named(topology, traffic, field, message):
    # Serde stops its error path at a `kind`-tagged section (it buffers it to pick the
    # variant): these used to name only `topology` or `traffic`.
    with pytest.raises(ConfigError) as e:
        simulate(topology, traffic)
    assert e.value.field == field
    assert str(e.value) == f"invalid config field `{field}`: {message}"


@pytest.mark.parametrize("traffic,field,message", [
    ("permutation:sz=1MiB", "traffic.sz", "unknown parameter `sz` (expected: size, inter_pod)"),
    ("all-to-all:staggered=true", "traffic.size", "missing `size=`"),
    ("incast:senders=2,size=1MiB,dest=3", "traffic.dest", "unknown parameter `dest` (expected: dst, senders, size)"),
])
def test_a_misspelt_traffic_parameter_is_named_not_reported_as_a_missing_size(traffic, field, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        simulate("fat-tree:k=4", traffic)
    assert e.value.field == field


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", *args], capture_output=True, text=True)


def test_cli_output_paths_that_cannot_be_written_give_one_line(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    fast = ["--topology", "fat-tree:k=4", "--traffic", "permutation:size=4KiB"]
    for args in (["net", "run", *fast, "--flows-out", str(blocker / "f.csv")],
                 ["net", "compare", *fast, "--schemes", "ecmp", "--out", str(blocker / "cmp")]):
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        [line] = proc.stderr.strip().splitlines()  # before any run: no progress bar either
        assert line.startswith(f"error: {blocker}") and line.endswith((": File exists", ": Not a directory")), line
    # A suffix it would have to guess a format for is refused before the run.
    proc = _cli("net", "run", *fast, "--flows-out", str(tmp_path / "f.txt"))
    assert proc.returncode == 2 and "expected a file ending in .csv or .parquet" in proc.stderr
    proc = _cli("net", "run", *fast, "--flows-out", str(tmp_path / "f.csv"))
    assert proc.returncode == 0 and len((tmp_path / "f.csv").read_text().splitlines()) == 1 + 16
    # An empty path ("$OUT" unset) used to mean the current folder: traces were written there.
    for args, name in ((["trace", "synthesize", "--model", "gpt2-small", "--world", "2", "--out", ""], "--out"),
                       (["trace", "synthesize", "--model", "gpt2-small", "--world", "2", "--out="], "--out"),
                       (["trace", "validate", ""], "argument 3")):
        proc = subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", *args],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.strip() == f"error: {name}: empty value (an unset shell variable?)"
    assert not list(tmp_path.glob("*.et"))
    from tracefabric.tools.cli import _empty_argument
    assert _empty_argument(["trace", "capture", "--option=KEY="]) is None  # an option's own empty value
    assert _empty_argument(["run", "--comm-groups=g.json", ""]) == "argument 3"


def test_the_packet_backend_of_run_names_a_bad_fabric_field(tmp_path, shared):
    fx = shared / "fixtures" / "astra-sim"
    fabric = tmp_path / "fabric.yml"
    fabric.write_text("topology: {kind: fat_tree, k: 7}\n")
    proc = _cli("run", "--workload", str(fx / "workloads/8npus_1MB/all_reduce"), "--system", str(fx / "configs/sys_ring_4chunks.json"),
                "--network", str(fabric), "--backend", "packet")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {fabric}: invalid config field `topology.k`: a k-ary fat tree "
                                                "needs an even k >= 2, got 7"]


@needs_torch
def test_capture_refuses_an_option_its_workload_does_not_take_before_starting_ranks():
    from tracefabric.traces.capture import check_options
    from tracefabric.traces.workloads import get_workload

    with pytest.raises(ConfigError, match=r"build_fsdp2 takes no option 'foo' \(it takes: vocab, dim, layers") as e:
        check_options(get_workload("fsdp2-llama"), {"foo": 1})
    assert e.value.field == "option"
    with pytest.raises(ConfigError, match=r"takes no option 'experts' \(it takes: tokens, dim, ffn"):
        check_options(get_workload("moe"), {"experts": 4})
    check_options(get_workload("moe"), {"ep": 3, "tokens": 8})  # accepted


@pytest.mark.parametrize("kwargs,field", [
    ({"link": {"latency_ns": 1e17}}, "link.latency_ns"),    # past 2^64 ps: wrapped to a short CCT
    ({"switch": {"latency_ns": 1e17}}, "switch.latency_ns"),
    ({"link": {"rate_gbps": 1e-9}}, "link.rate_gbps"),       # one frame would take 9 hours
    ({"packet": {"header_bytes": 2**32 - 1}}, "packet.payload_bytes"),  # payload + header wrapped in 32 bits
    ({"packet": {"ack_bytes": 2**32 - 1}}, "packet.ack_bytes"),
    ({"packet": {"gap_bytes": 2**32 - 1}}, "packet.gap_bytes"),  # 43 ms of gap per frame at 800 Gbps
])
def test_numbers_that_would_overflow_the_engines_clock_or_sizes_are_refused(kwargs, field):
    with pytest.raises(ConfigError) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", **kwargs)
    assert e.value.field == field, str(e.value)


def test_out_of_range_floats_are_printed_short():
    # Rust's `{}` prints 1e-300 with 300 digits: the one-line error was 330 characters long.
    with pytest.raises(ConfigError) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"rate_gbps": 1e-300})
    assert str(e.value) == "invalid config field `link.rate_gbps`: must be between 0.001 and 1000000, got 1e-300"
    with pytest.raises(ConfigError) as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"latency_ns": 1e300})
    assert str(e.value) == "invalid config field `link.latency_ns`: must be between 0 and 1e11 (the longest run), got 1e300"


@pytest.mark.parametrize("topology,traffic,field,message", [
    # 6 x 10^9 links (10^5 leaves x 6 x 10^4 spines) and 10^8 routing entries: refused before they
    # are allocated (this grew until the machine ran out of memory).
    ("leaf-spine:leaves=100000,spines=60000,hosts_per_leaf=1", "permutation:size=4KiB", "topology",
     "hosts + leaves x spines x links_per_pair = 6000100000 links exceeds the supported maximum of 4194304"),
    # 65,536 uplinks per leaf: more next hops in one group than LB pointers index (it panicked).
    ("leaf-spine:leaves=2,spines=256,links_per_pair=256,hosts_per_leaf=1", "permutation:size=4KiB", "topology",
     "spines x links_per_pair = 65536 uplinks per leaf exceeds the supported maximum of 65535 (the next hops of one group)"),
    ("leaf-spine:leaves=10000,spines=64,hosts_per_leaf=1", "permutation:size=4KiB", "topology",
     "(leaves + spines) x leaves = 100640000 routing entries exceeds the supported maximum of 67108864"),
    # 8,192 x 8,191 flows: ~55 GB of run state.
    ("fat-tree:k=32", "all-to-all:size=4KiB", "traffic",
     "67100672 flows on 8192 hosts exceeds the supported maximum of 8388608 flows per run"),
])
def test_fabrics_and_traffic_too_large_for_memory_are_refused_before_they_are_built(topology, traffic, field, message):
    with pytest.raises(ConfigError) as e:
        simulate(topology, traffic)
    assert e.value.field == field
    assert str(e.value) == f"invalid config field `{field}`: {message}"


def test_a_run_past_its_time_limit_reports_the_limit_not_its_last_event():
    # The first frame's arrival (2 s of link latency) lies past the 1 s limit: the error said t = 0.
    with pytest.raises(SimulationDidNotFinish, match=r"16 of 16 flows incomplete at t=1000000\.000 us \(limits\.max_time_ms = 1000 reached\)"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"latency_ns": 2e9})


def test_a_flow_too_large_to_finish_is_refused_before_memory_runs_out():
    # 10^12 B at 800 Gbps needs 10 s of serialization alone: past the default 1 s limit. It
    # used to abort the process allocating per-packet state for the bound.
    huge = {"kind": "flows", "src": [0], "dst": [1], "bytes": [10**12], "start_ps": [0]}
    with pytest.raises(FlowError, match=r"flow 0: field `bytes` = 1000000000000 needs at least 10000.0 ms") as e:
        simulate("fat-tree:k=4", huge)
    assert e.value.field == "bytes"


def test_wrong_types_at_the_api_name_the_argument():
    with pytest.raises(ConfigError, match=r"`topology`: expected a spec string .* got NoneType"):
        simulate(None, "permutation:size=4KiB")
    with pytest.raises(ConfigError, match=r"`traffic`: expected a spec string .* got int"):
        simulate("fat-tree:k=4", 5)
    with pytest.raises(ConfigError, match=r"`link`: expected a dict of settings, got list"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", link=[400])  # was read as rate_gbps=400
    with pytest.raises(ConfigError, match=r"`lb_params`: expected a dict"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", lb_params=[1])


def test_files_that_are_not_utf8_are_named(tmp_path):
    from tracefabric.astra_configs.formats import read_network, read_system

    for name in ("flows.csv", "flows.json", "m.cm"):
        p = tmp_path / name
        p.write_bytes(b"src,dst,bytes\n0,1,\xff\xfe\n")
        with pytest.raises(TrafficFileError, match=rf"{p}: not UTF-8 text"):
            simulate("fat-tree:k=4", f"file:{p}")
    for name, read in (("sys.json", read_system), ("net.yml", read_network)):
        p = tmp_path / name
        p.write_bytes(b"\xff\xfe")
        with pytest.raises(ConfigError, match=rf"{p}: not UTF-8 text \(byte 0\)"):
            read(p)


def test_a_standalone_run_without_flows_is_refused():
    # (A driven run may declare none: the system layer's compute-only workloads.)
    empty = {"kind": "flows", "src": [], "dst": [], "bytes": [], "start_ps": []}
    with pytest.raises(ConfigError, match="invalid config field `traffic`: no flows to simulate") as e:
        simulate("fat-tree:k=4", empty)
    assert e.value.field == "traffic"


def test_a_key_given_twice_is_refused_not_overwritten(tmp_path):
    # JSON and YAML parsers keep the last of two equal keys without a word; a study would
    # then run on a value its author may have meant to replace, or not.
    from tracefabric.astra_configs.formats import read_comm_groups, read_network, read_system
    flows = tmp_path / "f.json"
    flows.write_text('[{"src": 0, "dst": 1, "bytes": 4096, "bytes": 8192}]')
    with pytest.raises(TrafficFileError, match=r"f\.json: key 'bytes' appears twice in one object") as e:
        read_traffic_file(flows)
    assert e.value.field == "bytes"
    system = tmp_path / "sys.json"
    system.write_text('{"scheduling-policy": "LIFO", "collective-optimization": "baseline", '
                      '"preferred-dataset-splits": 4, "preferred-dataset-splits": 1}')
    with pytest.raises(ConfigError, match=r"sys\.json: key 'preferred-dataset-splits' appears twice") as e:
        read_system(system)
    assert e.value.field == "preferred-dataset-splits"
    network = tmp_path / "net.yml"
    network.write_text("topology: [Switch]\nnpus_count: [4]\nbandwidth: [100]\nlatency: [1000]\nbandwidth: [50]\n")
    with pytest.raises(ConfigError, match=r"net\.yml: key 'bandwidth' appears twice in one object \(line 5\)") as e:
        read_network(network)
    assert e.value.field == "bandwidth"
    network.write_text("topology: [Switch]\nnpus_count: [4]\nbandwidth: [100]\nlatency: [1000]\n")
    assert read_network(network).bandwidth == [100.0]  # one of each still reads
    groups = tmp_path / "comm_groups.json"
    groups.write_text('{"1": [0, 1], "1": [2, 3]}')
    with pytest.raises(ConfigError, match=r"comm_groups\.json: key '1' appears twice") as e:
        read_comm_groups(groups)
    assert e.value.field == "1"


def test_network_yaml_reads_exponent_floats_and_names_values_json_cannot_carry(tmp_path):
    from tracefabric.astra_configs.formats import read_network
    net = tmp_path / "net.yml"
    # YAML 1.1 reads `5e1` as a string; ASTRA-sim's yaml-cpp (and the user) mean 50.
    net.write_text("topology: [Switch]\nnpus_count: [8]\nbandwidth: [5e1]\nlatency: [5E+2]\n")
    n = read_network(net)
    assert (n.bandwidth, n.latency) == ([50.0], [500.0])
    # A date used to reach json.dumps as a TypeError traceback.
    net.write_text("topology: {kind: fat_tree, k: 4}\nlink: {rate_gbps: 2024-01-01}\n")
    with pytest.raises(ConfigError, match=r"net\.yml: link\.rate_gbps = datetime\.date\(2024, 1, 1\): a YAML date") as e:
        read_network(net)
    assert e.value.field == "link.rate_gbps"


def test_a_timeout_shorter_than_the_round_trip_is_refused_and_the_default_stretches_to_it():
    # At 1 Gbps a full frame (4,158 B) takes 33.264 us per link: over the 6 links of k = 4 and
    # back as a 64 B ACK the unloaded round trip is 6 x (33.264 + 0.5) + 6 x (0.512 + 0.5)
    # = 208.656 us. The old fixed 100 us timeout presumed every packet lost before its ACK
    # could return, and the run ended "stuck" after 32 timeouts.
    rtt_us = 6 * (4158 * 8 / 1e3 + 0.5) + 6 * (64 * 8 / 1e3 + 0.5)
    with pytest.raises(ConfigError, match=rf"= 100 us is not longer than the unloaded round trip .* \({rtt_us:.3f} us\)") as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", link={"rate_gbps": 1}, limits={"rto_us": 100})
    assert e.value.field == "limits.rto_us"
    r = simulate("fat-tree:k=4", "permutation:size=4KiB", link={"rate_gbps": 1})  # default: 2 x RTT
    assert len(r.flows) == 16 and (r.flows["timeouts"] == 0).all()
    # One packet per flow: each FCT is at least the round trip over its own path.
    per_hop_us = (4158 * 8 / 1e3 + 0.5) + (64 * 8 / 1e3 + 0.5)
    assert (r.flows["fct_us"] >= r.flows["hops"] * per_hop_us - 1e-6).all()
    assert r.flows["fct_us"].max() >= rtt_us
    # Nor may a packet be presumed lost while it can still wait in queues: the default is at
    # least the round trip plus two drains of an 800 KB buffer (2 x 6,400 us at 1 Gbps). With
    # 417 us, a 1 Gbps ECMP all-to-all ended "no progress through 32 timeouts"; a run that
    # gives up now names the timeout it used.
    rto_us = rtt_us + 2 * 800_000 * 8 / 1e3
    with pytest.raises(SimulationDidNotFinish, match=rf"through 1 consecutive timeouts \(limits.max_timeouts\) of {rto_us:.3f} us each \(limits.rto_us\)"):
        simulate("fat-tree:k=4", "all-to-all:size=1MiB", link={"rate_gbps": 1}, limits={"max_timeouts": 1})
    r = simulate("fat-tree:k=4", "all-to-all:size=1MiB", link={"rate_gbps": 1})
    assert r.flows["timeouts"].sum() > 0 and r.summary["data_packets_dropped"] > 0  # ECMP collisions overflow queues...
    assert 0 < r.cct_increase < 0.5  # ...and every flow still finishes (measured +25.7 %)


def test_a_csv_with_a_bom_reads_and_a_param_given_twice_is_refused(tmp_path):
    from typer.testing import CliRunner

    from tracefabric.tools.cli import app
    # Excel writes a byte-order mark: it used to become part of the first column's name.
    p = tmp_path / "f.csv"
    p.write_bytes("src,dst,bytes\n0,5,8192\n".encode("utf-8-sig"))
    assert read_traffic_file(p)["src"] == [0]
    res = CliRunner().invoke(app, ["net", "run", "--topology", "fat-tree:k=4", "--traffic", "permutation:size=4KiB",
                                   "--scheme", "reps", "--param", "loss.threshold=6", "--param", "loss.threshold=7"])
    assert res.exit_code == 2 and "loss.threshold is given twice" in res.output


def test_progress_callback_errors_and_signals_surface_as_themselves():
    # They were swallowed into "did not finish (cancelled)", and Ctrl-C waited for the run's end.
    import os
    import signal
    import threading

    import numpy as np

    from tracefabric import SimulationDidNotFinish

    with pytest.raises(ZeroDivisionError):
        simulate("fat-tree:k=4", "permutation:size=4KiB", progress=lambda done, total: 1 / 0)
    with pytest.raises(ConfigError, match=r"`progress`: expected a callable progress\(done, total\), got int"):
        simulate("fat-tree:k=4", "permutation:size=4KiB", progress=5)
    calls = []  # any false value cancels, numpy's too; the engine calls every 2^20 events
    with pytest.raises(SimulationDidNotFinish, match=r"16256 of 16256 flows incomplete .*\(cancelled\)"):
        simulate("fat-tree:k=8", "all-to-all:size=64KiB", progress=lambda d, t: calls.append((d, t)) or np.False_)
    assert calls == [(0, 16256)]

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop

    # A signal's handler runs during a run with no callback (a 1 MiB all-to-all takes seconds).
    previous = signal.signal(signal.SIGUSR1, stop)
    try:
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(Stop):
            simulate("fat-tree:k=8", "all-to-all:size=1MiB", lb="host_spray")
    finally:
        signal.signal(signal.SIGUSR1, previous)
