"""Every page of benchkit's part of the site, rendered from one `SiteData`: the front page
(`landing`), changes, regressions, why and operators (`pages`)."""

from __future__ import annotations

import dataclasses
import functools

from benchkit.names import MetricKind
from benchkit.report.site import paging
from benchkit.report.site.count_links import walls_with_counts
from benchkit.report.site.data import PAIRS_PER_WORKER, PairChanges, SiteData, operators_anchor, pair_changes
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
from benchkit.util import forked_map


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
    # A long history's pairs on every core: a why page reads two stored profiles.
    rendered = forked_map(functools.partial(_why_pages, data, store), pairs, min_per_worker=PAIRS_PER_WORKER)
    for pair, pair_pages in zip(pairs, rendered, strict=True):
        for name, (path, html) in pair_pages.items():
            pages[path] = html
            why_pages.setdefault(pair.anchor, {})[name] = path
        _link_wall_times(pair, why_pages.get(pair.anchor, {}))
    counts = {"pairs": len(pairs), "changes": sum(len(p.changes) for p in pairs), "why pages": len(pages)}
    steps = regression_sections(data)
    pages["index.html"] = render_landing(data, pairs, why_pages, steps)
    pages.update(render_changes(data, pairs, why_pages))
    pages.update(render_why_index(data, pairs, why_pages))
    pages.update(render_regressions(data, steps))
    return pages, counts


def _why_pages(data: SiteData, store: ProfileStore, pair: PairChanges) -> dict[str, tuple[str, str]]:
    """The pair's why pages: instruction count -> (its page's path, the page)."""
    pages = {}
    for c in pair.changes:
        if c.metric != MetricKind.INSTRUCTIONS:
            continue
        why = explain(store, pair, c)
        if why is not None:
            pages[c.name] = (why_file(pair, c.name), render_why(data, pair, c, why))
    return pages


def _link_wall_times(pair: PairChanges, why: dict[str, str]) -> None:
    """A wall time whose case's instruction count moved links to that count's why page: the
    count says what the build runs differently there."""
    for wall, count in walls_with_counts(pair.changes):
        if count.name in why:
            why.setdefault(wall.name, why[count.name])
