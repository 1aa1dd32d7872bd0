"""The main job's operator replicates as asv records them (`benchkit.operator_rounds`): a sample per
replicate process, a failure in any replicate a failed input, an operator the build cannot time
skipped; two builds' replicate processes side by side, one core each. Whole main jobs run them in
tests/test_fresh_main_job.py."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path

import pytest
import torch

from benchkit import operator_rounds as rounds
from benchkit.measure.operators import asv as op_asv
from benchkit.names import Metric

RATIO = "operators.aten_relu_default.track_compiled_over_eager"
EAGER = "operators.aten_relu_default.track_eager_seconds"
SUITE = rounds._Suite(
    "cpu",
    ("aten.relu.default",),
    {RATIO: "aten.relu.default", EAGER: "aten.relu.default", "operators.gone.track_eager_seconds": ""},
    {"'a'": "a", "'b'": "b"},
)


def _process(eager: float, compiled: float, error_b: str | None = None) -> dict:
    inputs = {
        "a": {"eager_s": eager, "compiled_s": compiled, "error": None},
        "b": {"eager_s": eager * 2, "compiled_s": compiled, "error": error_b},
    }
    return {"operators": {"aten.relu.default": {"inputs": inputs}}}


def _benchmark(name: str) -> dict:
    return {"name": name, "params": [["'a'", "'b'"]]}


def test_a_sample_per_replicate_and_the_value_their_median() -> None:
    runs = [rounds._Run("cpu", _process(e, 1.0), "", 2.0) for e in (2.0, 4.0, 3.0)]
    outcome = rounds._outcome(_benchmark(RATIO), SUITE, runs)
    assert outcome.errcode == 0
    assert outcome.samples[0] == [0.5, 0.25, 1 / 3] and outcome.result[0] == 1 / 3
    assert outcome.samples[1] == [0.25, 0.125, 1 / 6] and outcome.number == [1, 1]
    eager = rounds._outcome(_benchmark(EAGER), SUITE, runs)
    assert eager.samples[0] == [2.0, 4.0, 3.0]


def test_an_input_failing_in_one_replicate_fails_and_the_others_keep_their_samples() -> None:
    runs = [
        rounds._Run("cpu", _process(2.0, 1.0), "", 1.0),
        rounds._Run("cpu", _process(2.0, 1.0, error_b="RuntimeError: boom"), "", 1.0),
        rounds._Run("cpu", None, "the timing process exited with status 1: killed", 1.0),
    ]
    outcome = rounds._outcome(_benchmark(RATIO), SUITE, runs)
    assert outcome.errcode == 1 and outcome.result == [None, None]
    assert "exited with status 1" in outcome.stderr and outcome.samples == [None, None]
    outcome = rounds._outcome(_benchmark(RATIO), SUITE, runs[:2])
    assert outcome.result[0] == 0.5 and outcome.result[1] is None and "boom" in outcome.stderr


def test_a_skipped_operator_is_nan_and_an_unknown_one_fails() -> None:
    skipped = {"operators": {"aten.relu.default": {"skip": "not on this build"}}}
    outcome = rounds._outcome(_benchmark(RATIO), SUITE, [rounds._Run("cpu", skipped, "", 1.0)])
    assert outcome.errcode == 0 and outcome.number == [None, None]
    assert all(math.isnan(v) for v in outcome.result)
    gone = rounds._outcome(_benchmark("operators.gone.track_eager_seconds"), SUITE, [])
    assert gone.errcode == 1 and "not in this checkout's operator set" in gone.stderr


def test_a_figure_is_read_as_its_asv_benchmark_reads_it() -> None:
    data = _process(2.0, 1.0, error_b="ValueError: no")
    assert op_asv.replicate_figure(data, "aten.relu.default", "a", Metric.COMPILED_SECONDS).value == 1.0
    assert "ValueError" in op_asv.replicate_figure(data, "aten.relu.default", "b", Metric.EAGER_SECONDS).error
    assert op_asv.replicate_figure(data, "aten.mm.default", "a", Metric.EAGER_SECONDS).error
    assert op_asv.replicate_figure(data, "aten.relu.default", "c", Metric.EAGER_SECONDS).skipped


def test_the_selected_benchmarks_name_the_operators_and_inputs_to_time() -> None:
    from benchkit.measure.operators.workload import asv_workload, input_labels

    names = [RATIO, EAGER, "operators.not_an_operator.track_eager_seconds"]
    [suite] = rounds._suites(names)
    assert suite.device == "cpu" and suite.operators == ("aten.relu.default",)
    assert suite.operator_of == {RATIO: "aten.relu.default", EAGER: "aten.relu.default", names[2]: ""}
    labels = input_labels(asv_workload("cpu").inputs("aten.relu.default"))
    assert labels and suite.labels == {repr(label): label for label in labels}
    assert rounds._suites([]) == []


@pytest.mark.slow
def test_replicates_of_two_builds_run_side_by_side_one_core_each(tmp_path: Path) -> None:
    """Real timing processes of relu's inputs, this interpreter's torch standing in for two builds."""
    from benchkit.asv_runs import Progress
    from benchkit.measure.side_by_side import usable_cores
    from benchkit.measure.walltime.batch import BuildPlace

    cores = usable_cores()
    if len(cores) < 2:
        pytest.skip("side by side needs two usable cores")
    here = Path(torch.__file__).resolve().parent.parent
    a = BuildPlace("a" * 40, "here", sys.executable, here, torch.version.git_version)
    b = dataclasses.replace(a, commit="b" * 40)
    [suite] = rounds._suites([RATIO, EAGER])
    environ = {**os.environ, "BENCHKIT_CACHE_DIR": str(tmp_path / "cache"), "BENCHKIT_SIDE_BY_SIDE": "1"}
    notes: list[str] = []

    class Notes(Progress):
        def note(self, text: str) -> None:
            notes.append(text)

    runs = rounds._replicates([a, b], [suite], 2, environ, Notes())
    assert all(run.error == "" and run.data is not None for runs_of in runs.values() for run in runs_of)
    used = [[run.data["cores"] for run in runs[place.commit]] for place in (a, b)]
    # one core each, a different one per build in a round, and each build on both cores in turn
    assert all(len(cores_of) == 1 for per_build in used for cores_of in per_build), used
    assert [used[0][i] != used[1][i] for i in range(2)] == [True, True], used
    assert used[0][0] != used[0][1], used
    assert "side by side" in notes[0]
    label = next(iter(suite.labels.values()))
    figure = op_asv.replicate_figure(runs[a.commit][0].data, "aten.relu.default", label, Metric.EAGER_SECONDS)
    assert figure.error == "" and figure.value > 0
