"""Shared test setup: one scratch root and one cache directory per test session.

Every test (and every subprocess it starts) shares BENCHKIT_CACHE_DIR, so a
C++ shard or TorchScript artifact built by one test is reused by the next, and
nothing leaks into the user's own cache. Temporary files of the session (``TMPDIR``:
asv's forkserver sockets, Chromium profiles, inductor's default cache, valgrind's files)
go under one root that is removed when the session ends, whatever its outcome, so runs
do not pile up on the disk. pytest's own ``tmp_path`` folders stay where pytest puts
them, and only those of failed tests are kept (``tmp_path_retention_policy``).

CI runs the suite on both cores (pytest-xdist, ``-n 2``, whole files per worker): the workers
share the session root and its cache (shards are built under a lock and renamed into place),
a file with a test marked ``quiet`` (its verdict rests on wall times it measures) runs while
no other test does (`support.quiet`): the quiet files go first, one after another on one
worker, while the other waits; then files with slow tests, so that no long file starts last.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.quiet import QuietLock, quiet_first_scheduler, write_quiet_scopes

REPO_ROOT = Path(__file__).resolve().parent.parent

# The slow suite's peak disk use is measured by lab/measure_ci.py
# (lab/reports/ci-time.md); below this much free space it would fail midway on
# "No space left on device", so the session refuses to start instead.
SLOW_SUITE_FREE_GIB = 20

# An xdist worker inherits the controller's environment, root included; only the process
# that made the root removes it.
_SESSION_ROOT_VARIABLE = "BENCHKIT_TEST_SESSION_ROOT"
_IS_WORKER = "PYTEST_XDIST_WORKER" in os.environ and _SESSION_ROOT_VARIABLE in os.environ
if _IS_WORKER:
    _SESSION_ROOT = Path(os.environ[_SESSION_ROOT_VARIABLE])
else:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    _SESSION_ROOT = Path(tempfile.mkdtemp(prefix="benchkit-tests-"))
    (_SESSION_ROOT / "tmp").mkdir()
    os.environ[_SESSION_ROOT_VARIABLE] = str(_SESSION_ROOT)
    os.environ["TMPDIR"] = str(_SESSION_ROOT / "tmp")
    tempfile.tempdir = None  # re-read TMPDIR

# Every Callgrind batch of the session (both workers, every subprocess) counts in one place,
# one batch at a time: counts of separate batches then agree exactly wherever a test compares
# them, the session's shared count cache included, while the rest of the machine is shared.
# Not place 00, the first a user's own job takes.
os.environ["BENCHKIT_COUNTING_SLOT"] = "90"

# The tests' main jobs judge their pairs by 6 operator replicates a build, not the default 20
# (`benchkit.rounds_policy.OPERATOR_ROUNDS`): they check what a job does, not its power, and 20
# would add minutes to CI. tests/test_fresh_main_job.py clears benchkit's variables and sets its
# own (the trimmed test's 10).
os.environ.setdefault("BENCHKIT_OPERATOR_REPLICATES", "6")

if "BENCHKIT_TEST_KEEP_CACHE" not in os.environ:
    os.environ["BENCHKIT_CACHE_DIR"] = str(_SESSION_ROOT / "cache")
else:  # reuse compiled shards across local test runs
    os.environ.setdefault("BENCHKIT_CACHE_DIR", str(REPO_ROOT / ".benchkit" / "test-cache"))


# Files with a ``quiet`` test (filled at collection): each runs alone (support.quiet).
_QUIET_FILES: set[Path] = set()
# Their test-id scopes, written by the collecting workers for xdist's controller.
_QUIET_SCOPES = _SESSION_ROOT / "quiet-scopes.json"


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("BENCHKIT_SLOW") != "1" or _IS_WORKER:
        return
    free = shutil.disk_usage(_SESSION_ROOT).free / 2**30
    if free < SLOW_SUITE_FREE_GIB:
        shutil.rmtree(_SESSION_ROOT, ignore_errors=True)  # sessionfinish does not run after this exit
        pytest.exit(
            f"only {free:.1f} GiB free on the disk of {_SESSION_ROOT}; the slow suite needs "
            f"{SLOW_SUITE_FREE_GIB} GiB (asv environments with torch, Callgrind profiles): "
            "free some space or point TMPDIR at a larger disk",
            returncode=2,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _IS_WORKER:
        shutil.rmtree(_SESSION_ROOT, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _QUIET_FILES.update(item.path for item in items if "quiet" in item.keywords)
    write_quiet_scopes(items, _QUIET_SCOPES)  # for xdist's scheduler, in the controller
    if os.environ.get("BENCHKIT_SLOW") == "1":
        # Files that run alone first (on one worker, support.quiet's scheduler), then files
        # with slow tests, then the quick ones, which even out the two
        # workers' ends; each file's tests stay together and in their order (a stable sort;
        # pyproject's --no-loadscope-reorder keeps xdist from sorting files by test count).
        slow = {item.path for item in items if "slow" in item.keywords}
        items.sort(key=lambda item: 0 if item.path in _QUIET_FILES else 1 if item.path in slow else 2)
        return
    skip = pytest.mark.skip(reason="slow end-to-end check: run with BENCHKIT_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def worker_asv_envs() -> Path:
    """An asv environment folder for this worker's tests that opt in (tests/support/asv_project.py):
    its virtualenv with torch is made once (half a minute or more) instead of once per test. A
    worker runs one test at a time, and asv installs each project's build into the environment
    as it would for any project; a test that kills or damages environments keeps its own."""
    return _SESSION_ROOT / f"asv-envs-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


_QUIET_LOCK = QuietLock(_SESSION_ROOT / "quiet")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return quiet_first_scheduler(config, log, _QUIET_SCOPES)


@pytest.fixture(scope="module", autouse=True)
def _quiet_machine(request: pytest.FixtureRequest) -> Iterator[None]:
    """A file with a ``quiet`` test runs alone, module fixtures included; the others side by
    side (support.quiet)."""
    with _QUIET_LOCK.hold(alone=request.path in _QUIET_FILES):
        yield
