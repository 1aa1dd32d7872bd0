"""Disturbed builds over a whole history: one build's wall times all away, together, and back.

A build measured while the machine was busy, or slower for the minutes it ran, moves every wall
time by about one common factor while its instruction counts stay where they were: the machine's
doing, not torch's. Seen over a history it is an excursion. Per wall-time benchmark, the build's
value (its fast level, `benchkit.report.gate.noise.wall_level`) is compared with the level of the
builds just before it and with the level of those just after it; it moved when it lies beyond
its noise on the same side of both. A build is disturbed when its wall times moved that way
together -- all but a quarter of them, in one direction, by a median factor beyond the
benchmarks' noise -- while its instruction counts (where the suite has them) did not move by the
count threshold. Its wall times then make no steps in `benchkit.report.steps.changepoints`, and it is
reported once. Over a history the first and last builds have one side only and are not judged
this way; `benchkit check` judges its base and head by `build_disturbance`, one-sided at an end
of the history (against the builds before a last head; only where the suite has instruction
counts to witness that the code stayed), and leaves a disturbed side's wall times unjudged.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Sequence

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.names import MetricKind
from benchkit.report.gate.noise import wall_level
from benchkit.stats import robust_sigma

NEIGHBOURS = 2  # builds on each side whose median is the level a build is compared with
NOISE_Z = 3.0  # a benchmark moved when beyond this many of its own sigmas
MOVED_SHARE = 0.75  # of the build's wall-time benchmarks, at least, moved the same way
MIN_BENCHMARKS = 2


@dataclasses.dataclass(frozen=True)
class DisturbedBuild:
    commit: str
    position: int  # index in the history
    factor: float  # median ratio of its wall times to the neighbouring levels
    moved: int  # wall-time benchmarks beyond their noise in the common direction
    judged: int  # wall-time benchmarks with a value here and on both sides (one, when one-sided)
    one_sided: bool = False  # at an end of the history: against the builds on its one side

    def describe(self, steps: bool = True) -> str:
        """What happened to the build; `steps`: and that its wall times make no steps (a history's)."""
        way = "slower" if self.factor > 1 else "faster"
        if self.one_sided:
            side = "before" if self.position > 0 else "after"
            return (
                f"disturbed build: {self.moved} of {self.judged} wall times ×{self.factor:.2f} ({way}) "
                f"against the builds {side} it, its instruction counts unchanged"
            )
        return (
            f"disturbed build: {self.moved} of {self.judged} wall times ×{self.factor:.2f} ({way}) against "
            f"the builds on both sides, its instruction counts unchanged"
            + ("; its wall times make no steps" if steps else "")
        )


Series = dict[tuple[str, str], list[float | None]]


def _series(
    history: Sequence[ResultSet],
    keys: Sequence[tuple[str, str]],
    value_of: Callable[[Measurement], float | None],
) -> Series:
    out = {}
    for key in keys:
        column = [r.measurements.get(key) for r in history]
        values = [value_of(m) if m is not None and m.has_number else None for m in column]
        out[key] = [math.log(v) if v is not None and v > 0 else None for v in values]
    return out


def _side_level(values: Sequence[float | None], indices: range) -> float | None:
    known = [values[j] for j in indices if 0 <= j < len(values) and values[j] is not None]
    return statistics.median(known) if known else None


def _deviation(values: Sequence[float | None], i: int, one_sided: bool = False) -> float | None:
    """The smaller of the moves against the levels before and after `i`, signed; 0 when the
    two disagree in sign (a step, not an excursion); None without a value or a side.
    `one_sided`: against the one side the history has (`i` at an end)."""
    here = values[i]
    before = _side_level(values, range(i - NEIGHBOURS, i))
    after = _side_level(values, range(i + 1, i + 1 + NEIGHBOURS))
    if one_sided:
        side = before if i > 0 else after
        return None if here is None or side is None else here - side
    if here is None or before is None or after is None:
        return None
    d_before, d_after = here - before, here - after
    if d_before * d_after <= 0:
        return 0.0
    return d_before if abs(d_before) < abs(d_after) else d_after


def _noise(values: Sequence[float | None]) -> float:
    """A benchmark's build-to-build sigma: from successive differences, robust to steps;
    0 when unknown (fewer than four values)."""
    known = [v for v in values if v is not None]
    diffs = [b - a for a, b in itertools.pairwise(known)]
    sigma = robust_sigma(diffs) if len(diffs) >= 3 else None
    return (sigma or 0.0) / math.sqrt(2)


def _judge(
    history: Sequence[ResultSet],
    i: int,
    walls: Series,
    counts: Series,
    noise: dict[tuple[str, str], float],
    count_threshold: float,
    one_sided: bool,
) -> DisturbedBuild | None:
    # A benchmark whose noise is unknown cannot be beyond it: it does not take part.
    moves = {
        key: d
        for key, values in walls.items()
        if noise[key] > 0 and (d := _deviation(values, i, one_sided)) is not None
    }
    if len(moves) < MIN_BENCHMARKS:
        return None
    middle = statistics.median(moves.values())
    typical_noise = statistics.median(noise[key] for key in moves)
    if abs(middle) <= NOISE_Z * typical_noise:
        return None
    moved = sum(1 for key, d in moves.items() if d * middle > 0 and abs(d) > NOISE_Z * noise[key])
    if moved < max(MIN_BENCHMARKS, math.ceil(MOVED_SHARE * len(moves))):
        return None
    count_moves = [
        abs(d) for values in counts.values() if (d := _deviation(values, i, one_sided)) is not None
    ]
    if count_moves and statistics.median(count_moves) >= math.log1p(count_threshold):
        return None  # the code moved too: not the machine's doing
    if one_sided and not count_moves:
        # No way back to show an excursion, and no count to witness that the code stayed:
        # a slowdown of every wall time may be torch's.
        return None
    return DisturbedBuild(history[i].commit, i, math.exp(middle), moved, len(moves), one_sided)


def _prepared(
    history: Sequence[ResultSet], metric_of: Callable[[str], MetricKind]
) -> tuple[Series, Series, dict[tuple[str, str], float]]:
    keys = sorted({key for r in history for key in r.measurements})
    walls = _series(history, [k for k in keys if metric_of(k[0]) == MetricKind.WALL_TIME], wall_level)
    counts = _series(
        history, [k for k in keys if metric_of(k[0]) == MetricKind.INSTRUCTIONS], lambda m: m.value
    )
    return walls, counts, {key: _noise(values) for key, values in walls.items()}


def disturbed_builds(
    history: Sequence[ResultSet], metric_of: Callable[[str], MetricKind], count_threshold: float
) -> list[DisturbedBuild]:
    """The disturbed builds among those with builds on both sides."""
    walls, counts, noise = _prepared(history, metric_of)
    found = []
    for i in range(1, len(history) - 1):
        build = _judge(history, i, walls, counts, noise, count_threshold, one_sided=False)
        if build is not None:
            found.append(build)
    return found


def every_disturbance(
    history: Sequence[ResultSet], metric_of: Callable[[str], MetricKind], count_threshold: float
) -> dict[str, DisturbedBuild]:
    """commit -> its build, for every disturbed build of the history, one-sided at its ends
    (`build_disturbance` of each, the history prepared once)."""
    if len(history) < 3:
        return {}
    walls, counts, noise = _prepared(history, metric_of)
    found = {}
    for i, result_set in enumerate(history):
        one_sided = i in (0, len(history) - 1)
        build = _judge(history, i, walls, counts, noise, count_threshold, one_sided)
        if build is not None:
            found[result_set.commit] = build
    return found


def build_disturbance(
    history: Sequence[ResultSet], commit: str, metric_of: Callable[[str], MetricKind], count_threshold: float
) -> DisturbedBuild | None:
    """Whether the build of `commit` is disturbed by the history-wide rule; one-sided at an end
    of the history. None when it is not, is not in the history, or the history holds fewer than
    three builds (a pair alone is `benchkit.report.gate.noise`'s environment test)."""
    position = next((i for i, r in enumerate(history) if r.commit == commit), None)
    if position is None or len(history) < 3:
        return None
    walls, counts, noise = _prepared(history, metric_of)
    one_sided = position in (0, len(history) - 1)
    return _judge(history, position, walls, counts, noise, count_threshold, one_sided)
