"""The lock that lets a ``quiet`` test file run alone while the others share the machine."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from support.quiet import QuietLock


def _hold(lock: QuietLock, alone: bool, log: list[str], name: str, seconds: float) -> threading.Thread:
    def body() -> None:
        with lock.hold(alone):
            log.append(f"{name} in")
            time.sleep(seconds)
            log.append(f"{name} out")

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_ordinary_files_share_and_a_quiet_one_waits_for_them_and_goes_first(tmp_path: Path) -> None:
    # flock locks belong to open files, so threads with files of their own contend like processes.
    lock = QuietLock(tmp_path)
    log: list[str] = []
    first = _hold(lock, False, log, "a", 0.6)
    second = _hold(lock, False, log, "b", 0.3)
    time.sleep(0.1)
    assert sorted(log) == ["a in", "b in"]  # shared: side by side
    quiet = _hold(lock, True, log, "quiet", 0.3)
    time.sleep(0.1)
    later = _hold(lock, False, log, "c", 0.1)  # asks while the quiet one waits
    for thread in (first, second, quiet, later):
        thread.join(timeout=10)
    assert log.index("quiet in") > log.index("a out") and log.index("quiet in") > log.index("b out")
    assert log.index("c in") > log.index("quiet out"), log  # the waiting quiet file came first


_MINI_CONFTEST = """
import sys
from pathlib import Path

sys.path.insert(0, {tests!r})
from support.quiet import quiet_first_scheduler, write_quiet_scopes

SCOPES = Path(__file__).with_name("quiet-scopes.json")


def pytest_collection_modifyitems(items):
    write_quiet_scopes(items, SCOPES)


def pytest_xdist_make_scheduler(config, log):
    return quiet_first_scheduler(config, log, SCOPES)
"""

_MINI_TEST = """
import os, time
import pytest
{mark}

def _log(event):
    with open({log!r}, "a") as f:
        f.write(f"{{time.monotonic()}} {{os.environ['PYTEST_XDIST_WORKER']}} {name} {{event}}\\n")

{tests}
"""


def _mini_file(name: str, quiet: bool, log: Path, count: int) -> str:
    tests = "\n".join(
        f"def test_{i}():\n    _log('in')\n    time.sleep(0.4)\n    _log('out')\n" for i in range(count)
    )
    mark = "pytestmark = pytest.mark.quiet" if quiet else ""
    return _MINI_TEST.format(mark=mark, log=str(log), name=name, tests=tests)


def test_xdist_runs_the_quiet_files_first_on_one_worker_while_the_other_waits(tmp_path: Path) -> None:
    """Through real pytest-xdist: the ordinary files come first in the collection (so xdist's own
    scheduler would start them beside the quiet ones); every quiet test still ends before any
    ordinary test starts, and the quiet files run on one worker."""
    project = tmp_path / "mini"
    project.mkdir()
    log = tmp_path / "events.log"
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    quiet: alone\n")
    (project / "conftest.py").write_text(_MINI_CONFTEST.format(tests=str(Path(__file__).parent)))
    files = {"test_a_ordinary": False, "test_b_ordinary": False, "test_c_quiet": True, "test_d_quiet": True}
    for name, quiet in files.items():
        (project / f"{name}.py").write_text(_mini_file(name, quiet, log, count=3))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider"],
        cwd=project, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    events = [line.split() for line in log.read_text().splitlines()]
    quiet_out = max(float(t) for t, _, name, event in events if "quiet" in name and event == "out")
    ordinary_in = min(float(t) for t, _, name, event in events if "ordinary" in name and event == "in")
    assert quiet_out < ordinary_in, log.read_text()
    assert len({worker for _, worker, name, _ in events if "quiet" in name}) == 1, log.read_text()
    assert len(events) == 4 * 3 * 2
