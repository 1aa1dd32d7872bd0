"""`benchkit check --json`: the gate's verdicts as data, for CI steps that read them."""

from __future__ import annotations

from typing import Any

from benchkit.history.results.read import Measurement
from benchkit.report.check_types import Comparison, Verdict

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
        "counts": counts,
        "comparisons": [_row(c) for c in verdict.comparisons],
    }
