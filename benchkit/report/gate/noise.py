"""How noisy each benchmark is, estimated from what asv recorded (the environment's shifts,
which move many wall times at once, are `benchkit.report.gate.shifts`).

A fixed threshold (×1.10 for wall time) says nothing about whether a benchmark's
run-to-run noise lets such a change be seen: on a shared machine two runs of the *same*
build can differ by +40-90 % while the samples inside each run agree within 1-2 %.
So each benchmark gets a noise estimate ``sigma``, the standard deviation of
``log(after / before)`` between two runs of one build:

* a wall time with at least `benchkit.stats.MIN_ROUNDS` rounds a side (benchkit's suite runs
  12) is judged by its rounds: each round is a process, the processes are the replicates,
  and Welch's test between the two builds' fast levels (`benchkit.stats.fast_level_test`:
  the rounds a shared machine's bursts did not slow) gives the change, its standard error
  and the critical value, from this very comparison;
* otherwise the largest known of: the **history** (consecutive measured commits are
  de-facto A/A pairs for a case whose instruction count did not move between them, for
  wall time, or robustly all consecutive pairs for instructions and ratios: a MAD ignores
  the few real steps; an operator figure that depends on the generated kernel counts only
  pairs that ran the same kernel, when both recorded it (`benchkit.report.gate.kernels`); a wall
  time short of pairs gets the machine's, pooled) and, for
  instruction counts, the Callgrind **prior**. A wall time's own samples are no source:
  within one process they understate the noise between processes.

The estimate becomes the minimum detectable change (`Noise.mdc`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import statistics
from collections.abc import Callable, Sequence

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.names import BenchmarkName, Metric, MetricKind, Suite
from benchkit.report.gate.kernels import kernel_changed
from benchkit.rounds_policy import CORROBORATED_ALPHA, corroborated, rounds_alpha
from benchkit.stats import (
    ALPHA,
    MIN_REPLICATES,
    MIN_ROUNDS,
    RoundsTest,
    VariancePrior,
    fast_level,
    fast_level_test,
    minimum_detectable_change,
    pooled_variance,
    replicate_test,
    robust_sigma,
    t_critical,
    t_two_sided_p,
    variance_prior,
    z_two_sided,
)

MIN_SAMPLES = 5  # per side, for a within-run spread
# An operator input's cold compile time: measured in its build's own run (not interleaved), by
# `benchkit main` in two processes a build (`benchkit.rounds_policy.MAIN_RUN_COMPILES`).
# Between two cold compiles of one build in fresh processes its log ratio spreads by a robust
# sigma of 0.018-0.033 over the 51 inputs of the default set, but single inputs moved by up to
# x1.35, 16 sigma (lab/reports/compile-noise.md): a normal test would flag an input in most
# such pairs. So a compile time's noise is a Student t with COMPILE_TAIL_DF degrees of freedom
# scaled by COMPILE_SIGMA, or where larger by the spread between the builds' own replicates
# (without them the pair's spread over its inputs, real changes of single inputs included:
# `compile_spread`, MIN_COMPILE_INPUTS) or the history's: it flags, and its MDC is, only
# changes far beyond those tails (x1.47 at sigma 0.03 and alpha 0.001). The interval a row
# shows and an interval's "unchanged" vouches for is the normal core's
# (`Noise.interval_critical`); single inputs of one build left it 4 times in the 204 measured.
COMPILE_SIGMA = 0.03
COMPILE_TAIL_DF = 3.0
MIN_COMPILE_INPUTS = 10
MIN_PAIRS = 4  # consecutive pairs in the history, for a history spread
MIN_POOLED_PAIRS = 20  # pairs of all wall times together, for the machine's spread
# A prior a little above the run-to-run spread of one build's Callgrind counts
# (`lab/bench_callgrind.py` measures it), so only a noisier history (e.g.
# allocator-dependent counts) widens it.
INSTRUCTIONS_SIGMA = 1e-4
Key = tuple[str, str]  # (benchmark name with params, asv environment)


@dataclasses.dataclass(frozen=True)
class HistoryNoise:
    """A benchmark's noise from pairs of consecutive builds of a history."""

    sigma: float  # of the log ratio of a pair
    pairs: int
    source: str  # which history: the benchmark's own, or the machine's pooled wall times


def case_of(name: str) -> tuple[str, str]:
    """(case, method): ``m.Class.time_wall(p)`` -> (``m.Class(p)``, ``time_wall``).

    A case's instruction count and wall time share the case and differ in the method.
    """
    parsed = BenchmarkName.parse(name)
    return parsed.case, parsed.method


@functools.lru_cache(maxsize=1 << 16)
def counts_name(name: str) -> str:
    """The instruction-count benchmark of the same case as `name`."""
    return str(BenchmarkName.parse(name).with_metric(Metric.INSTRUCTIONS))


def log_ratio(before: Measurement | None, after: Measurement | None) -> float | None:
    if before is None or after is None or not (before.has_number and after.has_number):
        return None
    if before.version and after.version and before.version != after.version:
        return None
    assert before.value is not None and after.value is not None
    if before.value <= 0 or after.value <= 0:
        return None
    return math.log(after.value / before.value)


def count_move(base: ResultSet, head: ResultSet, key: Key, count_threshold: float) -> int | None:
    """Which way the instruction count of `key`'s case moved: +1 up, -1 down, 0 not beyond the
    threshold; None: not known (no count on a side)."""
    name, env = key
    other = (counts_name(name), env)
    d = log_ratio(base.measurements.get(other), head.measurements.get(other))
    if d is None:
        return None
    return 0 if abs(d) <= math.log1p(count_threshold) else (1 if d > 0 else -1)


# --------------------------------------------------------------------- per benchmark


Z_ALPHA = z_two_sided(ALPHA)


@dataclasses.dataclass(frozen=True)
class Noise:
    """One benchmark's noise for one comparison; `sigma` None: too little data to estimate it.

    `sigma` is the standard error of the log change; a change beyond `critical` × `sigma`
    is detected (the normal z at `ALPHA`, or Welch's t at `rounds_alpha` for a comparison of rounds, whose
    `change` then is the log change that test measured instead of asv's two values)."""

    sigma: float | None
    basis: str  # which source set sigma, and the others, for the report
    critical: float = Z_ALPHA
    change: float | None = None
    rounds: str = ""  # a rounds test's processes, "12+12"; empty for the other sources
    df: float | None = None  # the test's degrees of freedom (Welch's); None: the normal z
    alpha: float = ALPHA  # the test's two-sided false-alarm rate per figure, as `critical` says
    # Noise with heavy tails (a compile time): the critical of the normal core, which sets the
    # interval a row shows and an interval's "unchanged" vouches for; `critical` and `df` still
    # set the MDC, the smallest change flagged. None: `critical` for both.
    interval_critical: float | None = None
    # Measured outside the wall-time rounds' runs (a compile time, in its build's compiling
    # processes): a drift within those runs says nothing about it; its own spread does.
    outside_rounds: bool = False

    @property
    def half_width(self) -> float | None:
        """Half the judged change's interval (log scale); None where the noise is unknown."""
        critical = self.critical if self.interval_critical is None else self.interval_critical
        return None if self.sigma is None else critical * self.sigma

    @property
    def mdc(self) -> float | None:
        return None if self.sigma is None else minimum_detectable_change(self.sigma, self.critical)

    @property
    def by_rounds(self) -> bool:
        """Judged by the rounds test (its own change estimate and test), not asv's values."""
        return self.change is not None

    def p_value(self, log_ratio: float) -> float | None:
        """Two-sided p of `log_ratio` under this noise (Welch's t with `df`, else the normal);
        None where the noise is unknown."""
        if self.sigma is None:
            return None
        if self.sigma <= 0:
            return 0.0 if log_ratio else 1.0
        score = abs(log_ratio) / self.sigma
        if self.df is None:
            from statistics import NormalDist

            return 2 * (1 - NormalDist().cdf(score))
        return t_two_sided_p(score, self.df)

    def detects(self, log_ratio: float) -> bool:
        # No change is never "beyond noise", even where the noise is zero.
        return self.sigma is not None and log_ratio != 0 and abs(log_ratio) >= self.critical * self.sigma


def history_sigmas(
    history: Sequence[ResultSet], metric_of: Callable[[str], MetricKind], count_threshold: float
) -> dict[Key, HistoryNoise]:
    """(sigma, pairs, source) per benchmark from consecutive commits of `history` (oldest first).

    For wall time a pair counts only when the case's instruction count did not move
    (a de-facto A/A pair); a wall time without a count uses every pair. For an operator
    figure of the generated kernel a pair counts only when both builds ran the same kernel
    (or either did not record it). A wall time with
    fewer than MIN_PAIRS pairs of its own gets the machine's: the pooled spread of every
    wall time's pairs. Between two builds a benchmark moves by more than its samples and
    rounds show (each build is another process, another memory layout: single benchmarks of
    identical builds can differ by several times their sample noise),
    and only pairs of builds show that.
    """
    diffs: dict[Key, list[float]] = {}
    for a, b in itertools.pairwise(history):
        for key, after in b.measurements.items():
            d = log_ratio(a.measurements.get(key), after)
            if d is None:
                continue
            if metric_of(key[0]) == MetricKind.WALL_TIME and count_move(a, b, key, count_threshold):
                continue
            if kernel_changed(a, b, *key):  # a new kernel: no A/A pair for what it generated
                continue
            diffs.setdefault(key, []).append(d)
    out = {}
    for key, values in diffs.items():
        sigma = robust_sigma(values, center=0.0)
        if sigma is not None and len(values) >= MIN_PAIRS:
            out[key] = HistoryNoise(sigma, len(values), "history")
    # The machine's spread is that of the cases' wall times (a process of a case, minutes apart):
    # an operator's timings and compile times are measured otherwise and spread otherwise.
    walls = [key for key in diffs if metric_of(key[0]) == MetricKind.WALL_TIME and _case_wall_time(key[0])]
    pooled = [d for key in walls for d in diffs[key]]
    machine = robust_sigma(pooled, center=0.0) if len(pooled) >= MIN_POOLED_PAIRS else None
    if machine is not None:
        for key in walls:
            if key not in out:
                out[key] = HistoryNoise(machine, len(pooled), "machine's wall-time history")
    return out


def _case_wall_time(name: str) -> bool:
    """A wall time of a case (or a user's own timing), not an operator's timing or compile time."""
    metric = BenchmarkName.parse(name).metric
    return metric is None or metric.suite is not Suite.OPERATORS


def rounds_shift(m: Measurement) -> tuple[float, float] | None:
    """(log shift of the later rounds against the earlier ones, its standard error) of one build
    with `MIN_ROUNDS` or more rounds: the later half of the processes against the earlier half
    (the rounds test; asv records the rounds in the order it ran them). None with fewer rounds,
    or too few of a half in its fast band."""
    values = m.round_logs
    if values is None or len(values) < MIN_ROUNDS:
        return None
    half = len(values) // 2
    test = fast_level_test(values[:half], values[half:])
    return None if test is None else (test.change, test.se)


def _level(m: Measurement) -> tuple[float, float | None] | None:
    values = m.round_logs
    return fast_level(values) if values is not None and len(values) >= MIN_ROUNDS else None


def value_sigma(m: Measurement) -> float | None:
    """The standard error of one build's wall time (log scale) from its own rounds, each round a
    process: of its fast level (`wall_level`). None with fewer than `MIN_ROUNDS` rounds or
    `MIN_FAST_ROUNDS` at the fast level. Between runs a wall time moves by more; this is a floor."""
    level = _level(m)
    return None if level is None else level[1]


def wall_level(m: Measurement) -> float | None:
    """A build's wall time (seconds) as a history judges it: the fast level of its rounds
    (`benchkit.stats.fast_level`: the rounds another tenant's bursts did not slow, even where
    they slowed all but two), with `MIN_ROUNDS` rounds; else asv's value."""
    if not m.has_number or m.value is None:
        return None
    level = _level(m)
    return m.value if level is None else math.exp(level[0])


def rounds_test(before: Measurement, after: Measurement) -> RoundsTest | None:
    """The rounds test between the two builds' fast levels, when each has `MIN_ROUNDS` rounds
    or more, `MIN_FAST_ROUNDS` of them in its fast band (`benchkit.stats.fast_level_test`)."""
    a, b = before.round_logs, after.round_logs
    if a is None or b is None or min(len(a), len(b)) < MIN_ROUNDS:
        return None
    test = fast_level_test(a, b)
    return test if test is not None and test.se > 0 else None


def replicated_metric(name: str) -> Metric | None:
    """The metric of a benchmark whose samples are replicates (`Metric.replicated`), else None."""
    metric = BenchmarkName.parse(name).metric
    return metric if metric is not None and metric.replicated else None


def replicate_priors(base: ResultSet, head: ResultSet) -> dict[Metric, VariancePrior]:
    """Per operator timing metric, the variance prior of its replicates over all of the pair's
    figures of that metric (`benchkit.stats.variance_prior`)."""
    variances: dict[Metric, list[tuple[float, int]]] = {}
    for key, after in head.measurements.items():
        metric, before = replicated_metric(key[0]), base.measurements.get(key)
        if metric is None or before is None:
            continue
        a, b = before.log_samples, after.log_samples
        if min(len(a), len(b)) >= MIN_REPLICATES:
            variances.setdefault(metric, []).append(pooled_variance(a, b))
    priors = {metric: variance_prior(found) for metric, found in variances.items()}
    return {metric: prior for metric, prior in priors.items() if prior is not None}


def replicates_noise(
    before: Measurement, after: Measurement, prior: VariancePrior | None = None
) -> Noise | None:
    """An operator timing judged by its replicates (`benchkit.stats.replicate_test`, its
    variance moderated by the metric's `prior`), at `ALPHA`; None when a side has fewer than
    `MIN_REPLICATES`."""
    test = replicate_test(before.log_samples, after.log_samples, prior)
    if test is None or test.se <= 0:
        return None
    rounds = f"{test.n_before}+{test.n_after}"
    basis = f"replicates: {rounds} timing processes, t-test"
    if prior is not None:
        basis += f", variance moderated by the metric's over its figures ({prior.df:.0f} df)"
    return Noise(test.se, basis, test.critical(ALPHA), test.change, rounds, test.df)


def estimate(
    metric: MetricKind,
    before: Measurement,
    after: Measurement,
    history: HistoryNoise | None,
    count_move: int | None = None,
    figure: Metric | None = None,
    prior: VariancePrior | None = None,
    compile_spread: CompileSpread | None = None,
) -> Noise:
    """The noise of one comparison: for a wall time with `MIN_ROUNDS` rounds a side, the rounds
    test; otherwise the largest of the history's spread and (for counts) Callgrind's prior.

    A wall time's samples within one process understate how far two processes differ, so
    without enough rounds a wall time is judged against its history only. `count_move`: which
    way the case's instruction count moved (`count_move`); a rounds test of a change that way
    rejects at `benchkit.rounds_policy.CORROBORATED_ALPHA`. `figure`: which of benchkit's metrics it is,
    if any: an operator timing whose samples are replicates (`Metric.replicated`) is judged by
    them where each side has `MIN_REPLICATES` (`replicates_noise`, moderated by `prior`); a
    compile's seconds by `compile_noise` (`compile_spread`: the pair's, `compile_spread`)."""
    if figure is not None and figure.replicated:
        found = replicates_noise(before, after, prior)
        if found is not None:
            return found
    elif figure is Metric.COMPILE_SECONDS:
        return compile_noise(history, compile_spread)
    elif metric == MetricKind.WALL_TIME:
        test = rounds_test(before, after)
        if test is not None:
            rounds = f"{test.n_before}+{test.n_after}"
            fast = f"{test.fast_before}+{test.fast_after}"
            basis = f"rounds: {rounds} processes, {fast} at the fast level, Welch's test"
            if corroborated(test.change, count_move):
                basis += f" at α = {CORROBORATED_ALPHA:g}, the way the instruction count moved"
            alpha = rounds_alpha(test.change, count_move)
            return Noise(test.se, basis, test.critical(alpha), test.change, rounds, test.df, alpha)
    sources: list[tuple[float, str, float | None]] = []  # sigma, label, degrees of freedom
    if history is not None:
        label = f"{history.source}: {history.pairs} pairs"
        sources.append((history.sigma, label, history_df(history.pairs)))
    if metric == MetricKind.INSTRUCTIONS:
        sources.append((INSTRUCTIONS_SIGMA, "Callgrind prior", None))
    if not sources:
        if metric == MetricKind.WALL_TIME and before.samples and after.samples:
            return Noise(None, f"fewer than {MIN_ROUNDS} rounds a side and under {MIN_PAIRS} history pairs")
        return Noise(None, f"under {MIN_PAIRS} history pairs")  # one number per build: no rounds
    sources.sort(key=lambda s: -s[0])
    sigma, _, df = sources[0]
    basis = "; ".join(label for _, label, _ in sources)
    critical = Z_ALPHA if df is None else t_critical(ALPHA, df)
    return Noise(sigma, basis, critical, df=df)


def history_df(pairs: int) -> float:
    """The degrees of freedom of a t-test whose sigma is a MAD of `pairs` A/A differences: a
    MAD is a noisy estimate, and a normal z on it flags identical builds far beyond α (3.6 % at
    α = 0.001 with 4 pairs, 0.8 % with 20). Simulated on Gaussian pairs, t with 0.45 pairs + 1
    degrees of freedom keeps α for 4 to 100 pairs."""
    return 0.45 * pairs + 1.0


@dataclasses.dataclass(frozen=True)
class CompileSpread:
    """How far a pair's compile times spread, and what that was measured on."""

    sigma: float
    source: str


def compile_spread(base: ResultSet, head: ResultSet) -> CompileSpread | None:
    """The spread of the log ratio of the pair's compile times: from the builds' own replicates
    where they have them, else from the pair's inputs. None with fewer than
    `MIN_COMPILE_INPUTS` values.

    Replicates (several processes compiling in one cache state): the robust sigma of the log
    ratio of an input's first two compiles in one build, each build's about its own median (the
    second process of a build may run in other weather than its first: a shift common to its
    inputs, not their noise), over the inputs of both builds, is that of two single compiles;
    divided by sqrt 2 where both builds' values are medians of two or more compiles (that of
    the ratio of two builds' means of two).
    Without them, the robust sigma of the pair's log ratios about their median: a change
    common to every input does not widen it, real changes of single inputs do."""
    within: list[float] = []  # each about its build's median
    replicated: list[bool] = []  # per build: most of its compile times are medians of several
    for side in (base, head):
        logs, counts = [], []
        for key, m in side.measurements.items():
            if BenchmarkName.parse(key[0]).metric is not Metric.COMPILE_SECONDS or not m.has_number:
                continue
            positive = [x for x in (m.samples or ()) if x > 0]
            counts.append(len(positive))
            if len(positive) >= 2:
                logs.append(math.log(positive[1] / positive[0]))
        if logs:
            middle = statistics.median(logs)
            within.extend(x - middle for x in logs)
        replicated.append(bool(counts) and statistics.median(counts) >= 2)
    if len(within) >= MIN_COMPILE_INPUTS and (sigma := robust_sigma(within, center=0.0)) is not None:
        both = all(replicated)
        source = f"its builds' replicates ({len(within)} pairs of compiles)"
        return CompileSpread(sigma / math.sqrt(2) if both else sigma, source)
    ratios = [
        d
        for key, after in head.measurements.items()
        if BenchmarkName.parse(key[0]).metric is Metric.COMPILE_SECONDS
        and (d := log_ratio(base.measurements.get(key), after)) is not None
    ]
    if len(ratios) >= MIN_COMPILE_INPUTS and (sigma := robust_sigma(ratios)) is not None:
        return CompileSpread(sigma, "the pair's spread over its inputs")
    return None


def compile_noise(history: HistoryNoise | None, spread: CompileSpread | None) -> Noise:
    """A compile time's noise (see `COMPILE_SIGMA`): the largest of the prior, the pair's
    spread (`compile_spread`) and the figure's history, under a t with `COMPILE_TAIL_DF`
    degrees of freedom for flags and the normal core for its interval."""
    sources = [(COMPILE_SIGMA, "cold-compile prior")]
    if spread is not None:
        sources.append((spread.sigma, spread.source))
    if history is not None:
        sources.append((history.sigma, f"{history.source}: {history.pairs} pairs"))
    sigma = max(s for s, _ in sources)
    basis = (
        "each build compiled in its own run (not interleaved); "
        + "; ".join(f"{label} σ {s:.2g}" for s, label in sources)
        + f"; flagged under heavy tails (t, {COMPILE_TAIL_DF:.0f} df)"
    )
    critical = t_critical(ALPHA, COMPILE_TAIL_DF)
    return Noise(sigma, basis, critical, df=COMPILE_TAIL_DF, interval_critical=Z_ALPHA, outside_rounds=True)
