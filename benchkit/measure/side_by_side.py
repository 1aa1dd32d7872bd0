"""Builds measured side by side: the builds' processes of a round run at the same time, each
pinned to a core of its own, the cores swapping builds round by round.

Two builds measured one after the other see different stretches of the machine's weather;
measured at once, they see the same stretch ("duet benchmarking", Bulej et al., ICPE 2020),
and a round of two builds takes the time of one. Only single-threaded work runs this way (a
case of two threads needs the cores to itself); on a machine with fewer cores than builds,
or with ``BENCHKIT_SIDE_BY_SIDE=0``, the builds take turns as before.

This module owns that policy: who may share, which core each build gets, and how many
processes ran at once (the share of a phase spent in timed samples is counted per core in use).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from benchkit import settings

T = TypeVar("T")


def usable_cores() -> tuple[int, ...]:
    """The cores this process may run on (its affinity), in order."""
    if not hasattr(os, "sched_getaffinity"):
        return ()
    return tuple(sorted(os.sched_getaffinity(0)))


@dataclasses.dataclass(frozen=True)
class Lanes:
    """The cores the builds of a round share, one build per core."""

    cores: tuple[int, ...]

    def fit(self, builds: int) -> bool:
        """Whether `builds` processes can run at once, each on a core of its own."""
        return 2 <= builds <= len(self.cores)

    def core_of(self, round_index: int, build: int) -> int:
        """The core of the `build`-th build (in the job's order, whatever order a round starts
        them in) in round `round_index`: every build moves one core on every round, so none
        keeps one core's quirks."""
        return self.cores[(build + round_index) % len(self.cores)]


def lanes(environ: Mapping[str, str], builds: int) -> Lanes | None:
    """The lanes for `builds` builds measured side by side, or None where they take turns (the
    setting is off, or there is no usable core for each of them)."""
    if not settings.read(environ).measure.side_by_side:
        return None
    found = Lanes(usable_cores())
    return found if found.fit(builds) else None


def pin(pid: int, core: int) -> None:
    """Keep process `pid` (and the processes it starts later) on `core`: call it right after
    starting the process, before waiting on it (a reaped process's pid may be another's)."""
    try:
        os.sched_setaffinity(pid, {core})
    except ProcessLookupError:  # it has already exited: nothing to pin
        pass


def at_once(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run `tasks` at the same time (each starts and waits on its own process); their results
    in order. An exception of one is raised after all have finished."""
    if len(tasks) < 2:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        futures = [pool.submit(task) for task in tasks]
        return [future.result() for future in futures]
