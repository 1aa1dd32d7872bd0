"""`benchkit check --json`: the gate's verdicts as data, for CI steps that read them."""

from __future__ import annotations

import math
from typing import Any

from benchkit.history.results.read import Measurement
from benchkit.report.gate.check_types import Comparison, Verdict

EXIT_REASONS = {
    0: "every metric compared and nothing fails the gate",
    1: "a regression, or a benchmark newly failing, newly skipped or missing on head",
    2: "could not compare (see problems), or verdicts not judged (see not_judged): measure again",
}


def _side(measurement: Measurement | None) -> dict[str, Any] | None:
    if measurement is None:
        return None
    state = "failed" if measurement.failed else "skipped" if measurement.skipped else "ok"
    return {"value": None if measurement.failed or measurement.skipped else measurement.value, "state": state}


def _judged(c: Comparison) -> dict[str, Any]:
    """The change the verdict's test judged (a factor), its interval at the test's α, and its p."""
    change, interval = c.judged_change, c.interval()
    return {
        "change": None if change is None else math.exp(change),
        "interval": None if interval is None else list(interval),
        "alpha": None if c.noise is None or c.noise.sigma is None else c.noise.alpha,
        "p": c.p_value(),
    }


def _row(c: Comparison) -> dict[str, Any]:
    return {
        "name": c.name,
        "env": c.env,
        "metric": c.metric,
        "unit": c.unit,
        "verdict": c.status.value,
        "base": _side(c.before),
        "head": _side(c.after),
        "ratio": c.ratio,
        "threshold": c.threshold,
        "mdc": c.mdc,
        **_judged(c),
        "note": c.note,
    }


def verdict_json(verdict: Verdict, base: str, head: str) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for c in verdict.comparisons:
        counts[c.status.value] = counts.get(c.status.value, 0) + 1
    return {
        "base": base,
        "head": head,
        "exit_code": verdict.exit_code,
        "exit_reason": EXIT_REASONS[verdict.exit_code],
        "problems": list(verdict.problems),
        "not_judged": list(verdict.not_judged),
        "environment_shifts": list(verdict.shifts),
        "build_wide_changes": list(verdict.build_wide),
        "counts": counts,
        "comparisons": [_row(c) for c in verdict.comparisons],
    }
