"""Every page of benchkit's part of the site, rendered from one `SiteData`: the front page
(`landing`), changes, regressions, why and operators (`pages`)."""

from __future__ import annotations

import dataclasses

from benchkit.names import MetricKind
from benchkit.report.site import paging
from benchkit.report.site.count_links import walls_with_counts
from benchkit.report.site.data import PairChanges, SiteData, operators_anchor, pair_changes
from benchkit.report.site.explain import ProfileStore, explain
from benchkit.report.site.landing import render_landing
from benchkit.report.site.operators_page import operator_pages
from benchkit.report.site.pages import (
    changes_parts,
    mark_damaged,
    regression_sections,
    render_changes,
    render_regressions,
    render_why,
    render_why_index,
    why_file,
)


def render_pages(data: SiteData) -> tuple[dict[str, str], dict[str, int]]:
    """benchkit's pages as {path in the site: HTML}, and how many of each there are."""
    mark_damaged(data)
    pairs = pair_changes(data)
    pages, operators_home = operator_pages(data)
    home = paging.page_of(changes_parts(pairs), lambda pair: pair.anchor)
    pairs = [
        dataclasses.replace(
            p,
            page=home[p.anchor],
            operators_page=operators_home.get(operators_anchor(p.machine, p.head), "operators.html"),
        )
        for p in pairs
    ]
    why_pages: dict[str, dict[str, str]] = {}
    store = ProfileStore(data.conf.results_dir)
    for pair in pairs:
        for c in pair.changes:
            if c.metric != MetricKind.INSTRUCTIONS:
                continue
            why = explain(store, pair, c)
            if why is None:
                continue
            path = why_file(pair, c.name)
            pages[path] = render_why(data, pair, c, why)
            why_pages.setdefault(pair.anchor, {})[c.name] = path
        _link_wall_times(pair, why_pages.get(pair.anchor, {}))
    counts = {"pairs": len(pairs), "changes": sum(len(p.changes) for p in pairs), "why pages": len(pages)}
    steps = regression_sections(data)
    pages["index.html"] = render_landing(data, pairs, why_pages, steps)
    pages.update(render_changes(data, pairs, why_pages))
    pages.update(render_why_index(data, pairs, why_pages))
    pages.update(render_regressions(data, steps))
    return pages, counts


def _link_wall_times(pair: PairChanges, why: dict[str, str]) -> None:
    """A wall time whose case's instruction count moved links to that count's why page: the
    count says what the build runs differently there."""
    for wall, count in walls_with_counts(pair.changes):
        if count.name in why:
            why.setdefault(wall.name, why[count.name])
