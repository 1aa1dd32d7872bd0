"""Instruction counts kept per case and torch build, so a case is counted once.

Counts under Callgrind are deterministic: the same statement, torch build, valgrind
and counting code give the same number (A/A differences stay below 0.003 %). So a
case counted for a build is looked up, not counted again -- by asv's second round,
by a later ``-b`` selection that includes it, by the next ``benchkit main``.

The key of a case is everything its count depends on: the case's fingerprint (its
statement, setup, language, threads...), the torch build (`benchkit.util.torch_build_id`,
which includes the wheel's RECORD, so patched twins differ), valgrind's version and
the counting code itself (the sources of the modules that run under valgrind). Only
successful counts are kept; a failure is counted again next time. Each entry is one
file written atomically, so a batch interrupted half-way leaves whole entries and
never passes for complete. ``BENCHKIT_RECOUNT=1`` ignores the entries (and replaces them).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import settings
from benchkit.util import atomic_write_json, cache_dir, content_key, torch_build_id

if TYPE_CHECKING:
    from benchkit.define.expand import Case
    from benchkit.measure.callgrind.results import CaseCount


def recount_requested() -> bool:
    return settings.current().measure.recount


@functools.cache
def counting_code_key() -> str:
    """Every file of the Callgrind stage, the statement loop and the C++ shards (which
    hold the counting functions): a change to any of them may move counts, so counts
    from older code are not reused."""
    here = Path(__file__).resolve().parent
    sources = [*sorted(here.glob("*.py")), here.parent / "stmt_loop.py", here.parent / "cpp" / "shards.py"]
    return content_key(*(f"{path.name}\n{path.read_text()}" for path in sources))


def store_dir(valgrind: str) -> Path:
    """The folder of this torch build's counts under this valgrind and counting code."""
    return cache_dir("callgrind", "counts", content_key(torch_build_id(), valgrind, counting_code_key()))


def _entry_path(store: Path, case: Case) -> Path:
    return store / f"{case.fingerprint}.json"


def load(store: Path, cases: Sequence[Case]) -> dict[str, CaseCount]:
    """The stored counts of these cases, by case key (cases without an entry are absent)."""
    from benchkit.measure.callgrind.results import CaseCount

    found: dict[str, CaseCount] = {}
    if recount_requested():
        return found
    for case in cases:
        try:
            data = json.loads(_entry_path(store, case).read_text())
        except (OSError, ValueError):
            continue  # not counted yet, or unreadable: count it again
        try:
            data["repeat_totals"] = tuple(data["repeat_totals"])
            count = CaseCount(**{**data, "key": case.key})
        except (KeyError, TypeError):
            continue
        if count.status == "ok":
            found[case.key] = count
    return found


def save(store: Path, cases: Sequence[Case], counts: Mapping[str, CaseCount]) -> int:
    """Keep the successful counts of these cases; returns how many were written."""
    written = 0
    for case in cases:
        count = counts.get(case.key)
        if count is None or count.status != "ok":
            continue
        data: dict[str, Any] = dataclasses.asdict(count)
        data["functions"] = dict(count.functions)
        atomic_write_json(_entry_path(store, case), data)
        written += 1
    return written
