"""One error budget for a whole comparison of two builds.

Each figure's own test keeps its false-alarm rate per figure (`benchkit.stats.ALPHA`), but a
comparison judges hundreds of figures (every case's wall time and instruction count, every
operator input's timings), so a false flag somewhere would be likely even where each test
keeps its α. The gate therefore holds every figure it tests to the Benjamini-Hochberg step-up
rule over all of them together (`FAMILY_Q`): for two builds that run the same code, where
every figure is unchanged, the chance that any figure is flagged is at most `FAMILY_Q`
(Benjamini and Hochberg, 1995; their rule holds for tests that are independent or positively
dependent, as figures of one build that a common shift moves alike are). Where many figures
did change, the rule lets each through at a larger α than a fixed correction would.

Left out of the family: figures the pair leaves unjudged (`benchkit.report.gate.not_judged`:
no verdict, so no discovery either, which would loosen every other figure's cutoff); and, each
at its own test's α, figures whose test was corroborated by a moved instruction count
(`Noise.alpha` above `ALPHA`: code changed there, so it is no longer the unchanged pair the
budget is about), and figures without a noise estimate (they fail closed on their own terms).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchkit.report.gate.check_status import NUMERIC_STATUSES, Status
from benchkit.report.gate.check_types import Comparison
from benchkit.stats import ALPHA

FAMILY_Q = 0.01  # the chance that a pair of identical builds fails the gate anywhere
FLAGS = (Status.REGRESSION, Status.IMPROVEMENT)


@dataclasses.dataclass(frozen=True)
class Budget:
    """The pair's budget: `tested` figures in the family, and `cutoff`, the largest p-value a
    figure may have to be flagged (`FAMILY_Q` / `tested` where the rule rejects none)."""

    q: float
    tested: int
    cutoff: float

    def describe(self) -> str:
        promise = f"error budget: identical builds fail anywhere at most 1 time in {1 / self.q:.0f}"
        if not self.tested:
            return promise
        return (
            f"{promise} (Benjamini-Hochberg over {self.tested} tested figures; a figure is flagged "
            f"at p ≤ {self.cutoff:.2g} here)"
        )


def in_family(c: Comparison, p: float | None) -> bool:
    """Whether `c` (of p-value `p`) counts in the pair's budget: judged (not left unjudged: a
    compile time of another cache state, a disturbed build's wall time) and tested at `ALPHA` or
    below (not corroborated)."""
    judged = c.status in NUMERIC_STATUSES
    return judged and p is not None and c.noise is not None and c.noise.alpha <= ALPHA


def bh_cutoff(p_values: Sequence[float], q: float = FAMILY_Q) -> float:
    """The Benjamini-Hochberg step-up cutoff: the largest k * q / m with the k-th smallest p at
    or below it; q / m when no p is (the α a single change needs)."""
    m = len(p_values)
    if m == 0:
        return q
    cutoff = q / m
    for k, p in enumerate(sorted(p_values), start=1):
        if p <= k * q / m:
            cutoff = k * q / m
    return cutoff


def _family(comparisons: Sequence[Comparison]) -> list[float | None]:
    """Each comparison's p-value where it counts in the budget, else None (computed once)."""
    out = []
    for c in comparisons:
        p = c.p_value()
        out.append(p if in_family(c, p) else None)
    return out


def family_budget(comparisons: Sequence[Comparison], q: float = FAMILY_Q) -> Budget:
    return _budget(_family(comparisons), q)


def _budget(family: Sequence[float | None], q: float) -> Budget:
    p_values = [p for p in family if p is not None]
    return Budget(q, len(p_values), bh_cutoff(p_values, q))


def apply_budget(comparisons: Sequence[Comparison], q: float = FAMILY_Q) -> list[Comparison]:
    """`comparisons` with every flag of the family whose p lies above the pair's cutoff made
    can't tell: its own test saw a change, the whole comparison's budget does not allow it."""
    family = _family(comparisons)
    budget = _budget(family, q)
    out = []
    for c, p in zip(comparisons, family, strict=True):
        if c.status in FLAGS and p is not None and p > budget.cutoff:
            note = (
                f"p = {p:.2g} passes its own test but not the comparison's error budget "
                f"(p ≤ {budget.cutoff:.2g} over {budget.tested} figures)"
            )
            note = "; ".join(n for n in (note, c.note) if n)
            c = dataclasses.replace(c, status=Status.CANT_TELL, note=note)
        out.append(c)
    return out
