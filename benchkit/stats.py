"""Statistics in one place: robust spreads, the rounds test of wall times (for the gate), and
the percentiles of operator speedups."""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence

# Like PyTorch's operatorbench: the 20th, 50th and 80th percentile of the speedups.
QUANTILES = (0.2, 0.5, 0.8)


def quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    """The `QUANTILES` of `values` (numpy's linear interpolation)."""
    import numpy as np

    low, mid, high = np.quantile(np.asarray(values, dtype=float), QUANTILES).tolist()
    return low, mid, high


# ---------------------------------------------------------------- noise and detectability
#
# Noise is measured on the log scale: a relative change ×r is log(r), symmetric for
# slower and faster, and the spread of log-ratios of repeated runs does not depend on
# the benchmark's absolute speed. "sigma" below is always the standard deviation of
# log(after / before) between two runs, estimated robustly (MAD, so a few real steps or
# one disturbed run do not inflate it).

ALPHA = 0.001  # two-sided false-positive rate per benchmark for the minimum detectable change
MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # s.e. of a median / s.e. of a mean, normal samples


def z_two_sided(alpha: float = ALPHA) -> float:
    """The normal quantile z with P(|Z| > z) = alpha (3.29 for alpha = 0.001)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - alpha / 2)


# Student's t through scipy's special functions (what `scipy.stats.t` calls underneath, without
# its argument checks, which cost a publish of a long history more than the comparisons
# themselves): a gate judges hundreds of thousands of figures over a history.


@functools.lru_cache(maxsize=4096)
def t_critical(alpha: float, df: float) -> float:
    """The t quantile with P(|T| > t) = alpha for `df` degrees of freedom (df may be inf)."""
    from scipy.special import stdtrit

    return float(-stdtrit(df, alpha / 2))


def t_two_sided_p(score: float, df: float) -> float:
    """P(|T| > |score|) for `df` degrees of freedom."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(score)))


def robust_sigma(values: Sequence[float], center: float | None = None) -> float | None:
    """MAD-based standard deviation around `center` (the median when None); None below 2 values.

    `center=0.0` is for A/A log-ratios, whose true center is known to be 0: a
    consistent bias between runs is then counted as noise, as it should be.
    """
    import statistics

    if len(values) < 2:
        return None
    mid = statistics.median(values) if center is None else center
    return MAD_TO_SIGMA * statistics.median(abs(v - mid) for v in values)


def log_samples(samples: Sequence[float] | None) -> list[float]:
    return [math.log(x) for x in samples or () if x is not None and not math.isnan(x) and x > 0]


def median_difference_sigma(sigma_a: float, n_a: int, sigma_b: float, n_b: int) -> float:
    """Standard error of the difference of two medians of `n_a` and `n_b` samples."""
    return MEDIAN_EFFICIENCY * math.sqrt(sigma_a**2 / n_a + sigma_b**2 / n_b)


def minimum_detectable_change(sigma: float, critical: float | None = None) -> float:
    """The smallest relative slowdown a two-sided test can tell from noise.

    MDC = exp(critical * sigma) - 1, with `sigma` the standard error of log(after / before)
    and `critical` the test's critical value: by default z_{1-ALPHA/2} (3.29), for a
    comparison of rounds Welch's t quantile. A change with |log(after / before)| below
    critical * sigma is one that A/A pairs produce more often than ALPHA.
    """
    return math.expm1((z_two_sided(ALPHA) if critical is None else critical) * sigma)


def sign_test_p(n_up: int, n_down: int) -> float:
    """Exact two-sided sign test: the chance of a split at least this lopsided by coin flips."""
    n = n_up + n_down
    if n == 0:
        return 1.0
    k = min(n_up, n_down)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def median_shift_p(values: Sequence[float]) -> float:
    """Two-sided p that values centred on 0 give a median this far from 0 (normal approximation,
    s.e. of a median = sqrt(pi/2) * sigma / sqrt(n), sigma robust). Unlike the sign test it
    sees a large common shift that a few values do not share (a busy machine slows most
    benchmarks a lot and a few not at all)."""
    import statistics
    from statistics import NormalDist

    sigma = robust_sigma(values)
    if sigma is None or len(values) < 5:
        return 1.0
    middle = statistics.median(values)
    if sigma == 0:
        return 0.0 if middle else 1.0
    z = abs(middle) / (MEDIAN_EFFICIENCY * sigma / math.sqrt(len(values)))
    return 2 * (1 - NormalDist().cdf(z))


# ---------------------------------------------------------------- rounds: processes as replicates
#
# Wall time varies more between processes than within one: each asv round is a fresh process
# (its own memory layout, and minutes apart from the other rounds), and its samples agree
# more closely than the rounds of one build do (docs/verdicts.md;
# `lab/bench_verdicts.py` measures both). So a wall-time comparison treats each round as
# one observation: its fastest sample. Within a process, what moves a sample is the machine
# (another tenant, an interrupt), and that only ever adds time; the fastest of a round's samples
# spreads less between rounds than their median (lab/bench_wall_noise.py measures both).
#
# On a shared machine (a virtual machine whose cores another tenant uses in bursts of seconds) a
# round that falls into a burst runs 1.3-2x slower, samples and all, and a fifth to a half of a
# benchmark's rounds may do so: the rounds are a mixture of a fast level and a burst level. A
# test of the whole mixture (a mean, a median, a trimmed mean) carries the bursts' spread and
# sees only changes of their size. The rounds test compares the builds' fast levels instead: the
# rounds of both sides within FAST_BAND of the second-fastest round of the two together (the
# second, so that one freak fast round does not narrow the band), then the rounds within
# FAST_BAND above the median of those (so that a side a few percent slower keeps its whole fast
# cluster, not its luckier half), compared with Welch's t-test.
# The band is chosen from both sides alike, without looking at which build a round came from, so
# for identical builds which side a kept round belongs to is a coin flip and the test's false
# alarms stay at its alpha, however wide the rounds spread (a band chosen per side would not be:
# on rounds spread wider than the band, each side's band follows its own luckiest rounds). A
# change larger than the band is met by each side's own cluster of fast rounds, or a wider band
# (`fast_rounds`). Measured: lab/bench_verdicts.py, and tests/test_rounds.py on a model of
# such a machine. A change that slows only some of a build's processes does not move its fast
# level; it widens the rounds' spread instead.

FAST_BAND = math.log(1.10)
MIN_ROUNDS = 7  # per side: below it the fast level rests on too few processes
MIN_FAST_ROUNDS = 3  # per side, kept in the band: Welch's variance needs a few


def round_values(samples: Sequence[float] | None, per_round: int | None) -> list[float] | None:
    """Log of the fastest sample of each round; None when the list cannot be cut into rounds.

    asv records a benchmark's rounds one after the other (``--record-samples``); with a
    fixed repeat count each round holds exactly `per_round` samples.
    """
    logs = log_samples(samples)
    if not per_round or per_round < 1 or not logs or len(logs) % per_round:
        return None
    return [min(logs[i : i + per_round]) for i in range(0, len(logs), per_round)]


def _own_band(values: Sequence[float]) -> tuple[list[float], float]:
    """One side's rounds within `FAST_BAND` of its second-fastest (fastest first), and the
    band's top; ([], -inf) with fewer than two rounds."""
    ordered = sorted(values)
    if len(ordered) < 2:
        return [], -math.inf
    top = ordered[1] + FAST_BAND
    return [v for v in ordered if v <= top], top


def _separate_cluster(values: Sequence[float]) -> list[float] | None:
    """One side's own band (`_own_band`) when it is a cluster of its own (`MIN_FAST_ROUNDS` or
    more rounds, and no round in the band above it); else None."""
    kept, top = _own_band(values)
    if len(kept) < MIN_FAST_ROUNDS or any(top < v <= top + FAST_BAND for v in values):
        return None
    return kept


def _below(before: Sequence[float], after: Sequence[float], top: float) -> tuple[list[float], list[float]]:
    return sorted(v for v in before if v <= top), sorted(v for v in after if v <= top)


def fast_rounds(before: Sequence[float], after: Sequence[float]) -> tuple[list[float], list[float]]:
    """Each side's rounds (log values) at the fast level, ([], []) when no rule finds
    `MIN_FAST_ROUNDS` a side:

    * the rounds within `FAST_BAND` above the median of those within `FAST_BAND` of the
      second-fastest round of both sides together (the band is chosen from both sides'
      rounds alike, without looking at which side a round came from);
    * where a side has too few there, a change larger than the band: each side's own cluster
      of fast rounds, where both sides have one set apart from their slower rounds, and the
      two clusters lie more than the band apart;
    * else the band of the first rule, doubled until each side has enough."""
    pooled = sorted([*before, *after])
    if len(pooled) < 2:
        return [], []
    reference, band = pooled[1], FAST_BAND
    own = _separate_cluster(before), _separate_cluster(after)
    while True:
        kept = _below(before, after, reference + band)
        if min(len(kept[0]), len(kept[1])) >= MIN_FAST_ROUNDS:
            if band > FAST_BAND:
                return kept
            # The band again from the kept rounds' median: from the second-fastest it ends
            # about the rounds' spread above the faster side's level, and cuts off the upper
            # half of a side that is a few percent slower (its change then looks smaller).
            # The median lies above the second-fastest, so no side loses a round.
            return _below(before, after, statistics.median([*kept[0], *kept[1]]) + band)
        if band == FAST_BAND and own[0] is not None and own[1] is not None:
            if abs(statistics.fmean(own[1]) - statistics.fmean(own[0])) > FAST_BAND:
                return own[0], own[1]
        if reference + band >= pooled[-1]:
            return [], []
        band *= 2


def fast_level(values: Sequence[float]) -> tuple[float, float | None] | None:
    """One build's fast level from its own rounds (log values), for a history of builds: the
    mean of the rounds within `FAST_BAND` of its second-fastest, and its standard error (None
    with fewer than `MIN_FAST_ROUNDS` there: two rounds show no spread); None with fewer than
    two rounds. A band per build follows its luckiest rounds a little, alike in every build, so
    a history's spread of these levels holds that too. A build whose rounds nearly all fell into
    bursts keeps the level of the two or so they did not slow, not the bursts' level."""
    kept, _ = _own_band(values)
    if not kept:
        return None
    if len(kept) < MIN_FAST_ROUNDS:
        return statistics.fmean(kept), None
    return statistics.fmean(kept), statistics.stdev(kept) / math.sqrt(len(kept))


@dataclasses.dataclass(frozen=True)
class RoundsTest:
    """Welch's test of the fast level of `after`'s rounds against `before`'s (log scale)."""

    change: float  # difference of the fast levels: log(after / before)
    se: float  # its standard error
    df: float  # Welch-Satterthwaite degrees of freedom
    n_before: int  # rounds (processes) on each side
    n_after: int
    fast_before: int  # of them, in the fast band
    fast_after: int

    def critical(self, alpha: float = ALPHA) -> float:
        """|change| / se beyond this is significant at `alpha`, two-sided."""
        return t_critical(alpha, self.df)

    def p_value(self) -> float:
        """Two-sided p of the change (1.0 with no spread and no change)."""
        if self.se <= 0:
            return 0.0 if self.change else 1.0
        return t_two_sided_p(self.change / self.se, self.df)


def welch_test(before: Sequence[float], after: Sequence[float]) -> tuple[float, float, float]:
    """(difference of the means, its standard error, Welch-Satterthwaite df), as
    `scipy.stats.ttest_ind(after, before, equal_var=False)` computes them."""
    n_a, n_b = len(before), len(after)
    mean_a, mean_b = sum(before) / n_a, sum(after) / n_b
    d_a = sum((v - mean_a) ** 2 for v in before) / (n_a - 1) / n_a
    d_b = sum((v - mean_b) ** 2 for v in after) / (n_b - 1) / n_b
    denominator = d_a**2 / (n_a - 1) + d_b**2 / (n_b - 1)
    df = (d_a + d_b) ** 2 / denominator if denominator > 0 else float(n_a + n_b - 2)
    return mean_b - mean_a, math.sqrt(d_a + d_b), df


def fast_level_test(before: Sequence[float], after: Sequence[float]) -> RoundsTest | None:
    """The rounds test between two sides' round values (log scale); None when a side has
    fewer than `MIN_FAST_ROUNDS` rounds."""
    fast_a, fast_b = fast_rounds(before, after)
    if min(len(fast_a), len(fast_b)) < MIN_FAST_ROUNDS:
        return None
    change, se, df = welch_test(fast_a, fast_b)
    return RoundsTest(change, se, df, len(before), len(after), len(fast_a), len(fast_b))


# ---------------------------------------------------------------- replicates: operator timings
#
# An operator timing's replicate is one timing process: it runs every input of the operator set
# and keeps, per input, the fastest of its rounds. What a process fixes for its lifetime (where
# code and buffers landed) moves all of its rounds alike, so processes, not rounds, are the
# replicates. Two builds' replicates of one figure are compared by a t-test on their logs (no fast
# band: the speedup ratio is a quotient of two timings, and a burst can move it either way).
#
# A comparison has a few replicates of each of many figures, and a variance from a few replicates
# is itself noisy: a t-test on 5 degrees of freedom needs t = 10 for p = 1e-4. The figures of one
# metric share most of their noise's size, so each figure's variance is moderated towards the
# metric's (Smyth's empirical Bayes, 2004, as limma does for many genes and few arrays): the prior
# is estimated from all of the pair's figures of that metric, each figure's variance is a weighted
# mean of its own and the prior's, and the test's degrees of freedom are its own plus the prior's.
# A figure much noisier than the others keeps most of its own variance (its weight grows with its
# degrees of freedom), so it is not judged as if it were quiet.

MIN_REPLICATES = 4  # per side: a variance needs a few, and the main job measures more
MIN_PRIOR_FIGURES = 10  # figures of one metric, for a variance prior
MAX_PRIOR_DF = 1000.0  # "every figure's variance alike"


@dataclasses.dataclass(frozen=True)
class VariancePrior:
    """The variance of a metric's replicates across its figures (log scale), and its degrees of
    freedom: how many replicates' worth of evidence it adds to each figure's own variance."""

    variance: float
    df: float


def _trigamma_inverse(value: float) -> float:
    """x with trigamma(x) = value (trigamma falls from +inf to 0 on (0, inf))."""
    from scipy.optimize import brentq
    from scipy.special import polygamma

    return float(brentq(lambda x: float(polygamma(1, x)) - value, 1e-8, 1e8))


def variance_prior(variances: Sequence[tuple[float, int]]) -> VariancePrior | None:
    """Smyth's method-of-moments prior from (variance, degrees of freedom) of many figures; None
    with fewer than `MIN_PRIOR_FIGURES` positive variances."""
    from scipy.special import digamma, polygamma

    found = [(v, d) for v, d in variances if v > 0 and d > 0]
    if len(found) < MIN_PRIOR_FIGURES:
        return None
    e = [math.log(v) - float(digamma(d / 2)) + math.log(d / 2) for v, d in found]
    mean = statistics.fmean(e)
    excess = statistics.variance(e) - statistics.fmean(float(polygamma(1, d / 2)) for _, d in found)
    df = MAX_PRIOR_DF if excess <= 0 else min(MAX_PRIOR_DF, 2 * _trigamma_inverse(excess))
    variance = math.exp(mean + float(digamma(df / 2)) - math.log(df / 2))
    return VariancePrior(variance, df)


# From this many replicates a side, each side is summarised by its 20 % trimmed mean and the
# test is Yuen's (1974) trimmed t: now and then one replicate process in a dozen or two runs an
# input 1.5-2x slower (where its buffers or kernels landed), and such a value inflates a plain
# t-test's variance more than it moves a trimmed mean. Below it trimming leaves too few values;
# lab/reports/replicate-rules.md compares the tests on twin builds.
TRIMMED_FROM = 10
TRIM_FRACTION = 0.2


@dataclasses.dataclass(frozen=True)
class ReplicateSide:
    """One build's replicates of a figure as the replicate test reads them (log values)."""

    centre: float  # the mean; the trimmed mean when trimmed
    variance: float  # per replicate: the (winsorized) variance, scaled to the centre's
    size: int  # the values the centre averages (h)

    @classmethod
    def of(cls, values: Sequence[float], trimmed: bool) -> ReplicateSide:
        """`values` summarised: trimmed at `TRIM_FRACTION` each end, the variance winsorized at
        the same points, (n - 1) s_w^2 / (h - 1), so that variance / h is the squared standard
        error of the trimmed mean (Yuen); untrimmed: the mean and the sample variance."""
        ordered, n = sorted(values), len(values)
        cut = int(TRIM_FRACTION * n) if trimmed else 0
        kept = ordered[cut : n - cut]
        winsorized = [kept[0]] * cut + kept + [kept[-1]] * cut
        return cls(
            statistics.fmean(kept), (n - 1) * statistics.variance(winsorized) / (len(kept) - 1), len(kept)
        )


def replicate_sides(before: Sequence[float], after: Sequence[float]) -> tuple[ReplicateSide, ReplicateSide]:
    """Both sides, trimmed where each has `TRIMMED_FROM` replicates."""
    trimmed = min(len(before), len(after)) >= TRIMMED_FROM
    return ReplicateSide.of(before, trimmed), ReplicateSide.of(after, trimmed)


def pooled_of(a: ReplicateSide, b: ReplicateSide) -> tuple[float, int]:
    """Two summarised sides' pooled variance per replicate, and its degrees of freedom."""
    df = a.size + b.size - 2
    return ((a.size - 1) * a.variance + (b.size - 1) * b.variance) / df, df


def pooled_variance(before: Sequence[float], after: Sequence[float]) -> tuple[float, int]:
    """The two sides' pooled variance per replicate as the replicate test reads it
    (`replicate_sides`), and its degrees of freedom."""
    return pooled_of(*replicate_sides(before, after))


def replicate_test(
    before: Sequence[float], after: Sequence[float], prior: VariancePrior | None = None
) -> RoundsTest | None:
    """The t-test of `after`'s replicates (log values) against `before`'s: of their means, or of
    their trimmed means from `TRIMMED_FROM` a side (`replicate_sides`); its variance moderated by
    `prior` where there is one. None when a side has fewer than `MIN_REPLICATES`."""
    if min(len(before), len(after)) < MIN_REPLICATES:
        return None
    a, b = replicate_sides(before, after)
    variance, df = pooled_of(a, b)
    if prior is not None:
        variance = (prior.df * prior.variance + df * variance) / (prior.df + df)
        df = df + prior.df
    se = math.sqrt(variance * (1 / a.size + 1 / b.size))
    return RoundsTest(b.centre - a.centre, se, df, len(before), len(after), a.size, b.size)
