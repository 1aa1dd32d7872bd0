"""lab/bench_injected_power.py: a twin pair judged as it is and with one figure made slower."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

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


def test_twins_are_not_flagged_and_a_large_injected_change_is_found(tmp_path: Path) -> None:
    project = _twins(tmp_path)
    corpus, report = tmp_path / "twins.json.gz", tmp_path / "power.md"
    script = [sys.executable, "-m", "lab.bench_injected_power"]
    pair = [commit_hash(0)[:8], commit_hash(1)[:8]]
    made = subprocess.run(
        [*script, "export", "--asv-config", str(project.config), *pair, str(corpus)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert made.returncode == 0 and "12 figures" in made.stdout, made.stderr
    judge = [*script, "judge", str(corpus), "--trials", "5"]
    done = subprocess.run(
        [*judge, "--size", "0.3", "--markdown", str(report)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "Identical builds: 0 of 1 twin pair(s) with any flag" in done.stdout
    assert "| speedup ratio ×1.3 | 5 | 5/5 (100%) | - |" in done.stdout
    assert report.read_text().startswith("# The gate on real noise")
    small = subprocess.run([*judge, "--size", "0.001"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert "| speedup ratio ×1.001 | 5 | 0/5 (0%) |" in small.stdout  # the script can miss
