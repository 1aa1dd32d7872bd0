"""The main job's first look at its wall times: which verdicts are still open, so that only
those get more rounds (`benchkit.rounds_policy.first_look` holds the rule and why the gate stays valid).

Input: the results as read after the first ``asv run`` and the pairs the job judges (each
measured build against its predecessor, and a baseline). Output: a `TopUp`, the builds and
the ``time_wall`` benchmarks to measure again, which the job hands to asv as data, and how
many rounds each gets (`rounds_to_add`: up to the cap of a `RoundsPlan`, within the budget of
the fixed design, first and up to a higher cap to those whose case's instruction count moved).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

from benchkit.history.results.read import LoadedResults, Measurement, ResultSet
from benchkit.names import BenchmarkName, Metric
from benchkit.report.gate.budget import FAMILY_Q
from benchkit.report.gate.noise import count_move, rounds_test
from benchkit.report.gate.rounds_window import Key, rounds_of
from benchkit.rounds_policy import NOISE_CEILING, Look, RoundsPlan, TopUp, first_look
from benchkit.stats import MIN_ROUNDS


@dataclasses.dataclass(frozen=True)
class WallLook:
    """The first look's decision for one wall time of a pair: `moved` says its case's
    instruction count moved beyond the threshold."""

    key: Key
    look: Look
    moved: bool
    before: Measurement
    after: Measurement


def budget_floor(base: ResultSet, head: ResultSet) -> float:
    """The smallest cutoff the pair's error budget can set (`benchkit.report.gate.budget`):
    `FAMILY_Q` over every figure with a number on both sides, more than the budget will count."""
    before = base.measurements
    both = sum(
        1 for key, m in head.measurements.items() if m.has_number and key in before and before[key].has_number
    )
    return FAMILY_Q / max(both, 1)


def look_at_pair(
    base: ResultSet,
    head: ResultSet,
    plan: RoundsPlan,
    count_threshold: float,
    floor: float | None = None,
) -> list[WallLook]:
    """The first look at every wall time of `base` → `head` with a number on both sides and
    enough rounds for the rounds test (too few: the gate judges by the history). `floor`: the
    early stop's `budget_floor` (None: the pair's; lab/wall_looks.py compares others)."""
    floor = budget_floor(base, head) if floor is None else floor
    out = []
    for key, after in sorted(head.measurements.items()):
        before = base.measurements.get(key)
        if BenchmarkName.parse(key[0]).metric is not Metric.WALL_TIME or before is None:
            continue
        if not (before.has_number and after.has_number):
            continue
        test = rounds_test(before, after)
        if test is None and min(rounds_of(before), rounds_of(after)) < MIN_ROUNDS:
            continue
        moved = count_move(base, head, key, count_threshold)
        if test is not None:
            look = first_look(test, NOISE_CEILING, plan.cap, plan.futility_p, moved, floor)
        else:  # enough rounds, too few at the fast level yet: more rounds may add some
            look = Look.OPEN
        out.append(WallLook(key, look, bool(moved), before, after))
    return out


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
    counts (a case whose count moved beyond it is tested as `benchkit.rounds_policy.first_look` says)."""
    looks: collections.Counter[Look] = collections.Counter()
    commits: dict[str, None] = {}
    benchmarks: set[str] = set()
    moved_ones: set[str] = set()
    looked: set[str] = set()
    for base, head in pairs:
        base_set, head_set = loaded.result_set(base, machine), loaded.result_set(head, machine)
        for one in look_at_pair(base_set, head_set, plan, count_threshold):
            looks[one.look] += 1
            looked.add(one.key[0])
            if one.look is not Look.OPEN:
                continue
            cap = plan.moved_cap if one.moved else plan.cap
            for commit, m in ((base, one.before), (head, one.after)):
                if rounds_of(m) < cap:
                    commits.setdefault(commit)
                    benchmarks.add(BenchmarkName.parse(one.key[0]).benchmark)
                    if one.moved:
                        moved_ones.add(BenchmarkName.parse(one.key[0]).benchmark)
    return TopUp(
        tuple(commits), tuple(sorted(benchmarks)), dict(looks), len(looked), tuple(sorted(moved_ones))
    )
