"""Shifts of the environment that move many wall times at once, and what the gate knows about
noise when it compares one pair of builds (`PairNoise`).

A machine shared with other tenants moves every wall time of a stretch of time alike: a build
measured in one stretch and its base in another differ by the machine's move as well as the
build's. The gate looks for such shifts between base and head (`between_shift`: most wall times
whose instruction count did not move moved the same way), within a build's own run (its later
rounds against its earlier ones, `round_drifts`), and in the samples' spread (`spread_shift`).
Where the two builds were measured interleaved (round k of each, then round k+1), the machine
cannot have moved between them: a shift common to their wall times is then the build's
(`PairNoise.build_wide`), reported once and judged figure by figure.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence

from benchkit.history.results.read import ResultSet
from benchkit.names import Metric, MetricKind
from benchkit.report.gate.noise import (
    MIN_SAMPLES,
    CompileSpread,
    HistoryNoise,
    Key,
    compile_spread,
    count_move,
    log_ratio,
    replicate_priors,
    rounds_shift,
    rounds_test,
)
from benchkit.stats import (
    MEDIAN_EFFICIENCY,
    VariancePrior,
    median_shift_p,
    robust_sigma,
    sign_test_p,
    z_two_sided,
)

SHIFT_P = 0.001  # sign test across benchmarks: how lopsided a common shift must be
SPREAD_FACTOR = 3.0  # median spread ratio that marks a disturbed machine (see `spread_shift`)
MIN_SPREAD_CASES = 5


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
    interval: tuple[float, float] = (math.nan, math.nan)  # of `factor`, at `SHIFT_P` two-sided

    def short(self) -> str:
        if self.kind == "spread":
            return f"disturbed machine {self.where} (samples ×{self.factor:.1f} more spread)"
        return f"environment shift of ×{self.factor:.2f} {self.where}"

    def describe_build_wide(self) -> str:
        """`describe` for a shift measured interleaved: the build's change, not the machine's."""
        n = self.n_up + self.n_down
        way = "slower" if self.n_up >= self.n_down else "faster"
        low, high = self.interval
        return (
            f"build-wide change of ×{self.factor:.3f} (99.9 % interval ×{low:.3f} to ×{high:.3f}) "
            f"{self.where}: {max(self.n_up, self.n_down)} of {n} wall times whose instruction count "
            f"did not move were {way} ({_p_text(self.p)}); both builds were measured interleaved, so "
            "this is the build's (compiler flags, BLAS or OpenMP, code layout), not the machine's, "
            "and each wall time is judged by its own test"
        )

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


def _p_text(p: float) -> str:
    return f"p = {p:.1g}" if p > 0 else "p < 1e-300"


def spread_shift(base: ResultSet, head: ResultSet, metric_of: Callable[[str], MetricKind]) -> EnvShift | None:
    """One side's wall-time samples far more spread than the other's, for most benchmarks at
    once: a disturbed machine (other processes competing for the cores), whose benchmarks
    each move by their own factor, so no common level shift shows. SPREAD_FACTOR lies between the
    spread ratios of identical builds and those of a build measured with busy loops on every
    core, as `lab/bench_verdicts.py` measures them."""
    ratios = []
    for key, after in head.measurements.items():
        before = base.measurements.get(key)
        if metric_of(key[0]) != MetricKind.WALL_TIME or before is None:
            continue
        a, b = before.log_samples, after.log_samples
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
    spread = robust_sigma(shifts) or 0.0
    half = z_two_sided(SHIFT_P) * MEDIAN_EFFICIENCY * spread / math.sqrt(len(shifts))
    interval = (math.exp(middle - half), math.exp(middle + half))
    return EnvShift(where, math.exp(middle), ups, downs, p, interval=interval)


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
        d = log_ratio(before, after)
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
    # Both builds' wall times were measured in one interleaved run (round k of each, then round
    # k+1): the machine cannot have moved between them, so a shift common to their wall times
    # is the build's (`build_wide`), and the wall times are judged, not explained away.
    interleaved: bool = False
    # Per operator timing metric, its replicates' variance over the pair's figures (`replicate_priors`).
    replicate_priors: Mapping[Metric, VariancePrior] = dataclasses.field(default_factory=dict)
    compile_spread: CompileSpread | None = None  # of the pair's compile times (`compile_spread`)

    @property
    def build_wide(self) -> EnvShift | None:
        """A shift between base and head of most wall times, measured interleaved: the build's."""
        return self.between if self.interleaved else None

    @property
    def environment(self) -> EnvShift | None:
        """A shift between base and head that the machine may have made (not interleaved)."""
        return None if self.interleaved else self.between

    @property
    def shifts(self) -> tuple[EnvShift, ...]:
        """The environment's shifts (a build-wide change measured interleaved is not one)."""
        found = (self.environment, *self.rounds, self.unshared)
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
    interleaved: bool = False,
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
    unshared = unshared_drift(base_drifts, head_drifts)
    priors = replicate_priors(base, head)
    spread = compile_spread(base, head)
    return PairNoise(history, between, rounds, moved, unshared, interleaved, priors, spread)
