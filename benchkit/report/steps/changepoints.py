"""Steps over a whole history, per benchmark, each tested against the history's own noise,
labelled jointly per case from its instruction count and its wall time.

`benchkit check` looks at one pair; a slow drift or a step hidden by one noisy pair
shows only over the whole series. `benchkit.report.steps.segments` fits piecewise-constant levels
to the series (the logs of its values) and keeps a boundary between two levels only where
an F test against the series' residual spread, floored by what one build shows of its own
noise (a wall time's rounds, Callgrind's prior for counts), finds a step; each boundary it
keeps is a step here. A step is reported when its size also reaches the metric's threshold
(``benchkit-check.toml`` applies). Joint labels, per case (see `benchkit.report.gate.noise.case_of`):

* **code change**: the instruction count and the wall time stepped at the same commit;
* **wall time only**: memory, threads or the machine; nothing Callgrind counts changed;
* **counts only**: executed instructions changed with no visible cost in time.

Instruction counts are deterministic, so their steps pin one commit; a wall-time step
is placed where the fit puts it, within the commits between its two levels. A compile-time
step between builds whose recorded inductor cache states differ (cold vs warm) is not
judged (`benchkit.report.gate.not_judged`); the cache records make no steps themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable, Collection, Sequence

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.names import MetricKind
from benchkit.report.gate.excursions import DisturbedBuild, disturbed_builds
from benchkit.report.gate.kernels import KERNEL_CHANGED, SAME_KERNEL, is_kernel_record, kernel_changed
from benchkit.report.gate.kernels import LABEL_MEANINGS as KERNEL_LABEL_MEANINGS
from benchkit.report.gate.noise import INSTRUCTIONS_SIGMA, case_of, value_sigma, wall_level
from benchkit.report.gate.not_judged import DISTURBED, cache_record_of, cache_state, is_cache_record
from benchkit.report.gate.shifts import build_shift, round_drifts
from benchkit.report.steps.segments import FALSE_STEP_RATE, fit_levels, series_rate
from benchkit.report.steps.step_types import Step
from benchkit.stats import median_difference_sigma, robust_sigma, z_two_sided
from benchkit.util import forked_map

INTERVAL_LEVEL = 0.95  # of a step's size interval
OUTLIER = "outlier"  # one build away from its neighbours' common level, and back after it
LABELS = ("code change", "wall time only", "counts only", OUTLIER)
NOT_JUDGED = "not judged"
# What each label of the reports' label column means (their legends).
LABEL_MEANINGS = {
    "code change": "the case's instruction count and wall time stepped at the same commit (±1 build)",
    "wall time only": "the wall time stepped, the instruction count did not: memory, threads or the machine",
    "counts only": "the instruction count stepped at no visible cost in wall time",
    OUTLIER: "one build away from the level its neighbours share, and back after it: not a step",
    **KERNEL_LABEL_MEANINGS,
    "-": "no pair metric to label by (eager operator timings, other tracked numbers, operator "
    "results without the generated-kernel record)",
    NOT_JUDGED: "one build on a side of the step: nothing shows how far each level spreads",
    "cache state differed": "a compile time between builds compiled in different inductor cache "
    "states (cold vs warm): only shows which one compiled",
    DISTURBED: "a build whose wall times all moved together, alone and back, while its instruction "
    "counts did not: the machine's doing; its wall times make no steps",
}


def _level_sigmas(groups: Sequence[Sequence[float]], sigma: float | None) -> list[float | None]:
    """Each level's noise of one value: the fit's; without one (a series too short for the test),
    each level's own robust spread where it has three values, else the median of those."""
    if sigma is not None:
        return [sigma] * len(groups)
    own = [robust_sigma(g) if len(g) >= 3 else None for g in groups]
    known = sorted(s for s in own if s is not None)
    pooled = known[len(known) // 2] if known else None
    return [pooled if s is None else s for s in own]


def series_steps(
    name: str,
    env: str,
    metric: str,
    commits: Sequence[str],
    values: Sequence[float | None],
    threshold: float,
    floor: float = 0.0,
    rate: float = FALSE_STEP_RATE,
) -> list[Step]:
    """The steps of one benchmark's series (`values[i]` measured at `commits[i]`, None: missing);
    `floor`: the least noise of one value on the log scale, `rate`: the series' false-step rate
    (`benchkit.report.steps.segments`)."""
    measured = [(i, v) for i, v in enumerate(values) if v is not None and v > 0]
    if len(measured) < 2:
        return []
    at = [i for i, _ in measured]
    logs = [math.log(v) for _, v in measured]
    fit = fit_levels(logs, floor, rate)
    groups = [logs[left:right] for left, right in fit.bounds]
    levels = [statistics.median(g) for g in groups]
    sigmas = _level_sigmas(groups, fit.sigma)
    z, z_step = z_two_sided(1 - INTERVAL_LEVEL), z_two_sided(rate)

    def se(i: int, j: int) -> float | None:
        """Standard error of the difference of levels i and j."""
        sa, sb = sigmas[i], sigmas[j]
        if sa is None or sb is None:
            return None
        return median_difference_sigma(sa, len(groups[i]), sb, len(groups[j]))

    def back(i: int, j: int) -> bool:
        """Levels i and j are one: within the threshold, or too close for a step of their own."""
        diff, error = abs(levels[j] - levels[i]), se(i, j)
        return diff < math.log1p(threshold) or (error is not None and diff <= z_step * error)

    steps: list[Step] = []
    skip_next = False
    for i in range(1, len(groups)):
        if skip_next:
            skip_next = False
            continue
        diff = levels[i] - levels[i - 1]
        if abs(diff) < math.log1p(threshold):
            continue
        last_a, first_b = at[fit.bounds[i - 1][1] - 1], at[fit.bounds[i][0]]
        step = Step(
            name,
            env,
            metric,
            commits[last_a],
            commits[first_b],
            first_b == last_a + 1,
            math.exp(levels[i - 1]),
            math.exp(levels[i]),
            math.expm1(diff),
            None,
            None,
            first_b,
        )
        if len(groups[i]) == 1 and i + 1 < len(groups) and back(i - 1, i + 1):
            # One build away and back after it: an outlier of that build, not two steps.
            steps.append(dataclasses.replace(step, label=OUTLIER))
            skip_next = True
            continue
        error = se(i - 1, i)
        if error is not None:
            step = dataclasses.replace(
                step, low=math.expm1(diff - z * error), high=math.expm1(diff + z * error)
            )
        steps.append(step)
    return steps


def _label_case(counts: Sequence[Step], walls: Sequence[Step]) -> list[Step]:
    """Pair each wall-time step with a count step at the same commit (±1 for the fit's placement)."""
    out, matched = [], set()
    out += [s for s in (*counts, *walls) if s.label == OUTLIER]
    counts = [c for c in counts if c.label != OUTLIER]
    walls = [w for w in walls if w.label != OUTLIER]
    for w in walls:
        partner = next((c for c in counts if abs(c.position - w.position) <= 1), None)
        if partner is not None:
            matched.add(id(partner))
        out.append(dataclasses.replace(w, label="code change" if partner else "wall time only"))
    for c in counts:
        out.append(dataclasses.replace(c, label="code change" if id(c) in matched else "counts only"))
    return out


# Values (builds x series) a forked worker should fit at least, for forking to pay.
SERIES_VALUES_PER_WORKER = 20_000


def changepoints(
    history: Sequence[ResultSet],
    metric_of: Callable[[str], MetricKind],
    threshold_of: Callable[[str], float],
    disturbed: Collection[int] = (),
) -> list[Step]:
    """Every benchmark's steps over `history` (oldest first), with joint labels per case.

    A benchmark whose code changed (asv's version) is followed from its latest version on.
    Wall times at the `disturbed` positions (`benchkit.report.gate.excursions`) are left out.
    """
    keys = sorted({key for r in history for key in r.measurements})
    # The cache state of a compile and its kernel's hash are records, not performance.
    keys = [(name, env) for name, env in keys if not (is_cache_record(name) or is_kernel_record(name))]
    rate = series_rate(len(keys))  # the history's false steps, all series together
    series = functools.partial(_key_steps, history, metric_of, threshold_of, disturbed, rate)
    by_case: dict[tuple[str, str], dict[MetricKind, list[Step]]] = {}
    loose: list[Step] = []
    # A long history's series are fitted on every core (each stands alone); a short one's
    # would cost more to fork than to fit.
    per_worker = max(20, SERIES_VALUES_PER_WORKER // max(len(history), 1))
    fitted = forked_map(series, keys, min_per_worker=per_worker)
    for (name, env), (metric, steps) in zip(keys, fitted, strict=True):
        case, _ = case_of(name)
        if metric in (MetricKind.INSTRUCTIONS, MetricKind.WALL_TIME):
            by_case.setdefault((case, env), {}).setdefault(metric, []).extend(steps)
        else:
            loose.extend(steps)
    labelled = list(loose)
    for metrics in by_case.values():
        counts, walls = metrics.get(MetricKind.INSTRUCTIONS, []), metrics.get(MetricKind.WALL_TIME, [])
        if MetricKind.INSTRUCTIONS in metrics and MetricKind.WALL_TIME in metrics:
            labelled += _label_case(counts, walls)
        else:
            labelled += counts + walls
    labelled = [label_step(_cache_reason(s, history), history) for s in labelled]
    return sorted(labelled, key=lambda s: (s.position, s.name, s.env))


def _key_steps(
    history: Sequence[ResultSet],
    metric_of: Callable[[str], MetricKind],
    threshold_of: Callable[[str], float],
    disturbed: Collection[int],
    rate: float,
    key: tuple[str, str],
) -> tuple[MetricKind, list[Step]]:
    """The metric of one benchmark `key` and its steps over `history` (see `changepoints`)."""
    name, env = key
    column = [r.measurements.get(key) for r in history]
    versions = [m.version for m in column if m is not None and m.version]
    latest = versions[-1] if versions else None
    metric = metric_of(name)
    value_of = wall_level if metric == MetricKind.WALL_TIME else (lambda m: m.value)
    values = [
        value_of(m) if m is not None and m.has_number and (not m.version or m.version == latest) else None
        for m in column
    ]
    if metric == MetricKind.WALL_TIME:
        values = [None if i in disturbed else v for i, v in enumerate(values)]
    floor = _noise_floor(metric, [m for m, v in zip(column, values, strict=True) if m and v])
    commits = [r.commit for r in history]
    return metric, series_steps(name, env, metric, commits, values, threshold_of(name), floor, rate)


def _noise_floor(metric: MetricKind, measured: Sequence[Measurement]) -> float:
    """The least noise of one value of a series (log scale): for a wall time the median over its
    builds of each build's own spread from its rounds (of its fast level, the series' value),
    for an instruction count Callgrind's prior; 0 for the rest, which have nothing but their
    history."""
    if metric == MetricKind.INSTRUCTIONS:
        return INSTRUCTIONS_SIGMA
    if metric != MetricKind.WALL_TIME:
        return 0.0
    known = [s for s in map(value_sigma, measured) if s is not None]
    return statistics.median(known) if known else 0.0


def _cache_reason(step: Step, history: Sequence[ResultSet]) -> Step:
    """A compile-time step whose two builds compiled in different cache states is not judged."""
    record = cache_record_of(step.name)
    if record is None:
        return step
    by_commit = {r.commit: r for r in history}
    states = [
        cache_state(by_commit[c].measurements.get((record, step.env))) for c in (step.before, step.after)
    ]
    if None in states or states[0] == states[1]:
        return step
    return dataclasses.replace(step, reason=f"cache state differed ({states[0]} vs {states[1]})")


@dataclasses.dataclass(frozen=True)
class HistorySteps:
    """What a history shows: its steps, and the builds whose wall times are the machine's."""

    steps: list[Step]
    disturbed: list[DisturbedBuild]  # away from both sides together, then back
    shifted: list[tuple[str, str]]  # (commit, description): rounds of one build disagree

    def unreliable(self) -> list[tuple[str, str]]:
        """(commit, description) of every build whose wall times are left out or doubtful, once."""
        found: dict[str, list[str]] = {}
        for commit, text in [(d.commit, d.describe()) for d in self.disturbed] + list(self.shifted):
            found.setdefault(commit, []).append(text)
        return [(commit, "; ".join(texts)) for commit, texts in found.items()]


def history_steps(
    history: Sequence[ResultSet],
    metric_of: Callable[[str], MetricKind],
    threshold_of: Callable[[str], float],
    count_threshold: float,
) -> HistorySteps:
    """`changepoints` with the disturbed builds found first and their wall times left out."""
    disturbed = disturbed_builds(history, metric_of, count_threshold)
    steps = changepoints(history, metric_of, threshold_of, {d.position for d in disturbed})
    return HistorySteps(steps, disturbed, shifted_builds(history, metric_of))


def shifted_builds(
    history: Sequence[ResultSet], metric_of: Callable[[str], MetricKind]
) -> list[tuple[str, str]]:
    """(commit, description) of every build whose two asv rounds disagree for most wall times:
    its wall-time points in the history are the machine's, not torch's."""
    found = []
    for result_set in history:
        shift = build_shift(round_drifts(result_set, metric_of), result_set.commit[:8])
        if shift is not None:
            found.append((result_set.commit, shift.describe()))
    return found


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def judged(step: Step) -> bool:
    """A step with an interval; without one (one build a side) nothing shows how far each level
    spreads, and the step is listed as not judged; an outlier is no step either."""
    return step.label != OUTLIER and not step.reason and step.low is not None and step.high is not None


def shown_label(step: Step) -> str:
    """The label column: the joint label; why a step is not judged; '-' without a pair metric."""
    if step.reason:
        return step.reason
    if judged(step) or step.label == OUTLIER:
        return step.label or "-"
    return NOT_JUDGED + (f" ({step.label})" if step.label else "")


def legend_key(label: str) -> str:
    """The `LABEL_MEANINGS` entry that explains a shown label."""
    if label.startswith("cache state differed"):
        return "cache state differed"
    if label.startswith(NOT_JUDGED):
        return NOT_JUDGED
    return label


def legend(steps: Sequence[Step], disturbed: bool = False) -> dict[str, str]:
    """The meanings of the labels these steps show (and of a disturbed build, when one is named)."""
    keys = {legend_key(shown_label(s)) for s in steps} | ({DISTURBED} if disturbed else set())
    keys |= {s.label for s in steps if s.label}  # "not judged (code change)" names both
    return {k: v for k, v in LABEL_MEANINGS.items() if k in keys}


def format_table(steps: Sequence[Step]) -> str:
    """Plain-text tables for a terminal, one step a line: judged steps, then steps that could
    not be judged (one build a side), then outliers."""
    if not steps:
        return "no steps beyond the thresholds in this history\n"
    groups = (
        ("", [s for s in steps if judged(s)]),
        (
            "# not judged: one build a side, so no interval",
            [s for s in steps if not judged(s) and s.label != OUTLIER and not s.reason],
        ),
        (
            "# not judged: the builds' inductor cache states differed (compile times)",
            [s for s in steps if s.reason],
        ),
        (
            "# outliers: one build away and back after it (not steps)",
            [s for s in steps if s.label == OUTLIER],
        ),
    )
    parts = [(title + "\n" if title else "") + _table(rows) for title, rows in groups if rows or not title]
    return "".join(parts)


def _table(steps: Sequence[Step]) -> str:
    if not steps:
        return "no judged step beyond the thresholds in this history\n"
    head = ("commits", "benchmark", "metric", "change", f"{INTERVAL_LEVEL:.0%} interval", "label")
    rows = [
        (
            f"{s.before[:8]}..{s.after[:8]}" + (" (exact)" if s.exact else ""),
            s.name,
            s.metric,
            _pct(s.change),
            f"[{_pct(s.low)}, {_pct(s.high)}]" if s.low is not None and s.high is not None else "n/a",
            shown_label(s),
        )
        for s in steps
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [head, *rows]
    ]
    return "\n".join(lines) + "\n"


def label_step(step: Step, history: Sequence[ResultSet]) -> Step:
    """A step of a kernel-dependent figure without another label: kernel changed or same kernel
    between the builds on either side of it."""
    if step.label:
        return step
    by_commit = {r.commit: r for r in history}
    changed = kernel_changed(by_commit[step.before], by_commit[step.after], step.name, step.env)
    if changed is None:
        return step
    return dataclasses.replace(step, label=KERNEL_CHANGED if changed else SAME_KERNEL)
