"""Faults a real machine produces, through the real commands: a second job beside a running one,
damaged results files, a publish killed midway. (The main job under kill -9, a read-only results
folder and a full disk: tests/test_main_job_faults.py.)

The results are a small history written with asv's own Results API into a real torch-history
repository (lab/synthetic.py), published by real `asv publish`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchkit.history import lock
from lab import synthetic

REPO_ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def benchkit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchkit.cli", *args]
    return subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """asv.conf.json of a 3-build history with results, a check config beside it."""
    conf = synthetic.make_project(tmp_path / "p", commits=3, benchmarks=12, seed=4, step_chance=0.3)
    (conf.parent / "benchkit-check.toml").write_text("[thresholds]\ninstructions = 0.01\n")
    return conf


def _results(conf: Path) -> list[Path]:
    folder = conf.parent / "results" / synthetic.MACHINE
    return sorted(p for p in folder.glob("*.json") if p.name != "machine.json")


# ------------------------------------------------------------------ the lock


@pytest.fixture
def holder(project: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the checkout's lock until it is killed (as a job would)."""
    code = (
        "import sys, time; from pathlib import Path; from benchkit.history.lock import job_lock\n"
        "with job_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(project)], env=_env(), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout and proc.stdout.readline() == "held\n"
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_job_refuses_with_no_wait_naming_the_holder(project: Path, holder) -> None:
    html = project.parent / "html"
    done = benchkit("publish", "--no-wait", "--asv-config", str(project))
    assert done.returncode == 2, done.stderr
    assert re.search(rf"is in use by pid {holder.pid} \(`-c .+`, since \d{{4}}-\d\d-\d\d \d\d:", done.stderr)
    assert not html.exists(), "the refused job published anyway"


def test_a_second_job_waits_and_goes_on_when_the_holder_dies(project: Path, holder) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchkit.cli", "publish", "--asv-config", str(project)],
        env=_env(), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr
    first = proc.stderr.readline()
    assert f"benchkit: waiting for pid {holder.pid} (`-c " in first
    time.sleep(1)
    assert proc.poll() is None, "it did not wait"
    assert not (project.parent / "html").exists()
    holder.send_signal(signal.SIGKILL)  # the kernel drops the lock with its holder
    rest = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, rest
    assert re.search(r"benchkit: .+ is free after \d+ s; going on", rest)
    assert (project.parent / "html" / "changes.html").is_file()


def test_asv_build_step_refuses_beside_another_job_but_not_inside_its_own(project: Path, holder) -> None:
    step = [sys.executable, "-m", "benchkit.cli.build_step", "build", "--build-dir", "b", "--cache-dir", "c",
            "--commit", "0" * 40]  # fmt: skip
    done = subprocess.run(step, cwd=project.parent, env=_env(), capture_output=True, text=True)
    assert done.returncode == 2
    assert f"is in use by pid {holder.pid}" in done.stderr and "would tear down" in done.stderr
    # A job's own asv (a child of the holder) goes on.
    code = (
        "import subprocess, sys; from pathlib import Path; from benchkit.history.lock import job_lock\n"
        "with job_lock(Path(sys.argv[1]) / 'asv.conf.json'):\n"
        "    sys.exit(subprocess.run([sys.executable, '-c', 'import sys; from pathlib import Path; "
        "from benchkit.history.lock import check_asv_step; check_asv_step(Path(sys.argv[1]))', "
        "sys.argv[1]]).returncode)\n"
    )
    holder.kill()
    holder.wait()
    inside = subprocess.run(
        [sys.executable, "-c", code, str(project.parent)], env=_env(), capture_output=True
    )
    assert inside.returncode == 0, inside.stderr
    lock.check_asv_step(project.parent)  # free: goes on


# ------------------------------------------------------------ damaged files


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_results_file_is_named_and_fails_every_reader(project: Path, damage: str) -> None:
    assert benchkit("publish", "--asv-config", str(project)).returncode == 0
    html = project.parent / "html"
    before = (html / "changes.html").read_bytes()
    victim = _results(project)[1]
    data = victim.read_bytes()
    victim.write_bytes(data[:300] if damage == "truncated" else b"")
    name = re.escape(str(victim))
    commits = [p.name.split("-")[0] for p in _results(project)]
    for args in (["regressions"], ["publish"], ["check", commits[0], commits[2]]):
        done = benchkit(*args, "--asv-config", str(project))
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert re.search(rf"1 damaged results file\(s\):\n  {name}: (Error parsing JSON|.+)", done.stderr), (
            args
        )
    assert (html / "changes.html").read_bytes() == before, "a failed publish changed the site"
    # --skip-damaged reads the rest and says what it left out, in the output and on the site.
    for args in (["regressions"], ["publish"], ["check", commits[0], commits[2]]):
        done = benchkit(*args, "--skip-damaged", "--asv-config", str(project))
        assert done.returncode in (0, 1), (args, done.stderr)
        assert f"--skip-damaged: left out {victim}" in done.stderr, args
    for page in ("changes.html", "regressions.html", "operators.html", "why.html"):
        text = (html / page).read_text()
        assert "Published with --skip-damaged:</b> 1 results file(s)" in text, page
        assert f"results/{synthetic.MACHINE}/{victim.name}:" in text and str(project.parent) not in text


def test_a_damaged_benchmarks_json_is_named(project: Path) -> None:
    (project.parent / "results" / "benchmarks.json").write_text('{"version": 2, "a.b": {')
    done = benchkit("regressions", "--asv-config", str(project))
    assert done.returncode == 2 and "benchmarks.json: Error parsing JSON" in done.stderr, done.stderr


def test_published_pages_hold_no_path_of_this_machine(project: Path) -> None:
    done = benchkit("publish", "--asv-config", str(project))
    assert done.returncode == 0, done.stderr
    for page in (project.parent / "html").glob("*.html"):
        assert str(project.parent) not in page.read_text(), page
    assert "(thresholds: benchkit-check.toml)" in (project.parent / "html" / "changes.html").read_text()
    assert "threshold (benchkit-check.toml)" in (project.parent / "html" / "regressions.html").read_text()


# ------------------------------------------------------------ publish killed


def test_a_publish_killed_midway_leaves_the_old_site_whole(project: Path) -> None:
    assert benchkit("publish", "--asv-config", str(project)).returncode == 0
    html = project.parent / "html"
    old = {p.relative_to(html): p.read_bytes() for p in html.rglob("*") if p.is_file()}
    for path in _results(project):  # new numbers: the next site differs
        data = json.loads(path.read_text())
        data["date"] += 1
        path.write_text(json.dumps(data))
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchkit.cli", "publish", "--asv-config", str(project)],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 120
    # Midway: `asv publish` (its child) is writing the new site.
    while time.monotonic() < deadline and proc.poll() is None:
        if children.read_text().split() and list(project.parent.glob(".html.new-*/*")):
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the job: benchkit and its asv
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "publish ended before it could be killed midway"
    now = {p.relative_to(html): p.read_bytes() for p in html.rglob("*") if p.is_file()}
    assert now == old, "the killed publish changed the published site"
    done = benchkit("publish", "--asv-config", str(project))
    assert done.returncode == 0, done.stderr
    assert not list(project.parent.glob(".html.*")), "the killed publish's folder was left behind"
    assert (html / "changes.html").is_file() and (html / "index.html").is_file()
