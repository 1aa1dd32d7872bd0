"""How `benchkit check` writes its verdicts: values, thresholds, MDCs and Markdown tables
(also used by the site's Changes page)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchkit.names import BenchmarkName, Metric, MetricKind, Suite, kind_of_unit
from benchkit.report.gate.check_config import METRIC_LABELS
from benchkit.report.gate.check_types import Comparison

if TYPE_CHECKING:
    from benchkit.history.results.read import Measurement


# asv keeps no error text in its result files: point the user at where it is.
WHY_HINT = (
    "asv's result files keep no error text; see the asv run's log or rerun with "
    "`asv run --show-stderr -b REGEX` (a failed setup_cache fails every benchmark of its file)"
)


def count_phrase(n: int, status: str) -> str:
    """How reports count a verdict: '2 regressions', '1 newly failing', '3 missing on head'."""
    plural = n != 1 and status in ("regression", "improvement")
    return f"{n} {status}{'s' if plural else ''}"


def format_value(m: Measurement | None, unit: str | None) -> str:
    from asv import util as asv_util
    from asv_runner.statistics import get_err

    if m is None:
        return "missing"
    if m.failed:
        return "failed"
    if m.skipped:
        return "skipped"
    assert m.value is not None
    if unit == "instructions":
        return f"{m.value:,.0f}"
    if unit == Metric.KERNEL_HASH.unit and m.value == int(m.value):
        return f"{int(m.value):012x}"
    if unit is not None and kind_of_unit(unit) is MetricKind.RATIO:  # a ratio: 3 significant figures
        return f"{m.value:.3g}"
    err = get_err(m.value, m.stats) if m.stats else None
    return str(asv_util.human_value(m.value, unit, err=err))


def format_change(c: Comparison) -> str:
    """The change the verdict judged: a rounds or replicates test's own estimate, with its
    confidence interval at the test's α; else the ratio of asv's two values."""
    interval = c.interval()
    if c.noise is not None and c.noise.change is not None and interval is not None:
        ratio = math.exp(c.noise.change)
        level = f"{(1 - c.noise.alpha) * 100:.4g}%"
        return (
            f"{(ratio - 1) * 100:+.1f}% (×{ratio:.3f}, {level} CI ×{interval[0]:.3f} to ×{interval[1]:.3f})"
        )
    ratio = c.ratio
    return f"{(ratio - 1) * 100:+.1f}% (×{ratio:.2f})" if ratio is not None else c.status.value


def format_percent(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 100:.2g}%" if x < 0.1 else f"{x * 100:.0f}%"


def format_mdc(c: Comparison) -> str:
    """The minimum detectable change at ALPHA (and the rounds it rests on), or why there is none."""
    if c.noise is None:
        return ""
    if c.mdc is None:
        return "unknown"
    rounds = f" ({c.noise.rounds} rounds)" if c.noise.rounds else ""
    return f"±{format_percent(c.mdc)}{rounds}"


def format_threshold(c: Comparison) -> str:
    if c.metric != MetricKind.WALL_TIME:
        return f"{c.threshold * 100:.2g}%"
    if c.noise is None or c.noise.sigma is None:  # no noise to test against: the factor alone
        return f"×{1 + c.threshold:.2f}"
    test = "rounds test" if c.noise.by_rounds else "history noise"
    if c.noise.mdc == c.threshold:
        return f"MDC ×{1 + c.threshold:.2f} + {test}"
    return f"×{1 + c.threshold:.2f} + {test}"


def md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _metric_label(c: Comparison, metric: Metric | None) -> str:
    """What was measured: an operator figure by its own name (eager seconds, not the wall time
    its unit is judged as), any other by how the gate judges it."""
    if metric is not None and metric.suite is Suite.OPERATORS:
        return metric.label
    return METRIC_LABELS[c.metric]


def markdown_table(rows: Sequence[Comparison], show_env: bool = False) -> list[str]:
    lines = [
        "| Benchmark | Metric | Before | After | Change | Threshold | MDC | Note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        change = format_change(c)
        metric = BenchmarkName.parse(c.name).metric
        if metric is not None and metric.is_record:  # a cache state or a hash: no change to size
            change = "-"
        cells = [
            f"`{c.name}`" + (f" [{c.env}]" if show_env else ""),
            _metric_label(c, metric),
            format_value(c.before, c.unit),
            format_value(c.after, c.unit),
            change,
            format_threshold(c),
            format_mdc(c),
            c.note,
        ]
        lines.append("| " + " | ".join(md_escape(x) for x in cells) + " |")
    return lines
