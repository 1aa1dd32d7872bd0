"""`benchkit.util.forked_map`: the same list as a plain loop, from more than one process where the
machine has the cores, and a worker's error raised here."""

from __future__ import annotations

import os
import time

import pytest

from benchkit.util import forked_map, usable_cores

BIG = bytearray(8 << 20)  # inherited by the workers, never pickled


def _square_with_pid(n: int) -> tuple[int, int, int]:
    return n * n, os.getpid(), len(BIG)


def _slow_square_with_pid(n: int) -> tuple[int, int, int]:
    # 2 s of work in all: on a loaded machine the first worker could otherwise take every
    # chunk before the second has started (CI of 69e0490: all 200 items in one process)
    time.sleep(0.01)
    return _square_with_pid(n)


def test_results_come_back_in_order_from_every_usable_core() -> None:
    items = list(range(200))
    results = forked_map(_slow_square_with_pid, items, min_per_worker=10)
    assert [r[0] for r in results] == [n * n for n in items]
    assert all(r[2] == len(BIG) for r in results)
    pids = {r[1] for r in results}
    cores = usable_cores()
    if cores >= 2:
        assert os.getpid() not in pids and 2 <= len(pids) <= cores
    else:
        assert pids == {os.getpid()}


def test_few_items_stay_in_this_process() -> None:
    results = forked_map(_square_with_pid, [1, 2, 3], min_per_worker=10)
    assert [r[:2] for r in results] == [(1, os.getpid()), (4, os.getpid()), (9, os.getpid())]


def test_a_closure_runs_in_the_workers_and_its_error_is_raised_here() -> None:
    offset = 7

    def shifted(n: int) -> int:  # a closure: it could not be pickled, it need not be
        if n == 150:
            raise ValueError(f"bad item {n}")
        return n + offset

    assert forked_map(shifted, list(range(100)), min_per_worker=10) == [n + 7 for n in range(100)]
    with pytest.raises(ValueError, match="bad item 150"):
        forked_map(shifted, list(range(200)), min_per_worker=10)
