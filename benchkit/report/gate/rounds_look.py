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
from collections.abc import Sequence

from benchkit.history.results.read import LoadedResults
from benchkit.names import BenchmarkName, Metric
from benchkit.report.gate.noise import count_move, rounds_test
from benchkit.report.gate.rounds_window import rounds_of
from benchkit.rounds_policy import NOISE_CEILING, Look, RoundsPlan, TopUp, first_look
from benchkit.stats import MIN_ROUNDS


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
