"""Who shares the machine and on which core (`benchkit.measure.side_by_side`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchkit.errors import UserError
from benchkit.measure import side_by_side
from benchkit.measure.side_by_side import Lanes


def test_every_build_takes_every_core_in_turn_and_never_shares_one() -> None:
    lanes = Lanes((3, 5))
    assert lanes.fit(2) and not lanes.fit(1) and not lanes.fit(3)
    rounds = [[lanes.core_of(index, build) for build in range(2)] for index in range(4)]
    assert rounds == [[3, 5], [5, 3], [3, 5], [5, 3]]


def test_the_setting_or_too_few_cores_turns_it_off() -> None:
    assert side_by_side.lanes({"BENCHKIT_SIDE_BY_SIDE": "0"}, 2) is None
    with pytest.raises(UserError, match="BENCHKIT_SIDE_BY_SIDE='sometimes'"):
        side_by_side.lanes({"BENCHKIT_SIDE_BY_SIDE": "sometimes"}, 2)
    found = side_by_side.lanes({}, 2)
    cores = side_by_side.usable_cores()
    assert (found is None) == (len(cores) < 2) and (found is None or found.cores == cores)
    assert side_by_side.lanes({}, 1) is None and side_by_side.lanes({}, len(cores) + 1) is None


def test_tasks_run_at_once_and_keep_their_order() -> None:
    began = time.monotonic()
    done = side_by_side.at_once([lambda: time.sleep(1.0) or "a", lambda: time.sleep(1.0) or "b"])
    assert done == ["a", "b"] and time.monotonic() - began < 1.9


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_pinned_process_and_its_children_stay_on_the_core() -> None:
    core = side_by_side.usable_cores()[-1]
    script = "import os, subprocess, sys; print(sorted(os.sched_getaffinity(0)))"
    child = f"{script}; subprocess.run([sys.executable, '-c', {script!r}])"
    process = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep(0.5); {child}"], stdout=subprocess.PIPE, text=True
    )
    side_by_side.pin(process.pid, core)
    out, _ = process.communicate(timeout=60)
    assert out.split() == [f"[{core}]", f"[{core}]"]
