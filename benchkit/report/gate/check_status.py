"""The verdicts `benchkit check` gives, and which of them fail the gate (docs/verdicts.md).

Each value is the exact text the reports print (Markdown, ``--json``, the site), so a
`Status` reads and compares as that string.
"""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """One benchmark's verdict."""

    # both sides had numbers and were compared
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    CANT_TELL = "can't tell"
    INSUFFICIENT_DATA = "insufficient data"
    # a side without a number
    NEWLY_FAILING = "newly failing"
    NEWLY_SKIPPED = "newly skipped"
    MISSING_ON_HEAD = "missing on head"
    STILL_FAILING = "still failing"
    FIXED = "fixed"
    NOT_COMPARED = "not compared"
    IGNORED = "ignored"
    # not judged (`benchkit.report.gate.not_judged`)
    DISTURBED = "disturbed build"
    CACHE_DIFFERED = "cache state differed"

    # The value, not "Status.REGRESSION", wherever a report formats it (Python 3.10 to 3.12
    # differ on how a str-mixin enum formats).
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# A number on BASE and none on HEAD; with a regression they fail the gate (exit 1).
LOST_ON_HEAD = (Status.NEWLY_FAILING, Status.NEWLY_SKIPPED, Status.MISSING_ON_HEAD)
FAILS_GATE = (Status.REGRESSION, *LOST_ON_HEAD)
# Both sides had a number and were compared.
NUMERIC_STATUSES = (
    Status.REGRESSION,
    Status.IMPROVEMENT,
    Status.UNCHANGED,
    Status.CANT_TELL,
    Status.INSUFFICIENT_DATA,
)
# Compared, but noise hides the answer: shown and counted, never as "unchanged", never failing.
UNCERTAIN = (Status.CANT_TELL, Status.INSUFFICIENT_DATA)
# Not judged: no "no regression" either, the gate exits 2.
NOT_JUDGED = (Status.DISTURBED, Status.CACHE_DIFFERED)


def exit_effect(status: Status) -> str:
    """What one verdict does to the gate's exit status (the decision table's last column)."""
    if status in FAILS_GATE:
        return "exit 1"
    if status in NOT_JUDGED:
        return "exit 2"
    return "-"
