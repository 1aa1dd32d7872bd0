"""The main job's first look at its wall times: which verdicts are still open, so that only
those get more rounds (`benchkit.stats.first_look` holds the rule and why the gate stays valid).

Input: the results as read after the first ``asv run`` and the pairs the job judges (each
measured build against its predecessor, and a baseline). Output: a `TopUp`, the builds and
the ``time_wall`` benchmarks to measure again, which the job hands to asv as data, and how
many rounds each gets (`rounds_to_add`: up to the cap of a `RoundsPlan`, within the budget of
the fixed design, first and up to a higher cap to those whose case's instruction count moved).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence

from benchkit.history.results.read import LoadedResults
from benchkit.measure.walltime.timing import FIRST_LOOK_ROUNDS, MAX_ROUNDS, MOVED_MAX_ROUNDS, WALL_TIME_ROUNDS
from benchkit.names import BenchmarkName, Metric
from benchkit.report.check_decide import NOISE_CEILING
from benchkit.report.noise import count_move, rounds_test
from benchkit.report.rounds_window import rounds_of
from benchkit.stats import FUTILITY_P, MIN_ROUNDS, Look, first_look


@dataclasses.dataclass(frozen=True)
class RoundsPlan:
    """The rounds a wall time gets per build: `first` at the first look; then an open one up to
    `cap`, an open one whose case's instruction count moved up to `moved_cap`; with `budget`
    (a fixed design's rounds) no more processes per build than that design would have run.
    `futility_p`: the first look's (`benchkit.stats.first_look`)."""

    first: int
    cap: int
    moved_cap: int
    budget: int | None = None
    futility_p: float = FUTILITY_P

    @classmethod
    def default(cls) -> RoundsPlan:
        """`benchkit main`'s: 8 rounds, then up to 24 (48 where the count moved) within 12 fixed
        rounds' processes (`benchkit.measure.walltime.timing`)."""
        return cls(FIRST_LOOK_ROUNDS, MAX_ROUNDS, MOVED_MAX_ROUNDS, WALL_TIME_ROUNDS)

    @classmethod
    def fixed(cls, rounds: int) -> RoundsPlan:
        """Every wall time `rounds` rounds, none added."""
        return cls(rounds, rounds, rounds)

    @classmethod
    def unbudgeted(cls, first: int, cap: int, futility_p: float = FUTILITY_P) -> RoundsPlan:
        """`first` rounds, every open wall time `cap` (`benchkit main --max-rounds`)."""
        cap = max(first, cap)
        return cls(first, cap, cap, None, futility_p)

    @property
    def adds(self) -> bool:
        return max(self.cap, self.moved_cap) > self.first

    @property
    def highest(self) -> int:
        return max(self.cap, self.moved_cap)


@dataclasses.dataclass(frozen=True)
class TopUp:
    """What more rounds go to: `benchmarks` (asv names of wall times) on `commits`."""

    commits: tuple[str, ...]  # in the order of the pairs given, each once
    benchmarks: tuple[str, ...]  # sorted
    looks: Mapping[Look, int]  # decisions over every judged pair and wall time
    looked: int = 0  # distinct wall times the look judged (a test in at least one pair)
    moved: tuple[str, ...] = ()  # of `benchmarks`, those whose case's count moved in a pair

    def describe(self) -> str:
        counts = ", ".join(f"{self.looks.get(look, 0)} {look.value}" for look in Look)
        return f"first look at the wall times of the judged pairs: {counts}"


def open_wall_times(
    loaded: LoadedResults,
    machine: str,
    pairs: Sequence[tuple[str, str]],
    plan: RoundsPlan,
    count_threshold: float,
) -> TopUp:
    """The wall times whose verdict in any of `pairs` (base, head commits) is open after the
    first look, on the sides that hold fewer rounds of them than `plan`'s cap (its moved cap
    for a case whose count moved). `count_threshold`: the gate's threshold for instruction
    counts (a case whose count moved beyond it is tested as `benchkit.stats.first_look` says)."""
    looks: collections.Counter[Look] = collections.Counter()
    commits: dict[str, None] = {}
    benchmarks: set[str] = set()
    moved_ones: set[str] = set()
    looked: set[str] = set()
    for base, head in pairs:
        base_set, head_set = loaded.result_set(base, machine), loaded.result_set(head, machine)
        before, after = base_set.measurements, head_set.measurements
        for key, b in after.items():
            if BenchmarkName.parse(key[0]).metric is not Metric.WALL_TIME or key not in before:
                continue
            a = before[key]
            if not (a.has_number and b.has_number):
                continue
            test = rounds_test(a, b)
            if test is None and min(rounds_of(a), rounds_of(b)) < MIN_ROUNDS:
                continue  # too few rounds for the test: the gate judges by the history
            moved = count_move(base_set, head_set, key, count_threshold)
            if test is not None:
                look = first_look(test, NOISE_CEILING, plan.cap, plan.futility_p, moved)
            else:  # enough rounds, too few at the fast level yet: more rounds may add some
                look = Look.OPEN
            looks[look] += 1
            looked.add(key[0])
            if look is not Look.OPEN:
                continue
            cap = plan.moved_cap if moved else plan.cap
            for commit, m in ((base, a), (head, b)):
                if rounds_of(m) < cap:
                    commits.setdefault(commit)
                    benchmarks.add(BenchmarkName.parse(key[0]).benchmark)
                    if moved:
                        moved_ones.add(BenchmarkName.parse(key[0]).benchmark)
    return TopUp(
        tuple(commits), tuple(sorted(benchmarks)), dict(looks), len(looked), tuple(sorted(moved_ones))
    )


def rounds_to_add(top_up: TopUp, plan: RoundsPlan) -> dict[str, int]:
    """Rounds to add to each open wall time after `plan`'s first look: up to its cap, and, with
    a budget (the fixed design the adaptive one must not outspend, e.g. `WALL_TIME_ROUNDS`), no
    more benchmark processes per build than that design would have run beyond the first look on
    every judged wall time: (budget - first) x looked.

    The open wall times whose case's instruction count moved share the budget first, up to the
    moved cap: their build runs other code there, so a change of time is likeliest there (and
    their test is the corroborated one, `benchkit.stats.rounds_alpha`, whose power at a change
    of a few percent needs more rounds than a machine's noise leaves in 24); the other open
    ones share what is left. When few are open they all reach their cap; when many are, fewer
    rounds each."""
    most, most_moved = max(plan.cap - plan.first, 0), max(plan.moved_cap - plan.first, 0)
    moved = [name for name in top_up.benchmarks if name in top_up.moved]
    others = [name for name in top_up.benchmarks if name not in top_up.moved]
    if plan.budget is None:
        return {**{name: most_moved for name in moved}, **{name: most for name in others}}
    budget = max(plan.budget - plan.first, 0) * max(top_up.looked, len(top_up.benchmarks))
    for_moved = min(most_moved, budget // len(moved)) if moved else 0
    left = budget - for_moved * len(moved)
    for_others = min(most, left // len(others)) if others else 0
    return {**{name: for_moved for name in moved}, **{name: for_others for name in others}}
