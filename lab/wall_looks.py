"""The main job's two looks at its wall times, replayed on a pair measured with the cap's rounds.

`benchkit main` gives every wall time `FIRST_LOOK_ROUNDS` rounds a build, looks, and adds rounds
only to those whose verdict is still open (`benchkit.rounds_policy`). A pair judged as measured
holds only the rounds its own look gave, so a change injected afterwards is judged by the rounds
that a twin's look gave it (mostly the first look's), not by those the look would have given the
changed figure. A twin pair measured with ``benchkit main --rounds 24`` holds every wall time's
24 rounds in the order they ran: `replay` cuts each to its first look's rounds, lets the main
job's look (`benchkit.report.gate.rounds_look.look_at_pair`) and `rounds_to_add` decide, and
hands back the pair as the adaptive job would have measured it. An injected change goes in
before the replay, so the look sees it as the job would have.
"""

from __future__ import annotations

import dataclasses

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.names import BenchmarkName
from benchkit.report.gate.rounds_look import look_at_pair
from benchkit.report.gate.rounds_window import Key, is_wall_time, keep_rounds, rounds_of
from benchkit.rounds_policy import Look, RoundsPlan, TopUp, rounds_to_add


def replayable(base: ResultSet, head: ResultSet, plan: RoundsPlan) -> bool:
    """Whether every wall time with a number on both sides holds `plan`'s cap of rounds on each."""
    before = base.measurements
    walls = [
        (before[key], m)
        for key, m in head.measurements.items()
        if is_wall_time(key) and m.has_number and key in before and before[key].has_number
    ]
    return bool(walls) and all(min(rounds_of(b), rounds_of(a)) >= plan.cap for b, a in walls)


def _cut_walls(side: ResultSet, rounds_of_key: dict[Key, int]) -> ResultSet:
    """`side` with each wall time of `rounds_of_key` cut to its first that many rounds."""
    kept: dict[Key, Measurement] = {
        key: keep_rounds(m, 0, rounds_of_key[key]) if key in rounds_of_key else m
        for key, m in side.measurements.items()
    }
    return dataclasses.replace(side, measurements=kept)


def replay(
    base: ResultSet,
    head: ResultSet,
    count_threshold: float,
    plan: RoundsPlan | None = None,
    floor: float | None = None,
) -> tuple[ResultSet, ResultSet]:
    """`base` → `head` (every wall time holding `plan`'s cap of rounds, `replayable`) as the
    adaptive main job would have measured them: each wall time cut to the first look's rounds,
    and the open ones to as many more as `rounds_to_add` gives them. `floor`: the first look's
    early stop (`look_at_pair`)."""
    plan = plan or RoundsPlan.default()
    walls = [key for key in head.measurements if is_wall_time(key)]
    first = {key: plan.first for key in walls}
    looks = look_at_pair(_cut_walls(base, first), _cut_walls(head, first), plan, count_threshold, floor)
    opened = [one for one in looks if one.look is Look.OPEN]
    benchmark = {key: BenchmarkName.parse(key[0]).benchmark for key in walls}
    top_up = TopUp(
        ("base", "head"),
        tuple(sorted({benchmark[one.key] for one in opened})),
        {},
        len(looks),
        tuple(sorted({benchmark[one.key] for one in opened if one.moved})),
    )
    added = rounds_to_add(top_up, plan)
    final = {key: plan.first + added.get(benchmark[key], 0) for key in walls}
    return _cut_walls(base, final), _cut_walls(head, final)
