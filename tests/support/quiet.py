"""Tests that need the machine to themselves, in a suite that runs on both cores.

A test whose verdict rests on wall times it measures (an A/A pair judged unchanged), that
bounds the seconds something takes, or that compares two Callgrind batches' counts exactly
(a batch of the other worker at the same time takes the first counting place) must not share
the machine with the other xdist worker; every other test may. `QuietLock` is a readers-writer lock
between the worker processes, held for a whole test file (its module fixtures measure too):
ordinary files hold it shared, a file with a ``quiet`` test alone. A worker holds one file's
lock at a time, so two workers never wait for each other in a circle.

Two ``flock`` files make a waiting quiet file come first: it takes the gate and keeps it
while it waits for the shared holders to finish, so no new test of the other worker starts
in between (without the gate, ordinary tests could keep the lock shared for the rest of
the session). The kernel drops a lock when its holder dies, so a crashed worker blocks no one.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
