"""Operator timings without their process's common shift, on a real twin pair's replicates from
the noise corpus."""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
from pathlib import Path

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.report.gate.process_shift import without_process_shifts

CORPUS = Path(__file__).parent / "data" / "noise-corpus"
PAIR = CORPUS / "twin-2026-12-02T0257Z.json.gz"
TWENTY = CORPUS / "twin-2026-12-06T2224Z.json.gz"  # 20 replicates a build


def _side(side: str, pair: Path = PAIR) -> ResultSet:
    figures = json.loads(gzip.open(pair).read())["figures"]
    measurements = {
        (f["name"], f["env"]): Measurement(
            f[side]["value"], None, f[side].get("samples"), None, f[side].get("per_round")
        )
        for f in figures
    }
    return ResultSet("c" * 40, "vm", measurements)


def _spread(m: Measurement) -> float:
    return statistics.stdev(m.log_samples)


def _eager(result_set: ResultSet) -> list[tuple[str, str]]:
    return [
        k
        for k, m in result_set.measurements.items()
        if k[0].split("(")[0].endswith(".track_eager_seconds") and m.has_number and m.samples
    ]


def test_the_shift_lowers_each_figures_spread() -> None:
    before = _side("base")
    after = without_process_shifts(before)
    eager = [k for k in before.measurements if k[0].split("(")[0].endswith(".track_eager_seconds")]
    timed = _eager(before)
    assert len(timed) >= 10
    spreads = [(_spread(before.measurements[k]), _spread(after.measurements[k])) for k in timed]
    assert statistics.median(a for _, a in spreads) < 0.8 * statistics.median(b for b, _ in spreads)
    # the ratio and the wall times are left as they were
    others = [
        k for k in before.measurements if k not in eager and not k[0].split("(")[0].endswith("_seconds")
    ]
    assert all(after.measurements[k] is before.measurements[k] for k in others)


def test_a_few_slow_processes_leave_the_others_where_they_were() -> None:
    """Three processes of twenty run 30 % slow on every input (a noisy hour): their shift is
    removed, and the other seventeen keep their values: the trimmed test reads those."""
    before = _side("base", TWENTY)
    timed = _eager(before)
    slow = {0, 3, 16}
    slowed = dict(before.measurements)
    for key in timed:
        m = before.measurements[key]
        samples = [x * 1.3 if i in slow else x for i, x in enumerate(m.samples)]
        slowed[key] = dataclasses.replace(m, samples=samples)
    plain = without_process_shifts(before)
    shifted = without_process_shifts(dataclasses.replace(before, measurements=slowed))
    for key in timed:
        a, b = plain.measurements[key].log_samples, shifted.measurements[key].log_samples
        assert len(a) == len(b) == 20
        typical = [abs(x - y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if i not in slow]
        assert max(typical) < 0.005, key
        assert all(abs(b[i] - a[i]) < 0.02 for i in slow)  # the slow ones brought back
