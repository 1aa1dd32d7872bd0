"""Tests that need the machine to themselves, in a suite that runs on both cores.

A test whose verdict rests on wall times it measures (an A/A pair judged unchanged) or that
bounds the seconds something takes must not share the machine with the other xdist worker;
every other test may. (Instruction counts do not care what else runs; what they do depend on,
the counting place, is one for the whole session: tests/conftest.py.) `QuietLock` is a
readers-writer lock between the worker processes, held for a whole test file (its module
fixtures measure too):
ordinary files hold it shared, a file with a ``quiet`` test alone. A worker holds one file's
lock at a time, so two workers never wait for each other in a circle.

Two ``flock`` files make a waiting quiet file come first: it takes the gate and keeps it
while it waits for the shared holders to finish, so no new test of the other worker starts
in between (without the gate, ordinary tests could keep the lock shared for the rest of
the session). The kernel drops a lock when its holder dies, so a crashed worker blocks no one.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchkit.util import atomic_write_text


class QuietLock:
    def __init__(self, folder: Path) -> None:
        self._gate = folder / "gate.lock"
        self._machine = folder / "machine.lock"

    @contextmanager
    def hold(self, alone: bool) -> Iterator[None]:
        self._gate.parent.mkdir(parents=True, exist_ok=True)
        with open(self._gate, "a") as gate, open(self._machine, "a") as machine:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            finally:
                if not alone:
                    fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(machine, fcntl.LOCK_UN)
                if alone:
                    fcntl.flock(gate, fcntl.LOCK_UN)


def write_quiet_scopes(items: Sequence[pytest.Item], path: Path) -> None:
    """The quiet files' scopes (a test id up to ``::``, xdist's file scope), written by each
    collecting worker for the controller's scheduler, which does not collect."""
    scopes = sorted({item.nodeid.split("::", 1)[0] for item in items if "quiet" in item.keywords})
    atomic_write_text(path, json.dumps(scopes))


def quiet_first_scheduler(config: pytest.Config, log: Any, scopes_file: Path) -> Any:
    """For ``--dist loadfile``: xdist's file scheduler that hands every file with a quiet test
    to one worker, one after another, and nothing to the others until those files are done;
    None (xdist's own) otherwise. With the lock alone, a quiet file handed out while the other
    worker was in a long file waited for all of it (475 s of one worker idle in a 57-minute CI
    run); here the quiet phase comes first and whole."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class QuietFirstScheduling(LoadFileScheduling):
        _quiet: frozenset[str] | None = None

        def _quiet_scopes(self) -> frozenset[str]:
            if self._quiet is None:  # read once collection is complete
                self._quiet = frozenset(json.loads(scopes_file.read_text()) if scopes_file.is_file() else ())
            return self._quiet

        def _quiet_left(self) -> bool:
            quiet = self._quiet_scopes()
            if any(scope in quiet for scope in self.workqueue):
                return True
            return any(
                scope in quiet and not all(unit.values())
                for assigned in self.assigned_work.values()
                for scope, unit in assigned.items()
            )

        def _assign_work_unit(self, node: Any) -> None:
            if self._quiet_left():
                if node is not self.nodes[0]:
                    return  # idle while the quiet files run
                queued = [scope for scope in self.workqueue if scope in self._quiet_scopes()]
                if queued:
                    self.workqueue.move_to_end(queued[0], last=False)
                # else the last quiet file runs here, and the next file is queued behind it: a
                # worker runs its last test only once it knows what follows (or is told to stop)
            super()._assign_work_unit(node)

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            quiet_before = self._quiet_left()
            super().mark_test_complete(node, item_index, duration)
            if quiet_before and not self._quiet_left():
                for other in self.nodes:
                    self._reschedule(other)

    return QuietFirstScheduling(config, log)
