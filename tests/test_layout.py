"""The package layout keeps its rules: no import circle, no stage importing a later one,
files around 500 lines, the lab kept apart from the product (scripts/check_layout.py)."""

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


def _check_tree(
    tmp_path: Path, modules: dict[str, str], lab: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """scripts/check_layout.py run on a package of `modules` (path under benchkit/ -> source),
    beside a lab of `lab` (path under lab/ -> source)."""
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
    for path, source in (lab or {}).items():
        (copy / "lab" / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / "lab" / path).write_text(source)
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


def test_layout_check_catches_a_type_level_circle(tmp_path: Path) -> None:
    """A record type kept in the module that imports its users, named back under
    ``if TYPE_CHECKING:`` (plain or ``typing.``): a circle only at the type level fails."""
    done = _check_tree(
        tmp_path,
        {
            "report/gate.py": "from benchkit.report.render import render\n\nclass Record: ...\n",
            "report/render.py": (
                "import typing\n\nif typing.TYPE_CHECKING:\n"
                "    from benchkit.report.gate import Record\n\ndef render(r: 'Record') -> str: ...\n"
            ),
        },
    )
    assert done.returncode == 1
    assert (
        "type-level import circle (through TYPE_CHECKING imports): "
        "benchkit.report.gate -> benchkit.report.render -> benchkit.report.gate" in done.stderr
    )
    # The record in its own module below both: the same package passes.
    fixed = _check_tree(
        tmp_path / "fixed",
        {
            "report/record.py": "class Record: ...\n",
            "report/gate.py": (
                "from benchkit.report.record import Record\nfrom benchkit.report.render import render\n"
            ),
            "report/render.py": (
                "from benchkit.report.record import Record\n\ndef render(r: Record) -> str: ...\n"
            ),
        },
    )
    assert fixed.returncode == 0, fixed.stderr


def test_layout_check_catches_a_type_level_backward_import(tmp_path: Path) -> None:
    """A stage naming a later stage's type under ``if TYPE_CHECKING:`` fails; its ``else:`` runs."""
    done = _check_tree(
        tmp_path,
        {
            "report/gate.py": "X = 1\n",
            "measure/timing.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                "    from benchkit.report.gate import X\nelse:\n    import benchkit.define.api\n"
            ),
            "define/api.py": "from benchkit.measure.timing import Y\n",
        },
    )
    assert done.returncode == 1
    assert "benchkit.measure.timing (stage 2) type-level imports benchkit.report.gate" in done.stderr
    # the else branch is a runtime import: define importing measure and back is a runtime circle
    assert "benchkit.measure.timing (stage 2) imports benchkit.define.api" not in done.stderr
    assert "layout: import circle: benchkit.define.api -> benchkit.measure.timing" in done.stderr


def test_layout_check_keeps_the_lab_apart(tmp_path: Path) -> None:
    """benchkit importing lab fails; so does a lab program that edits sys.path or imports the
    tests' code. A lab that imports benchkit as installed, and reads sys.path, passes."""
    done = _check_tree(
        tmp_path,
        {"report/gate.py": "from lab.synthetic import MACHINE\n"},
        {
            "__init__.py": "",
            "bench_x.py": (
                "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent))\n"
                "sys.path[:0] = ['tests']\nfrom support.histories import History\nimport tests.conftest\n"
            ),
        },
    )
    assert done.returncode == 1
    assert "benchkit/report/gate.py:1: imports lab" in done.stderr
    assert "lab/bench_x.py:4: edits sys.path" in done.stderr
    assert "lab/bench_x.py:5: edits sys.path" in done.stderr
    assert "lab/bench_x.py:6: imports support" in done.stderr
    assert "lab/bench_x.py:7: imports tests" in done.stderr
    fixed = _check_tree(
        tmp_path / "fixed",
        {"report/gate.py": "X = 1\n"},
        {
            "__init__.py": "",
            "bench_x.py": "import sys\n\nfrom benchkit.report.gate import X\n\nprint(sys.path)\n",
        },
    )
    assert fixed.returncode == 0, fixed.stderr
