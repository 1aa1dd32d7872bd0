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


def _check_tree(tmp_path: Path, modules: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """scripts/check_layout.py run on a package of `modules` (path under benchkit/ -> source)."""
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "scripts" / "check_layout.py").write_text((ROOT / "scripts" / "check_layout.py").read_text())
    package = copy / "benchkit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for path, source in modules.items():
        for folder in reversed(Path(path).parents[:-1]):  # e.g. history, then history/builds
            (package / folder).mkdir(exist_ok=True)
            (package / folder / "__init__.py").touch()
        (package / path).write_text(source)
    script = str(copy / "scripts" / "check_layout.py")
    return subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)


def test_layout_check_catches_a_backward_import(tmp_path: Path) -> None:
    """A define module importing report must fail the check (the check can fail)."""
    done = _check_tree(
        tmp_path, {"report/gate.py": "X = 1\n", "define/api.py": "from benchkit.report.gate import X\n"}
    )
    assert done.returncode == 1
    assert "benchkit.define.api (stage 1) imports benchkit.report.gate" in done.stderr


def test_layout_check_catches_builds_importing_results(tmp_path: Path) -> None:
    """Within history/, builds/ comes before results/: the reverse import fails the check."""
    done = _check_tree(
        tmp_path,
        {
            "history/results/read.py": "X = 1\n",
            "history/builds/repo.py": "from benchkit.history.results.read import X\n",
        },
    )
    assert done.returncode == 1
    assert "benchkit.history.builds.repo imports benchkit.history.results.read, a later part" in done.stderr
