"""The pages that grow with the history, split so that none a user opens grows without end.

Changes, regressions, why and operators list something per build. Each keeps its newest items
on its own page (``changes.html``) and every item on the page of its month
(``changes-2026-03.html``; a busy month in parts, ``changes-2026-03-2.html``), each page linking
the others. An item's month page is where links point: it does not move when the history
grows, since a month's items are kept oldest first and new ones only join its last part.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")

# How many of each page's items its front page shows, and how many a month's part holds: sized
# so that a page of a history of ~1,400 benchmarks stays under ~1 MB.
FRONT_PAIRS, PAIRS_PER_PART = 12, 25
FRONT_STEPS, STEPS_PER_PART = 150, 600
FRONT_BUILDS, BUILDS_PER_PART = 6, 12


@dataclasses.dataclass(frozen=True)
class Part(Generic[Item]):
    """One month's page (or part of one): its file, its label and its items, oldest first."""

    file: str
    label: str
    items: tuple[Item, ...]


def _month(timestamp: float) -> str:
    return time.strftime("%Y-%m", time.gmtime(timestamp))


def month_parts(
    stem: str, items: Sequence[Item], date_of: Callable[[Item], float], per_part: int
) -> list[Part[Item]]:
    """`items` by the month of their date (UTC), each month cut into parts of `per_part`, oldest
    month first. Items of one date keep their order in `items`."""
    by_month: dict[str, list[Item]] = {}
    for item in sorted(items, key=date_of):  # sorted() is stable: ties keep the given order
        by_month.setdefault(_month(date_of(item)), []).append(item)
    parts: list[Part[Item]] = []
    for month in sorted(by_month):
        chunk = by_month[month]
        count = (len(chunk) + per_part - 1) // per_part
        for index in range(count):
            suffix = f"-{index + 1}" if index else ""
            label = month if count == 1 else f"{month} ({index + 1}/{count})"
            items = tuple(chunk[index * per_part : (index + 1) * per_part])
            parts.append(Part(f"{stem}-{month}{suffix}.html", label, items))
    return parts


def page_of(parts: Sequence[Part[Item]], key: Callable[[Item], str]) -> dict[str, str]:
    """Each item's key -> the file of its part."""
    return {key(item): part.file for part in parts for item in part.items}


def archive_links(parts: Sequence[Part[Item]]) -> list[dict[str, str | int]]:
    """The month pages as a page's list of links, newest first."""
    return [{"file": p.file, "label": p.label, "count": len(p.items)} for p in reversed(parts)]
