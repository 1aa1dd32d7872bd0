"""`benchkit.util.bulk_load`: a history's results are read without the cyclic collector, then
frozen so that later collections skip them."""

from __future__ import annotations

import gc

from benchkit.util import bulk_load


def test_objects_built_inside_are_frozen_and_the_collector_comes_back() -> None:
    frozen_before = gc.get_freeze_count()
    try:
        with bulk_load():
            assert not gc.isenabled()
            built = [{"sample": [float(i)]} for i in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen_before + len(built)
    finally:
        gc.unfreeze()


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        with bulk_load():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
