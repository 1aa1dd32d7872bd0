"""Through real asv: a `-b` selection pays only for its own cases, and rounds share one batch.

Each test has a project, a history, a cache and an asv environment of its own: sharing the
worker's environment (`worker_asv_envs`) made the second and third test's setup_cache fail
under xdist (`-n 2`), though not in one process."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.asv_project import MACHINE, AsvProject, make_project
from support.wheels import LOCAL_WHEEL

from benchkit.define.api import Language, TimerArgs
from benchkit.measure.callgrind.profiles import load_profile
from benchkit.measure.cpp.shards import Snippet

pytestmark = pytest.mark.slow
ROUNDS = ["--interleave-rounds", "-a", "rounds=2", "-a", "repeat=(2,3,1.0)", "--record-samples"]
LINEAR_COUNTS = "instruction_counts.e2e_Linear_PYTHON_EXPLICIT_EXPLICIT_t1"
RELU_COUNTS = "instruction_counts.e2e_ReLU_PYTHON_EXPLICIT_EXPLICIT_t1"
RELU_OPERATOR = "operators.aten_relu_default.track_compiled_over_eager"


def _results(project: AsvProject) -> dict[str, Any]:
    """Benchmark name (the class's content hash left out) -> asv's result list."""
    [path] = (project.root / "results" / MACHINE).glob("*-*.json")
    data = json.loads(path.read_text())
    columns = data["result_columns"]
    results = {}
    for name, row in data["results"].items():
        module, cls, method = name.split(".")
        short = re.sub("_[0-9a-f]{8}$", "", cls)  # the case's content hash
        results[f"{module}.{short}.{method}"] = dict(zip(columns, row, strict=False))["result"]
    return results


def _profile_metadata(project: AsvProject) -> dict[str, object]:
    [path] = (project.root / "results" / MACHINE).glob("*/*.json.gz")
    return load_profile(path).metadata


def _stored_counts(project: AsvProject) -> list[Path]:
    root = Path(project.env["BENCHKIT_CACHE_DIR"]) / "callgrind" / "counts"
    return [p for p in root.glob("*/*.json") if p.name != "metadata.json"]


def test_a_selection_counts_only_its_cases_once_and_later_ones_reuse(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", tmp_path / "env")
    # A cache of its own: other tests of the session count the same case for the same build.
    project.env["BENCHKIT_CACHE_DIR"] = str(tmp_path / "cache")
    project.benchkit("history", "init", "--repo", str(project.history), str(LOCAL_WHEEL), check=True)
    assert not _stored_counts(project)

    project.asv("run", "ALL", *ROUNDS, "--machine", MACHINE, "-b", "e2e_Linear.*track_instructions")
    results = _results(project)
    assert results[f"{LINEAR_COUNTS}.track_instructions"][0] > 0
    assert f"{RELU_COUNTS}.track_instructions" not in results  # not selected: not run, not written as failed
    assert not any(name.endswith("time_wall") for name in results)
    new = set(_stored_counts(project))
    assert len(new) == 1, "one case selected, one case counted"
    metadata = _profile_metadata(project)
    # The profile is written by the last round: it found the count round 1 made.
    assert (metadata["suite_cases"], metadata["selected_cases"]) == (2, 1)
    assert (metadata["counted_cases"], metadata["reused_cases"]) == (0, 1)

    [linear_entry] = new
    stamp = linear_entry.stat().st_mtime_ns
    project.asv("run", "ALL", *ROUNDS, "--machine", MACHINE, "-b", "e2e_.*track_instructions")
    results = _results(project)
    assert results[f"{LINEAR_COUNTS}.track_instructions"][0] > 0
    assert results[f"{RELU_COUNTS}.track_instructions"][0] > 0
    assert len(_stored_counts(project)) == 2
    assert linear_entry.stat().st_mtime_ns == stamp, "a case counted for this build was counted again"
    assert _profile_metadata(project)["selected_cases"] == 2


def test_an_operator_selection_times_only_its_operator_once_per_command(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", tmp_path / "env")
    # A cache of its own: the other test worker's operator runs keep their timings there too.
    project.env["BENCHKIT_CACHE_DIR"] = str(tmp_path / "cache")
    project.benchkit("history", "init", "--repo", str(project.history), str(LOCAL_WHEEL), check=True)
    timing = tmp_path / "operators.json"
    project.env.update(
        BENCHKIT_OPERATOR_PROCESSES="1", BENCHKIT_OPERATOR_ROUNDS="2", BENCHKIT_OPERATORS_JSON=str(timing)
    )
    reuse_folder = tmp_path / "cache" / "operators" / "asv-commands"
    before = set(reuse_folder.glob("*.json"))
    project.asv("run", "ALL", *ROUNDS, "--machine", MACHINE, "-b", RELU_OPERATOR)
    measured = json.loads(timing.read_text())
    assert list(measured["operators"]) == ["aten.relu.default"]
    results = _results(project)
    assert list(results) == [RELU_OPERATOR] and all(v > 0 for v in results[RELU_OPERATOR])
    # Round 2 took round 1's timing: one timing was kept for this asv command.
    assert len(set(reuse_folder.glob("*.json")) - before) == 1


CPP_DEFINITIONS = """
from benchkit.define.api import Language, TimerArgs

BENCHMARKS = {
    "e2e": {
        "AddCpp": TimerArgs("auto y = x + x;", setup="auto x = torch::ones({8, 4});", language=Language.CPP),
        "MulCpp": TimerArgs("auto y = x * 2;", setup="auto x = torch::ones({8, 4});", language=Language.CPP),
    }
}
"""


def _cpp_libraries(cache: Path) -> list[Path]:
    return sorted((cache / "cpp").glob("benchkit_cpp_*/*.so"))


def test_wall_time_and_counts_of_a_cpp_case_share_one_compile(tmp_path: Path) -> None:
    """Both metrics of the selected C++ case, two interleaved rounds: one library is
    compiled for the torch build, holding the selected case alone (not its suite-mates)."""
    project = make_project(tmp_path / "project", tmp_path / "env")
    (project.root / "e2e_definitions.py").write_text(CPP_DEFINITIONS)
    # A cache of its own: the other test worker may compile C++ shards meanwhile.
    cache = tmp_path / "cache"
    project.env["BENCHKIT_CACHE_DIR"] = str(cache)
    project.benchkit("history", "init", "--repo", str(project.history), str(LOCAL_WHEEL), check=True)
    before = set(_cpp_libraries(cache))

    project.asv("run", "ALL", *ROUNDS, "--machine", MACHINE, "-b", "e2e_AddCpp")
    results = _results(project)
    add = "instruction_counts.e2e_AddCpp_CPP_EXPLICIT_EXPLICIT_t1"
    assert results[f"{add}.track_instructions"][0] > 0
    assert results[f"{add}.time_wall"][0] > 0
    assert not any("MulCpp" in name for name in results)
    [library] = set(_cpp_libraries(cache)) - before  # one C++ library for both metrics
    exported = library.read_bytes()
    setup = "auto x = torch::ones({8, 4});"
    add_key, mul_key = (
        Snippet.of(TimerArgs(f"auto y = {op};", setup=setup, language=Language.CPP)).key
        for op in ("x + x", "x * 2")
    )
    assert f"timeit_{add_key}".encode() in exported and f"count_{add_key}".encode() in exported
    assert f"timeit_{mul_key}".encode() not in exported, "an unselected case was compiled"
    metadata = _profile_metadata(project)
    assert (metadata["selected_cases"], metadata["reused_cases"]) == (1, 1)
