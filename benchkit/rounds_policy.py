"""How many rounds each figure gets, and when the main job adds more: the numbers and the rule,
in one place.

A round is one measuring process of one build (asv's ``rounds``; in `benchkit main` one process
measures every wall time of the round, `benchkit.wall_rounds`): wall times get
`WALL_TIME_ROUNDS` from a plain ``asv run``; ``benchkit main`` gives each `FIRST_LOOK_ROUNDS`,
looks (`first_look`), and adds rounds only where the verdict is still open (`RoundsPlan`,
`rounds_to_add`; `benchkit.report.gate.rounds_look` applies the look to a run's results).
Operator timings get `OPERATOR_ROUNDS` replicates (`benchkit.operator_rounds`), compile times
`MAIN_RUN_COMPILES`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping

from benchkit.stats import ALPHA, RoundsTest, minimum_detectable_change

# Processes per build and samples per process of every ``time_wall`` (asv's ``rounds`` and
# ``repeat``). Wall time moves more between processes than within one, and now and then a
# process is disturbed, so the gate compares builds process by process
# (`benchkit.stats.fast_level_test`) and what it can see depends on how many processes a build
# has; docs/verdicts.md gives the power and false-alarm figures for this number. Three samples
# give each process its fastest sample; more samples per process would not shrink the
# between-process part (lab/bench_wall_noise.py compares 3 and 7).
# ``BENCHKIT_WALL_ROUNDS`` changes the rounds for a run (`benchkit main --rounds`).
WALL_TIME_ROUNDS = 12
# `benchkit main` instead looks twice: every wall time first gets FIRST_LOOK_ROUNDS, and only
# those whose verdict is still open get more, up to MAX_ROUNDS (`first_look`),
# together no more processes than WALL_TIME_ROUNDS would have run. Those whose instruction
# count moved come first, up to MOVED_MAX_ROUNDS (`rounds_to_add`): a change of a
# few percent needs more rounds than 24 on a noisy machine (docs/verdicts.md), and a moved
# count says where to spend them.
FIRST_LOOK_ROUNDS = 8
# The first look settles a wall time only when its MDC is at most this (so that, with p >= FUTILITY_P,
# its interval lies within the gate's ±15 % margin for unchanged, `benchkit.report.gate.check_decide`).
NOISE_CEILING = 0.10
MAX_ROUNDS = 24
MOVED_MAX_ROUNDS = 48

# Replicates per build and pair. Each is one timing process of the whole operator set (its
# kernels from the build's inductor cache, warm after the main run), about 10 s on the project's
# 2-core machine, two builds' processes side by side. From `benchkit.stats.TRIMMED_FROM` a side
# the gate compares trimmed means; on twin builds with 20 a side it found ×1.05 in 94-96 % of
# the eager times and speedup ratios injected one at a time, and 82 % of the compiled times
# (6 a side: 16-33 %; lab/reports/replicate-rules.md).
OPERATOR_ROUNDS = 20
# The main run's operator timing processes per build, each compiling (a cold first: each cold,
# ~45 s a build on that machine): their compile times are the replicates the gate takes a
# compile's noise from (`benchkit.report.gate.noise.compile_spread`); one cold compile a side
# left a pair's noise to its inputs' spread, real changes included (lab/reports/compile-noise.md).
MAIN_RUN_COMPILES = 2


# ---------------------------------------------------------------- two looks at the rounds
#
# `benchkit main` measures every wall time with a first look's rounds, then adds rounds, up to
# a cap, only to the benchmarks whose verdict is still open. The rounds test is a
# fixed-sample test, so the looks must not spend more than ALPHA together (Bonferroni over the
# two looks, in the manner of Haybittle and Peto): a change that clear at the first look
# (p < EARLY_ALPHA) stops there, decided; the gate's rounds test always rejects at
# ROUNDS_ALPHA; a benchmark stops for futility where more rounds would rarely find anything
# (p >= FUTILITY_P, and its MDC already below the gate's ceiling, or so far above it that the
# cap's rounds would not bring it below). A false alarm then needs
# either p < EARLY_ALPHA at the first look or p < ROUNDS_ALPHA at the cap: at most
# EARLY_ALPHA + ROUNDS_ALPHA = ALPHA, whatever the looks decide. Stopping for futility only
# removes chances to reject. lab/bench_verdicts.py measures the design's false alarms
# and power through the main job's own look.

EARLY_ALPHA = ALPHA / 10
ROUNDS_ALPHA = ALPHA - EARLY_ALPHA
FUTILITY_P = 0.2

# A wall time whose case's instruction count moved (Callgrind's count is deterministic: a move
# beyond its threshold means the build runs other code there) is tested against a laxer
# CORROBORATED_ALPHA in the direction the count moved: the count has already said that something
# changed, and the wall-time test only has to say whether time followed. Two-sided 0.01 taken
# one way is a false-alarm rate of at most 0.005 for a case whose code changed and whose time
# did not; a case whose count did not move (every case of two identical builds) keeps ALPHA.
# The first look splits it the same way (a tenth early), and never stops such a case for
# futility: a moved count is a reason to look closer, not a settled "no change".
CORROBORATED_ALPHA = 0.01
CORROBORATED_EARLY_ALPHA = CORROBORATED_ALPHA / 10
CORROBORATED_ROUNDS_ALPHA = CORROBORATED_ALPHA - CORROBORATED_EARLY_ALPHA


def corroborated(change: float, count_move: int | None) -> bool:
    """Whether a wall-time `change` (log) goes the way its case's instruction count moved
    (`count_move`: +1 up, -1 down, 0 within the count threshold, None unknown)."""
    return bool(count_move) and change * (count_move or 0) > 0


def rounds_alpha(change: float, count_move: int | None) -> float:
    """The gate's alpha for a rounds test of `change` (two-sided, after the first look's share)."""
    return CORROBORATED_ROUNDS_ALPHA if corroborated(change, count_move) else ROUNDS_ALPHA


class Look(enum.Enum):
    """What the first look at two builds' rounds decides for one wall time."""

    CHANGED = "changed beyond noise"  # p < EARLY_ALPHA: decided, no more rounds
    SETTLED = "within noise"  # p >= FUTILITY_P with a small enough MDC: decided
    TOO_NOISY = "too noisy for the cap"  # p >= FUTILITY_P, and even the cap's rounds would
    # leave the MDC above the ceiling: more rounds would not decide it (the gate: can't tell)
    OPEN = "open"  # more rounds, up to the cap


def projected(test: RoundsTest, rounds: int) -> RoundsTest:
    """`test` as it would come out with `rounds` a side, its spread what it is now (the
    standard error shrinks as 1/sqrt(rounds), the degrees of freedom grow with them)."""
    now = min(test.n_before, test.n_after)
    scale = rounds / now
    return dataclasses.replace(
        test,
        se=test.se / math.sqrt(scale),
        df=test.df * scale,
        n_before=rounds,
        n_after=rounds,
        fast_before=round(test.fast_before * rounds / test.n_before),
        fast_after=round(test.fast_after * rounds / test.n_after),
    )


def first_look(
    test: RoundsTest,
    mdc_ceiling: float,
    max_rounds: int,
    futility_p: float = FUTILITY_P,
    count_move: int | None = None,
    budget_floor: float = 1.0,
) -> Look:
    """The first look's decision for one wall time (`mdc_ceiling`: the largest MDC at which
    the gate can call a benchmark unchanged; `max_rounds`: the cap a side can reach;
    `count_move`: which way the case's instruction count moved, see `corroborated`;
    `budget_floor`: the smallest p-value cutoff the pair's error budget can set, below which
    an uncorroborated change must also lie to stop early, else a change the budget would not
    let through at the first look's rounds stopped there as can't tell instead of getting more).
    `futility_p` must stay above the rounds alphas for the bound above to hold."""
    p = test.p_value()
    if corroborated(test.change, count_move):
        early = CORROBORATED_EARLY_ALPHA  # outside the pair's budget (`benchkit.report.gate.budget`)
    else:
        early = min(EARLY_ALPHA, budget_floor)
    if p < early:
        return Look.CHANGED
    if p < futility_p or count_move:
        return Look.OPEN

    def mdc(t: RoundsTest) -> float:
        return minimum_detectable_change(t.se, t.critical(ROUNDS_ALPHA))

    if mdc(test) <= mdc_ceiling:
        return Look.SETTLED
    if mdc(projected(test, max_rounds)) > mdc_ceiling:
        return Look.TOO_NOISY
    return Look.OPEN


@dataclasses.dataclass(frozen=True)
class RoundsPlan:
    """The rounds a wall time gets per build: `first` at the first look; then an open one up to
    `cap`, an open one whose case's instruction count moved up to `moved_cap`; with `budget`
    (a fixed design's rounds) no more processes per build than that design would have run.
    `futility_p`: the first look's (`first_look`)."""

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


def rounds_to_add(top_up: TopUp, plan: RoundsPlan) -> dict[str, int]:
    """Rounds to add to each open wall time after `plan`'s first look: up to its cap, and, with
    a budget (the fixed design the adaptive one must not outspend, e.g. `WALL_TIME_ROUNDS`), no
    more benchmark-rounds per build than that design would have run beyond the first look on
    every judged wall time, (budget - first) x looked, except for those riding along below.

    The open wall times whose case's instruction count moved share the budget first, up to the
    moved cap: their build runs other code there, so a change of time is likeliest there (and
    their test is the corroborated one, `rounds_alpha`, whose power at a change
    of a few percent needs more rounds than a machine's noise leaves in 24); the other open
    ones share what is left, and never get fewer rounds than the moved ones (up to their own
    cap): a round is one process per build that measures every wall time it is given
    (`benchkit.wall_rounds`), so the processes the moved ones need run anyway and an open wall
    time riding along costs its samples, not a process. When few are open they all reach their
    cap; when many are, fewer rounds each."""
    most, most_moved = max(plan.cap - plan.first, 0), max(plan.moved_cap - plan.first, 0)
    moved = [name for name in top_up.benchmarks if name in top_up.moved]
    others = [name for name in top_up.benchmarks if name not in top_up.moved]
    if plan.budget is None:
        return {**{name: most_moved for name in moved}, **{name: most for name in others}}
    budget = max(plan.budget - plan.first, 0) * max(top_up.looked, len(top_up.benchmarks))
    for_moved = min(most_moved, budget // len(moved)) if moved else 0
    left = budget - for_moved * len(moved)
    for_others = min(most, max(for_moved, left // len(others))) if others else 0
    return {**{name: for_moved for name in moved}, **{name: for_others for name in others}}
