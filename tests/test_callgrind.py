"""Instruction counts through real valgrind, torch and g++.

One small batch (`support.callgrind.real_batch`, shared with test_profiles.py) carries the
representative path: Python and C++ cases, the same case at two positions,
and three faulty cases (a segfault, a hang, an exception) that must each cost
only themselves. Whole-suite timings and the A/A spread are measured by
lab/bench_callgrind.py, not here.
"""

from __future__ import annotations

import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.callgrind import CASE_TIMEOUT, CASES, SETUP, count, needs_valgrind, real_batch

from benchkit.cli import counts as counts_cli
from benchkit.define.api import TimerArgs
from benchkit.define.expand import materialize
from benchkit.measure.callgrind import dumps, policy, supervisor
from benchkit.measure.callgrind import metric as cg_metric
from benchkit.measure.callgrind import results as cg_results

# Compares counts of separate batches exactly: they count in the session's one place
# (tests/conftest.py pins it), so the other test worker may run beside this file.

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCHKIT = [sys.executable, "-m", "benchkit.cli"]
LS = ["ls", "-la", "/usr/lib"]  # a small real program to profile

# A global setup unique to this test session: its C++ shard is never in any cache, so the
# batch always compiles it (what test_cpp_cases_are_counted checks the order of).
SESSION = f"// test session {os.getpid()}-{time.time_ns()}"
CPP_CASES = {  # slow: compiling even one C++ case costs half a minute or more
    "add": TimerArgs("x + 1", SETUP),
    "cpp add": TimerArgs("x + 1;", "auto x = torch::ones({4, 4});", global_setup=SESSION, language="cpp"),
    "cpp add again": TimerArgs(
        "x + 1;", "auto x = torch::ones({4, 4});", global_setup=SESSION, language="cpp"
    ),
    "cpp backward": TimerArgs(
        "(x * w).sum().backward();",
        "auto x = torch::ones({4, 4});\nauto w = torch::ones({4, 4}).set_requires_grad(true);",
        global_setup=SESSION,
        language="cpp",
        num_threads=2,
    ),
}
CPP_BATCH_MESSAGES: list[str] = []


@functools.cache
def cpp_batch() -> cg_results.BatchResult:
    def progress(message: str) -> None:
        print(message)
        CPP_BATCH_MESSAGES.append(message)

    return supervisor.collect(materialize(CPP_CASES), progress=progress)


def check_count(case: cg_results.CaseCount) -> None:
    assert case.status == "ok", case.error
    assert case.number >= 1 and len(case.repeat_totals) == policy.repeats_for(case.number)
    # per execution, from the smallest repeat
    assert case.instructions == min(case.repeat_totals) / case.number
    # a periodic cost (allocator housekeeping, a few thousand instructions) lands in
    # some repeats and not others: the repeats still agree to within a percent
    first = min(case.repeat_totals)
    assert statistics.median(case.repeat_totals) <= 1.01 * first
    # the profile of the chosen repeat accounts for all of it
    assert sum(case.functions.values()) == first


def test_choose_number_is_a_power_of_two_near_the_target() -> None:
    assert policy.choose_number(policy.SINGLE_EXECUTION_INSTRUCTIONS + 1) == 1
    assert policy.choose_number(policy.SINGLE_EXECUTION_INSTRUCTIONS) == 2
    assert policy.choose_number(0) == policy.MAX_NUMBER
    for probe in (1_000, 15_000, 20_000, 150_000):
        number = policy.choose_number(probe)
        assert number & (number - 1) == 0
        assert (
            number * probe <= policy.TARGET_REPEAT_INSTRUCTIONS < 2 * number * probe
            or number == policy.MAX_NUMBER
        )


def _annotate(path: Path) -> dict[str, int]:
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", "--show-percs=no", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    body = out.split("file:function", 1)[1].splitlines()[2:]
    counts = {}
    for line in body:
        match = re.match(r"^\s*([0-9,]+)\s+(.+)$", line)
        if match is None:
            break
        counts[match.group(2)] = int(match.group(1).replace(",", ""))
    return counts


def _without_object(counts: dict[str, int]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for name, value in counts.items():
        bare = re.sub(r" \[[^\]]*\]$", "", name)
        merged[bare] = merged.get(bare, 0) + value
    return merged


@needs_valgrind
@pytest.mark.parametrize("dump_line", ["no", "yes"])
def test_dump_parser_agrees_with_callgrind_annotate(tmp_path: Path, dump_line: str) -> None:
    out = tmp_path / "callgrind.out"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--dump-line={dump_line}", f"--callgrind-out-file={out}", *LS],
        capture_output=True,
        check=True,
    )
    ours = dumps.read_function_counts(out)
    assert len(ours) > 50
    assert sum(ours.values()) == dumps.read_total(out)
    # callgrind_annotate merges a file:function found in two objects (e.g. libc and
    # ld.so built from the same source file) and shows one object; compare without it.
    assert _without_object(ours) == _without_object(_annotate(out))


@needs_valgrind
def test_python_cases_are_counted() -> None:
    add, add_mul = count("add"), count("add and mul")
    for case in (add, add_mul):
        check_count(case)
    # An eager add from Python costs thousands of instructions; the extra mul about as many again.
    assert 5_000 < add.instructions < 100_000
    assert add_mul.instructions > add.instructions * 1.3
    # Profiles are standardized function names (no library suffix, no build prefix).
    assert not any(name.endswith("]") for name in add.functions)
    assert any("ceval.c" in name for name in add.functions)


@needs_valgrind
def test_layout_dependent_work_is_not_counted() -> None:
    """CPython's type-cache misses and pymalloc's pool bookkeeping depend on where
    objects lie, not on the statement: left out, while the lookups and allocation
    calls themselves are counted."""
    miss = count("type cache miss")
    check_count(miss)
    functions = {name.rsplit(":", 1)[-1] for name in miss.functions}
    assert "_PyType_Lookup" in functions and "find_name_in_mro" not in functions
    allocating = {name.rsplit(":", 1)[-1] for name in count("add").functions}  # a Python float, a tensor
    assert {"PyObject_Malloc", "PyObject_Free"} <= allocating
    assert not allocating & {"_PyObject_Malloc", "_PyObject_Free", "_PyObject_Realloc", "_PyObject_Calloc"}
    assert real_batch().metadata["not_counted"]["call_tree_of"] == "find_name_in_mro"


@needs_valgrind
@pytest.mark.slow
def test_cpp_cases_are_counted() -> None:
    batch = cpp_batch()
    add, cpp, again, backward = (count(k, batch) for k in ("add", "cpp add", "cpp add again", "cpp backward"))
    for case in (add, cpp, again, backward):
        check_count(case)
    assert 3_000 < cpp.instructions < add.instructions
    assert any("add" in name for name in cpp.functions)
    assert cpp.repeat_totals == again.repeat_totals
    # autograd from C++ runs (GIL released); both threads' work is counted
    assert backward.instructions > 3 * cpp.instructions
    # a separate batch (other processes, other order) counts the same
    assert count("add").repeat_totals == add.repeat_totals
    # the Python case went to the workers before the C++ compile (of a shard new to every cache) started
    messages = CPP_BATCH_MESSAGES
    queued = next(i for i, m in enumerate(messages) if m.startswith("counting 1 case(s)"))
    compiling = next(i for i, m in enumerate(messages) if m.startswith("compiling 1 C++ shard"))
    assert queued < compiling


@needs_valgrind
def test_a_case_counts_the_same_wherever_it_runs_in_the_batch() -> None:
    assert count("add").repeat_totals == count("add again").repeat_totals


# Calls a function compiled by dynamo (no inductor: its C++ compile is another test's).
COMPILED = TimerArgs(
    "f(x)", "x = torch.ones(4, 4)\nf = torch.compile(lambda t: t + 1, backend='eager')\nf(x)"
)


@needs_valgrind
def test_torch_compile_cases_run_in_one_compile_template() -> None:
    messages: list[str] = []
    cases = materialize({"compiled": COMPILED, "compiled again": COMPILED, "add": CASES["add"]})
    batch = supervisor.collect(cases, jobs=1, progress=messages.append)
    compiled, again, add = (count(k, batch) for k in ("compiled", "compiled again", "add"))
    for case in (compiled, again, add):
        check_count(case)
    # dynamo imported once for both cases, each case's cache prepared before it is counted
    assert sum("torch.compile template ready" in m for m in messages) == 1
    assert sum("torch.compile cache prepared" in m for m in messages) == 2
    # Two cases with the same statement but each its own torch.compile cache folder
    # (named by the case): close, though not instruction for instruction (0.09% here).
    assert abs(compiled.instructions / again.instructions - 1) < 0.005
    # the compiled call runs dynamo's guards and then the same add
    assert compiled.instructions > add.instructions
    # outside the compile template, the plain case counts as in any other batch
    assert add.repeat_totals == count("add").repeat_totals


@needs_valgrind
def test_crash_hang_and_exception_cost_only_their_own_case() -> None:
    segfault, hang, raises = count("segfault"), count("hang"), count("raises")
    assert segfault.status == "failed" and "SIGSEGV" in segfault.error
    assert hang.status == "failed" and f"timed out after {CASE_TIMEOUT:.0f}s" in hang.error
    assert raises.status == "failed" and "ValueError: broken on purpose" in raises.error
    ok = [c for c in real_batch().counts.values() if c.status == "ok"]
    assert len(ok) == 4


@needs_valgrind
def test_metadata_records_what_valgrind_emulates() -> None:
    meta = real_batch().metadata
    assert meta["valgrind"].startswith("valgrind-")
    # valgrind emulates at most AVX2, whatever the host has.
    assert meta["cpu_capability_under_valgrind"] in ("DEFAULT", "AVX2", "ZVECTOR", "VSX")
    assert meta["cpu_capability_native"]
    summary = counts_cli.counts_json(real_batch())
    (add_key,) = [k for k in summary if k.startswith("add |")]
    assert summary[add_key]["instructions"] == count("add").instructions
    assert summary[add_key]["cpu_capability"] == meta["cpu_capability_under_valgrind"]


def _env_without_valgrind(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {**os.environ, "PATH": str(bin_dir)}


def test_no_valgrind_is_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*BENCHKIT, "counts", "--filter", "^empty/"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=_env_without_valgrind(tmp_path),
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "benchkit counts: error: valgrind is not installed" in done.stderr


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--profile", "base.json.gz"], "benchkit counts: error: --profile is a switch (as in asv and "
         "`benchkit operators`): `--profile --profile-dir DIR` saves DIR/counts.json.gz, not base.json.gz"),
        (["base.json.gz"], "benchkit counts: error: unrecognized arguments: base.json.gz"),
    ],
)  # fmt: skip
def test_the_old_profile_spelling_is_one_line_naming_the_new(words: list[str], message: str) -> None:
    """`counts --profile FILE`, as the docs once gave it, stops before counting anything."""
    done = subprocess.run([*BENCHKIT, "counts", *words], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == message


def test_asv_instruction_benchmarks_skip_without_valgrind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asv_runner.benchmarks.mark import SkipNotImplemented

    monkeypatch.setenv("PATH", _env_without_valgrind(tmp_path)["PATH"])
    cases = materialize({"add": CASES["add"]})
    metric = cg_metric.InstructionCountMetric(cases)
    method = metric.make_method(cases[0])
    assert method.unit == "instructions"  # type: ignore[attr-defined]
    assert method.setup_cache.timeout >= cg_metric.suite_timeout(1)  # type: ignore[attr-defined]
    batch = method.setup_cache()  # type: ignore[attr-defined]
    assert "valgrind is not installed" in batch["unavailable"]
    with pytest.raises(SkipNotImplemented, match="valgrind is not installed"):
        method(None, batch)


@needs_valgrind
@pytest.mark.slow
def test_counts_cli_writes_json(tmp_path: Path) -> None:
    definitions = tmp_path / "defs.py"
    definitions.write_text(
        "from benchkit.define.api import TimerArgs\n"
        "BENCHMARKS = {'mine': {'add': TimerArgs('x + 1', 'x = torch.ones(4, 4)'),\n"
        "                       'broken': TimerArgs('raise RuntimeError(\"no\")')}}\n"
    )
    out, profile_dir = tmp_path / "counts.json", tmp_path / "base"
    command = [*BENCHKIT, "counts", "--definitions", str(definitions), "--filter", "^mine/"]
    done = subprocess.run(
        [*command, "--json", str(out), "--profile", "--profile-dir", str(profile_dir)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "BENCHKIT_STANDARD": "0"},
    )
    assert done.returncode == 1, done.stderr  # one case failed
    data = json.loads(out.read_text())
    add = data["mine/add | Python | explicit | explicit | 1 thread(s)"]
    broken = data["mine/broken | Python | explicit | explicit | 1 thread(s)"]
    assert add["status"] == "ok" and 3_000 < add["instructions"] < 100_000
    assert broken["status"] == "failed" and broken["instructions"] is None and "no" in broken["error"]
    assert "[1/2" in done.stderr and "[2/2" in done.stderr  # progress
    profile = counts_cli.profile_path(profile_dir)
    assert f"function-level profile: {profile}" in done.stderr
    diff = subprocess.run(  # what `benchkit diff` reads: the same build twice, nothing changed
        [*BENCHKIT, "diff", str(profile), str(profile)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert diff.returncode == 0, diff.stderr


# What the compile template and then each of its children run before a case's setup, then the
# name dynamo gives a compiled function.
_COMPILED_FUNCTION_NAME = """
import random
import torch._dynamo
from benchkit.measure.callgrind import child
child._draw_uuid4_from_random()
random.seed(0)
from torch._dynamo.bytecode_transformation import unique_id
print(unique_id("__compiled_fn", with_uuid=True))
"""


def test_dynamo_names_a_compiled_function_alike_in_every_counting_child() -> None:
    names = {
        subprocess.run(
            [sys.executable, "-c", _COMPILED_FUNCTION_NAME], cwd=REPO_ROOT, capture_output=True, text=True,
            check=True,
        ).stdout.strip()
        for _ in range(2)
    }  # fmt: skip
    assert len(names) == 1, names
    assert names.pop().startswith("__compiled_fn_")
