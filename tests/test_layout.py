"""The package layout keeps its rules: no import circle, no stage importing a later one,
files around 500 lines (scripts/check_layout.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_layout_rules_hold() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_layout.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr


def test_layout_check_catches_a_backward_import(tmp_path: Path) -> None:
    """A define module importing report must fail the check (the check can fail)."""
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "scripts" / "check_layout.py").write_text((ROOT / "scripts" / "check_layout.py").read_text())
    package = copy / "benchkit"
    for sub in ("define", "report"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "report" / "gate.py").write_text("X = 1\n")
    (package / "define" / "api.py").write_text("from benchkit.report.gate import X\n")
    done = subprocess.run(
        [sys.executable, str(copy / "scripts" / "check_layout.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "benchkit.define.api (stage 1) imports benchkit.report.gate" in done.stderr


def test_layout_check_catches_builds_importing_results(tmp_path: Path) -> None:
    """Within history/, builds/ comes before results/: the reverse import fails the check."""
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "scripts" / "check_layout.py").write_text((ROOT / "scripts" / "check_layout.py").read_text())
    package = copy / "benchkit"
    for sub in ("history", "history/builds", "history/results"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "history" / "results" / "read.py").write_text("X = 1\n")
    (package / "history" / "builds" / "repo.py").write_text("from benchkit.history.results.read import X\n")
    done = subprocess.run(
        [sys.executable, str(copy / "scripts" / "check_layout.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "benchkit.history.builds.repo imports benchkit.history.results.read, a later part" in done.stderr
