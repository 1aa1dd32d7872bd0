"""`benchkit list` / `benchkit run` through the real CLI, workers and torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

USER_DEFINITIONS = """
from benchkit.define.api import GroupedStmts, GroupedSetup, TimerArgs

BENCHMARKS = {
    "user": {
        "fine": GroupedStmts("y = x + 1",
                             setup=GroupedSetup("x = torch.ones(4)", "auto x = torch::ones({4});"),
                             signature="f(x) -> y", torchscript=True),
        "cpp broken": GroupedStmts(cpp_stmt="this is not C++;"),
        "cpp fine": GroupedStmts(cpp_stmt="auto y = torch::ones({2}) + 1;"),
        "raises": TimerArgs("raise ValueError('broken on purpose')"),
        "crashes": TimerArgs("import os; os._exit(7)"),
        "hangs": TimerArgs("import time; time.sleep(600)"),
        "two threads": TimerArgs("assert torch.get_num_threads() == 2", num_threads=2),
    }
}
"""


def _benchkit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchkit.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


@pytest.fixture
def user_definitions(tmp_path: Path) -> Path:
    path = tmp_path / "my_benchmarks.py"
    path.write_text(USER_DEFINITIONS)
    return path


def test_list_standard_suite() -> None:
    result = _benchkit("list")
    assert result.returncode == 0, result.stderr
    lines = dict(line.split("\t") for line in result.stdout.splitlines())
    assert len(lines) >= 181
    keys = set(lines.values())
    assert "Pointwise/Math/add/Tensor-Tensor | C++ | TorchScript | Forward | 1 thread(s)" in keys
    assert "training/simple | Python | Eager | Forward + Backward | 2 thread(s)" in keys
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*_[0-9a-f]{8}", name) for name in lines)


def test_one_name_per_case_every_form_selects_it(user_definitions: Path) -> None:
    """`list` prints asv's name first; -b/--filter take that name, asv's full name or the readable key."""
    base = ("list", "--definitions", str(user_definitions), "--no-standard")
    result = _benchkit(*base, "--filter", "^user/fine ")
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [key for _, key in rows] == [
        "user/fine | Python | Eager | Forward | 1 thread(s)",
        "user/fine | Python | TorchScript | Forward | 1 thread(s)",
        "user/fine | C++ | TorchScript | Forward | 1 thread(s)",
    ]
    name = rows[0][0]
    assert name.startswith("user_fine_PYTHON_EAGER_FORWARD_t1_")
    for form in (
        name,
        f"instruction_counts.{name}.time_wall",
        "user_fine_PYTHON_EAGER",
        "^user/fine \\| Python \\| Eager",
    ):
        picked = _benchkit(*base, "-b", form)
        assert picked.returncode == 0 and picked.stdout.split("\t")[0] == name, (form, picked.stdout)
    standard = _benchkit("list", "-b", "Pointwise_Math_add")
    assert standard.returncode == 0 and len(standard.stdout.splitlines()) >= 4, standard.stderr
    # nothing matched: exit 2 and one line, for every command that selects cases
    for command in ("list", "run", "counts"):
        none = _benchkit(command, *base[1:], "-b", "no-such-case")
        assert none.returncode == 2 and "nothing matched" in none.stderr, (command, none.stderr)


def test_bad_definitions_give_one_line_errors(tmp_path: Path) -> None:
    missing = _benchkit("list", "--definitions", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "nope.py does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from benchkit.define.api import GroupedStmts\nBENCHMARKS = {'x': GroupedStmts('y = x', "
        "signature='f(x) -> y', autograd=True, torchscript=True, num_threads=0)}\n"
    )
    result = _benchkit("list", "--definitions", str(bad))
    assert result.returncode == 2 and "bad.py" in result.stderr and "num_threads" in result.stderr
    assert "Traceback" not in result.stderr
    regex = _benchkit("list", "--filter", "(")
    assert regex.returncode == 2 and "not a valid regular expression" in regex.stderr


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import sys\nsys.exit(3)\n", "called sys.exit(3) while loading"),
        ("BENCHMARKS = {'a\\tb': TimerArgs('pass')}\n", "holds a control character"),
        ("BENCHMARKS = {'g': {'x\\ny': TimerArgs('pass')}}\n", "holds a control character"),
        ("BENCHMARKS = {'2d conv': TimerArgs('pass')}\n", "asv class name starting with '2'"),
    ],
)
def test_definition_files_that_would_break_names_or_loading(
    tmp_path: Path, source: str, message: str
) -> None:
    path = tmp_path / "defs.py"
    path.write_text("from benchkit.define.api import TimerArgs\n" + source)
    result = _benchkit("list", "--no-standard", "--definitions", str(path))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert str(path) in line and message in line, line


def test_run_isolates_failures_and_writes_json(user_definitions: Path, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    result = _benchkit(
        "run",
        "--definitions",
        str(user_definitions),
        "--no-standard",
        "--json",
        str(out),
        "--timeout",
        "20",
        "--min-run-time",
        "0.05",
    )
    assert result.returncode == 1  # some cases failed, the run still finished
    data = json.loads(out.read_text())
    by_label = {v["label"][-1] + v["language"] + v["runtime"]: v for v in data.values()}
    assert {k: v["status"] for k, v in by_label.items()} == {
        "finePythonEager": "ok",
        "finePythonTorchScript": "ok",
        "fineC++TorchScript": "ok",
        "cpp brokenC++Eager": "failed",
        "cpp fineC++Eager": "ok",  # shared a translation unit with the broken case
        "raisesPythonexplicit": "failed",
        "crashesPythonexplicit": "failed",
        "hangsPythonexplicit": "failed",
        "two threadsPythonexplicit": "ok",
    }
    assert "this is not C++" in by_label["cpp brokenC++Eager"]["error"]
    assert "broken on purpose" in by_label["raisesPythonexplicit"]["error"]
    assert "exit code 7" in by_label["crashesPythonexplicit"]["error"]
    assert "timed out" in by_label["hangsPythonexplicit"]["error"]
    fine = by_label["finePythonEager"]
    assert fine["median_s"] > 0 and fine["block_size"] >= 1 and len(fine["times_s"]) >= 3
    # Progress on stderr, a Compare table on stdout.
    assert "[   8/8]" in result.stderr  # the broken C++ case never reaches a worker
    assert "user" in result.stdout and "Python" in result.stdout and "C++" in result.stdout
