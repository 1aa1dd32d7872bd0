"""Operator timings without their process's common shift, on a real twin pair's replicates from
the noise corpus."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.report.gate.process_shift import without_process_shifts

PAIR = Path(__file__).parent / "data" / "noise-corpus" / "twin-2026-12-02T0257Z.json.gz"


def _side(side: str) -> ResultSet:
    figures = json.loads(gzip.open(PAIR).read())["figures"]
    measurements = {
        (f["name"], f["env"]): Measurement(
            f[side]["value"], None, f[side].get("samples"), None, f[side].get("per_round")
        )
        for f in figures
    }
    return ResultSet("c" * 40, "vm", measurements)


def _spread(m: Measurement) -> float:
    return statistics.stdev(m.log_samples)


def test_the_shift_leaves_each_figures_mean_and_lowers_its_spread() -> None:
    before = _side("base")
    after = without_process_shifts(before)
    eager = [k for k in before.measurements if k[0].split("(")[0].endswith(".track_eager_seconds")]
    timed = [k for k in eager if before.measurements[k].has_number and before.measurements[k].samples]
    assert len(timed) >= 10
    for key in timed:
        old, new = before.measurements[key], after.measurements[key]
        assert math.isclose(
            statistics.fmean(old.log_samples), statistics.fmean(new.log_samples), abs_tol=1e-12
        )
    spreads = [(_spread(before.measurements[k]), _spread(after.measurements[k])) for k in timed]
    assert statistics.median(a for _, a in spreads) < 0.8 * statistics.median(b for b, _ in spreads)
    # the ratio and the wall times are left as they were
    others = [
        k for k in before.measurements if k not in eager and not k[0].split("(")[0].endswith("_seconds")
    ]
    assert all(after.measurements[k] is before.measurements[k] for k in others)
