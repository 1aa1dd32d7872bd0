"""An operator timing's replicates without their process's common shift.

Each replicate process times every input of the operator set; a process that ran slow as a
whole moves them all alike. Per build and metric (eager, compiled seconds), each process's shift
is the median over the build's figures of their deviation (logs) from each figure's median,
centred on the median process, so that a build's typical process keeps its values; the figures
are judged on their samples less that shift (lab/bench_process_shift.py measures what it
removes). Centred on the mean instead, the few processes that ran far slower (a +30 % process
in a noisy hour) would move every other process of their build, and so the bulk of its
replicates that the gate's trimmed test reads: by +2 % on two twin figures of 2026-12-07 03:03
UTC, each then flagged. The speedup ratio, a quotient within one process, is left as it is.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Sequence

from benchkit.history.results.read import ResultSet
from benchkit.names import BenchmarkName, Metric

SHIFTED = (Metric.EAGER_SECONDS, Metric.COMPILED_SECONDS)
MIN_FIGURES = 10  # the shift is a median over this many figures at least
MIN_PROCESSES = 3


def without_process_shifts(result_set: ResultSet) -> ResultSet:
    """`result_set` with its eager and compiled times' samples less their process's shift."""
    keys: dict[Metric, list] = {}
    for key, m in result_set.measurements.items():
        metric = BenchmarkName.parse(key[0]).metric
        if metric in SHIFTED and m.has_number and m.samples and len(m.log_samples) == len(m.samples):
            keys.setdefault(metric, []).append(key)
    changed = dict(result_set.measurements)
    for found in keys.values():
        processes = Counter(len(result_set.measurements[k].samples) for k in found).most_common(1)[0][0]
        aligned = [k for k in found if len(result_set.measurements[k].samples) == processes]
        if len(aligned) < MIN_FIGURES or processes < MIN_PROCESSES:
            continue
        rows = [result_set.measurements[k].log_samples for k in aligned]
        shift = process_shifts(rows)
        for key, row in zip(aligned, rows, strict=True):
            samples = [math.exp(x - s) for x, s in zip(row, shift, strict=True)]
            changed[key] = dataclasses.replace(result_set.measurements[key], samples=samples)
    return dataclasses.replace(result_set, measurements=changed)


def process_shifts(rows: Sequence[Sequence[float]]) -> list[float]:
    """Each process's common shift over `rows` (per figure, its processes' logs, in one order):
    the median of the figures' deviations from their own medians, less the median process's."""
    processes = len(rows[0])
    shift = [statistics.median(r[p] - statistics.median(r) for r in rows) for p in range(processes)]
    centre = statistics.median(shift)
    return [s - centre for s in shift]
