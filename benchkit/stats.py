"""Statistics in one place: asv's significance test and its sample-size limits (for the
gate), and the percentiles of operator speedups."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchkit.history.results import Measurement


def stats_usable(m: Measurement) -> bool:
    return bool(m.stats) and m.stats.get("repeat", 0) != 1 and "ci_99_a" in m.stats


P_THRESHOLD = 0.002  # asv's default for `asv compare` and `asv continuous`


def smallest_mann_whitney_p(n_before: int, n_after: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney U test can give for these sizes.

    It is reached when every sample of one side lies beyond every sample of the other.
    """
    return min(1.0, 2 / math.comb(n_before + n_after, n_before)) if n_before and n_after else 1.0


def significantly_different(before: Measurement, after: Measurement) -> bool:
    """asv's own test: Mann-Whitney U on samples when it can reach p < 0.002, else 99% CI overlap.

    asv runs the U test whenever its *one-sided* minimum p is below the threshold, but
    compares the *two-sided* p: with 6 samples against 6 (benchkit's old quick mode) the
    test cannot go below 2/924 ~ 0.0022 and would call every change noise. Such sample
    sizes go to asv's confidence-interval test instead, which can decide.
    """
    from asv import _stats

    if not (stats_usable(before) and stats_usable(after)):
        return True  # one sample each: only the factor can decide, as in asv compare
    a = [x for x in before.samples or () if not math.isnan(x)]
    b = [x for x in after.samples or () if not math.isnan(x)]
    if smallest_mann_whitney_p(len(a), len(b)) >= P_THRESHOLD:
        return bool(_stats.is_different(None, None, before.stats, after.stats))
    return bool(_stats.is_different(a, b, before.stats, after.stats, p_threshold=P_THRESHOLD))


# Like PyTorch's operatorbench: the 20th, 50th and 80th percentile of the speedups.
QUANTILES = (0.2, 0.5, 0.8)


def quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    """The `QUANTILES` of `values` (numpy's linear interpolation)."""
    import numpy as np

    low, mid, high = np.quantile(np.asarray(values, dtype=float), QUANTILES).tolist()
    return low, mid, high
