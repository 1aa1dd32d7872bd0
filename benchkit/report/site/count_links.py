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


def count_links(
    comparisons: Sequence[Comparison], machine: str, base_commit: str, head_commit: str, html_dir: Path
) -> list[CountLink]:
    """Each wall time in `comparisons` whose case's instruction count has a why page in the
    published site at `html_dir` (a page is written where the count moved and its profiles
    explain it)."""
    counts = {BenchmarkName.parse(c.name).case: c for c in comparisons if c.metric == MetricKind.INSTRUCTIONS}
    links = []
    for c in comparisons:
        count = counts.get(BenchmarkName.parse(c.name).case) if c.metric == MetricKind.WALL_TIME else None
        if count is None:
            continue
        path = why_path(machine, base_commit, head_commit, count.name)
        if (html_dir / path).is_file():
            links.append(CountLink(c, count, path))
    return links
