"""What `benchkit check` does not judge, through the real command over asv result files written
by asv's own API: the wall times of a disturbed base or head (a labelled history: one busy
build among real steps), and compile times of builds whose inductor cache states differed."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.report.gate import check, not_judged
from benchkit.report.gate.check_types import Verdict
from lab.histories import BUSY, COMMITS, MACHINE, History, commit_hash, disturbed_history

REPO_ROOT = Path(__file__).resolve().parent.parent
# The labelled history's true changes, (base, head) -> (case, metric): see `disturbed_history`.
TRUE = {
    (7, 8): ("Slower", "wall_time"),
    (19, 20): ("Counted", "instructions"),
    (23, 24): ("Slower2", "wall_time"),
}


def _check(project: History, base: int, head: int, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchkit.cli", "check", commit_hash(base)[:8], commit_hash(head)[:8]]
    return subprocess.run(
        [*command, "--asv-config", str(project.config), *options],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _flagged(verdict: Verdict) -> set[tuple[str, str]]:
    return {
        (c.name.split(".")[1], c.metric)
        for c in verdict.comparisons
        if c.status in ("regression", "improvement")
    }


@pytest.mark.parametrize("flat", [0, 13], ids=["3 wall-time benchmarks", "16 wall-time benchmarks"])
def test_a_disturbed_build_is_not_judged_and_the_true_changes_are_found(tmp_path: Path, flat: int) -> None:
    """Every consecutive pair of the labelled history through `run_check` (the command's body):
    no false verdict anywhere, the busy build's two pairs not judged (exit 2), the true steps found."""
    project = disturbed_history(tmp_path, flat, seed=7)
    for base in range(COMMITS - 1):
        head = base + 1
        verdict = check.run_check(commit_hash(base), commit_hash(head), asv_config=project.config)
        flagged = _flagged(verdict)
        disturbed = [c for c in verdict.comparisons if c.status == not_judged.DISTURBED]
        if BUSY in (base, head):
            assert verdict.exit_code == 2 and not flagged, (base, head, flagged)
            assert len(disturbed) == flat + 3 and {c.metric for c in disturbed} == {"wall_time"}
            side = "head" if head == BUSY else "base"
            assert verdict.not_judged[0].startswith(
                f"wall time: {side} {commit_hash(BUSY)[:8]} is a disturbed"
            )
            counts = [c for c in verdict.comparisons if c.metric == "instructions"]
            assert counts and all(c.status == "unchanged" for c in counts)  # still judged
        elif (base, head) == (7, 8) and flat == 0:
            # +9.2 % of Slower in this draw, against the MDC of its own 29 history pairs (a t-test
            # on 14 degrees of freedom: ±10.4 %, above the 10 % ceiling): can't tell, not missed.
            slower = next(c for c in verdict.comparisons if c.name.endswith("Slower.time_wall"))
            assert not flagged and slower.status == "can't tell" and verdict.exit_code == 0
        elif (base, head) == (23, 24) and flat == 13:
            # This draw's +6.9 % of Slower2 lies within its MDC (±8.4 %): unchanged, with or
            # without the disturbed-build rule; `benchkit regressions` finds it over the history.
            assert not flagged and verdict.exit_code == 0
        elif (base, head) in TRUE:
            assert flagged == {TRUE[(base, head)]} and verdict.exit_code == 1, (base, head, flagged)
            assert not disturbed
        else:
            assert not flagged and not disturbed and verdict.exit_code == 0, (base, head, flagged)


def test_the_command_says_so_in_text_json_and_markdown(tmp_path: Path) -> None:
    project = disturbed_history(tmp_path, 0, seed=7)
    out, markdown = tmp_path / "verdict.json", tmp_path / "verdict.md"
    run = _check(project, BUSY - 1, BUSY, "--json", str(out), "--markdown", str(markdown))
    assert run.returncode == 2, run.stderr
    assert "⚠️ not judged: measure again" in run.stdout and "3 not judged (disturbed build)" in run.stdout
    assert "#### Not judged: disturbed build" in run.stdout and "#### Regressions" not in run.stdout
    assert (
        f"benchkit check: not judged: wall time: head {commit_hash(BUSY)[:8]} is a disturbed build"
        in run.stderr
    )
    assert "3 of 3 wall times ×1.59 (slower) against the builds on both sides" in run.stdout  # by prefix too
    assert markdown.read_text() == run.stdout
    data = json.loads(out.read_text())
    assert data["exit_code"] == 2 and data["not_judged"] and data["problems"] == []
    walls = [c for c in data["comparisons"] if c["metric"] == "wall_time"]
    assert {c["verdict"] for c in walls} == {"disturbed build"}
    assert all(c["note"].startswith("not judged: head ") and "measure again" in c["note"] for c in walls)
    assert data["counts"]["unchanged"] == 3  # the instruction counts


def test_a_disturbed_last_head_is_judged_against_the_builds_before_it(tmp_path: Path) -> None:
    """A head at the end of the history (as a pull request's) has one side: the builds before it."""
    full = disturbed_history(tmp_path, 0, seed=7)
    for index in range(BUSY + 1, COMMITS):  # the history ends with the busy build
        (full.results / MACHINE / f"{commit_hash(index)[:8]}-virtualenv-py3.11.json").unlink()
    verdict = check.run_check(commit_hash(BUSY - 1), commit_hash(BUSY), asv_config=full.config)
    assert verdict.exit_code == 2 and not _flagged(verdict)
    assert "against the builds before it" in verdict.not_judged[0]
    # A real step of one case at the end is no disturbance: judged as ever.
    for index in range(9, BUSY + 1):
        (full.results / MACHINE / f"{commit_hash(index)[:8]}-virtualenv-py3.11.json").unlink()
    verdict = check.run_check(commit_hash(7), commit_hash(8), asv_config=full.config)
    assert not verdict.not_judged and verdict.exit_code != 2
    assert not [c for c in verdict.comparisons if c.status == not_judged.DISTURBED]


# ------------------------------------------------------------------ cache state

COMPILE = "operators.aten_add_Tensor.track_compile_seconds('x')"
CACHE = "operators.aten_add_Tensor.track_compile_cache_hit('x')"
RATIO = "operators.aten_add_Tensor.track_compiled_over_eager('x')"


def _operator_history(root: Path) -> History:
    """Builds 0-3 compiled cold (build 3 six times as slow to compile: beyond a cold compile's
    noise, `COMPILE_SIGMA`), 4-7 warm (found every kernel)."""
    project = History(root)
    rng = random.Random(5)
    units = {COMPILE: "seconds", CACHE: "inductor cache hit (1 warm, 0 cold)", RATIO: "compiled/eager time"}
    for name, unit in units.items():
        project.bench(name.split("(")[0], unit, params=[["'x'"]])
    for i in range(8):
        warm = i >= 4
        compile_s = (0.1 if warm else 2.0 * (6 if i == 3 else 1)) * math.exp(rng.gauss(0, 0.01))
        for name, value in ((COMPILE, compile_s), (CACHE, float(warm)), (RATIO, 0.5)):
            project.add(i, name.split("(")[0], value)
    project.save()
    return project


def test_compile_times_of_different_cache_states_are_not_judged(tmp_path: Path) -> None:
    project = _operator_history(tmp_path)
    out = tmp_path / "verdict.json"
    run = _check(project, 3, 4, "--json", str(out))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "#### Not judged: inductor cache state differed" in run.stdout
    assert "not judged: cache state differed (cold vs warm)" in run.stdout
    assert "1 not judged (cache state differed)" in run.stdout and "0 regressions" in run.stdout
    assert "compile time: 1 compile time(s) not judged" in run.stderr
    rows = {c["name"]: c for c in json.loads(out.read_text())["comparisons"]}
    assert rows[COMPILE]["verdict"] == "cache state differed"
    assert rows[CACHE]["verdict"] == "not compared" and "not performance" in rows[CACHE]["note"]
    assert rows[RATIO]["verdict"] == "unchanged"
    # The same cache state: judged as ever (build 3 compiled six times as long as build 2).
    same = _check(project, 2, 3, "--json", str(out))
    rows = {c["name"]: c for c in json.loads(out.read_text())["comparisons"]}
    assert rows[COMPILE]["verdict"] == "regression" and same.returncode == 1, same.stdout
    # Over the whole history the cold -> warm step of compile times is not judged, and said why.
    steps = tmp_path / "steps.json"
    command = [sys.executable, "-m", "benchkit.cli", "regressions", "--asv-config", str(project.config)]
    run = subprocess.run(
        [*command, "--json", str(steps)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "# not judged: the builds' inductor cache states differed (compile times)" in run.stdout
    assert "#   cache state differed: a compile time between builds compiled in different" in run.stdout
    data = json.loads(steps.read_text())
    [step] = [s for s in data["steps"] if s["position"] == 4]
    assert step["name"] == COMPILE and not step["judged"]
    assert step["shown_label"] == "cache state differed (cold vs warm)"
    assert not [s for s in data["steps"] if s["name"] == CACHE]  # the record makes no steps
    assert data["labels"]["cache state differed"].startswith("a compile time between builds")


@pytest.mark.slow
def test_the_operator_suite_records_the_cache_state_of_each_compile(tmp_path: Path) -> None:
    """Two real timing processes of the asv suite on one empty inductor cache: the first
    compiles ReLU's inputs (cold, 0.0), the second finds every kernel there (warm, 1.0); both
    record the same generated kernels."""
    import os

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "PYTHONPATH": str(REPO_ROOT)}
    states, kernels = [], []
    for run in ("cold", "warm"):
        out = tmp_path / f"{run}.json"
        command = ["-m", "benchkit.measure.operators.asv", "--time-default-set", "1", str(out), "cpu"]
        done = subprocess.run(
            [sys.executable, *command, "aten.relu.default"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        inputs = json.loads(out.read_text())["operators"]["aten.relu.default"]["inputs"]
        assert inputs and all(entry["error"] is None for entry in inputs.values())
        states.append({entry["compile_cache_hit"] for entry in inputs.values()})
        kernels.append({label: (entry["kernel"], entry["kernel_hash"]) for label, entry in inputs.items()})
    assert states == [{0.0}, {1.0}]
    # What inductor generated is recorded alike whether compiled or loaded from the cache, one
    # kernel per input (the asv number is the hash's value).
    assert kernels[0] == kernels[1] and len({k for k, _ in kernels[0].values()}) == len(kernels[0])
    assert all(number == float(int(k, 16)) for k, number in kernels[0].values())


def test_the_operators_page_reads_results_with_the_cache_record(tmp_path: Path) -> None:
    from benchkit.history.results.read import load_asv_config, load_history
    from benchkit.report.site import data as site_data

    project = _operator_history(tmp_path)
    history = load_history(load_asv_config(project.config), MACHINE)
    [row] = site_data.operator_rows(history[4], {})
    assert row.operator == "aten.add.Tensor" and row.device == "cpu"
