"""The command line given bad input the way a hurried user errs: one line on stderr naming the
option or file, what was given and what is expected, exit code 2, before any run starts."""

from __future__ import annotations

import subprocess
import sys

from tracefabric.traces.chakra_io import EtNode, write_trace

from conftest import needs_torch

FAST = ["--topology", "fat-tree:k=4", "--traffic", "permutation:size=4KiB"]


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from tracefabric.tools.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_click_usage_errors_are_one_line_with_the_value_given():
    # They were a usage line, a hint and a boxed message wrapped at 80 columns; typer's type
    # checks did not say what was given.
    line = _one_line(_cli("net", "run", *FAST, "--seed", "abc"))
    assert line.startswith("error: Invalid value for '--seed': ") and "(got 'abc')" in line
    assert line.endswith("see `tracefabric net run --help`")
    line = _one_line(_cli("trace", "inspect", "x", "--ranks", "0"))
    assert "'--ranks'" in line and "greater than or equal to 1" in line and "(got '0')" in line
    line = _one_line(_cli("net", "run", *FAST, "--bogus", "1"))
    assert line.startswith("error: No such option: --bogus")
    line = _one_line(_cli("net", "run", *FAST, "--param", "threshold=6"))
    assert "--param" in line and "got 'threshold=6'" in line


def test_an_option_given_twice_is_refused_not_read_as_its_last_value():
    # `--scheme reps ... --scheme ecmp` ran ecmp without a word.
    line = _one_line(_cli("net", "run", *FAST, "--scheme", "reps", "--scheme", "ecmp"))
    assert line.startswith("error: --scheme: given twice ('reps', then 'ecmp'); give it once")
    line = _one_line(_cli("net", "run", "--topology=fat-tree:k=4", *FAST))
    assert "--topology: given twice ('fat-tree:k=4', then 'fat-tree:k=4')" in line
    line = _one_line(_cli("trace", "capture", "--convert", "--no-convert"))
    assert "--convert: given twice (--convert, then --no-convert)" in line


def test_compare_refuses_a_scheme_or_traffic_listed_twice(tmp_path):
    # A repeat was averaged in as an extra seed: `seeds` 2 in summary.csv for --seeds 1.
    line = _one_line(_cli("net", "compare", *FAST, "--schemes", "ecmp,ecmp", "--out", str(tmp_path / "a")))
    assert line == "error: compare: `schemes` lists 'ecmp' twice (expected each once)"
    line = _one_line(_cli("net", "compare", *FAST, "--traffic", "permutation:size=4KiB", "--schemes", "ecmp",
                          "--out", str(tmp_path / "b")))
    assert line == "error: compare: `traffic` lists 'permutation:size=4KiB' twice (expected each once)"
    # An empty entry was dropped without a word: the comparison ran without the scheme meant.
    line = _one_line(_cli("net", "compare", *FAST, "--schemes", "ecmp,,reps", "--out", str(tmp_path / "c")))
    assert line == "error: --schemes 'ecmp,,reps': entry 2 is empty (expected comma-separated scheme names)"
    # The same traffic written two ways was two identical panels.
    line = _one_line(_cli("net", "compare", *FAST, "--traffic", "permutation:size=4096", "--schemes", "ecmp",
                          "--out", str(tmp_path / "d")))
    assert line == ("error: compare: `traffic` lists 'permutation:size=4KiB' and 'permutation:size=4096', "
                    "the same traffic (expected each once)")
    # The engine's own checks (16 hosts on k = 4; a flow file's hosts) ran only as each run
    # started, so a bad last traffic lost the runs already finished.
    flows = tmp_path.parent / f"{tmp_path.name}_flows.csv"
    flows.write_text("src,dst,bytes,start_us\n0,1,4096,0\n2,16,4096,0\n")
    for bad, expected in ((f"file:{flows}", f"error: {flows}:3: field `dst` is host 16, but the topology has hosts 0..15"),
                          ("incast:senders=16,size=4KiB", "error: invalid config field `traffic.senders`: must be between 1 and 15 for 16 hosts")):
        line = _one_line(_cli("net", "compare", *FAST, "--traffic", bad, "--schemes", "ecmp,reps",
                              "--out", str(tmp_path / "e")))
        assert line == expected
    # Nothing is created for a refused plan (the output folder was made before the check).
    assert not list(tmp_path.iterdir())


@needs_torch
def test_capture_refuses_repeats_a_script_with_a_workload_and_bad_option_values_before_ranks_start(tmp_path):
    out = str(tmp_path / "cap")
    line = _one_line(_cli("trace", "capture", "--workload", "moe", "--ranks", "4", "--option", "ep=1", "--option", "ep=2", "--out", out))
    assert line == "error: --option ep: given twice ('1', then '2'); give it once"
    # The script used to win and the workload was ignored.
    line = _one_line(_cli("trace", "capture", "--script", "x.py:build", "--workload", "moe", "--out", out))
    assert line.startswith("error: --script 'x.py:build' and --workload 'moe': give one")
    # These failed in every rank after spawning, behind torch's "Terminating process" lines.
    line = _one_line(_cli("trace", "capture", "--workload", "moe", "--ranks", "4", "--option", "ep=3", "--out", out))
    assert line == "error: capture: moe option ep = 3: expected 0 (the world) or a divisor of the world (4)"
    line = _one_line(_cli("trace", "capture", "--option", "dim=-4", "--out", out))
    assert line == "error: capture: fsdp2-llama option dim = -4: expected an integer in 1..1048576"
    line = _one_line(_cli("trace", "capture", "--steps", "99999999999999", "--out", out))  # was a MemoryError per rank
    assert "warmup and steps must be at most 10,000" in line and "steps=99999999999999" in line
    assert not (tmp_path / "cap" / "raw").exists()


def test_a_folder_given_for_a_file_is_named_as_a_folder(tmp_path, shared):
    # "file not found" (or "no such file") sent users looking for a typo in a path that exists.
    fx = shared / "fixtures" / "astra-sim"
    w, s, n = str(fx / "workloads/8npus_1MB/all_reduce"), str(fx / "configs/sys_ring_1chunk.json"), str(fx / "configs/switch_8npus.yml")
    d = str(tmp_path)
    assert _one_line(_cli("run", "--workload", w, "--system", s, "--network", d)) == f"error: {d}: is a folder; expected a network file"
    assert _one_line(_cli("run", "--workload", w, "--system", d, "--network", n)) == f"error: {d}: is a folder; expected a system file"
    assert _one_line(_cli("net", "run", "--topology", "fat-tree:k=4", "--traffic", f"file:{d}")) == f"error: {d}: is a folder; expected a traffic file"
    assert _one_line(_cli("astra", "parse", d)) == f"error: {d}: is a folder; expected a file"
    missing = str(tmp_path / "nope.csv")  # and a path that does not exist, said the same way
    assert _one_line(_cli("net", "run", "--topology", "fat-tree:k=4", "--traffic", f"file:{missing}")) == f"error: {missing}: traffic file not found"


def test_an_output_folder_that_takes_no_files_is_named_not_the_probe():
    line = _one_line(_cli("net", "run", *FAST, "--flows-out", "/proc/flows.csv"))
    assert line.startswith("error: /proc: cannot write files in this folder (")  # was /proc/.tracefabric-write-check-PID


def test_astra_export_into_its_input_folder_and_run_without_a_binary(tmp_path, shared):
    fx = shared / "fixtures" / "astra-sim"
    work = tmp_path / "w"
    work.mkdir()
    for f in (fx / "workloads/8npus_1MB").glob("all_reduce.*.et"):
        (work / f.name).write_bytes(f.read_bytes())
    common = ["--workload", str(work / "all_reduce"), "--system", str(fx / "configs/sys_ring_1chunk.json"),
              "--network", str(fx / "configs/switch_8npus.yml")]
    # It wrote comm_groups.json beside the ETs, which `run` then reads by default.
    line = _one_line(_cli("astra", "export", *common, "--out", str(work)))
    assert line == f"error: --out {work}: holds the input ETs, whose files the export would replace; expected a new folder"
    assert sorted(p.name for p in work.iterdir()) == [f"all_reduce.{r}.et" for r in range(8)]
    proc = _cli("astra", "export", *common, "--out", str(tmp_path / "x"))
    assert proc.returncode == 0, proc.stderr
    line = _one_line(_cli("astra", "run", str(tmp_path / "x")))  # was four lines of build instructions
    assert line.startswith("error: no --binary given: ASTRA-sim is not bundled with tracefabric; build its analytical binaries")


def test_inspect_marks_a_cyclic_rank_instead_of_a_zero_critical_path(tmp_path):
    for r in (0, 1):
        write_trace(tmp_path / f"t.{r}.et", [EtNode(0, "a", "COMP_NODE", data_deps=[1], duration_micros=5),
                                             EtNode(1, "b", "COMP_NODE", data_deps=[0], duration_micros=5)])
    proc = _cli("trace", "inspect", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.count("cycle (see trace validate)") == 2, proc.stdout
    proc = _cli("trace", "validate", str(tmp_path))  # its exit code 1 survives the one-line error path
    assert proc.returncode == 1 and "dependency cycle through nodes 0 -> 1 -> 0" in proc.stdout
