"""Every reader of outside input as a fuzz target: valid seed inputs, and what tracefabric does
with such an input (read it, then check or run what it describes, as `run` and `net run` would).

The contract each input is held to (`outcome`): it runs, or it raises tracefabric's own error
(a `TracefabricError`) whose message names the input's file and, for a `ConfigError`, whose
`field` is set. Anything else is a crash: another exception (a panic in the engine included),
an error that names neither the file nor a field.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...astra_configs import read_scheme_preset, scheme_presets
from ...astra_configs.formats import RemoteMemory, check_system, read_comm_groups, read_memory, read_network
from ...collectives.iteration import backend_spec, simulate
from ...collectives.workload import check, read_workload
from ...errors import ConfigError, TracefabricError
from ...interop.astra_sim import parse_output
from ...interop.htsim.output import parse_output as parse_htsim_output
from ...network_backends.packet import build_config, check_config, traffic_file_errors
from ...network_backends.packet.traffic_files import read_traffic_file
from ...network_backends.packet.cm import read_cm
from ...network_backends.packet.specs import failures_config, topology_config, traffic_config
from ...specs import parse_size
from ...traces import validate
from ...traces.microbenchmark import write_microbenchmark
from ...traces.models import get_model
from ...traces.synthesis import Plan, read_routing, synthesize, write

RANKS = 4
# One algorithm per dimension for networks of up to three (entries past them are ignored).
SYSTEM = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 4,
          "all-reduce-implementation": ["ring"] * 3, "all-gather-implementation": ["ring"] * 3,
          "reduce-scatter-implementation": ["ring"] * 3, "all-to-all-implementation": ["direct"] * 3, "endpoint-delay": 10}
NETWORK = {"topology": ["Ring"], "npus_count": [RANKS], "bandwidth": [50], "latency": [500]}
# Fabrics past these sizes are only read, not built: building 4 M hosts is slow, not wrong.
MAX_FAT_TREE_K, MAX_HOSTS = 16, 4096


@dataclass
class Target:
    name: str
    filename: str  # what the input is written as; "" for a command-line string
    seeds: Callable[[Path], list[bytes]]
    run: Callable[[Path, Path], None]  # (the input's file, the work folder)
    folder_named: bool = False  # errors may name the input's folder (a workload of several files)
    edit: Callable[[bytes, random.Random], bytes] | None = None  # a format-aware mutation, used for half the inputs


def _json(*values: object) -> list[bytes]:
    return [json.dumps(v, indent=1).encode() for v in values]


def _later(step: Callable[[], object]) -> None:
    """Run a step after the input was read that does not read the file again (building an
    engine config from it): its errors must name a field, not the file."""
    try:
        step()
    except TracefabricError as e:
        e.fuzz_stage = "config"  # type: ignore[attr-defined]
        raise


def _workload(work: Path) -> Path:
    """A 4-rank workload (one collective of each kind, world group) for inputs that need one."""
    folder = work / "base"
    if not (folder / "w.0.et").exists():
        write_microbenchmark(folder, RANKS, "all_reduce", 1 << 16, prefix="w")
    return folder / "w"


# --- ASTRA-sim configs -----------------------------------------------------------------

def _system_seeds(work: Path) -> list[bytes]:
    return _json(SYSTEM, {**SYSTEM, "collective-optimization": "localBWAware", "scheduling-policy": "FIFO"},
                 {**SYSTEM, "all-reduce-implementation": ["doubleBinaryTree"], "active-chunks-per-dimension": 2,
                  "roofline-enabled": 1, "peak-perf": 900, "local-mem-bw": 3000},
                 {**SYSTEM, "all-reduce-implementation": ["halvingDoubling", "ring"], "local-mem-bw": 50})


def _run_system(path: Path, work: Path) -> None:
    from ...astra_configs.formats import read_system

    cfg = read_system(path)
    check(read_workload(_workload(work)), cfg, RemoteMemory(), [RANKS])  # every collective planned


def _network_seeds(work: Path) -> list[bytes]:
    return [b"topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n",
            b"topology: [ Switch, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50.0, 25 ]\nlatency: [ 500, 5e2 ]\n",
            b"topology: [ FullyConnected ]\nnpus_count: [ 4 ]\nbandwidth: [ 0.5 ]\nlatency: [ 0 ]\n",
            b"topology: {kind: fat_tree, k: 4}\nlink: {rate_gbps: 100, latency_ns: 500}\nswitch: {buffer_bytes: 100000}\nseed: 3\n",
            b"topology:\n  kind: leaf_spine\n  leaves: 2\n  spines: 2\n  hosts_per_leaf: 2\npacket: {payload_bytes: 4096}\n"
            b"limits: {max_time_ms: 100}\n"]


def _small_fabric(topology: object) -> bool:
    """Whether the engine may build this fabric quickly (any number in it at most MAX_HOSTS, or
    MAX_FAT_TREE_K for a fat tree; leaves x hosts per leaf at most MAX_HOSTS)."""
    if not isinstance(topology, dict):
        return True  # refused by the engine's config reader, cheaply
    numbers = {k: v for k, v in topology.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    limit = MAX_FAT_TREE_K if topology.get("kind") == "fat_tree" else MAX_HOSTS
    return all(v <= limit for v in numbers.values()) and numbers.get("leaves", 1) * numbers.get("hosts_per_leaf", 1) <= MAX_HOSTS


def _run_network(path: Path, work: Path) -> None:
    net = read_network(path)
    if hasattr(net, "npus_count"):
        if net.npus == RANKS:
            _later(lambda: simulate(_workload(work), SYSTEM, net, backend="analytical:astra-unaware"))
    elif _small_fabric(net.config.get("topology")):
        backend_spec("packet", net, 1, {})  # the engine builds the fabric


def _memory_seeds(work: Path) -> list[bytes]:
    return _json({"memory-type": "NO_MEMORY_EXPANSION"},
                 {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 50},
                 {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-bw": 1e3, "num-nodes": 1, "num-npus-per-node": 4})


def _groups_seeds(work: Path) -> list[bytes]:
    return _json({"0": [0, 1], "1": [2, 3]}, {"dp": [0, 1, 2, 3], "tp": [0, 2]}, {"1": [3, 2, 1, 0]})


def _run_groups(path: Path, work: Path) -> None:
    read_comm_groups(path)
    validate.problems(*validate.load(_workload(work), path))


# --- Chakra ETs --------------------------------------------------------------------------

def _et_seeds(work: Path) -> list[bytes]:
    """Rank 0 of symmetric workloads (every rank's file the same bytes)."""
    seeds = []
    for kind in ("all_reduce", "all_to_all", "broadcast"):
        seeds.append((write_microbenchmark(work / "seeds" / kind, RANKS, kind, 3 << 12).parent / f"{kind}.0.et").read_bytes())
    for model, plan in (("gpt2-small", Plan("dp", world=RANKS, gpus_per_server=1)),
                        ("tiny-llama", Plan("fsdp", world=RANKS, gpus_per_server=1, precision="fp32", seq=16))):
        write(synthesize(get_model(model), plan), work / "seeds" / model, prefix="t")
        seeds.append((work / "seeds" / model / "t.0.et").read_bytes())
    return seeds


_NODE_INTS = [0, 1, 2, 3, 5, 7, 1 << 20, 2**31, 2**32, 2**62, 2**63 - 1]
_ATTR_INTS = [-1, 0, 1, 3, 4, 7, 2**31, 2**62, 2**63 - 1, -(2**63)]


def _edit_et(data: bytes, rng: random.Random) -> bytes:
    """One field of one node changed within what Chakra's schema holds (ids, dependencies,
    type, duration, an attribute's value or kind): traces that decode and go deeper."""
    from chakra.schema.protobuf import et_def_pb2 as pb

    from ...traces.chakra_io import framed, messages

    raw = list(messages(data, Path("input")))
    if len(raw) < 2:
        return data
    nodes = [pb.Node.FromString(m) for m in raw[1:]]
    n = rng.choice(nodes)
    op = rng.randrange(6)
    if op == 0:
        n.id = rng.choice(_NODE_INTS + [m.id for m in nodes])
    elif op == 1:
        deps = n.data_deps if rng.random() < 0.5 else n.ctrl_deps
        deps.append(rng.choice(_NODE_INTS + [m.id for m in nodes]))
    elif op == 2:
        n.type = rng.randrange(9)
    elif op == 3:
        n.duration_micros = rng.choice(_NODE_INTS)
    elif n.attr:
        a = rng.choice(n.attr)
        value = rng.choice(_ATTR_INTS)
        kind = rng.randrange(6)
        if kind == 0:
            a.int64_val = value
        elif kind == 1:
            a.uint64_val = abs(value) % 2**64
        elif kind == 2:
            a.int32_val = max(-(2**31), min(value, 2**31 - 1))
        elif kind == 3:
            a.string_val = rng.choice(["", "x", "0", "ALL_REDUCE", "7", str(value)])
        elif kind == 4:
            a.bool_val = bool(value)
        else:
            a.int64_list.values[:] = [value] * rng.randint(0, 5)
    else:
        nodes.remove(n)
    return framed(pb.GlobalMetadata.FromString(raw[0])) + b"".join(framed(m) for m in nodes)


def _run_et(path: Path, work: Path) -> None:
    """The input is every rank's ET of a 4-rank workload (a symmetric one runs deeper)."""
    data = path.read_bytes()
    folder = path.parent
    for r in range(1, RANKS):
        (folder / f"t.{r}.et").write_bytes(data)
    (folder / "comm_groups.json").write_text(json.dumps({"0": list(range(RANKS))}))
    prefix = folder / "t"
    traces, groups = validate.load(prefix)
    if validate.problems(traces, groups):
        return
    w = read_workload(prefix)
    check(w, check_system(SYSTEM), RemoteMemory(), [RANKS])
    simulate(w, SYSTEM, NETWORK, backend="analytical:astra-unaware")


# --- traffic files, presets, models, outputs -------------------------------------------

def _run_traffic(path: Path, work: Path) -> None:
    read_traffic_file(path)
    cfg = build_config("fat-tree:k=4", f"file:{path}", seed=1)
    with traffic_file_errors(f"file:{path}"):
        check_config(cfg)


def _preset_seeds(work: Path) -> list[bytes]:
    from importlib import resources

    folder = resources.files("tracefabric.astra_configs") / "schemes"
    return [(folder / f"{name}.json").read_bytes() for name in scheme_presets()]


def _run_preset(path: Path, work: Path) -> None:
    p = read_scheme_preset(path)
    options = {k: p[k] for k in ("lb", "cc", "loss", "lb_params", "cc_params", "loss_params", "switch") if k in p}
    _later(lambda: check_config(build_config("fat-tree:k=4", "permutation:size=64KiB", **options)))


def _model_seeds(work: Path) -> list[bytes]:
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "_name_or_path": "x/tiny"}
    return _json(llama, {**llama, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
                 {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 1000, "n_positions": 128})


def _routing_seeds(work: Path) -> list[bytes]:
    return _json({"routing": [[4, 4], [4, 4]]}, [[1, 2, 3], [3, 2, 1], [2, 2, 2]])


def _output_seeds(work: Path) -> list[bytes]:
    lines = [f"[2024-01-01 00:00:00] [workload] [info] sys[{r}] finished, 92440 cycles, exposed communication 0 cycles"
             for r in range(RANKS)] + [f"sys[{r}], Wall time: 92440" for r in range(RANKS)]
    return ["\n".join(lines).encode(), b"sys[0] finished, 5 cycles\nsys[1] finished, 7 cycles\n"]


def _run_output(path: Path, work: Path) -> None:
    parse_output(path.read_text(errors="replace"), str(path))


_CM_FULL = (b"Nodes 16\nConnections 2\nTriggers 1\nFailures 1\n0->1 id 1 start 5 size 4096 recv_done_trigger 7 prio 3\n"
            b"2->3 id 2 trigger 7 size 100\ntrigger id 7 barrier count 1\nfailure switch_type AGG switch_id 2 link_id 1\n")
_HTSIM_OUT = (b"Connection 0->1 starting at 0 size 1048576\n"
              b"Flow Uec_0_1 flowId 1 uecSrc1 finished at 23.5 total messages 1 total packets 256 RTS 0 total bytes "
              b"1048576 in_flight now 0\nFlow ndp_2_3 2 finished at 30.25 total bytes 100\n")


def _run_htsim_output(path: Path, work: Path) -> None:
    """htsim's output, read against the full connection matrix it ran."""
    cm = work / "full.cm"
    if not cm.exists():
        cm.write_bytes(_CM_FULL)
    parse_htsim_output(path.read_text(errors="replace"), read_cm(cm), str(path))


# --- command-line specs ----------------------------------------------------------------

def _spec_seeds(work: Path) -> list[bytes]:
    return [s.encode() for s in ("fat-tree:k=4", "leaf-spine:leaves=4,spines=2,links_per_pair=2,oversubscription=1.5",
                                 "leaf-spine:leaves=2,spines=2,hosts_per_leaf=3", "permutation:size=1MiB,inter_pod=true",
                                 "all-to-all:size=64KiB,staggered=true,shuffled=false", "incast:senders=3,size=800KB,dst=1",
                                 "128KiB", "1.5MiB", "4096", "800kB", "probability=0.01,detection_us=5,convergence_us=20",
                                 '{"links": [{"nodes": [16, 24], "down_at_us": 1}], "detection_us": 2}')]


def _run_spec(path: Path, work: Path) -> None:
    """A string as --topology, --traffic or a size (--buffer, size=) reads it, by its kind."""
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    kind = text.partition(":")[0].strip().lower().replace("_", "-")
    if kind in ("fat-tree", "leaf-spine"):
        topology = topology_config(text)
        if _small_fabric(topology):
            _later(lambda: check_config(build_config(topology, "permutation:size=4KiB", seed=1)))
    elif kind in ("permutation", "all-to-all", "alltoall", "ata", "incast"):
        traffic = traffic_config(text)
        _later(lambda: check_config(build_config("fat-tree:k=4", traffic, seed=1)))
    elif "=" in kind or text.lstrip().startswith("{"):  # --failures probability=0.01,... or a JSON object
        failures = failures_config(text)
        _later(lambda: check_config(build_config("fat-tree:k=4", "permutation:size=4KiB", seed=1, failures=failures)))
    elif kind != "file":  # a file is a traffic file's target
        parse_size(text)


TARGETS = {t.name: t for t in [
    Target("system", "system.json", _system_seeds, _run_system),
    Target("network", "network.yml", _network_seeds, _run_network),
    Target("memory", "memory.json", _memory_seeds, lambda p, w: read_memory(p)),
    Target("comm_groups", "groups.json", _groups_seeds, _run_groups),
    Target("et", "t.0.et", _et_seeds, _run_et, folder_named=True, edit=_edit_et),
    Target("flows_csv", "flows.csv", lambda w: [b"src,dst,bytes,start_us\n0,1,4096,0\n1,2,65536,0.5\n3,0,1000,2\n",
                                                  b"src,dst,bytes,start_ps\n5,6,1,7\n"], _run_traffic),
    Target("flows_json", "flows.json", lambda w: _json([{"src": 0, "dst": 1, "bytes": 4096, "start_us": 1.5}],
                                                         {"flows": [{"src": 2, "dst": 3, "bytes": 9000, "start_ps": 10}]}),
           _run_traffic),
    Target("htsim_cm", "flows.cm", lambda w: [b"Nodes 16\nConnections 2\n0->5 id 1 start 0 size 65536\n3->9 id 2 start 10 size 4096\n",
                                                b"# a comment\n1->2 start 3 size 5\n"], _run_traffic),
    Target("preset", "preset.json", _preset_seeds, _run_preset),
    Target("model_config", "config.json", _model_seeds, lambda p, w: get_model(p)),
    Target("routing", "routing.json", _routing_seeds, lambda p, w: read_routing(p)),
    Target("astra_output", "astra_stdout.txt", _output_seeds, _run_output),
    Target("htsim_matrix", "full.cm", lambda w: [_CM_FULL, b"Nodes 4\nConnections 1\n0->1 id 9 start 0 size 10\n"],
           lambda p, w: read_cm(p)),
    Target("htsim_output", "htsim_out.txt", lambda w: [_HTSIM_OUT, b"Flow ndp_0_1 1 finished at 2.5 total bytes 4096\n"
                                                                   b"Flow ndp_2_3 2 finished at 3 total bytes 100\n"],
           _run_htsim_output),
    Target("spec", "", _spec_seeds, _run_spec),
]}


def outcome(target: Target, path: Path, work: Path) -> tuple[str, str | None]:
    """(kind, problem): kind is "ok" or the error's class and field; problem is None, or why
    this input broke the contract (a crash)."""
    try:
        target.run(path, work)
    except KeyboardInterrupt:
        raise
    except TracefabricError as e:
        field = getattr(e, "field", None) or getattr(e, "kind", None)
        kind = f"{type(e).__name__}:{field}" if field else type(e).__name__
        if isinstance(e, ConfigError) and not e.field:
            return kind, f"{type(e).__name__} without a field: {e}"
        if isinstance(e, ConfigError) and str(path.parent) in e.field:
            return kind, f"{type(e).__name__} whose field is a path, not a key: {e.field!r}"
        named = str(path.parent if target.folder_named else path) in str(e)
        if target.filename and not getattr(e, "fuzz_stage", None) and not named:
            return kind, f"{type(e).__name__} does not name the file: {e}"
        return kind, None
    except BaseException as e:  # noqa: BLE001 (a panic is a BaseException: every escape is a crash)
        return "crash", f"{type(e).__module__}.{type(e).__name__}: {e}"[:2000]
    return "ok", None
