"""The operators pages: per build, operatorbench's table of TorchInductor speedups, with each
operator's median speedup over the builds before it as a sparkline.

The newest builds are on ``operators.html``, every build on its month's page
(`benchkit.report.site.paging`); a sparkline covers the `SPARK_BUILDS` builds up to the newest
of its page, so that a page's size does not grow with the history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchkit.report.site.data import (
    Build,
    OperatorRow,
    SiteData,
    history_commits,
    operator_rows,
    operators_anchor,
    slug,
)
from benchkit.report.site.pages import fmt_seconds, render_template
from benchkit.report.site.paging import BUILDS_PER_PART, FRONT_BUILDS, archive_links, month_parts

SPARK_BUILDS = 40  # builds a sparkline covers, up to the newest build of its page
SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 160.0, 36.0, 4.0
FRONT_PAGE = "operators.html"


def _sparkline(
    symbol_id: str, points: Sequence[tuple[Build, float]]
) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """An SVG symbol of median speedup per commit, and each commit's point (for the marker)."""
    width, height, pad = SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD
    values = [v for _, v in points]
    low, high = min([*values, 1.0]), max([*values, 1.0])
    span = (high - low) or 1.0
    step = (width - 2 * pad) / max(len(points) - 1, 1)
    coords: dict[str, tuple[str, str]] = {}
    dots = []
    for i, (build, value) in enumerate(points):
        x = pad + i * step if len(points) > 1 else width / 2  # a single commit sits in the middle
        y = height - pad - (value - low) / span * (height - 2 * pad)
        coords[build.commit] = (f"{x:.1f}", f"{y:.1f}")
        dots.append({"x": f"{x:.1f}", "y": f"{y:.1f}", "title": f"{build.label}: {value:.2f}×"})
    parity = height - pad - (1.0 - low) / span * (height - 2 * pad)
    symbol = {
        "id": symbol_id,
        "parity": f"{parity:.1f}",
        "polyline": " ".join(f"{x},{y}" for x, y in coords.values()),
        "dots": dots,
    }
    return symbol, coords


def _row_view(row: OperatorRow, symbol: str | None, marker: tuple[str, str] | None) -> dict[str, Any]:
    speedups = [
        {"sort": "" if q is None else q, "text": "-" if q is None else f"{q:.2f}×"}
        for q in (row.speedups or (None, None, None))
    ]
    times = [
        {"sort": "" if v is None else v, "text": fmt_seconds(v)}
        for v in (row.eager_s, row.compiled_s, row.compile_s)
    ]
    return {
        "operator": row.operator,
        "device": row.device,
        "inputs": row.inputs,
        "failed": row.failed,
        "speedups": speedups,
        "times": times,
        "symbol": symbol,
        "marker": marker,
    }


# (machine, commit) -> that build's operator rows, every machine's builds in history order
Tables = Mapping[tuple[str, str], Sequence[OperatorRow]]


def operator_tables(data: SiteData) -> dict[tuple[str, str], list[OperatorRow]]:
    tables = {}
    for machine in data.machines:
        for commit in history_commits(data, machine):
            rows = operator_rows(data.results[(machine, commit)], data.benchmarks)
            if rows:
                tables[(machine, commit)] = rows
    return tables


def _page_sections(data: SiteData, tables: Tables, shown: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The sections of the builds `shown` (newest first on the page) and the sparklines they use."""
    symbols: list[dict[str, Any]] = []
    sections = []
    for machine in dict.fromkeys(m for m, _ in shown):
        line = [c for (m, c) in tables if m == machine]
        newest = max(line.index(c) for (m, c) in shown if m == machine)
        window = line[max(0, newest + 1 - SPARK_BUILDS) : newest + 1]
        history: dict[str, list[tuple[Build, float]]] = {}
        for commit in window:
            for row in tables[(machine, commit)]:
                if row.speedups:
                    history.setdefault(f"{row.device}-{row.operator}", []).append(
                        (data.builds[commit], row.speedups[1])
                    )
        coords = {}
        for series, points in history.items():
            symbol, coords[series] = _sparkline(slug(f"spark-{machine}-{series}"), points)
            symbols.append(symbol)
        for commit in (c for (m, c) in shown if m == machine):
            view_rows = []
            for row in tables[(machine, commit)]:
                series = f"{row.device}-{row.operator}"
                spark = coords.get(series)
                symbol_id = slug(f"spark-{machine}-{series}") if spark else None
                view_rows.append(_row_view(row, symbol_id, spark.get(commit) if spark else None))
            build = data.builds[commit]
            sections.append(
                {
                    "anchor": operators_anchor(machine, build),
                    "machine": machine,
                    "build": build,
                    "rows": view_rows,
                }
            )
    order = {key: i for i, key in enumerate(shown)}
    sections.sort(key=lambda s: order[(s["machine"], s["build"].commit)])
    return {"sections": sections, "symbols": symbols}


def operator_pages(data: SiteData) -> tuple[dict[str, str], dict[str, str]]:
    """{file: HTML} of the operators pages, and {anchor of a build's section: its month page}."""
    tables = operator_tables(data)
    builds = list(tables)
    parts = month_parts("operators", builds, lambda key: data.builds[key[1]].date, BUILDS_PER_PART)
    archives = archive_links(parts)
    newest = sorted(builds, key=lambda key: data.builds[key[1]].date, reverse=True)
    pages = {FRONT_PAGE: _render(data, tables, newest[:FRONT_BUILDS], archives, len(builds), FRONT_PAGE)}
    homes = {}
    for part in parts:
        shown = list(reversed(part.items))  # newest first
        pages[part.file] = _render(data, tables, shown, archives, len(builds), part.label)
        for machine, commit in part.items:
            homes[operators_anchor(machine, data.builds[commit])] = part.file
    return pages, homes


def _render(
    data: SiteData,
    tables: Tables,
    shown: Sequence[tuple[str, str]],
    archives: Sequence[Mapping[str, Any]],
    total: int,
    label: str,
) -> str:
    title = "Operators: TorchInductor speedups" + ("" if label == FRONT_PAGE else f", {label}")
    return render_template(
        "operators.html",
        title,
        FRONT_PAGE,
        archives=archives,
        total=total,
        front=label == FRONT_PAGE,
        spark_builds=SPARK_BUILDS,
        **_page_sections(data, tables, shown),
    )
