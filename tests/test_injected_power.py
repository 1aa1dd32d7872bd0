"""lab/bench_injected_power.py: a twin pair judged as it is and with one figure made slower."""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
from pathlib import Path

from lab import bench_injected_power
from lab.histories import History, commit_hash

REPO_ROOT = Path(__file__).resolve().parent.parent
RATIO = "operators.op{:02d}.track_compiled_over_eager"


def _twins(tmp_path: Path) -> History:
    """Two builds of 12 operator ratios, each 1 + 6 replicates of 2 % noise (the main run's
    process, then the job's interleaved ones)."""
    rng = random.Random(4)
    project = History(tmp_path)
    for k in range(12):
        project.bench(RATIO.format(k), "compiled/eager time (lower is better)")
        for index in (0, 1):
            samples = [0.5 * math.exp(rng.gauss(0, 0.02)) for _ in range(7)]
            project.add(index, RATIO.format(k), sorted(samples)[3], samples)
    project.save()
    return project


SCRIPT = [sys.executable, "-m", "lab.bench_injected_power"]


def _export(project: History, corpus: Path) -> subprocess.CompletedProcess[str]:
    """The twin pair of builds 0 and 1 exported as a corpus file."""
    pair = [commit_hash(0)[:8], commit_hash(1)[:8]]
    command = [*SCRIPT, "export", "--asv-config", str(project.config), *pair, str(corpus)]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)


def test_twins_are_not_flagged_and_a_large_injected_change_is_found(tmp_path: Path) -> None:
    project = _twins(tmp_path)
    corpus, report = tmp_path / "twins.json.gz", tmp_path / "power.md"
    made = _export(project, corpus)
    assert made.returncode == 0 and "12 figures" in made.stdout, made.stderr
    judge = [*SCRIPT, "judge", str(corpus), "--trials", "5"]
    done = subprocess.run(
        [*judge, "--size", "0.3", "--markdown", str(report)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "Identical builds: 0 of 1 twin pair(s) with any flag" in done.stdout
    assert "| speedup ratio ×1.3 | 5 | 5/5 (100%) | - |" in done.stdout
    assert report.read_text().startswith("# The gate on real noise")
    small = subprocess.run([*judge, "--size", "0.001"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert "| speedup ratio ×1.001 | 5 | 0/5 (0%) |" in small.stdout  # the script can miss


def test_a_pair_of_24_rounds_is_judged_as_the_adaptive_job_would_have_judged_it(tmp_path: Path) -> None:
    """Wall times with the cap's rounds: an injected change is judged with the rounds the first
    look gives it, the rest by their first look's (a replay, `lab.wall_looks`)."""
    rng = random.Random(9)
    project = History(tmp_path)
    wall = "instruction_counts.case{:02d}.time_wall"
    for k in range(12):
        project.bench(wall.format(k), "seconds", repeat=3)
        logs = [rng.gauss(0, 0.02) for _ in range(24)]
        for index in (0, 1):
            rounds = logs if index == 0 else rng.sample(logs, 24)  # the same rounds, reordered
            samples = [1e-4 * math.exp(v) for v in rounds for _ in range(3)]
            project.add(index, wall.format(k), sorted(samples)[36], samples)
    project.save()
    corpus = tmp_path / "twins.json.gz"
    made = _export(project, corpus)
    assert made.returncode == 0, made.stderr
    judge = [*SCRIPT, "judge", str(corpus), "--trials", "12", "--size", "0.3"]
    replayed = subprocess.run(judge, capture_output=True, text=True, cwd=REPO_ROOT)
    assert replayed.returncode == 0, replayed.stderr
    assert "(wall times: the main job's looks replayed, cap 24 rounds: " in replayed.stdout
    assert "Identical builds: 0 of 1 twin pair(s) with any flag" in replayed.stdout
    assert "| wall time ×1.3 | 12 | 12/12 (100%) | - |" in replayed.stdout
    heading = "Of those, the 1 pair(s) whose looks were replayed (cap 24 rounds):"
    replayed_table = replayed.stdout.split(heading)
    assert len(replayed_table) == 2 and "| wall time ×1.3 | 12 | 12/12 (100%) | - |" in replayed_table[1]
    measured = subprocess.run([*judge, "--as-measured"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert measured.returncode == 0 and "replayed" not in measured.stdout
    # Another cap: replayed with it where the pair holds that many rounds, else as measured.
    lower = subprocess.run([*judge, "--max-rounds", "16"], capture_output=True, text=True, cwd=REPO_ROOT)
    cost = re.search(r"cap 16 rounds: (\d+) processes a build, ([\d.]+) rounds per wall time", lower.stdout)
    assert cost and int(cost.group(1)) <= 16 and 8 <= float(cost.group(2)) <= 16, lower.stdout
    higher = subprocess.run([*judge, "--max-rounds", "48"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert higher.returncode == 0 and "replayed" not in higher.stdout
    # In process: the replay judges the settled twins by their first look's 8 rounds a side.
    twins = bench_injected_power.load_pair(corpus)
    rounds = [
        c.noise.rounds
        for c in bench_injected_power.Judging(replayed=True)(twins, twins.head)
        if c.noise is not None
    ]
    assert len(rounds) == 12 and rounds.count("8+8") >= 8, rounds  # a few stay open: more rounds
    as_measured = bench_injected_power.Judging(replayed=False)(twins, twins.head)
    assert {c.noise.rounds for c in as_measured if c.noise is not None} == {"24+24"}
