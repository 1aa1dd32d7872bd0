"""`benchkit main` under faults a real machine produces, through real asv and torch: two jobs in
one checkout, kill -9 of the job at each of its five steps, a results folder that becomes
read-only, a full disk while results are written. After each, a plain `benchkit main` ends with
every number, and nothing unmeasured is ever recorded as finished.

One small project (the local 2.13.0 wheel, one case: ReLU's wall time and instruction count,
2 rounds) shares its asv environment between the tests, so the whole file takes a few minutes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.asv_project import MACHINE, RELU, AsvProject, make_project
from support.scratch import module_dir
from support.wheels import LOCAL_WHEEL

from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

pytestmark = pytest.mark.slow
ROUNDS = 2


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsvProject]:
    with module_dir(tmp_path_factory, "main-faults") as base:
        yield from _job(base)


def _job(base: Path) -> Iterator[AsvProject]:
    yield make_project(base / "project", base / "env")
    # asv's forkserver runs in a session of its own: a job killed with its process group (or an
    # asv that crashed) leaves it waiting on its socket. End those this file's jobs started.
    for proc in Path("/proc").glob("[0-9]*"):
        if str(base / "env").encode() in _cmdline(int(proc.name)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


def command(job: AsvProject, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "benchkit.cli", "main", "--asv-config", str(job.config), "--machine", MACHINE,
        "--build", str(LOCAL_WHEEL), "-b", RELU, "--rounds", str(ROUNDS), *extra,
    ]  # fmt: skip


def start(job: AsvProject, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(job), cwd=job.root, env=job.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def results(job: AsvProject) -> list[Path]:
    return sorted((job.root / "results" / MACHINE).glob("*-*.json"))


def ledger(job: AsvProject) -> list[str]:
    path = job.root / ".asv" / "benchkit-main.json"
    return (
        sorted(c for commits in json.loads(path.read_text()).values() for c in commits)
        if path.exists()
        else []
    )


def assert_every_number(job: AsvProject) -> None:
    [path] = results(job)
    data = json.loads(path.read_text())
    columns = data["result_columns"]
    rows = data["results"]
    assert {n.rsplit(".", 1)[-1] for n in rows} == {"time_wall", "track_instructions"}, rows.keys()
    for name, row in rows.items():
        values = row[columns.index("result")]
        assert all(isinstance(v, float) and not math.isnan(v) for v in values), (name, values)
        if name.endswith("time_wall"):
            assert [len(s) for s in row[columns.index("samples")]] == [ROUNDS * SAMPLES_PER_ROUND], name


def plain_run(job: AsvProject) -> subprocess.CompletedProcess[str]:
    done = job.run(*command(job), check=False, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "finished in" in output and "every build measured" in output
    assert_every_number(job)
    return done


def test_a_second_job_waits_for_the_first_and_both_end_with_every_number(job: AsvProject) -> None:
    started = time.monotonic()
    first = start(job)
    time.sleep(3)
    second = start(job)
    out2, _ = second.communicate(timeout=900)
    out1, _ = first.communicate(timeout=900)
    elapsed = time.monotonic() - started
    assert first.returncode == 0, out1[-4000:]
    assert second.returncode == 0, out2[-4000:]
    assert re.search(rf"benchkit: waiting for pid {first.pid} \(`.+ main .+`, since ", out2), out2[:2000]
    assert "asv run over 1 of 1 torch build(s)" in out1
    assert "asv run over 0 of 1 torch build(s)" in out2  # the first measured it; nothing twice
    assert_every_number(job)
    print(f"two concurrent main jobs: {elapsed:.0f} s")


def _kill_at(job: AsvProject, step: int) -> str:
    """Start the job, kill -9 its process group (the job and its asv) once it reaches `step`."""
    proc = start(job)
    assert proc.stdout
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(f"==> [{step}/5]"):
            break
    if step == 3:  # midway through asv run: after its first round of the build is saved
        deadline = time.monotonic() + 600
        while not results(job) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return "".join(seen)


def test_kill_9_at_each_step_then_a_plain_run_ends_with_every_number(job: AsvProject) -> None:
    for path in results(job):
        path.unlink()  # what the job before measured: measure again
    for step in range(1, 6):
        seen = _kill_at(job, step)
        print(f"killed at step {step}: results {[p.name for p in results(job)]}, ledger {ledger(job)}")
        assert f"==> [{step}/5]" in seen, seen[-3000:]
        if step == 3:
            assert results(job), "killed before asv saved a round"
            assert ledger(job) == [], "a build killed during asv run was recorded as finished"
    done = plain_run(job)
    print("plain run after the kills:\n" + done.stderr[-1500:])


def test_a_results_folder_that_turns_read_only_is_not_finished(job: AsvProject) -> None:
    folder = job.root / "results" / MACHINE
    for path in results(job):
        path.unlink()
    mount = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"no bind mount here: {mount.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)
        done = job.run(*command(job), check=False, timeout=900)
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    output = done.stdout + done.stderr
    said = [line for line in output.splitlines() if re.search(r"Errno 30|lack numbers|^  - |error:", line)]
    print(f"read-only results folder: exit {done.returncode}\n" + "\n".join(s[:200] for s in said[:8]))
    assert done.returncode != 0, output[-3000:]
    assert "Read-only file system" in output and "lack numbers" in output, output[-3000:]
    assert ledger(job) == []
    plain_run(job)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_full_disk_while_results_are_written_is_not_finished(job: AsvProject) -> None:
    for path in results(job):
        path.unlink()
    # Bytes a process may write into one file: less than asv's discovery output needs, so the
    # disk is full when asv writes what it found (before any results file).
    size = 2048

    def small_disk() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    proc = subprocess.Popen(
        command(job), cwd=job.root, env=job.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, preexec_fn=small_disk,
    )  # fmt: skip
    output, _ = proc.communicate(timeout=900)
    said = [line for line in output.splitlines() if re.search(r"Errno 27|lack numbers|^  - |error:", line)]
    sizes = {p.name: p.stat().st_size for p in results(job)}
    print(f"full disk: exit {proc.returncode}, results {sizes}\n" + "\n".join(s[:200] for s in said[:8]))
    assert proc.returncode != 0, output[-3000:]
    assert "File too large" in output, output[-3000:]
    assert ledger(job) == [], output[-3000:]
    plain_run(job)


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_results_file_is_set_aside_and_measured_again(job: AsvProject, damage: str) -> None:
    [path] = results(job)
    assert ledger(job), "the plain run before recorded its build"
    path.write_bytes(path.read_bytes()[:300] if damage == "truncated" else b"")
    done = plain_run(job)
    assert f"damaged results file {path}: Error parsing JSON" in done.stderr, done.stderr[-3000:]
    assert "asv run over 1 of 1 torch build(s)" in done.stderr
    assert path.with_name(path.name + ".damaged").is_file()
