"""`benchkit main` inside a PyTorch source checkout, through real git, asv and torch.

The checkout is a real git repository shaped like PyTorch's (setup.py, torch/); its two
commits get real torch wheels (the local wheel with ``git_version`` stamped to each
commit), one in a wheelhouse folder and one in benchkit's wheel store, so nothing is
built. Results must land apart from the wheel history's, and ``asv run HEAD^!`` must
measure the commit checked out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.wheels import LOCAL_WHEEL

from benchkit.history.builds.wheels import file_sha256, patch_wheel_module

REPO_ROOT = Path(__file__).resolve().parent.parent
CASE = "src_ReLU_PYTHON_EXPLICIT_EXPLICIT_t1"
SELECTION = rf"^instruction_counts\.{CASE}_.*track_instructions"
DEFINITIONS = """
from benchkit.define.api import TimerArgs

RELU = TimerArgs("y = model(x)", setup="model = torch.nn.ReLU()\\nx = torch.ones(8, 4)")
BENCHMARKS = {"src": {"ReLU": RELU}}
"""
pytestmark = pytest.mark.slow


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    ).stdout


def _wheel_for(commit: str, folder: Path) -> Path:
    stamp = lambda text: re.sub(r"git_version = '[0-9a-f]+'", f"git_version = '{commit}'", text)  # noqa: E731
    return patch_wheel_module(LOCAL_WHEEL, folder / LOCAL_WHEEL.name, "torch/version.py", stamp)


def test_main_in_a_pytorch_checkout_uses_wheels_by_git_version_and_keeps_results_apart(
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "pytorch"
    (checkout / "torch").mkdir(parents=True)
    (checkout / "setup.py").write_text("raise SystemExit('benchkit must not build this checkout')\n")
    (checkout / "torch" / "__init__.py").write_text("")
    _git(checkout, "init", "-q", "-b", "main")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "first")
    (checkout / "torch" / "__init__.py").write_text("# second\n")
    _git(checkout, "commit", "-q", "-am", "second")
    first, second = _git(checkout, "rev-list", "--reverse", "main").split()

    cache = tmp_path / "cache"
    wheelhouse = tmp_path / "wheelhouse"
    _wheel_for(first, wheelhouse)
    head_wheel = _wheel_for(second, tmp_path / "made")
    stored = cache / "wheels" / file_sha256(head_wheel)[:32] / head_wheel.name  # benchkit's wheel store
    stored.parent.mkdir(parents=True)
    shutil.copyfile(head_wheel, stored)
    definitions = tmp_path / "defs.py"
    definitions.write_text(DEFINITIONS)
    (tmp_path / "home").mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BENCHKIT_")},
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO_ROOT),
        "BENCHKIT_CACHE_DIR": str(cache),
        "BENCHKIT_WHEELHOUSE": str(wheelhouse),
        "BENCHKIT_SOURCE_BUILD": "0",
        "BENCHKIT_STANDARD": "0",
        "BENCHKIT_DEFINITIONS": str(definitions),
    }
    project = None
    try:
        main = subprocess.run(
            [sys.executable, "-m", "benchkit.cli", "main", "-b", SELECTION, "--machine", "src"],
            cwd=checkout / "torch", env=env, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        log = main.stdout + main.stderr
        found = re.search(r"results in (\S+)", log)
        assert found, log[-3000:]
        project = Path(found.group(1))
        assert project.parent == REPO_ROOT / ".asv" / "source", project
        assert main.returncode == 0, log[-4000:]
        assert f"PyTorch source checkout {checkout}" in log, log[-3000:]
        results = project / "results" / "src"
        assert {p.name[:8] for p in results.glob("*-*.json")} == {second[:8]}, log[-3000:]
        data = json.loads(next(results.glob(f"{second[:8]}-*.json")).read_text())
        assert any(CASE in name for name in data["results"]), data["results"].keys()
        assert not (REPO_ROOT / ".asv" / "results" / "src").exists()  # apart from the wheel history's
        assert _git(checkout, "status", "--porcelain") == ""  # nothing written into the checkout

        # asv run HEAD^! measures the commit checked out: the first, from the wheelhouse
        _git(checkout, "checkout", "-q", first)
        run = subprocess.run(
            [sys.executable, "-m", "asv", "run", "HEAD^!", "--config", str(project / "asv.conf.json"),
             "-b", SELECTION, "--machine", "src", "--show-stderr"],
            cwd=project, env=env, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        assert {p.name[:8] for p in results.glob("*-*.json")} == {first[:8], second[:8]}
    finally:
        if project is not None and project.parent == REPO_ROOT / ".asv" / "source":
            shutil.rmtree(project, ignore_errors=True)
