"""The README's main-job command from a fresh clone with empty caches, on a small selection.

`lab/fresh_main_job.sh` clones the committed HEAD of this checkout into a temp
folder, makes a virtual environment for it, points HOME, BENCHKIT_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR at empty folders and runs
`bash scripts/install.sh && benchkit main -b SELECTION --rounds 8`: with the default builds (the
installed torch and another release of pip's sources) when pip's sources hold another
release, else with two builds passed explicitly (the installed torch's wheel and a copy
of it), so the test passes whatever the package index holds. The selection holds all
three metrics: wall time and instruction counts of a Python case, and the operator timings
of ReLU (a C++ case's compile, wall time and counts through asv are
tests/test_selection_asv.py's: here its compile for each of two torch releases would add
two minutes of CI). Every selected benchmark of both builds must have a number in asv's
result files.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.names import OPERATOR_METRICS
from benchkit.operator_rounds import REPLICATED
from benchkit.rounds_policy import FIRST_LOOK_ROUNDS, MAIN_RUN_COMPILES
from benchkit.stats import MIN_REPLICATES

REPO_ROOT = Path(__file__).resolve().parent.parent
SELECTION = "Pointwise_Math_add_Tensor_Scalar_PYTHON_EAGER_FORWARD_t1|aten_relu_default"
# The first look's rounds alone: adding rounds to open wall times is tests/test_asv_e2e.py's;
# here, between two real releases, it would add minutes of build switches per open wall time.
FIRST_LOOK = ["--rounds", str(FIRST_LOOK_ROUNDS)]
# As few operator replicates as the gate reads (the default's 20 would add two minutes of CI
# for the same code path; the trimmed test of 10 and more is tests/test_noise.py's).
REPLICATES = MIN_REPLICATES
pytestmark = pytest.mark.slow


def torch_has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _numbers(path: Path, column_name: str = "result") -> dict[str, list[object]]:
    data = json.loads(path.read_text())
    column = data["result_columns"].index(column_name)
    # asv leaves out a row's empty columns at its end
    return {name: row[column] if len(row) > column else None for name, row in data["results"].items()}


def _builds_to_pass(tmp_path: Path) -> list[str]:
    """[] when the default builds make a pair here; else two builds for `--build`: the installed
    torch's wheel and a copy whose torch/version.py carries one more comment line."""
    from benchkit.history.builds.defaults import command_source, comparison_release, installed_torch_wheel
    from benchkit.history.builds.installed import installed_torch
    from benchkit.history.builds.sources import PIP_CONFIG
    from benchkit.history.builds.wheels import patch_wheel_module

    torch = installed_torch()
    assert torch is not None, "install.sh installs torch before the tests run"
    if comparison_release(torch.version, torch.flavour, command_source(PIP_CONFIG, True)) is not None:
        return []
    wheel = installed_torch_wheel()
    copy = patch_wheel_module(
        wheel, tmp_path / "copy" / wheel.name, "torch/version.py", lambda text: text + "# a second build\n"
    )
    return ["--build", str(wheel), "--build", str(copy)]


def test_main_job_from_a_fresh_clone_measures_every_metric_of_both_builds(tmp_path: Path) -> None:
    work = tmp_path / "fresh"
    env = {key: value for key, value in os.environ.items() if not key.startswith("BENCHKIT_")}
    env["BENCHKIT_FRESH_DIR"] = str(work)
    env["BENCHKIT_OPERATOR_REPLICATES"] = str(REPLICATES)
    builds = _builds_to_pass(tmp_path)
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "lab" / "fresh_main_job.sh"), "-b", SELECTION, *FIRST_LOOK, *builds],
        env=env, capture_output=True, text=True, timeout=2400,
    )  # fmt: skip
    log = done.stdout + done.stderr
    if not builds:
        assert log.count("default build: torch ") == 2, log[-3000:]
    results = list((work / "benchkit" / ".asv" / "results").glob("*/*-*.json"))
    assert len(results) == 2, log[-5000:]
    metrics = {"time_wall": 0, "track_instructions": 0, "operators.": 0, "operators_cuda.": 0}
    for path in results:
        for name, values in _numbers(path).items():
            assert re.search(SELECTION, name), f"{path.name}: {name} ran but was not selected"
            if name.startswith("operators_cuda.") and not torch_has_cuda():
                # The selection names ReLU on CUDA too: a machine without a GPU records skips.
                assert values and all(isinstance(v, float) and math.isnan(v) for v in values), (name, values)
                metrics["operators_cuda."] += 1
                continue
            assert values and all(isinstance(v, float) and not math.isnan(v) for v in values), (
                f"{path.name}: {name} has no number: {values}\n{log[-5000:]}"
            )
            for key in metrics:
                metrics[key] += key in name
    # Per build: a wall time, a count, every operator metric x ReLU's inputs.
    assert metrics["time_wall"] == 2 and metrics["track_instructions"] == 2, metrics
    assert metrics["operators."] >= 2 * len(OPERATOR_METRICS), metrics
    # The operator timings: the main run's processes and the interleaved replicates of the job's pair.
    for path in results:
        for name, samples in _numbers(path, "samples").items():
            if name.startswith("operators.") and any(name.endswith(m.method) for m in REPLICATED):
                assert samples and all(len(s) == MAIN_RUN_COMPILES + REPLICATES for s in samples), (
                    path.name,
                    name,
                    samples,
                )
            if name.startswith("operators.") and name.endswith("track_compile_seconds"):
                # both main-run processes compiled cold (a fresh clone: empty caches)
                compiles = [len(s) for s in samples]
                assert compiles and set(compiles) == {MAIN_RUN_COMPILES}, (path.name, name, samples)
    methods = len(OPERATOR_METRICS)  # the operator suite's metrics, each once per build
    assert metrics["operators_cuda."] == (0 if torch_has_cuda() else 2 * methods), metrics
    # Exit 0, or 1 only because the gate judged the two real torch versions different.
    problems = [line[4:] for line in log.splitlines() if line.startswith("  - ")]
    assert done.returncode == (1 if problems else 0), log[-3000:]
    assert all(p.startswith("benchkit check ") for p in problems), problems
    assert (work / "benchkit" / "html" / "index.html").is_file()
    _export_has_a_record_per_number(work / "benchkit", tmp_path / "export", results)


def _export_has_a_record_per_number(project: Path, out: Path, results: list[Path]) -> None:
    """`benchkit export` of the job: one record per figure with a number (the cache state and the
    kernel, records rather than figures, go into the compile figures'), in the shape of PyTorch's
    writers, the newer build judged against the older."""
    from test_export import PYTORCH_RECORD, shape

    done = subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "export", "--asv-config", str(project / "asv.conf.json"),
         "--out", str(out)], capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records_of = {path.stem[:8]: json.loads(path.read_text()) for path in out.glob("*/*.json")}
    assert len(records_of) == 2, done.stdout
    for path in results:
        numbers = [
            value
            for name, values in _numbers(path).items()
            if not name.endswith(("track_compile_cache_hit", "track_kernel_hash"))
            for value in values or [None]
            if isinstance(value, float) and not math.isnan(value)
        ]
        assert len(records_of[path.name[:8]]) == len(numbers), path.name
    records = [r for rs in records_of.values() for r in rs]
    assert all(shape(r) == shape(PYTORCH_RECORD) for r in records)
    judged = [rs for rs in records_of.values() if all("verdict" in r["metric"]["extra_info"] for r in rs)]
    assert len(judged) == 1, done.stdout  # the newer build; the older has no predecessor
