"""ASTRA-sim inputs an audit found misread or crashing: shared remote-memory queues run as if
unshared, YAML 1.1 numbers ASTRA-sim's yaml-cpp reads otherwise, `astra parse` hanging on a huge
rank or keeping the last of two reports, JSON that Python cannot hold, and `astra export`
stopping half-way on a value the feeder's protobuf types cannot hold. Each is refused in one
line naming the file, key (or node and attribute) and value."""

from __future__ import annotations

import json
import re
import time

import pytest

from tracefabric.astra_configs.formats import (check_network, check_system, read_comm_groups, read_memory, read_network,
                                               read_system)
from tracefabric.traces.microbenchmark import write_microbenchmark
from tracefabric.collectives.workload import read_workload
from tracefabric.errors import ConfigError
from tracefabric.jsonio import load_json, loads_json
from tracefabric.collectives.iteration import simulate
from tracefabric.interop import astra_sim
from tracefabric.traces.chakra_io import COMM_TYPES, EtNode, read_pb_trace, write_trace

SYSTEM = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
          "endpoint-delay": 0, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
          "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["direct"]}
NET4 = {"topology": ["Switch"], "npus_count": [4], "bandwidth": [100], "latency": [1000]}
NET_YAML = "topology: [ Switch ]\nnpus_count: [ 4 ]\nbandwidth: [ 100 ]\nlatency: [ {} ]\n"


# (1) remote memory ----------------------------------------------------------------------

@pytest.mark.parametrize("kind,queue", [("PER_NODE_MEMORY_EXPANSION", "shared by the NPUs of a node"),
                                        ("MEMORY_POOL", "shared by all NPUs")])
def test_memory_types_with_a_shared_queue_are_refused_not_run_as_per_npu(tmp_path, kind, queue):
    mem = tmp_path / "mem.json"
    mem.write_text(json.dumps({"memory-type": kind, "remote-mem-bw": 100, "num-nodes": 2, "num-npus-per-node": 2}))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(mem))}: key 'memory-type' = '{kind}': the (one )?queue of "
                                          rf"remote requests {queue} is not modelled; expected PER_NPU_MEMORY_EXPANSION "
                                          r"\(no queueing\) or NO_MEMORY_EXPANSION$") as e:
        read_memory(mem)
    assert e.value.field == "memory-type"


def test_memory_node_counts_must_be_positive(tmp_path):
    mem = tmp_path / "mem.json"
    for key, value, shown in (("num-nodes", 0, "0"), ("num-npus-per-node", 2**31, "2147483648")):
        mem.write_text(json.dumps({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-bw": 100, key: value}))
        with pytest.raises(ConfigError, match=rf"mem\.json: key '{key}' = {shown}: expected an integer in 1\.\.2147483647$") as e:
            read_memory(mem)
        assert e.value.field == key
    # ASTRA-sim reads them only for PER_NODE; with PER_NPU positive counts are accepted as they are.
    mem.write_text(json.dumps({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-bw": 100, "num-nodes": 2,
                               "num-npus-per-node": 3}))
    m = read_memory(mem)
    assert (m.memory_type, m.bandwidth_gbps, m.raw["num-nodes"]) == ("PER_NPU_MEMORY_EXPANSION", 100.0, 2)


# (2) network YAML numbers --------------------------------------------------------------------

@pytest.mark.parametrize("text,why", [
    ("0500", "a leading 0: YAML 1.1 reads it as octal 320, ASTRA-sim (yaml-cpp) as 500 in bandwidth and latency "
             "but as octal 320 in npus_count"),
    ("09", "a leading 0: YAML 1.1 reads it as a string, ASTRA-sim (yaml-cpp) as 9 in bandwidth and latency "
           "but as no number in npus_count"),
    ("0x10", "hexadecimal: YAML 1.1 reads it as 16, ASTRA-sim (yaml-cpp) as 16 in npus_count but as no number "
             "in bandwidth and latency"),
    ("0b101", "binary: YAML 1.1 reads it as 5, ASTRA-sim (yaml-cpp) as no number"),
    ("1_000", r"digit separators \(_\): YAML 1.1 reads it as 1000, ASTRA-sim \(yaml-cpp\) as no number"),
    ("8:20", "a base-60 number: YAML 1.1 reads it as 500, ASTRA-sim (yaml-cpp) as no number"),
    ("1:30.5", "a base-60 number: YAML 1.1 reads it as 90.5, ASTRA-sim (yaml-cpp) as no number"),
])
def test_yaml_numbers_read_otherwise_by_yaml_cpp_are_refused_with_key_and_line(tmp_path, text, why):
    net = tmp_path / "net.yml"
    net.write_text(NET_YAML.format(text))
    why = why if "\\" in why else re.escape(why)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(net))}: latency\[0\] = {re.escape(text)} \(line 4\): {why}; "
                                          r"write it in decimal, without leading zeros or separators$") as e:
        read_network(net)
    assert e.value.field == "latency[0]"


def test_yaml_plain_decimal_numbers_still_read(tmp_path):
    net = tmp_path / "net.yml"
    for text, want in (("500", 500.0), ("+500", 500.0), ("0", 0.0), ("0.5", 0.5), ("5e2", 500.0), ("0500.5", 500.5)):
        net.write_text(NET_YAML.format(text))
        assert read_network(net).latency == [want], text


def test_yaml_too_long_or_too_deep_is_one_line(tmp_path):
    net = tmp_path / "net.yml"
    net.write_text(NET_YAML.format("1" * 5000))
    with pytest.raises(ConfigError, match=r"net\.yml: latency\[0\] = 111111\.\.\. \(line 4\): an integer of 5000 digits, "
                                          r"past the 4300 Python reads$"):
        read_network(net)
    net.write_text("a: " + "[" * 1200 + "]" * 1200 + "\n")
    with pytest.raises(ConfigError, match=r"net\.yml: lists or mappings nested too deeply for Python \(recursion limit \d+\)$"):
        read_network(net)


# (3) astra parse ----------------------------------------------------------------------------

def test_parse_names_missing_ranks_without_listing_a_huge_range():
    start = time.monotonic()
    with pytest.raises(astra_sim.AstraSimError, match=r"^o\.txt: ranks \[0, 1, 2, 3, 4, 5, 6, 7, 8, 9\] and "
                                                      r"99,999,999,989 more never reported `finished`$"):
        astra_sim.parse_output("sys[99999999999] finished, 100 cycles\n", "o.txt")
    assert time.monotonic() - start < 1  # it built a set of 10^11 ranks
    with pytest.raises(astra_sim.AstraSimError, match=r"^o\.txt: ranks \[1, 2, 4\] never reported"):
        astra_sim.parse_output("sys[0] finished, 5 cycles\nsys[3] finished, 5 cycles\nsys[5] finished, 5 cycles\n", "o.txt")
    with pytest.raises(astra_sim.AstraSimError, match=r"^o\.txt: line 1: a number of 5000 digits \(999999\.\.\.\)"):
        astra_sim.parse_output(f"sys[0] finished, {'9' * 5000} cycles\n", "o.txt")


@pytest.mark.parametrize("text,line,first,what", [
    ("sys[0] finished, 100 cycles\nsys[1] finished, 5 cycles\nsys[0] finished, 999 cycles\n", 3, 1, "sys[0] reports `finished`"),
    ("sys[0] finished, 100 cycles\nsys[00] finished, 100 cycles\n", 2, 1, "sys[00] reports `finished`"),
    ("sys[0] finished, 1 cycles\nsys[0], Wall time: 5\nsys[0], Wall time: 6\n", 3, 2, "sys[0] reports `Wall time`"),
])
def test_parse_refuses_a_rank_reported_twice_with_both_lines(text, line, first, what):
    with pytest.raises(astra_sim.AstraSimError, match=rf"^o\.txt: line {line}: {re.escape(what)} again \(first on line "
                                                      rf"{first}\); expected one report per rank$"):
        astra_sim.parse_output(text, "o.txt")


# (4) JSON readers ------------------------------------------------------------------------

def test_json_past_python_limits_is_one_line_naming_the_file(tmp_path):
    p = tmp_path / "sys.json"
    p.write_text('{"preferred-dataset-splits":\n' + "9" * 5000 + "}")
    for read in (read_system, read_memory, read_comm_groups):
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(p))}: cannot read an integer of 5000 digits, past the "
                                              r"4300 Python reads \(line 2\)$"):
            read(p)
    p.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(p))}: cannot read arrays or objects nested too deeply for "
                                          r"Python \(recursion limit \d+\)$") as e:
        load_json(p, "routing")
    assert e.value.field == "routing"


def test_json_with_a_bom_is_read_and_a_device_is_named_as_one(tmp_path):
    p = tmp_path / "sys.json"
    p.write_text("\ufeff" + json.dumps(SYSTEM), encoding="utf-8")  # as Windows editors save it; nlohmann skips it
    assert read_system(p)["preferred-dataset-splits"] == 1
    assert loads_json("\ufeff[1]") == [1]
    with pytest.raises(ConfigError, match=r"^/dev/null: is not a regular file \(a device, FIFO or socket\); "
                                          r"expected a system file$"):
        read_system("/dev/null")
    with pytest.raises(ConfigError, match=r"^/dev/null: is not a regular file \(a device, FIFO or socket\); "
                                          r"expected a network file$"):
        read_network("/dev/null")


# (5) astra export ---------------------------------------------------------------------------

def _coll(**attrs):
    return EtNode(0, "c", "COMM_COLL_NODE", attrs={"comm_type": COMM_TYPES["ALL_REDUCE"], "comm_size": 64, **attrs})


def _export(tmp_path, per_rank):
    folder = tmp_path / "wl"
    folder.mkdir()
    for r, nodes in enumerate(per_rank):
        write_trace(folder / f"t.{r}.et", nodes)
    return astra_sim.export(read_workload(folder / "t"), check_system(SYSTEM), check_network(NET4), read_memory(None),
                            tmp_path / "out")


@pytest.mark.parametrize("node,attr,value,expected", [
    # On a collective, which `run` does not read it from (on compute and memory nodes `run` refuses it first).
    (_coll(tensor_size=-5), "tensor_size", "-5", r"0\.\.2\^64-1 \(ASTRA-sim reads it as uint64\)"),
    (_coll(comm_priority=2**40), "comm_priority", "1099511627776", r"-2\^31\.\.2\^31-1 \(ASTRA-sim reads it as int32\)"),
    (_coll(tensor_loc=-1), "tensor_loc", "-1", r"0\.\.2\^32-1 \(ASTRA-sim reads it as uint32\)"),
    (_coll(is_cpu_op="yes"), "is_cpu_op", "'yes'", r"a bool \(true, false, 1 or 0\)"),
])
def test_export_range_checks_attributes_before_writing_anything(tmp_path, node, attr, value, expected):
    # The bad node is on the last rank: ranks 0-2 used to be written before protobuf's ValueError.
    good = EtNode(0, "k", "COMP_NODE", duration_micros=5) if node.type == "COMP_NODE" else _coll()
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path / 'wl' / 't.3.et'))}: node 0 \('{node.name}'\): "
                                          rf"attribute '{attr}' = {value}: expected (an integer in )?{expected}$") as e:
        _export(tmp_path, [[good]] * 3 + [[node]])
    assert e.value.field == attr
    assert not (tmp_path / "out").exists()


def test_export_range_checks_int32_tags_and_writes_comm_type_names_as_numbers(tmp_path):
    send = EtNode(0, "s", "COMM_SEND_NODE", attrs={"comm_dst": 1, "comm_size": 64, "comm_tag": 2**40})
    recv = EtNode(0, "r", "COMM_RECV_NODE", attrs={"comm_src": 0, "comm_size": 64, "comm_tag": 2**40})
    comp = EtNode(0, "k", "COMP_NODE", duration_micros=1)
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 \('s'\): attribute 'comm_tag' = 1099511627776: expected an "
                                          r"integer in -2\^31\.\.2\^31-1"):
        _export(tmp_path, [[send], [recv], [comp], [comp]])
    assert not (tmp_path / "out").exists()
    # `run` takes comm_type by its name; the export used to crash on int('ALL_REDUCE').
    named = EtNode(0, "c", "COMM_COLL_NODE", attrs={"comm_type": "ALL_GATHER", "comm_size": 64})
    (tmp_path / "wl").rename(tmp_path / "old")
    files = _export(tmp_path, [[named]] * 4)
    _, nodes = read_pb_trace(files["workload"].parent / "workload.2.et")
    assert [(a.name, a.WhichOneof("value"), a.int64_val) for a in nodes[0].attr if a.name == "comm_type"] == \
        [("comm_type", "int64_val", COMM_TYPES["ALL_GATHER"])]


# (6) extra implementation entries -------------------------------------------------------------

def test_implementation_entries_past_the_networks_dimensions_are_ignored_as_astra_sim_does(tmp_path):
    # ASTRA-sim takes entry d for dimension d and ignores the rest, so one system file serves
    # networks of several dimensions: the first entry alone decides a 1-D run.
    wl = write_microbenchmark(tmp_path, 4, "all_reduce", 1 << 20)

    def run(impl):
        return simulate(wl, {**SYSTEM, "all-reduce-implementation": impl}, NET4).iteration_ns

    assert run(["ring", "direct"]) == run(["ring"])
    assert run(["direct", "ring"]) == run(["direct"]) != run(["ring"])
