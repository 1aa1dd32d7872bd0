"""lab/measure_ci.py reads the slowest tests out of pytest's own durations section."""

from __future__ import annotations

from lab import measure_ci

LOG = """\
........ [100%]
============================= slowest 25 durations =============================
394.10s call     tests/test_fresh_main_job.py::test_main_job
20.21s setup    tests/test_check_asv.py::test_exit[2-0-no regression]
5.94s teardown tests/test_source_checkout.py::test_main

(22 durations < 0.005s hidden.  Use -vv to show these durations.)
708 passed, 1 skipped in 2933.96s (0:48:53)
"""


def test_the_slowest_tests_come_from_pytests_durations_section() -> None:
    lines = [line for line in LOG.splitlines() if line.strip()]
    assert measure_ci.slowest_tests(lines, 2) == [
        (394.10, "call", "tests/test_fresh_main_job.py::test_main_job"),
        (20.21, "setup", "tests/test_check_asv.py::test_exit[2-0-no regression]"),
    ]
    assert len(measure_ci.slowest_tests(lines)) == 3
    assert measure_ci.slowest_tests(["708 passed"]) == []


def test_a_files_seconds_are_its_phases_summed() -> None:
    lines = [line for line in LOG.splitlines() if line.strip()]
    rows = measure_ci.slowest_tests(lines, None)
    rows.append((6.0, "call", "tests/test_check_asv.py::test_other"))
    assert measure_ci.seconds_per_file(rows) == [
        (394.10, "tests/test_fresh_main_job.py"),
        (26.21, "tests/test_check_asv.py"),
        (5.94, "tests/test_source_checkout.py"),
    ]
