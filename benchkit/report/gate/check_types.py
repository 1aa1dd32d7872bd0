"""The records of `benchkit check`: one benchmark's `Comparison` and the pair's `Verdict`.

They live below every module that makes or reads them (the gate, its decision, formatting,
rendering and not-judged steps, ``--json`` and the site), so none of those imports another
to name them.
"""

from __future__ import annotations

import dataclasses
import math

from benchkit.history.results.read import Measurement
from benchkit.names import MetricKind
from benchkit.report.gate.check_status import Status
from benchkit.report.gate.noise import Noise


@dataclasses.dataclass(frozen=True)
class Comparison:
    name: str
    env: str
    metric: MetricKind
    unit: str | None
    status: Status  # a plain string is read as the Status of that value
    before: Measurement | None
    after: Measurement | None
    threshold: float
    note: str = ""
    noise: Noise | None = None  # set when both sides had numbers

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @property
    def mdc(self) -> float | None:
        return self.noise.mdc if self.noise else None

    @property
    def judged_change(self) -> float | None:
        """The log change the verdict's test judged: a rounds or replicates test's own estimate,
        else the log of asv's two values; None without both."""
        if self.noise is not None and self.noise.change is not None:
            return self.noise.change
        ratio = self.ratio
        return math.log(ratio) if ratio is not None and ratio > 0 else None

    def interval(self) -> tuple[float, float] | None:
        """The judged change's confidence interval (factors) at its test's α; None without noise."""
        change, noise = self.judged_change, self.noise
        half = noise.half_width if noise is not None else None
        if change is None or half is None:
            return None
        return math.exp(change - half), math.exp(change + half)

    def p_value(self) -> float | None:
        """The two-sided p of the judged change under its noise; None without a noise estimate."""
        change = self.judged_change
        return None if change is None or self.noise is None else self.noise.p_value(change)

    @property
    def ratio(self) -> float | None:
        if not self.before or not self.after or self.before.value is None or self.after.value is None:
            return None
        if self.before.skipped or self.after.skipped or self.before.value == 0:
            return None
        return self.after.value / self.before.value


@dataclasses.dataclass(frozen=True)
class Verdict:
    exit_code: int  # 0 clean, 1 regression or a number lost on head, 2 incomplete or not judged
    markdown: str
    comparisons: tuple[Comparison, ...]
    problems: tuple[str, ...] = ()  # why the comparison is incomplete (`check_render.unjudged_metrics`)
    shifts: tuple[str, ...] = ()  # environment shifts found (`benchkit.report.gate.shifts.EnvShift`)
    not_judged: tuple[str, ...] = ()  # why verdicts were not given (`benchkit.report.gate.not_judged`)
    headline: str = ""  # the verdict and the count of each status, one line
    build_wide: tuple[str, ...] = ()  # a shift of builds measured interleaved: the build's
