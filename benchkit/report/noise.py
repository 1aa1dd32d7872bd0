"""How noisy each benchmark is, estimated from what asv recorded, and shifts of the
environment that move many wall times at once.

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
  pairs that ran the same kernel, when both recorded it (`benchkit.report.kernels`); a wall
  time short of pairs gets the machine's, pooled) and, for
  instruction counts, the Callgrind **prior**. A wall time's own samples are no source:
  within one process they understate the noise between processes.

The estimate becomes the minimum detectable change (`Noise.mdc`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.names import BenchmarkName, Metric, MetricKind
from benchkit.report.kernels import kernel_changed
from benchkit.stats import (
    ALPHA,
    CORROBORATED_ALPHA,
    MIN_ROUNDS,
    RoundsTest,
    corroborated,
    fast_level,
    fast_level_test,
    log_samples,
    median_shift_p,
    minimum_detectable_change,
    robust_sigma,
    round_values,
    rounds_alpha,
    sign_test_p,
    z_two_sided,
)

MIN_SAMPLES = 5  # per side, for a within-run spread
MIN_PAIRS = 4  # consecutive pairs in the history, for a history spread
MIN_POOLED_PAIRS = 20  # pairs of all wall times together, for the machine's spread
# A prior a little above the run-to-run spread of one build's Callgrind counts
# (`scripts/bench_callgrind.py` measures it), so only a noisier history (e.g.
# allocator-dependent counts) widens it.
INSTRUCTIONS_SIGMA = 1e-4
SHIFT_P = 0.001  # sign test across benchmarks: how lopsided a common shift must be
SPREAD_FACTOR = 3.0  # median spread ratio that marks a disturbed machine (see `spread_shift`)
MIN_SPREAD_CASES = 5
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


def counts_name(name: str) -> str:
    """The instruction-count benchmark of the same case as `name`."""
    return str(BenchmarkName.parse(name).with_metric(Metric.INSTRUCTIONS))


def _log_ratio(before: Measurement | None, after: Measurement | None) -> float | None:
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
    d = _log_ratio(base.measurements.get(other), head.measurements.get(other))
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

    @property
    def mdc(self) -> float | None:
        return None if self.sigma is None else minimum_detectable_change(self.sigma, self.critical)

    @property
    def by_rounds(self) -> bool:
        """Judged by the rounds test (its own change estimate and test), not asv's values."""
        return self.change is not None

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
            d = _log_ratio(a.measurements.get(key), after)
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
    pooled = [d for key, values in diffs.items() if metric_of(key[0]) == MetricKind.WALL_TIME for d in values]
    machine = robust_sigma(pooled, center=0.0) if len(pooled) >= MIN_POOLED_PAIRS else None
    if machine is not None:
        for key in diffs:
            if metric_of(key[0]) == MetricKind.WALL_TIME and key not in out:
                out[key] = HistoryNoise(machine, len(pooled), "machine's wall-time history")
    return out


def rounds_shift(m: Measurement) -> tuple[float, float] | None:
    """(log shift of the later rounds against the earlier ones, its standard error) of one build
    with `MIN_ROUNDS` or more rounds: the later half of the processes against the earlier half
    (the rounds test; asv records the rounds in the order it ran them). None with fewer rounds,
    or too few of a half in its fast band."""
    values = round_values(m.samples, m.per_round)
    if values is None or len(values) < MIN_ROUNDS:
        return None
    half = len(values) // 2
    test = fast_level_test(values[:half], values[half:])
    return None if test is None else (test.change, test.se)


def _level(m: Measurement) -> tuple[float, float | None] | None:
    values = round_values(m.samples, m.per_round)
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
    a, b = round_values(before.samples, before.per_round), round_values(after.samples, after.per_round)
    if a is None or b is None or min(len(a), len(b)) < MIN_ROUNDS:
        return None
    test = fast_level_test(a, b)
    return test if test is not None and test.se > 0 else None


def estimate(
    metric: MetricKind,
    before: Measurement,
    after: Measurement,
    history: HistoryNoise | None,
    count_move: int | None = None,
) -> Noise:
    """The noise of one comparison: for a wall time with `MIN_ROUNDS` rounds a side, the rounds
    test; otherwise the largest of the history's spread and (for counts) Callgrind's prior.

    A wall time's samples within one process understate how far two processes differ, so
    without enough rounds a wall time is judged against its history only. `count_move`: which
    way the case's instruction count moved (`count_move`); a rounds test of a change that way
    rejects at `benchkit.stats.CORROBORATED_ALPHA`."""
    if metric == MetricKind.WALL_TIME:
        test = rounds_test(before, after)
        if test is not None:
            rounds = f"{test.n_before}+{test.n_after}"
            fast = f"{test.fast_before}+{test.fast_after}"
            basis = f"rounds: {rounds} processes, {fast} at the fast level, Welch's test"
            if corroborated(test.change, count_move):
                basis += f" at α = {CORROBORATED_ALPHA:g}, the way the instruction count moved"
            alpha = rounds_alpha(test.change, count_move)
            return Noise(test.se, basis, test.critical(alpha), test.change, rounds)
    sources: list[tuple[float, str]] = []
    if history is not None:
        sources.append((history.sigma, f"{history.source}: {history.pairs} pairs"))
    if metric == MetricKind.INSTRUCTIONS:
        sources.append((INSTRUCTIONS_SIGMA, "Callgrind prior"))
    if not sources:
        if metric == MetricKind.WALL_TIME and before.samples and after.samples:
            return Noise(None, f"fewer than {MIN_ROUNDS} rounds a side and under {MIN_PAIRS} history pairs")
        return Noise(None, f"under {MIN_PAIRS} history pairs")  # one number per build: no rounds
    sources.sort(key=lambda s: -s[0])
    basis = sources[0][1] + "".join(f"; {label}" for _, label in sources[1:])
    return Noise(sources[0][0], basis)


# --------------------------------------------------------------------- environment shifts


@dataclasses.dataclass(frozen=True)
class EnvShift:
    """Many wall times moved the same way at once, or all got much noisier: the machine
    changed, not torch."""

    where: str  # "between base and head", "within base abc12345 (later rounds against earlier ones)"
    factor: float  # median ratio of the levels (kind "level") or of the spreads ("spread")
    n_up: int
    n_down: int
    p: float
    kind: str = "level"

    def short(self) -> str:
        if self.kind == "spread":
            return f"disturbed machine {self.where} (samples ×{self.factor:.1f} more spread)"
        return f"environment shift of ×{self.factor:.2f} {self.where}"

    def describe(self) -> str:
        n = self.n_up + self.n_down
        if self.kind == "spread":
            return (
                f"disturbed machine {self.where}: wall-time samples ×{self.factor:.1f} more spread "
                f"(median over {n} benchmarks; ×{SPREAD_FACTOR:g} or more marks a disturbed machine)"
            )
        most = max(self.n_up, self.n_down)
        way = "slower" if self.n_up >= self.n_down else "faster"
        return (
            f"environment shift of ×{self.factor:.2f} {self.where}: {most} of {n} wall times "
            f"moved {way} (p = {self.p:.1g})"
        )


def spread_shift(base: ResultSet, head: ResultSet, metric_of: Callable[[str], MetricKind]) -> EnvShift | None:
    """One side's wall-time samples far more spread than the other's, for most benchmarks at
    once: a disturbed machine (other processes competing for the cores), whose benchmarks
    each move by their own factor, so no common level shift shows. SPREAD_FACTOR lies between the
    spread ratios of identical builds and those of a build measured with busy loops on every
    core, as `scripts/bench_verdicts.py` measures them."""
    ratios = []
    for key, after in head.measurements.items():
        before = base.measurements.get(key)
        if metric_of(key[0]) != MetricKind.WALL_TIME or before is None:
            continue
        a, b = log_samples(before.samples), log_samples(after.samples)
        if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
            continue
        sa, sb = robust_sigma(a), robust_sigma(b)
        if sa and sb:
            ratios.append(math.log(sb / sa))
    if len(ratios) < MIN_SPREAD_CASES:
        return None
    middle = statistics.median(ratios)
    if abs(middle) < math.log(SPREAD_FACTOR):
        return None
    side = "head" if middle > 0 else "base"
    n_up = sum(1 for r in ratios if r > 0)
    return EnvShift(f"on {side}", math.exp(abs(middle)), n_up, len(ratios) - n_up, 1.0, kind="spread")


def common_shift(shifts: Sequence[float], noise: Sequence[float], where: str) -> EnvShift | None:
    """A shift shared by many benchmarks: p <= SHIFT_P by the sign test (most moved the same
    way) or by the median test (the median moved far beyond the spread across benchmarks),
    and the median shift beyond the median benchmark's noise (so a consistent but
    negligible drift is not reported)."""
    # A case that moved less than its own noise (`noise`, aligned with `shifts`: the rounds
    # test's standard error, 0 where unknown) is a tie for the sign test: on a busy machine a
    # few cases barely move and would otherwise hide how lopsided the rest is.
    ties = list(noise) if len(noise) == len(shifts) else [0.0] * len(shifts)
    ups = sum(1 for s, t in zip(shifts, ties, strict=True) if s > t)
    downs = sum(1 for s, t in zip(shifts, ties, strict=True) if s < -t)
    p = min(sign_test_p(ups, downs), median_shift_p(shifts))
    if p > SHIFT_P:
        return None
    middle = statistics.median(shifts)
    known = [n for n in noise if n > 0]
    if known and abs(middle) <= statistics.median(known):
        return None
    return EnvShift(where, math.exp(middle), ups, downs, p)


def round_drifts(
    result_set: ResultSet, metric_of: Callable[[str], MetricKind]
) -> dict[Key, tuple[float, float]]:
    """Per wall-time benchmark of one build: its later rounds against its earlier ones
    (`rounds_shift`: log shift, standard error)."""
    drifts = {}
    for key, m in result_set.measurements.items():
        if metric_of(key[0]) == MetricKind.WALL_TIME and m.has_number:
            found = rounds_shift(m)
            if found is not None:
                drifts[key] = found
    return drifts


def build_shift(drifts: Mapping[Key, tuple[float, float]], label: str) -> EnvShift | None:
    """Most wall-time benchmarks of one build drifted the same way (`round_drifts`)."""
    if not drifts:
        return None
    shifts, noise = zip(*drifts.values(), strict=True)
    return common_shift(shifts, noise, f"within {label} (later rounds against earlier ones)")


def unshared_drift(
    base: Mapping[Key, tuple[float, float]], head: Mapping[Key, tuple[float, float]]
) -> EnvShift | None:
    """A drift within a run that the two builds did not share: per wall-time benchmark, head's
    later rounds against its earlier ones minus the same for base (`round_drifts`). Builds
    whose rounds asv interleaved in one run drift alike (the difference is noise) and a
    comparison of their rounds holds the drift in its spread; a build measured in a run of its
    own, e.g. with the machine busy for part of it, does not share it, and its rounds are not
    the build's."""
    both = [key for key in head if key in base]
    if not both:
        return None
    shifts = [head[key][0] - base[key][0] for key in both]
    noise = [math.hypot(head[key][1], base[key][1]) for key in both]
    return common_shift(shifts, noise, "within head's run, not shared by base's (head's drift over base's)")


def between_shift(
    base: ResultSet, head: ResultSet, metric_of: Callable[[str], MetricKind], count_threshold: float
) -> EnvShift | None:
    """Wall-time changes of cases whose instruction counts did not move (issue 17, (b)): each
    the change the gate judges, the rounds test's where both sides have the rounds, else the
    ratio of asv's values."""
    shifts, noise = [], []
    for key, after in head.measurements.items():
        if metric_of(key[0]) != MetricKind.WALL_TIME or count_move(base, head, key, count_threshold) != 0:
            continue
        before = base.measurements.get(key)
        d = _log_ratio(before, after)
        if d is None:
            continue
        assert before is not None
        test = rounds_test(before, after)
        shifts.append(d if test is None else test.change)
        noise.append(test.se if test is not None else 0.0)
    return common_shift(shifts, noise, "between base and head") if shifts else None


@dataclasses.dataclass(frozen=True)
class PairNoise:
    """What the gate knows about noise when it compares one BASE/HEAD pair."""

    history: Mapping[Key, HistoryNoise] = dataclasses.field(default_factory=dict)
    between: EnvShift | None = None
    rounds: tuple[EnvShift, ...] = ()  # builds whose earlier and later rounds disagree
    count_moves: Mapping[Key, int | None] = dataclasses.field(default_factory=dict)  # `count_move`
    unshared: EnvShift | None = None  # a drift within one build's run only (`unshared_drift`)

    @property
    def shifts(self) -> tuple[EnvShift, ...]:
        found = (self.between, *self.rounds, self.unshared)
        return tuple(s for s in found if s is not None)

    def drifts(self, by_rounds: bool) -> tuple[EnvShift, ...]:
        """The drifts within runs that make a wall-time comparison the machine's: for one that
        compared the builds' rounds, only a drift the runs did not share (`unshared_drift`)."""
        if by_rounds:
            return (self.unshared,) if self.unshared else ()
        return self.rounds


def pair_noise(
    base: ResultSet,
    head: ResultSet,
    history: Mapping[Key, HistoryNoise],
    metric_of: Callable[[str], MetricKind],
    count_threshold: float,
) -> PairNoise:
    base_drifts, head_drifts = round_drifts(base, metric_of), round_drifts(head, metric_of)
    rounds = tuple(
        s
        for s in (
            build_shift(base_drifts, f"base {base.commit[:8]}"),
            build_shift(head_drifts, f"head {head.commit[:8]}"),
        )
        if s is not None
    )
    moved = {
        key: count_move(base, head, key, count_threshold)
        for key in head.measurements
        if metric_of(key[0]) == MetricKind.WALL_TIME
    }
    between = between_shift(base, head, metric_of, count_threshold) or spread_shift(base, head, metric_of)
    return PairNoise(history, between, rounds, moved, unshared_drift(base_drifts, head_drifts))
