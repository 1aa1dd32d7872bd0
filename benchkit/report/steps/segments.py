"""The levels of one benchmark's series over a history: where it steps, with each step tested
against the history's own noise.

The values (logs, so that a step is relative) are fitted by piecewise-constant levels by
least squares: for each number of steps the best placement is found exactly, by dynamic
programming over the end of the last level (the segment neighbourhood search of Auger and
Lawrence). How many steps to keep is a test, not a guess. Adding `d` steps to the fit is
accepted when the drop of the residual sum of squares, per added step, divided by the
residual variance of the richer fit, exceeds the F quantile at level
``FALSE_STEP_RATE / 2**d / C(m, d)``, with `m` the places left for a step: a Bonferroni bound
over every way to place the `d` steps, and the rate spent over the number of steps added
at once, so that a pair of steps around a short excursion is seen without letting pairs
of noise through.

Why the residual variance of the fit: between two builds a benchmark moves by more than its
own samples and rounds show (each build is another run, with another memory layout), and
only the history shows that spread. The residual variance of a fit with the steps in it is
that spread without the steps inflating it, and the ratio it enters is free of the
benchmark's scale: in a flat series of independent normal noise, a step is kept with
probability below `FALSE_STEP_RATE`, however noisy the benchmark and however long the
history (the F distribution accounts for a short history's uncertain spread). What benchkit
knows of a single build sets a floor under that spread: a wall time's rounds (each build's
own spread of the level it reports) and Callgrind's prior for instruction counts. A floor
only makes the test stricter, and it keeps near-deterministic instruction counts from
having a spread of zero; their steps still land on one commit.

asv's `step_detect.detect_steps` chooses its penalty from the shape of its own fit curve,
which can return one level for a series with a plain step several times its noise; it is
used here only for series too short to show their spread (fewer than `MIN_VALUES`), where
no test can be calibrated.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

FALSE_STEP_RATE = 0.0005  # per flat series: the chance that noise alone makes a step
# Per flat history, all its series together: a history's steps share one error budget as a
# comparison's figures do (`benchkit.report.gate.budget`), so a long suite does not make up steps.
HISTORY_FALSE_STEPS = 0.01


def series_rate(series: int) -> float:
    """The false-step rate of one series of a history of `series` series: its share of
    `HISTORY_FALSE_STEPS` (Bonferroni), never above `FALSE_STEP_RATE`."""
    return min(FALSE_STEP_RATE, HISTORY_FALSE_STEPS / max(series, 1))


MIN_VALUES = 5  # values a series needs for its spread to be estimated with a few degrees of freedom


@dataclasses.dataclass(frozen=True)
class Levels:
    """A piecewise-constant fit: `bounds[i]` is (first, past last) index of level i."""

    bounds: tuple[tuple[int, int], ...]
    # Noise of one value (log scale) that the test used: the residual spread of the fit, or
    # the floor when larger; None: the series was too short and asv's fit placed the levels.
    sigma: float | None


@functools.lru_cache(maxsize=1024)
def _critical(level: float, added: int, df: int) -> float:
    from scipy.stats import f

    return float(f.isf(level, added, df))


# Ends per block of the search for where the last level starts: a level ending at j starts
# before j, so a block of ends reads only the columns left of its last end (half the matrix
# in all), and a block's sums stay in cache.
SEARCH_BLOCK = 256


def _cost_matrix(values: Sequence[float]) -> Any:
    """cost[j, i]: residual sum of squares of values[i:j] around their mean (inf unless i < j).
    Indexed end first, so that the search over where a level starts reads contiguous rows.
    Filled by the search's blocks of ends (`SEARCH_BLOCK`), each up to its last end: the rest
    is the inf it starts as, and a long history's matrix is computed half, in cache-sized parts."""
    import numpy as np

    y = np.asarray(values, dtype=float)
    y = y - np.median(y)  # centred: the sums below then lose no precision
    sums = np.concatenate(([0.0], np.cumsum(y)))
    squares = np.concatenate(([0.0], np.cumsum(y * y)))
    size = len(y) + 1
    cost = np.full((size, size), np.inf)
    # Within a block's own columns: where a level would start at or after its end.
    empty = np.triu(np.ones((SEARCH_BLOCK, SEARCH_BLOCK), dtype=bool))
    for first in range(0, size, SEARCH_BLOCK):
        past = min(first + SEARCH_BLOCK, size)
        block = cost[first:past, :past]
        count = np.arange(first, past)[:, None] - np.arange(past)[None, :]
        np.subtract(squares[first:past, None], squares[None, :past], out=block)
        mean_part = sums[first:past, None] - sums[None, :past]
        np.multiply(mean_part, mean_part, out=mean_part)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(mean_part, count, out=mean_part)
        np.subtract(block, mean_part, out=block)
        np.maximum(block, 0.0, out=block)
        block[:, first:past][empty[: past - first, : past - first]] = np.inf
    return cost


def _last_starts(cost: Any, best: Any, total: Any) -> tuple[Any, Any]:
    """For every end j: where its last level best starts (the first i minimising best[i] +
    cost[j, i]) and that least cost; `total`: scratch space, `SEARCH_BLOCK` rows of `cost`'s width."""
    import numpy as np

    ends = len(best)
    start = np.empty(ends, dtype=np.intp)
    least = np.empty(ends)
    for first in range(0, ends, SEARCH_BLOCK):
        past = min(first + SEARCH_BLOCK, ends)
        block = total[: past - first, :past]
        np.add(cost[first:past, :past], best[None, :past], out=block)
        start[first:past] = np.argmin(block, axis=1)
        least[first:past] = block[np.arange(past - first), start[first:past]]
    return start, least


def fit_levels(values: Sequence[float], floor: float = 0.0, rate: float = FALSE_STEP_RATE) -> Levels:
    """The levels of `values` (logs, no missing ones); `floor`: the least noise of one value."""
    import numpy as np

    n = len(values)
    if n < MIN_VALUES:
        return _asv_levels(values)
    cost = _cost_matrix(values)
    best = cost[:, 0].copy()  # best[j]: least cost of values[:j] in the current number of levels
    starts = []  # per number of steps k: for each end j, where the last level begins
    rss = [float(best[n])]
    kept = 0
    total = np.empty((min(SEARCH_BLOCK, n + 1), n + 1))
    for k in range(1, n - 1):
        # For each end j: values[:i] in k levels, then i..j, at the best i.
        start, best = _last_starts(cost, best, total)
        starts.append(start)
        rss.append(float(best[n]))
        added, df = k - kept, n - k - 1
        variance = max(rss[k] / df, floor * floor, 1e-300)
        level = rate / 2**added / math.comb(n - 1 - kept, added)
        if (rss[kept] - rss[k]) / added / variance > _critical(level, added, df):
            kept = k
        elif added >= 2:
            break  # neither one more step nor a pair of them pays
    ends = [n]
    for k in range(kept, 0, -1):
        ends.append(int(starts[k - 1][ends[-1]]))
    edges = sorted(ends) if kept else [n]
    bounds = tuple(zip([0, *edges[:-1]], edges, strict=True))
    sigma = math.sqrt(max(rss[kept] / (n - kept - 1), floor * floor))
    return Levels(bounds, sigma)


def _asv_levels(values: Sequence[float]) -> Levels:
    from asv.step_detect import detect_steps

    if not values:
        return Levels((), None)
    measured = [math.exp(v) for v in values]  # asv fits the values as measured, not their logs
    return Levels(tuple((left, right) for left, right, *_ in detect_steps(measured)), None)
