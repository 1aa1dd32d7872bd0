"""benchkit's pages from Jinja2 templates (``templates/``), autoescaped.

This module turns the site's data into the values the templates print: numbers
formatted, links built, rows grouped. Every string reaches HTML through the
template engine's escaping; the only markup made here (`breakable`) escapes first.
"""

from __future__ import annotations

import functools
import math
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from benchkit.history.results.read import Measurement
from benchkit.names import BenchmarkName, Metric, MetricKind, benchmark_key, readable_name
from benchkit.report.gate import check
from benchkit.report.gate.check_types import Comparison
from benchkit.report.site import paging
from benchkit.report.site.data import (
    LISTED_ORDER,
    BenchmarkInfo,
    PairChanges,
    SiteData,
    machine_history,
    operators_anchor,
    slug,
)
from benchkit.report.site.explain import GROUP_ORDER, Explanation, function_group
from benchkit.report.steps import changepoints
from benchkit.util import content_key

# asv's page (grid, list and one graph per benchmark), moved from index.html: ours is the front page.
ASV_PAGE = "graphs.html"
# The site's navigation, in order: (file, label).
PAGES = (
    ("index.html", "Overview"),
    ("changes.html", "Changes"),
    ("regressions.html", "Regressions"),
    ("why.html", "Why"),
    ("operators.html", "Operators"),
    (ASV_PAGE, "Graphs"),
)
METRIC_HEADINGS = {
    MetricKind.INSTRUCTIONS: "Instruction counts",
    MetricKind.WALL_TIME: "Wall time",
    MetricKind.RATIO: "Operator ratios and other tracked values",
}
UPSTREAM_COMMIT_URL = "https://github.com/pytorch/pytorch/commit/{}"
TOP_FUNCTIONS = 12  # per group and direction on a why page


def breakable(name: str) -> Markup:
    """Escaped, with line-break opportunities after dots and underscores of a long dotted name."""
    escaped = str(escape(name))
    if " " in name:
        return Markup(escaped)
    return Markup(escaped.replace(".", ".<wbr>").replace("_", "_<wbr>"))


def _upstream_url(git_version: str) -> str:
    return UPSTREAM_COMMIT_URL.format(urllib.parse.quote(git_version))


def _utc(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(timestamp))


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt field fails loudly, not as an empty cell
        keep_trailing_newline=True,
    )
    env.filters["breakable"] = breakable
    env.globals.update(upstream_url=_upstream_url, utc=_utc, pages=PAGES, asv_page=ASV_PAGE, damaged=())
    return env


def render_template(template: str, title: str, active: str, depth: int = 0, **values: Any) -> str:
    """A page from its template; `active`: its file, marked in the navigation; `depth`: how many
    folders below the site's root it lies."""
    return (
        _environment().get_template(template).render(title=title, active=active, up="../" * depth, **values)
    )


def mark_damaged(data: SiteData) -> None:
    """Every page names the results files --skip-damaged left out."""
    _environment().globals["damaged"] = [f.describe(data.project_dir) for f in data.damaged]


# -------------------------------------------------------------- formatting


def graph_url(info: BenchmarkInfo | None, name: str, machine: str, branch: str, pair: PairChanges) -> str:
    """asv's URL of a benchmark's graph: ``graphs.html#<name>?machine=..&p-<param>=..&commits=a-b``."""
    return commits_graph_url(info, name, machine, branch, f"{pair.base.short}-{pair.head.short}")


def commits_graph_url(info: BenchmarkInfo | None, name: str, machine: str, branch: str, commits: str) -> str:
    key = info.key if info else benchmark_key(name)
    query: list[tuple[str, str]] = [("machine", machine), ("branch", branch)]
    if info:
        query += [(f"p-{n}", v) for n, v in zip(info.param_names, info.params, strict=True)]
    query.append(("commits", commits))
    encoded = "&".join(f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}" for k, v in query)
    return f"{ASV_PAGE}#{urllib.parse.quote(key, safe='')}?{encoded}"


def why_file(pair: PairChanges, name: str) -> str:
    return why_path(pair.machine, pair.base.commit, pair.head.commit, name)


def why_path(machine: str, base_commit: str, head_commit: str, name: str) -> str:
    """Where in the site the why page of benchmark `name` between two builds lives."""
    return f"why/{content_key(machine, base_commit, head_commit, name)}.html"


def display_unit(c: Comparison) -> str | None:
    """The unit to print a value in; from the method name when benchmarks.json lacks the benchmark
    (asv rewrites that file for the benchmarks of its last run)."""
    if c.unit is not None:
        return c.unit
    return BenchmarkName.parse(c.name).fallback_unit()


def fmt_value(c: Comparison, measurement: Measurement | None) -> str:
    return str(check.format_value(measurement, display_unit(c)))


def _log_ratio(ratio: float | None) -> str:
    """Sort key of a ratio: ×2 and ×0.5 are equally far from no change."""
    return f"{math.log(ratio):.6f}" if ratio else "0"


def _fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"×{ratio:.3f} ({(ratio - 1) * 100:+.1f}%)"


def _fmt_instructions(n: float, signed: bool = False) -> str:
    """Instructions per execution: whole numbers, a decimal when small (they are medians/number)."""
    text = f"{n:+,.1f}" if signed else f"{n:,.1f}"
    if abs(n) >= 100:
        text = f"{n:+,.0f}" if signed else f"{n:,.0f}"
    return "0" if signed and n == 0 else text


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    from asv import util as asv_util

    return str(asv_util.human_value(value, "seconds"))


def _pretty(data: SiteData, name: str) -> str:
    info = data.benchmarks.get(name)
    return info.pretty if info else name


# -------------------------------------------------------------- changes


def change_row(c: Comparison, data: SiteData, pair: PairChanges, why: Mapping[str, str]) -> dict[str, Any]:
    return {
        "c": c,
        "css": slug(c.status),
        "pretty": _pretty(data, c.name),
        "env": c.env if data.env_count > 1 and c.env else "",
        "graph": graph_url(data.benchmarks.get(c.name), c.name, pair.machine, pair.branch, pair),
        "before": fmt_value(c, c.before),
        "after": fmt_value(c, c.after),
        "sort_ratio": _log_ratio(c.ratio),
        "ratio": _fmt_ratio(c.ratio),
        "threshold": check.format_threshold(c),
        "mdc": check.format_mdc(c),
        "why": why.get(c.name),
    }


def _status_order(count: tuple[str, int]) -> int:
    return LISTED_ORDER.index(count[0]) if count[0] in LISTED_ORDER else len(LISTED_ORDER)


def pair_view(data: SiteData, pair: PairChanges, why: Mapping[str, str]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for c in pair.changes:
        counts[c.status] = counts.get(c.status, 0) + 1
        by_metric.setdefault(c.metric, []).append(change_row(c, data, pair, why))
    # The uncertain are counted whole (listed or not), once.
    listed = sorted(((s, n) for s, n in counts.items() if s not in dict(pair.uncertain)), key=_status_order)
    summary = ", ".join(check.count_phrase(n, s) for s, n in [*listed, *pair.uncertain])
    return {
        "pair": pair,
        "summary": summary or ("nothing flagged" if pair.problems else "no change beyond thresholds"),
        "operators_link": f"{pair.operators_page}#{operators_anchor(pair.machine, pair.head)}",
        "by_metric": [(METRIC_HEADINGS.get(m, m), rows) for m, rows in by_metric.items()],
    }


def changes_parts(pairs: Sequence[PairChanges]) -> list[paging.Part[PairChanges]]:
    """Every pair on the page of its head build's month."""
    return paging.month_parts("changes", pairs, lambda p: p.head.date, paging.PAIRS_PER_PART)


def _changes_groups(
    data: SiteData, pairs: Sequence[PairChanges], why_pages: Mapping[str, dict[str, str]]
) -> list[dict[str, Any]]:
    grouped: dict[tuple[str, str], list[PairChanges]] = {}
    for pair in pairs:
        grouped.setdefault((pair.machine, pair.branch), []).append(pair)
    return [
        {
            "anchor": slug(f"{machine}-{branch}"),
            "machine": machine,
            "branch": branch,
            "changed": sum(1 for p in group if p.changes),
            # newest first
            "pairs": [pair_view(data, p, why_pages.get(p.anchor, {})) for p in reversed(group)],
        }
        for (machine, branch), group in grouped.items()
    ]


def render_changes(
    data: SiteData,
    pairs: Sequence[PairChanges],
    why_pages: Mapping[str, dict[str, str]],
) -> dict[str, str]:
    """changes.html (each branch's newest pairs) and a page per month (`changes_parts`)."""
    parts = changes_parts(pairs)
    archives = paging.archive_links(parts)
    front: list[PairChanges] = []
    for machine, branch in dict.fromkeys((p.machine, p.branch) for p in pairs):
        front += [p for p in pairs if (p.machine, p.branch) == (machine, branch)][-paging.FRONT_PAIRS :]
    pages = {}
    for file, label, shown in [("changes.html", "", front), *((p.file, p.label, p.items) for p in parts)]:
        pages[file] = render_template(
            "changes.html", f"Changes, {label}" if label else "Changes", "changes.html",
            groups=_changes_groups(data, shown, why_pages), config_source=data.config.source,
            archives=archives, front=not label, total=len(pairs), front_pairs=paging.FRONT_PAIRS,
        )  # fmt: skip
    return pages


# -------------------------------------------------------------- regressions


def regression_sections(data: SiteData) -> list[dict[str, Any]]:
    """Per machine, the steps over its whole history (`benchkit.report.steps.changepoints`), newest
    first, as the regressions page and the front page show them."""
    units = {info.key: info.unit for info in data.benchmarks.values()}
    metric_of = check.metric_judge(units, data.config)
    sections = []
    for machine in data.machines:
        history = machine_history(data, machine)
        branch = next((b for (m, b) in data.branch_commits if m == machine), "main")
        found = changepoints.history_steps(
            history,
            metric_of,
            lambda name: data.config.rule_for(name, metric_of(name))[1],
            data.config.thresholds["instructions"],
        )
        steps = found.steps
        rows = [
            {
                "s": s,
                "before": data.builds[s.before],
                "after": data.builds[s.after],
                "pretty": _pretty(data, s.name),
                "graph": commits_graph_url(
                    data.benchmarks.get(s.name), s.name, machine, branch, f"{s.before[:8]}-{s.after[:8]}"
                ),
                "css": (
                    ("regression" if s.change > 0 else "improvement")
                    if changepoints.judged(s)
                    else "notjudged"
                ),
                "label": changepoints.shown_label(s),
                "meaning": changepoints.LABEL_MEANINGS[changepoints.legend_key(changepoints.shown_label(s))],
                "change": f"{s.change * 100:+.1f}%",
                "interval": (
                    f"{s.low * 100:+.1f}% … {s.high * 100:+.1f}%"
                    if s.low is not None and s.high is not None
                    else (
                        "n/a (one build)"
                        if s.label == changepoints.OUTLIER
                        else "not judged (one build a side)"
                    )
                )
                if not s.reason
                else "not judged",
                "sort": f"{s.change:.6g}",
            }
            for s in reversed(steps)  # newest first
        ]
        shifted = [(data.builds[c], text) for c, text in found.unreliable()]
        legend = changepoints.legend(steps, disturbed=bool(found.disturbed))
        sections.append(
            {"machine": machine, "commits": len(history), "rows": rows, "shifted": shifted, "legend": legend}
        )
    return sections


def render_regressions(data: SiteData, sections: Sequence[dict[str, Any]]) -> dict[str, str]:
    """regressions.html (each machine's newest steps) and a page per month of the steps' builds."""
    rows = [(sec["machine"], row) for sec in sections for row in reversed(sec["rows"])]  # oldest first
    parts = paging.month_parts("regressions", rows, lambda item: item[1]["after"].date, paging.STEPS_PER_PART)
    archives = paging.archive_links(parts)
    front = [(sec["machine"], row) for sec in sections for row in reversed(sec["rows"][: paging.FRONT_STEPS])]
    pages = {}
    for file, label, shown in [("regressions.html", "", front), *((p.file, p.label, p.items) for p in parts)]:
        kept = [
            {**sec, "rows": [row for machine, row in reversed(shown) if machine == sec["machine"]]}
            for sec in sections
        ]
        pages[file] = render_template(
            "regressions.html", f"Regressions, {label}" if label else "Regressions", "regressions.html",
            sections=kept, level=f"{changepoints.INTERVAL_LEVEL:.0%}", config_source=data.config.source,
            meanings=changepoints.LABEL_MEANINGS, archives=archives, front=not label,
            total=len(rows), front_steps=paging.FRONT_STEPS,
        )  # fmt: skip
    return pages


# -------------------------------------------------------------- why


def render_why(data: SiteData, pair: PairChanges, c: Comparison, why: Explanation) -> str:
    # The case key as written, escaped by the template: asv's pretty name has look-alikes.
    pretty = readable_name(why.diff.key, Metric.INSTRUCTIONS) if c.name in data.benchmarks else c.name
    values: dict[str, Any] = {
        "pair": pair,
        "pretty": pretty,
        "graph": graph_url(data.benchmarks.get(c.name), c.name, pair.machine, pair.branch, pair),
        "before": fmt_value(c, c.before),
        "after": fmt_value(c, c.after),
        "ratio": _fmt_ratio(c.ratio),
        "failed": why.diff.note if why.diff.status == "failed" else "",
        "top": TOP_FUNCTIONS,
    }
    total_before = sum(b for _, b, _ in why.groups)
    total_after = sum(h for _, _, h in why.groups)
    net = total_after - total_before
    scale = max((abs(h - b) for _, b, h in why.groups), default=0) or 1
    groups = []
    for group, before, after in why.groups:
        moved = after != before
        groups.append(
            {
                "name": group,
                "anchor": slug(group),
                "before": _fmt_instructions(before),
                "after": _fmt_instructions(after),
                "change": _fmt_instructions(after - before, signed=True),
                "direction": "up" if after > before else "down" if after < before else "",
                "width": f"{100 * abs(after - before) / scale:.0f}" if moved else None,
                "share": f"{(after - before) / net * 100:.0f}% of the net change" if moved and net else "",
            }
        )
    moved_functions: dict[str, dict[str, list[Any]]] = {g: {"up": [], "down": []} for g in GROUP_ORDER}
    for d in why.diff.increases:
        moved_functions[function_group(d.function)]["up"].append(d)
    for d in why.diff.decreases:
        moved_functions[function_group(d.function)]["down"].append(d)
    functions = []
    for group in GROUP_ORDER:
        tables = []
        for title, direction in (("more instructions", "up"), ("fewer instructions", "down")):
            rows = moved_functions[group][direction]  # largest change first (the diff's order)
            if rows:
                tables.append(
                    {
                        "title": title,
                        "direction": direction,
                        "total": len(rows),
                        "rows": [
                            {
                                "function": d.function,
                                "before": _fmt_instructions(d.base),
                                "after": _fmt_instructions(d.head),
                                "delta": d.delta,
                                "change": _fmt_instructions(d.delta, signed=True),
                            }
                            for d in rows[:TOP_FUNCTIONS]
                        ],
                    }
                )
        functions.append({"name": group, "anchor": slug(group), "tables": tables})
    values.update(
        total_before=_fmt_instructions(total_before),
        total_after=_fmt_instructions(total_after),
        net=_fmt_instructions(net, signed=True),
        groups=groups,
        functions=functions,
    )
    return render_template("why.html", f"Why: {pretty}", "why.html", depth=1, **values)


def render_why_index(
    data: SiteData, pairs: Sequence[PairChanges], why_pages: Mapping[str, dict[str, str]]
) -> dict[str, str]:
    """why.html (the newest instruction-count changes) and a page per month of their builds."""
    rows = []
    for pair in pairs:
        for c in pair.changes:
            if c.metric == MetricKind.INSTRUCTIONS:
                rows.append(
                    {
                        "c": c,
                        "pair": pair,
                        "css": slug(c.status),
                        "pretty": _pretty(data, c.name),
                        "sort_ratio": _log_ratio(c.ratio),
                        "ratio": _fmt_ratio(c.ratio),
                        "page": why_pages.get(pair.anchor, {}).get(c.name),
                    }
                )
    rows.sort(key=lambda row: row["pair"].head.date)  # stable: a pair's rows keep their order
    missing = sum(1 for row in rows if row["page"] is None)
    parts = paging.month_parts("why", rows, lambda row: row["pair"].head.date, paging.STEPS_PER_PART)
    archives = paging.archive_links(parts)
    title = "Why did instruction counts change?"
    pages = {}
    front = rows[-paging.FRONT_STEPS :]
    for file, label, shown in [("why.html", "", front), *((p.file, p.label, p.items) for p in parts)]:
        pages[file] = render_template(
            "why_index.html", f"{title} {label}" if label else title, "why.html",
            rows=list(reversed(shown)), missing=missing, archives=archives, front=not label,
            total=len(rows), front_rows=paging.FRONT_STEPS,
        )  # fmt: skip
    return pages
