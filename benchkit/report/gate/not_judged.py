"""What the gate leaves unjudged, and says so: a disturbed build's wall times, and compile
times of builds whose inductor cache states differed.

* **disturbed build**: by the history-wide rule (`benchkit.report.gate.excursions`) the base's or
  the head's wall times moved together by a common factor beyond their noise while their
  instruction counts did not: the machine's doing. Its wall-time verdicts are not judged
  ("measure again"); instruction counts are judged as usual.
* **cache state differed**: the operator suite records with each compile time whether the
  compile found its kernels in inductor's cache (``track_compile_cache_hit``: 1 warm, 0 cold).
  A compile time that falls by nearly all of itself between a cold and a warm build
  only shows which one compiled; such a compile-time difference is not judged. The cache
  record itself is no performance number.

Neither is "no regression": both make the gate's exit status 2 (see `benchkit.report.gate.check`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from benchkit.names import BenchmarkName, Metric, MetricKind
from benchkit.report.gate.check_status import NUMERIC_STATUSES, Status
from benchkit.report.gate.check_types import Comparison

if TYPE_CHECKING:
    from benchkit.history.results.read import Measurement, ResultSet
    from benchkit.report.gate.excursions import DisturbedBuild

DISTURBED = Status.DISTURBED
CACHE_DIFFERED = Status.CACHE_DIFFERED
NOT_JUDGED = (DISTURBED, CACHE_DIFFERED)
# What each status tells a reader (legends of the reports).
MEANINGS = {
    DISTURBED: "not judged: the build's wall times all moved together while its instruction counts "
    "did not (the machine's doing); measure it again",
    CACHE_DIFFERED: "not judged: one build compiled cold, the other found its kernels in inductor's "
    "cache; a compile-time difference only shows which",
}
# Statuses a disturbed side overrides: both sides had numbers (a lost number still fails).
_COMPARED = NUMERIC_STATUSES


# ------------------------------------------------------------------ cache state


def is_cache_record(name: str) -> bool:
    return BenchmarkName.parse(name).metric is Metric.COMPILE_CACHE_HIT


def is_compile_time(name: str) -> bool:
    return BenchmarkName.parse(name).metric is Metric.COMPILE_SECONDS


def cache_record_of(name: str) -> str | None:
    """The cache-state benchmark recorded with the compile-time benchmark `name`, or None."""
    parsed = BenchmarkName.parse(name)
    if parsed.metric is not Metric.COMPILE_SECONDS:
        return None
    return str(parsed.with_metric(Metric.COMPILE_CACHE_HIT))


def cache_state(measurement: Measurement | None) -> str | None:
    """'cold', 'warm', 'x% warm', or None when not recorded (older results, a failed record)."""
    if measurement is None or not measurement.has_number or measurement.value is None:
        return None
    hit = float(measurement.value)
    if hit != hit:  # NaN: no compile recorded
        return None
    return "cold" if hit <= 0 else "warm" if hit >= 1 else f"{hit:.0%} warm"


def cache_states_differ(base: ResultSet, head: ResultSet, name: str, env: str) -> str:
    """'cache state differed (cold vs warm)' when `name` is a compile time whose recorded cache
    states differ between the two builds; '' otherwise (also when either is not recorded)."""
    record = cache_record_of(name)
    if record is None:
        return ""
    before = cache_state(base.measurements.get((record, env)))
    after = cache_state(head.measurements.get((record, env)))
    if before is None or after is None or before == after:
        return ""
    return f"cache state differed ({before} vs {after})"


def mark_cache_states(
    comparisons: Sequence[Comparison], base: ResultSet, head: ResultSet
) -> list[Comparison]:
    """Compile times of builds compiled in different cache states are not judged; the cache
    records themselves are not compared as performance."""
    out = []
    for c in comparisons:
        if c.status not in _COMPARED:  # ignored, lost on head, not compared: as judged
            out.append(c)
        elif is_cache_record(c.name):
            states = [cache_state(m) for m in (c.before, c.after)]
            shown = " → ".join(s or "not recorded" for s in states)
            note = f"the inductor cache state of the compile ({shown}), not performance"
            out.append(dataclasses.replace(c, status=Status.NOT_COMPARED, note=note))
        elif differed := cache_states_differ(base, head, c.name, c.env):
            out.append(dataclasses.replace(c, status=CACHE_DIFFERED, note=f"not judged: {differed}"))
        else:
            out.append(c)
    return out


def mark_compiled_apart(comparisons: Sequence[Comparison], why: str) -> tuple[list[Comparison], str]:
    """Compile times of a pair whose builds were compiled apart (`why`: by different jobs) are not
    compared, whatever their cache states: a compile time is measured once per build, in its
    own stretch of time, so nothing shares the two builds' weather. The line that says so once."""
    out, apart = [], 0
    for c in comparisons:
        if BenchmarkName.parse(c.name).metric is Metric.COMPILE_SECONDS and c.status in (
            *_COMPARED,
            CACHE_DIFFERED,
        ):
            c = dataclasses.replace(c, status=Status.NOT_COMPARED, note=f"compiled apart: {why}")
            apart += 1
        out.append(c)
    line = f"compile time: {why}: its {apart} compile time(s) are not compared" if apart else ""
    return out, line


# ------------------------------------------------------------------ disturbed builds


def mark_disturbed(
    comparisons: Sequence[Comparison], disturbed: dict[str, DisturbedBuild]
) -> list[Comparison]:
    """Wall-time verdicts of a pair whose base or head (`disturbed`: side -> build) is disturbed."""
    if not disturbed:
        return list(comparisons)
    why = "; ".join(f"{side} {d.commit[:8]} is a {d.describe(steps=False)}" for side, d in disturbed.items())
    note = f"not judged: {why}; measure again"
    return [
        dataclasses.replace(c, status=DISTURBED, note=note)
        if c.metric == MetricKind.WALL_TIME and c.status in _COMPARED
        else c
        for c in comparisons
    ]


def not_judged_reasons(comparisons: Sequence[Comparison], disturbed: dict[str, DisturbedBuild]) -> list[str]:
    """One line per reason the gate left verdicts unjudged (they make its exit status 2)."""
    lines = []
    walls = sum(1 for c in comparisons if c.status == DISTURBED)
    for side, d in disturbed.items():
        lines.append(
            f"wall time: {side} {d.commit[:8]} is a {d.describe(steps=False)}; "
            f"its {walls} wall-time verdict(s) are not judged: measure {side} again"
        )
    compiles = [c for c in comparisons if c.status == CACHE_DIFFERED]
    if compiles:
        lines.append(
            f"compile time: {len(compiles)} compile time(s) not judged, the builds' inductor cache "
            f"states differed ({compiles[0].note.removeprefix('not judged: cache state differed ')}): "
            "measure both in one cache state (BENCHKIT_INDUCTOR_COLD=1 compiles cold)"
        )
    return lines


def disturbed_sides(
    history: Sequence[ResultSet],
    base: ResultSet,
    head: ResultSet,
    metric_of: Callable[[str], MetricKind],
    count_threshold: float,
) -> dict[str, DisturbedBuild]:
    """side -> its build, for the base and head that are disturbed by the history-wide rule.

    A build off the history's branch (a pull request's head) is judged as if it followed the
    base: one-sided, against the builds up to the base."""
    from benchkit.report.gate.excursions import build_disturbance

    commits = [r.commit for r in history]

    def position(commit: str) -> int | None:  # a commit may be named by a hash prefix
        return next((i for i, c in enumerate(commits) if c.startswith(commit) or commit.startswith(c)), None)

    found = {}
    for side, build in (("base", base), ("head", head)):
        series = list(history)
        at = position(build.commit)
        if at is None:
            base_at = position(base.commit)
            series = [*series[: len(series) if base_at is None else base_at + 1], build]
        commit = build.commit if at is None else commits[at]
        disturbed = build_disturbance(series, commit, metric_of, count_threshold)
        if disturbed is not None:
            found[side] = disturbed
    return found
