"""Bad input to the Python API, found by fuzzing it: each is refused with one line naming the
field (or file, node, flow) and the value, and what it should be, instead of a raw TypeError,
OverflowError or protobuf error, a silent misreading, or files written outside their folder."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tracefabric import ConfigError, TrafficFileError
from tracefabric.astra_configs.formats import check_network, check_system, read_memory
from tracefabric.traces.microbenchmark import write_microbenchmark
from tracefabric.collectives.iteration import backend_spec
from tracefabric.collectives.iteration import simulate as run_iteration
from tracefabric.network_backends.packet import build_config, fabric_hosts, simulate
from tracefabric.network_backends.packet.traffic_files import read_traffic_file
from tracefabric.network_backends.packet.specs import topology_config
from tracefabric.specs import parse_size
from tracefabric.traces import validate as v
from tracefabric.traces.chakra_io import COMM_TYPES, EtNode, read_trace, write_trace
from tracefabric.traces.models import ModelSpec, from_hf_config, get_model
from tracefabric.traces.synthesis import Plan

SYSTEM = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
          "endpoint-delay": 0, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
          "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
NET4 = {"topology": ["Switch"], "npus_count": [4], "bandwidth": [100], "latency": [1000]}
# A ring all-reduce of 1 MiB on NET4: 6 steps of 256 KiB, each two 1 us links at 100 GB/s.
RING_1MIB_NS = 6 * int(2 * 1000 + 2**18 / (100 * 2**30 / 1e9))


# (9) simulate's options ------------------------------------------------------------------

@pytest.mark.parametrize("option,meant", [("lb_parms", "lb_params"), ("sede", "seed"), ("topolgy", "topology")])
def test_a_misspelt_simulate_option_is_named_with_the_one_meant(option, meant):
    # It was a TypeError naming build_config, a function the caller never called.
    with pytest.raises(ConfigError, match=rf"^simulate\(\): unknown option `{option}`; did you mean `{meant}`\? "
                                          r"expected one of: topology, traffic, scheme, lb, .*, progress$") as e:
        simulate("fat-tree:k=4", "permutation:size=4KiB", **{option: 1})
    assert e.value.field == option


# (10, 11) write_microbenchmark -----------------------------------------------------------

@pytest.mark.parametrize("kwargs,field,message", [
    ({"ranks": 10**7}, "ranks", r"`ranks`: expected an integer in 1\.\.131072, got 10000000"),  # wrote 656k files
    ({"ranks": 0}, "ranks", r"`ranks`: expected an integer in 1\.\.131072, got 0"),
    ({"ranks": True}, "ranks", r"`ranks`: expected an integer in 1\.\.131072, got True"),
    ({"ranks": "4"}, "ranks", r"`ranks`: expected an integer in 1\.\.131072, got '4'"),
    ({"size": -8}, "size", r"`size`: expected an integer number of bytes in 0\.\.2\^63-1, got -8"),
    ({"size": 1024.5}, "size", r"`size`: expected an integer number of bytes in 0\.\.2\^63-1, got 1024\.5"),
    ({"size": True}, "size", r"`size`: expected an integer number of bytes in 0\.\.2\^63-1, got True"),
    ({"size": 2**63}, "size", r"got 9223372036854775808"),
    ({"prefix": "../x"}, "prefix", r"ET prefix '\.\./x': expected a plain file name \(no folders\)"),
    ({"prefix": "a\\b"}, "prefix", r"ET prefix 'a\\\\b': expected a plain file name"),
    ({"prefix": ".."}, "prefix", r"ET prefix '\.\.': expected a plain file name"),
])
def test_microbenchmark_arguments_are_checked_before_anything_is_written(tmp_path, kwargs, field, message):
    out = tmp_path / "mb"
    args = {"ranks": 4, "size": 1 << 20, **kwargs}
    with pytest.raises(ConfigError, match=message) as e:
        write_microbenchmark(out, args.pop("ranks"), "all_reduce", args.pop("size"), **args)
    assert e.value.field == field
    assert sorted(p.name for p in tmp_path.rglob("*")) == []  # no folder, no ET, none beside it


def test_microbenchmark_takes_numpy_numbers_and_writes_one_file_per_rank(tmp_path):
    wl = write_microbenchmark(tmp_path, np.int64(3), "all_gather", np.int64(4096), prefix="ag")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ag.0.et", "ag.1.et", "ag.2.et"]
    assert read_trace(tmp_path / "ag.2.et")[1][0].attrs["comm_size"] == 4096
    assert wl == tmp_path / "ag"


# (12) write_trace -------------------------------------------------------------------------

@pytest.mark.parametrize("node,field,message", [
    (EtNode(-1, "a", "COMP_NODE"), "id", r"node -1 \('a'\): field `id` = -1: expected an integer in 0\.\.2\^64-1"),
    (EtNode(0, "a", "COMP_NODE", duration_micros=1.5), "duration_micros",
     r"node 0 \('a'\): field `duration_micros` = 1\.5: expected an integer in 0\.\.2\^64-1"),
    (EtNode(0, "a", "COMP_NODE", duration_micros=True), "duration_micros",
     r"node 0 \('a'\): field `duration_micros` = True: expected an integer in 0\.\.2\^64-1"),
    (EtNode(0, "a", "COMP"), "type", r"node 0 \('a'\): field `type` = 'COMP': expected one of INVALID_NODE, "),
    (EtNode(3, "a", "COMP_NODE", ctrl_deps=[1, -2]), "ctrl_deps",
     r"node 3 \('a'\): field `ctrl_deps`\[1\] = -2: expected a node id, an integer in 0\.\.2\^64-1"),
    (EtNode(0, 7, "COMP_NODE"), "name", r"node 0 \(7\): field `name` = 7: expected a string"),
    (EtNode(0, "a", "COMM_COLL_NODE", attrs={"comm_size": 2**63}), "comm_size",
     r"node 0 \('a'\): attribute `comm_size` = 9223372036854775808: expected a bool, a string, an integer in "
     r"-2\^63\.\.2\^63-1, or a list"),
    (EtNode(0, "a", "COMP_NODE", attrs={"flops": 1.5}), "flops", r"node 0 \('a'\): attribute `flops` = 1\.5: expected a bool"),
])
def test_write_trace_names_the_node_and_field_protobuf_refuses(tmp_path, node, field, message):
    path = tmp_path / "t.0.et"
    with pytest.raises(ConfigError, match="^" + re.escape(str(path)) + ": " + message) as e:
        write_trace(path, [EtNode(9, "ok", "COMP_NODE"), node])
    assert e.value.field == field
    assert not path.exists()


# (14) one rank's ET as the workload -------------------------------------------------------

def test_a_ranks_et_file_reads_as_its_workload_prefix(tmp_path):
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)
    assert run_iteration(wl, SYSTEM, NET4).iteration_ns == RING_1MIB_NS
    # It said "no Chakra ETs named <prefix>.<rank>.et found".
    assert run_iteration(tmp_path / "all_reduce.0.et", SYSTEM, NET4).iteration_ns == RING_1MIB_NS
    traces, _ = v.load(tmp_path / "all_reduce.3.et")
    assert [t.path.name for t in traces] == ["all_reduce.0.et", "all_reduce.1.et", "all_reduce.2.et", "all_reduce.3.et"]


# (15) run and trace validate read attributes alike ---------------------------------------

def _coll_workload(folder, size) -> None:
    folder.mkdir()
    for r in range(4):
        write_trace(folder / f"t.{r}.et", [EtNode(0, "ar", "COMM_COLL_NODE",
                                                  attrs={"comm_type": COMM_TYPES["ALL_REDUCE"], "comm_size": size})])


def test_run_and_validate_agree_on_a_comm_size_written_as_a_string(tmp_path):
    _coll_workload(tmp_path / "digits", str(1 << 20))
    traces, groups = v.load(tmp_path / "digits")
    assert v.problems(traces, groups) == []  # validate refused what run accepted
    assert run_iteration(tmp_path / "digits", SYSTEM, NET4).iteration_ns == RING_1MIB_NS
    _coll_workload(tmp_path / "words", "lots")
    traces, groups = v.load(tmp_path / "words")
    found = v.problems(traces, groups)
    assert len(found) == 4 and "node 0 (ar): comm_size = 'lots': expected bytes >= 0" in found[0]
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('ar'\): attribute 'comm_size' = 'lots': expected an integer") as e:
        run_iteration(tmp_path / "words", SYSTEM, NET4)
    assert e.value.field == "comm_size"


def test_validate_pairs_sends_and_receives_by_peers_read_as_run_reads_them(tmp_path):
    folder = tmp_path / "p2p"
    folder.mkdir()
    write_trace(folder / "t.0.et", [EtNode(0, "s", "COMM_SEND_NODE", attrs={"comm_dst": "1", "comm_size": 64})])
    write_trace(folder / "t.1.et", [EtNode(0, "r", "COMM_RECV_NODE", attrs={"comm_src": 0, "comm_size": "64"})])
    traces, groups = v.load(folder)
    assert v.problems(traces, groups) == []  # "1" and 1 were two peers: an unmatched send


# (16, 17) ModelSpec and Plan fields -------------------------------------------------------

TINY = dict(name="m", family="llama", layers=2, hidden=32, ffn=64, heads=4, kv_heads=2, vocab=64)


@pytest.mark.parametrize("change,field,message", [
    ({"experts": 4, "shared_experts": -1}, "shared_experts", r"`shared_experts` = -1: expected an integer in 0\.\.16777216"),
    ({"layers": 2.0}, "layers", r"`layers` = 2\.0: expected an integer in 1\.\.4096"),
    ({"heads": True}, "heads", r"`heads` = True: expected an integer in 1\.\.16777216"),
    ({"vocab": "64"}, "vocab", r"`vocab` = '64': expected an integer in 1\.\.16777216"),
    ({"q_lora_rank": -5}, "q_lora_rank", r"`q_lora_rank` = -5: expected an integer in 0\.\.16777216"),
    ({"family": "bert"}, "family", r"`family` = 'bert': expected one of llama, gpt2, deepseek, moe_layer"),
])
def test_model_spec_fields_are_type_and_range_checked(change, field, message):
    with pytest.raises(ConfigError, match=r"^model `m`: " + message) as e:
        ModelSpec(**{**TINY, **change})
    assert e.value.field == field


def test_model_spec_takes_numpy_integers_and_refuses_a_nameless_model():
    assert ModelSpec(**{**TINY, "layers": np.int64(3)}).total_params() == ModelSpec(**{**TINY, "layers": 3}).total_params()
    assert type(ModelSpec(**{**TINY, "layers": np.int64(3)}).layers) is int
    with pytest.raises(ConfigError, match=r"^model name '': expected a non-empty string$"):
        ModelSpec(**{**TINY, "name": ""})
    with pytest.raises(ConfigError, match=r"dense_layers \(1\) need their MLP width dense_ffn >= 1, got 0"):
        ModelSpec(**{**TINY, "dense_layers": 1})


@pytest.mark.parametrize("change,field,message", [
    ({"root_unit": "no"}, "root_unit", r"`root_unit`: expected True or False, got 'no'"),  # was accepted, and true
    ({"root_unit": 1}, "root_unit", r"`root_unit`: expected True or False, got 1"),
    ({"precision": ["bf16"]}, "precision", r"`precision`: expected a string, one of fp8, bf16, fp16, fp32, got \['bf16'\]"),
    ({"gpu": None}, "gpu", r"`gpu`: expected a string, one of h100, h200, b200, got None"),
    ({"parallel": 3}, "parallel", r"`parallel`: expected a string, one of fsdp, dp, got 3"),
])
def test_plan_fields_are_type_checked(change, field, message):
    with pytest.raises(ConfigError, match="^" + message + "$") as e:
        Plan(**change)
    assert e.value.field == field
    assert Plan(root_unit=np.bool_(True)).root_unit is True


# (18) flow files ---------------------------------------------------------------------------

def test_a_flow_with_a_bool_start_or_two_starts_is_refused(tmp_path):
    path = tmp_path / "flows.json"
    path.write_text(json.dumps([{"src": 0, "dst": 1, "bytes": 64}, {"src": 1, "dst": 0, "bytes": 64, "start_us": True}]))
    with pytest.raises(TrafficFileError, match=rf"^{re.escape(str(path))}: flow 2: field `start_us` must be a number, got True$") as e:
        read_traffic_file(path)
    assert (e.value.field, e.value.line) == ("start_us", 2)
    path.write_text(json.dumps([{"src": 1, "dst": 0, "bytes": 64, "start_us": 1, "start_ps": 5}]))
    with pytest.raises(TrafficFileError, match=rf"^{re.escape(str(path))}: flow 1: fields `start_us` and `start_ps` "
                                               r"both given; expected one start$"):
        read_traffic_file(path)
    csv = tmp_path / "flows.csv"
    csv.write_text("src,dst,bytes,start_us,start_ps\n0,1,64,1,\n1,0,64,,5\n2,0,64,3,7\n")
    with pytest.raises(TrafficFileError, match=rf"^{re.escape(str(csv))}:4: fields `start_us` and `start_ps` both given"):
        read_traffic_file(csv)
    csv.write_text("src,dst,bytes,start_us,start_ps\n0,1,64,1,\n1,0,64,,5\n")
    assert read_traffic_file(csv)["start_ps"] == [1_000_000, 5]  # one of the two per flow is fine


# (20) numbers past a float ------------------------------------------------------------------

@pytest.mark.parametrize("value,shown", [("1e308", "1e308"), ("0", "0.0"), ("-2", "-2.0"), ("16777217", "16777217.0")])
def test_oversubscription_out_of_range_is_named_with_its_range(value, shown):
    spec = f"leaf-spine:leaves=2,spines=2,oversubscription={value}"
    with pytest.raises(ConfigError) as e:
        simulate(spec, "permutation:size=4KiB")
    assert str(e.value) == ("invalid config field `topology.oversubscription`: must be in (0, 16777216] "
                            f"(hosts per leaf over its uplinks), got {shown}")
    assert e.value.field == "topology.oversubscription"
    assert topology_config("leaf-spine:leaves=2,spines=2,oversubscription=2")["oversubscription"] == 2.0


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_non_finite_oversubscription_is_named_as_such(value):
    with pytest.raises(ConfigError, match=rf"`topology.oversubscription`: expected a finite number, got {value}") as e:
        simulate(f"leaf-spine:leaves=2,spines=2,oversubscription={value}", "permutation:size=4KiB")
    assert e.value.field == "topology.oversubscription"


def test_oversubscription_in_a_dict_or_network_file_is_named_too():
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "oversubscription": 1e308}
    with pytest.raises(ConfigError, match=r"`topology\.oversubscription`: must be in \(0, 16777216\]"):
        simulate(topo, "permutation:size=4KiB")
    # The engine counts a network file's hosts (Python's own count overflowed on round(inf)).
    with pytest.raises(ConfigError, match=r"`topology\.oversubscription`: must be in \(0, 16777216\]"):
        backend_spec("packet", check_network({"topology": topo}, "net.yml"), 4, {})
    fabric = check_network({"topology": {**topo, "oversubscription": 2}}, "net.yml")
    assert fabric_hosts(build_config(fabric.config["topology"], None)) == 2 * (2 * 2)  # leaves x (oversubscription x spines)
    with pytest.raises(ConfigError, match=r"net\.yml: the fabric has 8 hosts but the workload has 9 ranks"):
        backend_spec("packet", fabric, 9, {})


def test_an_integer_past_a_floats_range_is_named_not_an_overflow_error(tmp_path):
    with pytest.raises(ConfigError, match=r"^sys\.json: key 'local-mem-bw' = an integer of 603 digits \(114813\.\.\.\): "
                                          r"expected a finite number >= 0$") as e:
        check_system({**SYSTEM, "local-mem-bw": 2**2000}, "sys.json")
    assert e.value.field == "local-mem-bw"
    with pytest.raises(ConfigError, match=r"key 'local-mem-bw' = an integer of 603 digits"):
        run_iteration(write_microbenchmark(tmp_path, 4, "all_reduce", 64), {**SYSTEM, "local-mem-bw": 2**2000}, NET4)
    mem = tmp_path / "mem.json"
    mem.write_text('{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-bw": ' + str(2**2000) + "}")
    with pytest.raises(ConfigError, match=r"key 'remote-mem-bw' = an integer of 603 digits \(114813\.\.\.\): "
                                          r"expected a finite number >= 0$"):
        read_memory(mem)


# (22) sizes are bytes -----------------------------------------------------------------------

@pytest.mark.parametrize("text,hint", [("1Mb", "1MB or 1MiB"), ("8kb", "8KB or 8KiB"), ("2 Gb", "2GB or 2GiB"),
                                       ("64b", "64B"), ("4Kib", "4KiB")])
def test_a_lowercase_b_size_is_refused_as_bits(text, hint):
    with pytest.raises(ConfigError, match=rf"^`traffic\.size`: '{text}' would be bits \(lowercase b\); sizes are bytes: "
                                          rf"write {hint}$") as e:
        simulate("fat-tree:k=4", f"permutation:size={text}")
    assert e.value.field == "traffic.size"


def test_byte_spellings_read_as_before():
    sizes = {"4096": 4096, "4096B": 4096, "800KB": 800_000, "800kB": 800_000, "1MB": 10**6, "1 MB": 10**6,
             "1GB": 10**9, "128KiB": 128 << 10, "1MiB": 1 << 20, "1mIB": 1 << 20, "1GiB": 1 << 30, "1.5MiB": 3 << 19,
             "2TB": 2 * 10**12, "1TiB": 1 << 40}
    assert {t: parse_size(t) for t in sizes} == sizes
    for text in ("1k", "1M"):  # no unit letter without its B, as before
        with pytest.raises(ConfigError, match=rf"cannot read '{text}' as a size"):
            parse_size(text)


# (24) a Hugging Face model folder ----------------------------------------------------------

def test_a_hugging_face_model_folder_reads_its_config_json(tmp_path):
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 64,
                                                    "num_attention_heads": 4, "vocab_size": 64}))
    model = get_model(str(folder))  # it said "unknown model", and from_hf_config "file not found"
    assert model == from_hf_config(folder) == from_hf_config(folder / "config.json")
    # Named after its folder; 2 x (attention 4096 + MLP 6144 + norms 64) + embedding 2048 + head 2080.
    assert (model.name, model.kv_heads, model.total_params()) == ("my-llama", 4, 24736)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(empty))}: a folder without config\.json; expected a Hugging "
                                          r"Face model folder or a config\.json path$"):
        get_model(str(empty))


# (25) attributes run and validate read: sizes that add up, and nothing guessed -------------

def _write_ranks(folder, nodes_by_rank) -> None:
    folder.mkdir()
    for r, nodes in enumerate(nodes_by_rank):
        write_trace(folder / f"t.{r}.et", nodes)


@pytest.mark.parametrize("text", [" 12 ", "1_000", "+5"])
def test_a_comm_size_string_is_plain_digits(tmp_path, text):
    # int() reads " 12 " as 12 and "1_000" as 1000; a Chakra writer writes neither.
    _coll_workload(tmp_path / "w", text)
    with pytest.raises(ConfigError, match=rf"attribute 'comm_size' = '{re.escape(text)}': expected an integer"):
        run_iteration(tmp_path / "w", SYSTEM, NET4)
    traces, groups = v.load(tmp_path / "w")
    assert len(v.problems(traces, groups)) == 4


def test_an_all_to_all_v_whose_comm_size_is_not_its_splits_sum_is_refused(tmp_path):
    # comm_size 1000 with splits of 1 B each ran as 4 B in 2,000 ns, and validate passed it.
    def a2a(size):
        return [[EtNode(0, "a2a", "COMM_COLL_NODE", attrs={"comm_type": COMM_TYPES["ALL_TO_ALL"], "comm_size": size,
                                                            "comm_split_sizes": [1, 1, 1, 1],
                                                            "comm_recv_split_sizes": [1, 1, 1, 1]})]] * 4
    _write_ranks(tmp_path / "bad", a2a(1000))
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('a2a'\): comm_size = 1000 but comm_split_sizes sum to 4 "
                                          r"\(expected the bytes this rank sends\)") as e:
        run_iteration(tmp_path / "bad", SYSTEM, NET4)
    assert e.value.field == "comm_size"
    traces, groups = v.load(tmp_path / "bad")
    found = v.problems(traces, groups)
    assert len(found) == 4 and "comm_size = 1000 but comm_split_sizes sum to 4" in found[0]
    _write_ranks(tmp_path / "good", a2a(4))
    traces, groups = v.load(tmp_path / "good")
    assert v.problems(traces, groups) == []


def test_a_send_or_receive_without_comm_size_is_refused_by_run_as_by_validate(tmp_path):
    # run read the missing size as 0 bytes (a 0 ns iteration) while validate refused it.
    _write_ranks(tmp_path / "p2p", [[EtNode(0, "s", "COMM_SEND_NODE", attrs={"comm_dst": 1})],
                                    [EtNode(0, "r", "COMM_RECV_NODE", attrs={"comm_src": 0})]])
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('s'\): COMM_SEND_NODE without attribute 'comm_size'") as e:
        run_iteration(tmp_path / "p2p", SYSTEM, {**NET4, "npus_count": [2]})
    assert e.value.field == "comm_size"
    traces, groups = v.load(tmp_path / "p2p")
    assert [p.split(": ", 1)[1] for p in v.problems(traces, groups)] == [
        "node 0 (s): COMM_SEND_NODE lacks attribute 'comm_size'", "node 0 (r): COMM_RECV_NODE lacks attribute 'comm_size'"]


def test_a_negative_memory_access_is_named_by_node(tmp_path):
    # The engine's reader said "invalid value: integer '-50', expected u64": no file, no node,
    # and -50 was the access time in ps, not the size given.
    mem = tmp_path / "mem.json"
    mem.write_text(json.dumps({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 0, "remote-mem-bw": 1000}))
    _write_ranks(tmp_path / "m", [[EtNode(0, "load", "MEM_LOAD_NODE", attrs={"tensor_size": 10})],
                                  [EtNode(0, "load", "MEM_LOAD_NODE", attrs={"tensor_size": -50})]])
    with pytest.raises(ConfigError, match=r"t\.1\.et: node 0 \('load'\): tensor_size = -50: expected bytes >= 0") as e:
        run_iteration(tmp_path / "m", SYSTEM, {**NET4, "npus_count": [2]}, memory=mem)
    assert e.value.field == "tensor_size"
    traces, groups = v.load(tmp_path / "m")
    assert [p.split(": ", 1)[1] for p in v.problems(traces, groups)] == ["node 0 (load): tensor_size = -50: expected bytes >= 0"]


def test_a_rank_numbered_far_past_the_others_is_named_without_listing_every_gap(tmp_path):
    # `t.99999999999.et` beside `t.0.et` built a set of 10^11 ranks and hung (as `astra parse` did).
    for r in (0, 99_999_999_999):
        write_trace(tmp_path / f"t.{r}.et", [EtNode(0, "c", "COMP_NODE")])
    with pytest.raises(ConfigError, match=r"t: ranks \[1, 2, 3, 4, 5, 6, 7, 8, 9, 10\] and 99,999,999,988 more have no "
                                          r"ET \(found 2 ranks, up to 99999999999\)$") as e:
        v.load(tmp_path / "t")
    assert e.value.field == "workload"


@pytest.mark.parametrize("attrs,key", [({"num_ops": -7, "tensor_size": 64}, "num_ops"),
                                       ({"num_ops": 7, "tensor_size": -5}, "tensor_size")])
def test_a_negative_roofline_count_is_refused_with_the_roofline_off_too(tmp_path, attrs, key):
    # With the roofline off the values go unused, so `run` and `trace validate` passed them while
    # `astra export` refused them (ASTRA-sim reads tensor_size as uint64).
    comp = EtNode(0, "mm", "COMP_NODE", duration_micros=3, attrs=attrs)
    _write_ranks(tmp_path / "c", [[comp], [EtNode(0, "mm", "COMP_NODE", duration_micros=1)]])
    unit = {"num_ops": "operations", "tensor_size": "bytes"}[key]
    with pytest.raises(ConfigError, match=rf"t\.0\.et: node 0 \('mm'\): {key} = {attrs[key]}: expected {unit} >= 0$") as e:
        run_iteration(tmp_path / "c", SYSTEM, {**NET4, "npus_count": [2]})
    assert e.value.field == key
    traces, groups = v.load(tmp_path / "c")
    assert [p.split(": ", 1)[1] for p in v.problems(traces, groups)] == [f"node 0 (mm): {key} = {attrs[key]}: expected {unit} >= 0"]
    # Zero is a count, and an iteration of the compute alone: 3 us.
    comp.attrs[key] = 0
    _write_ranks(tmp_path / "zero", [[comp], [EtNode(0, "mm", "COMP_NODE", duration_micros=1)]])
    assert run_iteration(tmp_path / "zero", SYSTEM, {**NET4, "npus_count": [2]}).iteration_ns == 3000
