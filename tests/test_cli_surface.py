"""The command line as a whole: --version, old import paths, failing closed without results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_version() -> None:
    done = _run("-m", "benchkit.cli", "--version")
    assert done.returncode == 0 and done.stdout.startswith("benchkit 0.")


def test_the_first_import_path_of_the_api_still_works() -> None:
    done = _run("-c", "from benchkit.api import GroupedStmts, TimerArgs; print(GroupedStmts.__module__)")
    assert done.returncode == 0 and done.stdout.strip() == "benchkit.define.api", done.stderr


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("from benchkit.opinputs import OperatorInputRecorder", "benchkit.measure.operators.recorder"),
        ("from benchkit.measure.operators.inputs import OperatorInputRecorder", "operators.recorder import"),
        ("import benchkit.site.publish", "benchkit.report.site"),
        ("import benchkit.profiles", "benchkit.measure.callgrind.profiles"),
        ("import benchkit.build_torch", "benchkit.history.builds.build_step"),
        ("import benchkit.models", "benchkit.measure.operators.models"),
    ],
)
def test_old_import_paths_fail_with_one_line_naming_the_new_one(statement: str, named: str) -> None:
    done = _run("-c", statement)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "Error: " in last and named in last, done.stderr


def _project(root: Path) -> Path:
    root.mkdir()
    conf = {"version": 1, "project": "x", "repo": ".", "results_dir": "results", "html_dir": "html"}
    (root / "asv.conf.json").write_text(json.dumps(conf))
    return root / "asv.conf.json"


@pytest.mark.parametrize("command", ["regressions", "check"])
def test_no_results_fails_closed_with_the_right_diagnosis(tmp_path: Path, command: str) -> None:
    conf = _project(tmp_path / "p")
    extra = ["main", "HEAD"] if command == "check" else []
    missing = _run("-m", "benchkit.cli", command, *extra, "--asv-config", str(conf))
    assert missing.returncode == 2 and "no asv results in" in missing.stderr, missing.stderr
    assert "several machines" not in missing.stderr
    (tmp_path / "p" / "results").mkdir()  # an empty results folder: the same
    empty = _run("-m", "benchkit.cli", command, *extra, "--asv-config", str(conf))
    assert empty.returncode == 2 and "no asv results in" in empty.stderr, empty.stderr
