"""One benchmark's verdict in three steps (`benchkit.report.gate.check.compare_one`):

1. **availability**: are both numbers there? A failed, skipped or missing side, or changed
   benchmark code, decides the verdict without any number (`availability`).
2. **noise**: what the metric's noise allows -- the noise estimate (`noise_of`) and the
   threshold it sets when the configured threshold is 0 (`threshold_of`).
3. **decision**: the change against the threshold and the noise (`decide`), and for a wall
   time against the environment's shifts (`environment_verdict`).

Each step returns a `Status` and the note that says why; docs/verdicts.md tabulates every
path as (metric, availability, noise, change) -> status, and tests/test_check_table.py runs
that table row by row.
"""

from __future__ import annotations

import dataclasses
import math

from benchkit.history.results.read import Measurement
from benchkit.names import BenchmarkName, MetricKind
from benchkit.report.gate.check_config import Override
from benchkit.report.gate.check_format import format_percent
from benchkit.report.gate.check_status import Status
from benchkit.report.gate.noise import Noise, estimate
from benchkit.report.gate.shifts import EnvShift, PairNoise

# A threshold of 0 in the config means "from the noise": the benchmark's minimum
# detectable change (MDC) at the stated false-positive rate is its threshold. Without a
# noise estimate the gate falls back to a fixed threshold (fail closed).
NOISE_FALLBACK_THRESHOLD = 0.10
# "Unchanged" vouches for an interval, not only for a test that found nothing: the change's
# interval must lie within ±UNCHANGED_MARGIN (a configured threshold: within it), else the
# verdict is can't tell, however small the estimate.
UNCHANGED_MARGIN = 0.15


@dataclasses.dataclass(frozen=True)
class Resolution:
    """What an "unchanged" needs: the change's interval within ±`margin`."""

    margin: float

    def reach(self, log_ratio: float, noise: Noise) -> float | None:
        """How far from no change the figure's verdict can vouch for (a fraction): the far end
        of the change's interval; None where it is unknown."""
        half = noise.half_width
        return None if half is None else math.expm1(abs(log_ratio) + half)

    def beyond(self, reach: float) -> str:
        """Why a figure that reaches `reach` is not unchanged, for its note."""
        reach_text, margin_text = format_percent(reach), format_percent(self.margin)
        return f"its interval reaches ±{reach_text}, unchanged needs ±{margin_text}"


CODE_CHANGED = "benchmark code changed between the two runs"
Key = tuple[str, str]
Judged = tuple[Status, str]  # a verdict and its note


def join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


# ------------------------------------------------------------------ 1. availability


def availability(
    before: Measurement | None, after: Measurement | None, override: Override | None
) -> Judged | None:
    """The verdict when the two numbers are not both there to compare; None when they are."""
    reason = override.reason if override is not None else ""
    if override is not None and override.ignore:
        return Status.IGNORED, reason
    if before is not None and before.has_number and after is None:
        return Status.MISSING_ON_HEAD, join("no result on head", reason)
    if before is None or after is None:
        return Status.NOT_COMPARED, f"only measured on {'base' if after is None else 'head'}"
    code_changed = bool(before.version and after.version and before.version != after.version)
    # A number lost on head counts even when the benchmark's code changed: that change may be the cause.
    lost_why = join(CODE_CHANGED if code_changed else "", reason)
    if after.failed:
        return (Status.STILL_FAILING, reason) if before.failed else (Status.NEWLY_FAILING, lost_why)
    if after.skipped and before.has_number:
        return Status.NEWLY_SKIPPED, lost_why
    if code_changed:
        return Status.NOT_COMPARED, CODE_CHANGED
    if before.failed:  # head has a number or is skipped (a failed head is handled above)
        if after.has_number:
            return Status.FIXED, reason
        return Status.NOT_COMPARED, "failed on base, skipped on head"
    if before.skipped or after.skipped:
        side = "both sides" if before.skipped and after.skipped else "base"
        return Status.NOT_COMPARED, f"skipped on {side}"
    return None


# ------------------------------------------------------------------ 2. noise


def noise_of(
    metric: MetricKind, key: Key, before: Measurement, after: Measurement, pair: PairNoise | None
) -> Noise | None:
    """The comparison's noise (`benchkit.report.gate.noise.estimate`); None without a log-ratio."""
    assert before.value is not None and after.value is not None
    if before.value <= 0 or after.value <= 0:
        return None
    figure = BenchmarkName.parse(key[0]).metric
    if pair is None:
        return estimate(metric, before, after, None, figure=figure)
    history, moved = pair.history.get(key), pair.count_moves.get(key)
    prior = pair.replicate_priors.get(figure) if figure is not None else None
    return estimate(metric, before, after, history, moved, figure, prior, pair.compile_spread)


def threshold_of(configured: float, noise: Noise | None) -> tuple[float, Resolution]:
    """(threshold, what "unchanged" needs) for a configured threshold, the interval within it;
    0 means the benchmark's own MDC (or the fallback when its noise is unknown) and the
    interval within `UNCHANGED_MARGIN`."""
    if configured != 0:
        return configured, Resolution(configured)
    mdc = noise.mdc if noise is not None else None
    threshold = mdc if mdc is not None else NOISE_FALLBACK_THRESHOLD
    return threshold, Resolution(UNCHANGED_MARGIN)


# ------------------------------------------------------------------ 3. decision


def decide(
    metric: MetricKind,
    key: Key,
    before: Measurement,
    after: Measurement,
    threshold: float,
    resolution: Resolution,
    noise: Noise | None,
    pair: PairNoise | None,
) -> Judged:
    """The verdict of two numbers: their change against the threshold and the noise."""
    assert before.value is not None and after.value is not None
    if noise is None:  # no log-ratio: the threshold alone
        worse = after.value > before.value * (1 + threshold)
        better = after.value * (1 + threshold) < before.value
        return (Status.REGRESSION if worse else Status.IMPROVEMENT if better else Status.UNCHANGED), ""
    # The change judged: a rounds test's own estimate, else the ratio of asv's two values.
    log_ratio = noise.change if noise.change is not None else math.log(after.value / before.value)
    if abs(log_ratio) <= math.log1p(threshold):
        return _within_threshold(metric, key, log_ratio, resolution, noise, pair)
    if noise.sigma is not None and not noise.detects(log_ratio):
        return Status.CANT_TELL, f"change within noise: {_mdc_text(noise)}"
    # Beyond the threshold and the noise; with the noise unknown the gate fails closed.
    status = Status.REGRESSION if log_ratio > 0 else Status.IMPROVEMENT
    why = f"noise unknown: {noise.basis}" if noise.sigma is None else ""
    if metric == MetricKind.WALL_TIME and pair is not None:
        return environment_verdict(status, key, noise, pair, why)
    return status, why


def _within_threshold(
    metric: MetricKind,
    key: Key,
    log_ratio: float,
    resolution: Resolution,
    noise: Noise,
    pair: PairNoise | None,
) -> Judged:
    """No change beyond the threshold: unchanged only where a change that size would show."""
    if noise.sigma is None:
        return Status.INSUFFICIENT_DATA, f"noise unknown: {noise.basis}"
    shifted = shift_of(pair, noise) if metric == MetricKind.WALL_TIME else ""
    if shifted:  # "no change" measured on a moving machine says nothing about torch
        return Status.CANT_TELL, f"wall time follows the {shifted}"
    reach = resolution.reach(log_ratio, noise)
    if reach is not None and reach > resolution.margin:
        return Status.CANT_TELL, f"noise hides the answer: {resolution.beyond(reach)}; {_mdc_text(noise)}"
    return Status.UNCHANGED, "below the threshold but beyond noise" if noise.detects(log_ratio) else ""


def _mdc_text(noise: Noise) -> str:
    return f"MDC ±{format_percent(noise.mdc)} ({noise.basis})"


def environment_verdict(status: Status, key: Key, noise: Noise, pair: PairNoise, why: str) -> Judged:
    """A wall-time change the environment may explain: not torch's, unless its counts moved too."""
    if pair.count_moves.get(key):
        return status, join("instruction count moved too", why)
    if pair.environment is not None:
        # No "beyond the shift": a busy machine slows benchmarks by different factors
        # (×1.0 to ×2.0 measured), so one common factor does not explain each of them.
        return Status.CANT_TELL, join(f"explained by the {pair.environment.short()}", why)
    drifts = drifts_of(pair, noise)
    if drifts:
        shifts = "; ".join(s.short() for s in drifts)
        return Status.CANT_TELL, join(f"wall time unreliable: {shifts}", why)
    return status, why


def shift_of(pair: PairNoise | None, noise: Noise) -> str:
    """The environment shift that makes "no change" in a wall time of this pair (judged with
    `noise`) the machine's, if any, whether or not the case's instruction count moved.

    For a comparison by rounds only a drift the two runs did not share counts: a shared one
    (asv interleaved both builds' rounds) is in the test's spread (`drifts_of`)."""
    if pair is None:
        return ""
    shifts = ([pair.environment] if pair.environment is not None else []) + list(drifts_of(pair, noise))
    return "; ".join(s.short() for s in shifts)


def drifts_of(pair: PairNoise, noise: Noise) -> tuple[EnvShift, ...]:
    """The drifts within the wall-time rounds' runs that bear on a comparison with `noise`: none
    for a figure measured outside those runs (`Noise.outside_rounds`)."""
    return () if noise.outside_rounds else pair.drifts(noise.by_rounds)
