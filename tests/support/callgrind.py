"""The small real valgrind batch that test_callgrind.py and test_profiles.py share: Python cases,
the same case at two positions, and three faulty cases (a segfault, a hang, an exception) that
must each cost only themselves. Collected once per test session (`functools.cache`)."""

from __future__ import annotations

import functools
import shutil

import pytest

from benchkit.define.api import TimerArgs
from benchkit.define.expand import materialize
from benchkit.measure.callgrind import results as cg_results
from benchkit.measure.callgrind import supervisor

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")

SETUP = "x = torch.ones(4, 4)"
CASES = {
    "add": TimerArgs("x + 1", SETUP),
    "add again": TimerArgs("x + 1", SETUP),  # same work elsewhere in the batch: same count
    "add and mul": TimerArgs("x + 1\nx.mul(2)", SETUP),
    # setting a class attribute resets the type's cache tag: the next lookup misses
    "type cache miss": TimerArgs("C.a = 1\nC.b", "class C:\n    b = 2"),
    "segfault": TimerArgs("ctypes.string_at(0)", "import ctypes"),
    "hang": TimerArgs("while True:\n    pass"),
    "raises": TimerArgs("raise ValueError('broken on purpose')"),
}
CASE_TIMEOUT = 12.0


@functools.cache
def real_batch() -> cg_results.BatchResult:
    return supervisor.collect(materialize(CASES), case_timeout=CASE_TIMEOUT, progress=lambda m: print(m))


def count(label: str, result: cg_results.BatchResult | None = None) -> cg_results.CaseCount:
    result = result or real_batch()
    (key,) = [k for k in result.counts if k.startswith(f"{label} |")]
    return result.counts[key]
