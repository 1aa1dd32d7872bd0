"""A disturbed build over a whole history: recognised once, its wall times making no steps,
while the real steps of the same history are still found; for a large and a small suite,
through `benchkit regressions` over asv result files written by asv's own API."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.history.results.read import load_asv_config, load_history
from benchkit.report.gate import check, check_config
from benchkit.report.steps import changepoints
from lab.histories import BUSY, COUNTS, MACHINE, WALL, History, commit_hash, disturbed_history

REPO_ROOT = Path(__file__).resolve().parent.parent


def _found(project: History, exclude: bool) -> tuple[list[changepoints.Step], list[int]]:
    conf = load_asv_config(project.config)
    config = check_config.parse_check_config({}, "defaults")
    metric_of = check.metric_judge({n: b["unit"] for n, b in project.benchmarks.items()}, config)
    history = load_history(conf, MACHINE)
    threshold_of = lambda n: config.rule_for(n, metric_of(n))[1]  # noqa: E731
    if not exclude:  # what `regressions` reported before disturbed builds were recognised
        return changepoints.changepoints(history, metric_of, threshold_of), []
    found = changepoints.history_steps(history, metric_of, threshold_of, config.thresholds["instructions"])
    return found.steps, [d.position for d in found.disturbed]


@pytest.mark.parametrize("flat", [13, 0], ids=["15 wall-time benchmarks", "3 wall-time benchmarks"])
def test_a_busy_build_is_one_disturbed_build_and_the_real_steps_stay(tmp_path: Path, flat: int) -> None:
    project = disturbed_history(tmp_path, flat, seed=7)
    before, _ = _found(project, exclude=False)
    touching_busy = [s for s in before if s.metric == "wall_time" and BUSY in (s.position, s.position - 1)]
    assert len(touching_busy) >= 3, "without the rule the busy build makes steps (the detector must matter)"
    steps, disturbed = _found(project, exclude=True)
    assert disturbed == [BUSY]
    assert not [s for s in steps if s.metric == "wall_time" and abs(s.position - BUSY) <= 1]
    real = {(s.name, s.position) for s in steps if changepoints.judged(s)}
    assert (COUNTS.format("Counted"), 20) in real
    assert (WALL.format("Slower"), 8) in real and (WALL.format("Slower2"), 24) in real
    false = [s for s in steps if "Flat" in s.name]
    assert false == [], [(s.name, s.position, s.change) for s in false]


def test_a_build_whose_counts_moved_too_is_not_the_machines(tmp_path: Path) -> None:
    """Every wall time and every count moved at one build and back: the code did it."""
    project = History(tmp_path)
    rng = random.Random(3)
    for k in range(4):
        project.bench(WALL.format(f"C{k}"), "seconds")
        project.bench(COUNTS.format(f"C{k}"), "instructions")
        for i in range(10):
            factor = 1.5 if i == 5 else 1.0
            project.add(i, WALL.format(f"C{k}"), 1e-5 * factor * math.exp(rng.gauss(0, 0.01)))
            project.add(i, COUNTS.format(f"C{k}"), round(1_000_000 * (1.2 if i == 5 else 1.0)))
    project.save()
    steps, disturbed = _found(project, exclude=True)
    assert disturbed == []
    # Counts: one outlier row per case, not a step up and a step down. Wall times: asv's
    # robust fit may absorb one point; either way, never two steps.
    assert [(s.metric, s.position, s.label) for s in steps if s.metric == "instructions"] == [
        ("instructions", 5, changepoints.OUTLIER)
    ] * 4
    assert all(s.label == changepoints.OUTLIER for s in steps)


def _regressions(project: History, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchkit.cli", "regressions", "--asv-config", str(project.config)]
    return subprocess.run([*command, *options], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_regressions_command_reports_it_once_and_keeps_short_steps_apart(tmp_path: Path) -> None:
    (tmp_path / "long").mkdir()
    (tmp_path / "short").mkdir()
    project = disturbed_history(tmp_path / "long", 13, seed=11)
    out = tmp_path / "steps.json"
    run = _regressions(project, "--json", str(out))
    assert run.returncode == 0, run.stderr
    left_out = [line for line in run.stdout.splitlines() if "left out" in line]
    assert len(left_out) == 1 and commit_hash(BUSY)[:8] in left_out[0], run.stdout
    assert "16 of 16 wall times ×1.5" in left_out[0] or "16 of 16 wall times ×1.6" in left_out[0]
    data = json.loads(out.read_text())
    assert [b["commit"] for b in data["shifted_builds"]] == [commit_hash(BUSY)]
    assert all(s["judged"] for s in data["steps"] if s["metric"] == "wall_time")
    # Two builds: each step has one build a side, so it is listed as not judged.
    short = History(tmp_path / "short")
    short.bench(WALL.format("A"), "seconds")
    short.add(0, WALL.format("A"), 1e-5)
    short.add(1, WALL.format("A"), 2e-5)
    short.save()
    run = _regressions(short)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "no judged step beyond the thresholds in this history" in lines
    assert "# not judged: one build a side, so no interval" in lines


def test_every_disturbance_of_a_history_is_each_builds_own(tmp_path: Path) -> None:
    """The site asks for every build's disturbance at once (`every_disturbance`, the history
    prepared once): the same answer as asking build by build, its ends one-sided included."""
    from benchkit.report.gate.excursions import build_disturbance, every_disturbance

    project = disturbed_history(tmp_path, 13, seed=7)
    conf = load_asv_config(project.config)
    config = check_config.parse_check_config({}, "defaults")
    metric_of = check.metric_judge({n: b["unit"] for n, b in project.benchmarks.items()}, config)
    threshold = config.thresholds["instructions"]
    history = load_history(conf, MACHINE)
    each = {r.commit: d for r in history if (d := build_disturbance(history, r.commit, metric_of, threshold))}
    assert list(each) == [commit_hash(BUSY)]
    assert every_disturbance(history, metric_of, threshold) == each
