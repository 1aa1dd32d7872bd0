"""Wall times measured against a reference timed apart from them: torch.utils.benchmark's own
Timer for a Python statement, and the same multiply from Python for a C++ case. Both sides are
seconds measured at different moments, so this file runs with the machine to itself
(tests/support/quiet.py); the rest of the timing tests are in test_timing.py."""

from __future__ import annotations

import pytest
import torch

from benchkit.define.api import Language, TimerArgs
from benchkit.measure.cpp.shards import CppSuite
from benchkit.measure.walltime.timing import blocked_autorange, prepare


# quiet: judges wall times it measures against a reference taken apart from them.
@pytest.mark.quiet
def test_python_case_times_the_statement() -> None:
    prepared = prepare(TimerArgs("y = x * w", "x = torch.ones((4, 4))\nw = torch.ones((4, 4))"))
    n = prepared.calibrate(target=0.005)
    assert n >= 10
    timing = blocked_autorange(prepared, min_run_time=0.05)
    per_call = min(timing.block_seconds) / timing.block_size
    reference = _timer_seconds("y = x * w", "x = torch.ones((4, 4))\nw = torch.ones((4, 4))")
    assert reference / 3 < per_call < reference * 3, (per_call, reference)


def _timer_seconds(stmt: str, setup: str) -> float:
    """torch.utils.benchmark's own per-call time for a Python statement (its fastest block)."""
    from torch.utils.benchmark import Timer

    measurement = Timer(stmt, setup, globals={"torch": torch}).blocked_autorange(min_run_time=0.2)
    return min(measurement.raw_times) / measurement.number_per_run


# quiet: bounds a C++ case's time by the same multiply's from Python, measured apart.
@pytest.mark.quiet
def test_cpp_cases_compile_once_per_shard_and_honour_threads() -> None:
    cases = [
        TimerArgs(
            "auto y = x * w;",
            "auto x = torch::ones({4, 4});\nauto w = torch::ones({4, 4});",
            language=Language.CPP,
        ),
        TimerArgs("TORCH_CHECK(torch::get_num_threads() == 2);", num_threads=2, language=Language.CPP),
    ]
    suite = CppSuite(cases)
    assert len(suite.shards) == 1  # both cases share one translation unit
    multiply = prepare(cases[0], cpp_suite=suite)
    cpp, python = [], []
    for _ in range(3):  # alternated, each side's fastest: a burst of the machine hits both
        timing = blocked_autorange(multiply, min_run_time=0.05)
        assert timing.block_size > 1
        cpp.append(min(timing.block_seconds) / timing.block_size)
        python.append(_timer_seconds("y = x * w", "x = torch.ones((4, 4))\nw = torch.ones((4, 4))"))
    # The same multiply from Python costs the interpreter and the binding on top (about twice
    # the C++ case's time here), and the C++ case with its setup's two allocations timed too
    # would cost more than the Python multiply (x1.5).
    assert min(python) / 50 < min(cpp) < min(python), (cpp, python)
    prepare(cases[1], cpp_suite=suite).run_block(3)  # TORCH_CHECK would throw with 1 thread
