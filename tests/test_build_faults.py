"""Interrupted and concurrent work leaves nothing that blocks or corrupts the next run."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchkit.define.api import Language, TimerArgs
from benchkit.errors import UserError
from benchkit.measure.callgrind import durations
from benchkit.measure.cpp import pch
from benchkit.measure.cpp import shards as cpp_batch

REPO_ROOT = Path(__file__).resolve().parent.parent
KILLED_DEFINITIONS = """
from benchkit.define.api import GroupedStmts

BENCHMARKS = {"faults": {"killed compile": GroupedStmts(cpp_stmt="auto y = torch::ones({3}) * 7;")}}
"""


def _shard(stmt: str) -> cpp_batch.Shard:
    [shard] = cpp_batch.CppSuite([TimerArgs(stmt, language=Language.CPP)]).shards
    return shard


def test_a_compile_over_its_time_limit_is_stopped_and_leaves_no_library(monkeypatch) -> None:
    shard = _shard(f"auto y = torch::ones({{2}}) + {time.time_ns()};")  # never built before
    monkeypatch.setenv("BENCHKIT_COMPILE_TIMEOUT", "2")
    started = time.monotonic()
    with pytest.raises(cpp_batch.CompileError, match=r"longer than 2 s \(BENCHKIT_COMPILE_TIMEOUT\)"):
        cpp_batch.build(shard)
    assert time.monotonic() - started < 30
    assert not cpp_batch.is_built(shard)
    assert not list(cpp_batch._build_dir(shard).glob("build-*")), "the scratch folder was left behind"
    monkeypatch.setenv("BENCHKIT_COMPILE_TIMEOUT", "soon")
    with pytest.raises(UserError, match="BENCHKIT_COMPILE_TIMEOUT='soon' is not a number"):
        cpp_batch.build(shard)


@pytest.mark.slow
def test_a_compile_killed_midway_does_not_block_the_next_run(tmp_path: Path) -> None:
    """kill -9 during the compile, a stale torch-style `lock` file beside it: `benchkit run` completes."""
    definitions = tmp_path / "faults.py"
    definitions.write_text(KILLED_DEFINITIONS)
    shard = _shard("auto y = torch::ones({3}) * 7;")
    build_dir = cpp_batch._build_dir(shard)
    code = (
        "from benchkit.measure.cpp import shards as cpp_batch; "
        "from benchkit.define.api import Language, TimerArgs; "
        "cpp_batch.build(cpp_batch.CppSuite([TimerArgs(%r, language=Language.CPP)]).shards[0])"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", code % "auto y = torch::ones({3}) * 7;"], cwd=REPO_ROOT, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not list(build_dir.glob("build-*/*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.poll() is None and list(build_dir.glob("build-*/*")), "the compile never started"
    time.sleep(2)  # the compiler is running now
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not cpp_batch.is_built(shard)
    (build_dir / "lock").write_text("")  # what torch's own build baton leaves behind
    done = subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "run", "--no-standard", "--definitions", str(definitions),
         "--filter", "C\\+\\+", "--min-run-time", "0.05"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "faults/killed compile" in done.stdout + done.stderr
    assert cpp_batch.is_built(shard)


def _save_many(prefix: str, count: int) -> None:
    for i in range(count):
        durations.save_durations({f"{prefix}{i}": 1.0 + i})


def test_two_batches_at_once_keep_every_duration() -> None:
    path = durations.durations_path()
    path.unlink(missing_ok=True)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_save_many, args=(p, 60)) for p in ("a-", "b-")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    saved = json.loads(path.read_text())
    assert {f"{p}{i}" for p in ("a-", "b-") for i in range(60)} <= set(saved)


def test_recently_used_precompiled_headers_are_never_pruned(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(pch, "PCH_KEPT", 1)
    keep = tmp_path / "pch_keep"
    recent, old = tmp_path / "pch_recent", tmp_path / "pch_old"
    for folder in (keep, recent, old):
        folder.mkdir()
        (folder / "shards.h.gch").write_text("x")
    week_ago = time.time() - 7 * 24 * 3600
    os.utime(old, (week_ago, week_ago))
    pch._prune_precompiled_headers(keep)
    assert keep.exists() and recent.exists() and not old.exists()
