"""How `benchkit check` reports a pair: which metrics could not be compared, the verdict
line, the exit status and the Markdown sections (see `benchkit.report.gate.check`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from benchkit.report.gate.budget import family_budget
from benchkit.report.gate.check_config import METRIC_LABELS, METRICS, CheckConfig
from benchkit.report.gate.check_decide import UNCHANGED_MARGIN
from benchkit.report.gate.check_format import (
    WHY_HINT,
    count_phrase,
    format_percent,
    markdown_table,
    md_escape,
)
from benchkit.report.gate.check_status import (
    LOST_ON_HEAD,
    NOT_JUDGED,
    NUMERIC_STATUSES,
    UNCERTAIN,
    Status,
)
from benchkit.report.gate.check_types import Comparison, Verdict
from benchkit.rounds_policy import CORROBORATED_ALPHA
from benchkit.stats import ALPHA

if TYPE_CHECKING:
    from benchkit.history.results.read import Measurement


def _side_summary(measurements: Iterable[Measurement | None]) -> str:
    counts = {"failed": 0, "skipped": 0, "without a result": 0}
    for m in measurements:
        if m is None:
            counts["without a result"] += 1
        elif not m.has_number:
            counts["failed" if m.failed else "skipped"] += 1
    return ", ".join(f"{n} {state}" for state, n in counts.items() if n) or "none"


def unjudged_metrics(comparisons: Sequence[Comparison]) -> list[str]:
    """Why the comparison is incomplete: a metric with numbers on one side only, or on neither.

    Each benchmark's verdict cannot see this: when HEAD ran without valgrind, or a
    failed ``setup_cache`` made asv record every benchmark of its file as failed,
    the metric as a whole is unmeasured, and "no regression" would be a guess.
    Ignored benchmarks do not count.
    """
    problems = []
    for metric in METRICS:
        rows = [c for c in comparisons if c.metric == metric and c.status != Status.IGNORED]
        on_base = sum(1 for c in rows if c.before is not None and c.before.has_number)
        on_head = sum(1 for c in rows if c.after is not None and c.after.has_number)
        if not rows or (on_base and on_head):
            continue
        label = METRIC_LABELS[metric]
        base_side, head_side = _side_summary(c.before for c in rows), _side_summary(c.after for c in rows)
        if on_base or on_head:
            has, lacks, why = ("base", "head", head_side) if on_base else ("head", "base", base_side)
            problems.append(
                f"{label}: {on_base or on_head} benchmark(s) have numbers on {has}, none on {lacks} ({why})"
            )
        else:
            problems.append(
                f"{label}: no numbers on either side for {len(rows)} benchmark(s) "
                f"(base: {base_side}; head: {head_side})"
            )
    if not problems and not any(c.status in NUMERIC_STATUSES for c in comparisons):
        problems.append("no benchmark has numbers on both sides to compare")
    return problems


# ------------------------------------------------------------------- report


def render(
    comparisons: Sequence[Comparison],
    base_label: str,
    head_label: str,
    machine: str,
    config: CheckConfig,
    show_unchanged: bool = False,
    shifts: Sequence[str] = (),
    not_judged: Sequence[str] = (),
    settings_differ: Sequence[str] = (),
    build_wide: Sequence[str] = (),
) -> Verdict:
    by_status: dict[Status, list[Comparison]] = {}
    for c in comparisons:
        by_status.setdefault(c.status, []).append(c)

    def rows(*statuses: Status) -> list[Comparison]:
        return [c for s in statuses for c in by_status.get(s, [])]

    problems = unjudged_metrics(comparisons)
    regressions = sorted(rows(Status.REGRESSION), key=lambda c: -(c.ratio or 0))
    lost = rows(*LOST_ON_HEAD)
    # Fail closed: a verdict not given (a disturbed build, compile times of different cache
    # states) is no "no regression"; CI must not go green on it.
    exit_code = 2 if problems or not_judged else 1 if (regressions or lost) else 0
    verdict = ("✅ no regression", "❌ fails", "⚠️ could not compare everything")[exit_code]
    if exit_code == 2 and not problems:
        verdict = "⚠️ not judged: measure again"
    if exit_code == 0 and rows(*UNCERTAIN):
        verdict = "✅ no regression found"  # not "no change": some could not be judged
    envs = sorted({c.env for c in comparisons})
    where = f"machine `{machine}`" + (f", environment `{envs[0]}`" if len(envs) == 1 else "")
    # The gate's own classes always show, even at 0; the others when present.
    counts = [f"**{count_phrase(len(regressions), Status.REGRESSION.value)}**"]
    counts += [count_phrase(len(rows(s)), s.value) for s in LOST_ON_HEAD]
    shown = (Status.IMPROVEMENT, Status.FIXED, Status.STILL_FAILING, Status.UNCHANGED)
    shown += (Status.NOT_COMPARED, Status.IGNORED)
    counts += [count_phrase(len(rows(s)), s.value) for s in shown if rows(s) or s == Status.UNCHANGED]
    counts += [count_phrase(len(rows(s)), s.value) for s in UNCERTAIN]
    counts += [f"{len(rows(s))} not judged ({s.value})" for s in NOT_JUDGED if rows(s)]
    headline = f"{verdict} on {where}: {', '.join(counts)}."
    lines = [
        f"### benchkit check: {base_label} → {head_label}",
        "",
        f"{headline} Thresholds: {config.source}; "
        f"MDC: minimum detectable change at α = {ALPHA:g} two-sided per benchmark "
        f"({CORROBORATED_ALPHA:g} for a wall time whose instruction count moved the same way); "
        f"{family_budget(comparisons).describe()}; unchanged: the change's interval within "
        f"±{format_percent(UNCHANGED_MARGIN)} (a configured threshold: within it).",
    ]
    lines += _context(build_wide, shifts, settings_differ, not_judged, problems)
    sections = [
        ("Regressions", regressions),
        ("Measured on base, no number on head", lost),
        ("Still failing", rows(Status.STILL_FAILING)),
        ("Improvements", sorted(rows(Status.IMPROVEMENT, Status.FIXED), key=lambda c: c.ratio or 0)),
        ("Not judged: disturbed build", rows(Status.DISTURBED)),
        ("Not judged: inductor cache state differed", rows(Status.CACHE_DIFFERED)),
        ("Can't tell (noise hides the answer)", _beyond_first(rows(Status.CANT_TELL))),
        ("Insufficient data (noise unknown)", rows(Status.INSUFFICIENT_DATA)),
        ("Not compared", rows(Status.NOT_COMPARED, Status.IGNORED)),
    ]
    if show_unchanged:
        sections.append(("Unchanged", rows(Status.UNCHANGED)))
    for title, section in sections:
        if section:
            lines += ["", f"#### {title}", "", *markdown_table(section, show_env=len(envs) > 1)]
    return Verdict(
        exit_code,
        "\n".join(lines) + "\n",
        tuple(comparisons),
        tuple(problems),
        tuple(shifts),
        tuple(not_judged),
        headline,
        tuple(build_wide),
    )


def _context(
    build_wide: Sequence[str],
    shifts: Sequence[str],
    settings_differ: Sequence[str],
    not_judged: Sequence[str],
    problems: Sequence[str],
) -> list[str]:
    """The sections above the tables: what moved every figure, what the gate could not judge."""
    lines: list[str] = []
    if build_wide:
        lines += ["", "#### Build-wide change", "", *(f"- {md_escape(s)}" for s in build_wide)]
    if shifts:
        lines += ["", "#### Environment", "", *(f"- {md_escape(s)}" for s in shifts)]
        lines += ["", "Wall-time changes these explain are can't tell unless the case's instructions moved."]
    if settings_differ:  # recorded beside asv's results by the runs (benchkit.settings_record)
        lines += ["", "#### Measured with different settings", ""]
        lines += [f"- {md_escape(d)}" for d in settings_differ]
    if not_judged:
        lines += ["", "#### Not judged (measure again)", "", *(f"- {md_escape(n)}" for n in not_judged)]
    if problems:
        lines += ["", "#### Could not compare", "", *(f"- {md_escape(p)}" for p in problems)]
        lines += ["", WHY_HINT + "."]
    return lines


def _beyond_first(rows: Sequence[Comparison]) -> list[Comparison]:
    """Largest observed changes first: those the old fixed threshold would have flagged."""
    return sorted(rows, key=lambda c: -abs(math.log(c.ratio)) if c.ratio else 0.0)
