"""The site's front page, ``index.html``: what the newest build of each branch changed against
the build before it, the newest steps over each machine's history, and what the history holds.
Everything else is one link away: all pairs (changes), all steps (regressions), where the
instructions went (why), operators, and asv's graphs (`pages.ASV_PAGE`).

It never says "no change" for what it could not compare: a branch with one build, a pair a
metric of which has numbers on one side only, builds on no branch and benchmarks without
results are each named as such.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from benchkit.names import MetricKind
from benchkit.report.site.data import (
    LISTED_ORDER,
    Build,
    PairChanges,
    SiteData,
    history_commits,
    slug,
    suite_coverage,
)
from benchkit.report.site.pages import pair_view, render_template

LATEST_CHANGES = 15  # rows per newest pair; the changes page lists them all
LATEST_STEPS = 10  # rows per machine; the regressions page lists them all
METRIC_WORDS = {
    MetricKind.INSTRUCTIONS: "instructions",
    MetricKind.WALL_TIME: "wall time",
    MetricKind.RATIO: "tracked value",
}


def _urgency(row: Mapping[str, Any]) -> tuple[int, float]:
    """What fails the gate first, then the largest change."""
    ratio = row["c"].ratio
    return LISTED_ORDER.index(row["c"].status), -abs(math.log(ratio)) if ratio else 0.0


def _latest(
    data: SiteData, pairs: Sequence[PairChanges], why_pages: Mapping[str, dict[str, str]]
) -> list[dict[str, Any]]:
    """Per branch and machine: its newest pair (or why there is none), its changes most urgent first."""
    newest = {(p.machine, p.branch): p for p in pairs}  # pairs come oldest first per branch
    groups = []
    for (machine, branch), commits in data.branch_commits.items():
        group: dict[str, Any] = {
            "machine": machine,
            "branch": branch,
            "anchor": slug(f"latest-{machine}-{branch}"),
            "changes_anchor": slug(f"{machine}-{branch}"),  # the branch's heading on the changes page
            "only": data.builds[commits[0]] if len(commits) == 1 else None,
            "view": None,
            "rows": [],
            "more": 0,
        }
        pair = newest.get((machine, branch))
        if pair is not None:
            view = pair_view(data, pair, why_pages.get(pair.anchor, {}))
            rows = sorted((row for _, rows in view["by_metric"] for row in rows), key=_urgency)
            for row in rows:
                row["metric"] = METRIC_WORDS.get(row["c"].metric, row["c"].metric)
            group.update(view=view, rows=rows[:LATEST_CHANGES], more=max(0, len(rows) - LATEST_CHANGES))
        groups.append(group)
    return groups


def _off_branch(data: SiteData, machine: str) -> list[Build]:
    """Measured builds of `machine` on no configured branch: no pair compares them."""
    on_branch = {c for (m, _), commits in data.branch_commits.items() if m == machine for c in commits}
    found = [data.builds[c] for (m, c) in data.results if m == machine and c not in on_branch]
    return sorted(found, key=lambda b: (b.revision, b.date))


def _history(data: SiteData) -> list[dict[str, Any]]:
    machines = []
    for machine in data.machines:
        builds = [data.builds[c] for c in history_commits(data, machine)]
        by_date = sorted(builds, key=lambda b: b.date)
        machines.append(
            {
                "machine": machine,
                "builds": len(builds),
                "oldest": by_date[0] if by_date else None,
                "newest": by_date[-1] if by_date else None,
                "off_branch": _off_branch(data, machine),
            }
        )
    return machines


def render_landing(
    data: SiteData,
    pairs: Sequence[PairChanges],
    why_pages: Mapping[str, dict[str, str]],
    step_sections: Sequence[Mapping[str, Any]],
) -> str:
    """`step_sections`: `pages.regression_sections`, as the regressions page shows them."""
    steps = []
    for sec in step_sections:
        rows = [{**row, "metric": METRIC_WORDS.get(row["s"].metric, row["s"].metric)} for row in sec["rows"]]
        # Newest first; at one commit, judged steps before the others, the largest first.
        rows.sort(key=lambda r: (-r["s"].position, r["css"] == "notjudged", -abs(r["s"].change)))
        steps.append({**sec, "rows": rows[:LATEST_STEPS], "more": max(0, len(rows) - LATEST_STEPS)})
    return render_template(
        "index.html",
        f"{data.conf.project}: what changed",
        "index.html",
        machines=data.machines,
        latest=_latest(data, pairs, why_pages),
        steps=steps,
        history=_history(data),
        coverage=suite_coverage(data),
        config_source=data.config.source,
    )
