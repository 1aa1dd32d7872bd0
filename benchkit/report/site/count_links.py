"""Which wall times of a judged pair have a why page through their case's instruction count,
for readers of the job's verdict file (the site's own rows link the same way, `render`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from benchkit.names import BenchmarkName, MetricKind
from benchkit.report.gate.check_types import Comparison
from benchkit.report.site.pages import why_path


@dataclasses.dataclass(frozen=True)
class CountLink:
    wall: Comparison  # the wall time's verdict
    count: Comparison  # its case's instruction count, which moved
    path: str  # the count's why page, relative to the site's folder


def walls_with_counts(comparisons: Sequence[Comparison]) -> list[tuple[Comparison, Comparison]]:
    """Each wall time in `comparisons` with its case's instruction count, where both are there."""
    counts = {BenchmarkName.parse(c.name).case: c for c in comparisons if c.metric == MetricKind.INSTRUCTIONS}
    walls = (c for c in comparisons if c.metric == MetricKind.WALL_TIME)
    return [(w, counts[case]) for w in walls if (case := BenchmarkName.parse(w.name).case) in counts]


def count_links(
    comparisons: Sequence[Comparison], machine: str, base_commit: str, head_commit: str, html_dir: Path
) -> list[CountLink]:
    """Each wall time in `comparisons` whose case's instruction count has a why page in the
    published site at `html_dir` (a page is written where the count moved and its profiles
    explain it)."""
    links = []
    for wall, count in walls_with_counts(comparisons):
        path = why_path(machine, base_commit, head_commit, count.name)
        if (html_dir / path).is_file():
            links.append(CountLink(wall, count, path))
    return links
