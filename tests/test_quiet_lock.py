"""The lock that lets a ``quiet`` test file run alone while the others share the machine."""

from __future__ import annotations

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
