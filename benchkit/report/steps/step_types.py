"""A step over a history: the record `benchkit regressions` finds and every report shows.

Its own module, below the modules that make it (`benchkit.report.steps.changepoints`) and those
that label it (`benchkit.report.gate.kernels`), so neither imports the other for its type.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    env: str
    metric: str
    before: str  # last commit of the old level
    after: str  # first commit of the new level
    exact: bool  # `after` directly follows `before` in the history: the step is that commit's
    value_before: float
    value_after: float
    change: float  # relative: value_after / value_before - 1
    low: float | None  # INTERVAL_LEVEL interval of `change`; None: no level has the builds
    high: float | None  # to show its spread (e.g. one build on each side of the step)
    position: int  # index of `after` in the history
    label: str = ""  # a joint label from LABELS; "" when the case has no pair metric
    reason: str = ""  # why the step is not judged beyond its sides, e.g. the cache state differed

    def as_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)
