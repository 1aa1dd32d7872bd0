"""Wall-time round designs judged on the same measurements (used by `lab.bench_verdicts`).

Every build is measured once with as many interleaved rounds as the designs need at most;
asv records a benchmark's
rounds in the order they ran, so a design with fewer rounds is the first rounds of each. Per
judged pair (base, head):

* ``fixed N``: both sides cut to their first N rounds, then `benchkit check`'s gate;
* ``adaptive``: the main job's own first look (`benchkit.report.gate.rounds_look.open_wall_times`)
  on the first `FIRST_LOOK_ROUNDS` rounds of the pair; the wall times it leaves open keep the
  rounds the job would give them (`rounds_to_add`: up to `MAX_ROUNDS` within the budget of
  `WALL_TIME_ROUNDS` fixed rounds, those whose count moved first and up to
  `MOVED_MAX_ROUNDS`), every other one its first look's; then the gate, as
  `benchkit main` judges a build against its predecessor. ``adaptive F-M P`` (F rounds first,
  M for the open ones, futility p P) is ``benchkit main --rounds F --max-rounds M``: no budget.

The gate sees exactly the rounds the design would have measured. The one difference from the
main job: there the added rounds run in a second ``asv run`` after the first look, here they
ran interleaved with the first ones. Each pair's cost is the rounds its two sides' wall times
got, against a fixed design's.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchkit.history.results.read import LoadedResults
from benchkit.names import BenchmarkName, Metric
from benchkit.report.gate import check
from benchkit.report.gate.check_config import CheckConfig
from benchkit.report.gate.rounds_look import open_wall_times
from benchkit.report.gate.rounds_window import cut_wall_times, is_wall_time, keep_rounds
from benchkit.rounds_policy import RoundsPlan, rounds_to_add

Key = tuple[str, str]
RoundsOf = Callable[[str, Key], int]  # (commit, key) -> rounds the design keeps


def cut_rounds(loaded: LoadedResults, machine: str, rounds_of: RoundsOf) -> LoadedResults:
    """`loaded` with every wall time of `machine` cut to the first rounds `rounds_of` keeps."""
    return cut_wall_times(loaded, machine, lambda commit, key, m: keep_rounds(m, 0, rounds_of(commit, key)))


def parse_design(design: str) -> RoundsPlan:
    """The rounds of "fixed N", "adaptive" (the main job's defaults) or "adaptive F-M P" (F
    rounds, up to M for every open one, futility p P, no budget)."""
    words = design.split()
    if words[0] == "fixed" and len(words) == 2:
        return RoundsPlan.fixed(int(words[1]))
    if words[0] == "adaptive" and len(words) in (1, 3):
        if len(words) == 1:
            return RoundsPlan.default()
        first, cap = words[1].split("-")
        return RoundsPlan.unbudgeted(int(first), int(cap), float(words[2]))
    raise SystemExit(f"design {design!r}: expected 'fixed N', 'adaptive' or 'adaptive F-M P'")


def raise_counts(loaded: LoadedResults, machine: str, commit: str, factor: float) -> LoadedResults:
    """`loaded` with every instruction count of `commit` times `factor`: a build whose code
    changed everywhere and whose time did not, for the corroborated alpha's false alarms."""
    result_set = loaded.sets[machine][commit]
    measurements = {
        key: dataclasses.replace(m, value=m.value * factor)
        if BenchmarkName.parse(key[0]).metric is Metric.INSTRUCTIONS and m.value is not None
        else m
        for key, m in result_set.measurements.items()
    }
    raised = dataclasses.replace(result_set, measurements=measurements)
    return dataclasses.replace(
        loaded, sets={**loaded.sets, machine: {**loaded.sets[machine], commit: raised}}
    )


def design_rounds(
    loaded: LoadedResults, machine: str, base: str, head: str, design: str, count_threshold: float
) -> tuple[LoadedResults, dict[Key, int]]:
    """The pair's results as `design` measures them (`parse_design`), and the rounds per wall
    time on the two sides together (`count_threshold`: the gate's, for the first look)."""
    plan = parse_design(design)
    first = plan.first
    if not plan.adds:
        cut = cut_rounds(loaded, machine, lambda commit, key: first)
    else:
        looked = cut_rounds(loaded, machine, lambda commit, key: first)
        top = open_wall_times(looked, machine, [(base, head)], plan, count_threshold)
        top_commits, added = set(top.commits), rounds_to_add(top, plan)

        def kept(commit: str, key: Key) -> int:
            more = added.get(BenchmarkName.parse(key[0]).benchmark, 0) if commit in top_commits else 0
            return first + more

        cut = cut_rounds(loaded, machine, kept)
    used: dict[Key, int] = {}
    for commit in (base, head):
        for key, m in cut.result_set(commit, machine).measurements.items():
            if is_wall_time(key) and m.samples and m.per_round:
                used[key] = used.get(key, 0) + len(m.samples) // m.per_round
    return cut, used


def judge_designs(
    loaded: LoadedResults,
    machine: str,
    config: CheckConfig,
    pairs: Sequence[tuple[str, str, Any]],
    designs: Sequence[str],
    count_factor: float = 1.0,
) -> dict[str, list[dict[str, Any]]]:
    """Per design, per pair (base, head, kind): benchkit's verdict per benchmark and the rounds
    each wall time used, in bench_verdicts' row format; with `count_factor` every instruction
    count of each head times it (`raise_counts`)."""
    out: dict[str, list[dict[str, Any]]] = {d: [] for d in designs}
    for design in designs:
        for base, head, kind in pairs:
            given = loaded if count_factor == 1.0 else raise_counts(loaded, machine, head, count_factor)
            cut, used = design_rounds(given, machine, base, head, design, config.thresholds["instructions"])
            verdict = check.judge_results(base, head, cut, config, machine)
            rows = {
                c.name: {"metric": c.metric, "benchkit": c.status, "ratio": c.ratio, "mdc": c.mdc}
                for c in verdict.comparisons
            }
            rounds = {name: n for (name, _env), n in used.items()}
            out[design].append(
                {
                    "base": base,
                    "head": head,
                    "kind": kind,
                    "rows": rows,
                    "rounds": rounds,
                    "exit": verdict.exit_code,
                    "shifts": list(verdict.shifts),
                }
            )
    return out


def mean_rounds(pairs: Sequence[Mapping[str, Any]]) -> float:
    """Rounds per wall time and build, over the pairs (each pair's two sides)."""
    counts = [n / 2 for p in pairs for n in p["rounds"].values()]
    return statistics.fmean(counts) if counts else 0.0


def slow_round_share(loaded: LoadedResults, machine: str, factor: float = 1.3) -> dict[str, float]:
    """Per wall time (class name), the share of its rounds, over every build, at least `factor`
    times slower than the build's fast level (the median of its fastest quarter of rounds):
    how often a whole process ran slow, which no number of samples inside it can undo."""
    import math

    from benchkit.stats import round_values

    slow: dict[str, list[bool]] = {}
    for result_set in loaded.sets[machine].values():
        for key, m in result_set.measurements.items():
            values = round_values(m.samples, m.per_round) if is_wall_time(key) else None
            if not values or len(values) < 4:
                continue
            fast = statistics.median(sorted(values)[: max(1, len(values) // 4)])
            name = BenchmarkName.parse(key[0]).class_name
            slow.setdefault(name, []).extend(v - fast >= math.log(factor) for v in values)
    return {name: sum(flags) / len(flags) for name, flags in sorted(slow.items())}
