"""The gate on real noise: twin pairs (the same wheel measured twice by `benchkit main`) kept as
a corpus, judged as they are and with one figure made slower.

    python -m lab.bench_injected_power export --asv-config DIR/asv.conf.json BASE HEAD OUT.json.gz
    python -m lab.bench_injected_power judge CORPUS.json.gz [...] [--size 0.05] [--markdown FILE]

``export`` keeps what the twin's job judged (HEAD: the twin, BASE: its predecessor): the last
`OPERATOR_ROUNDS` replicates of each operator timing, base's wall-time rounds cut to as many as
head holds (head's all came from the twin's job), every other figure as recorded; samples to six
significant digits, gzipped JSON (`tests/data/noise-corpus/` holds the project's).

``judge`` runs each pair through `benchkit.report.gate.check.compare_pair` as the main job judges it
(interleaved):

* **identical builds**: every flag is false. Over the pairs: the share with any flag and its
  Clopper-Pearson 95 % upper bound;
* **injected**: per metric group (operator speedup ratio, eager and compiled seconds, wall time,
  instruction count), `--trials` figures of distinct cases or inputs, each judged with its head
  samples and value multiplied by ``1 + --size`` (counts: ``1 + --count-size``), everything else
  as measured: found when that figure is a regression. The trials of one pair share its noise.

A pair measured with the cap's rounds for every wall time (``benchkit main --rounds 24``) is
judged as the adaptive job would have judged it: its wall times' first look replayed on their
first rounds, the open ones given the rounds the job would have added (`lab.wall_looks`), an
injected change in place before the look. ``--early-stop-at-alpha`` replays the first look's
early stop at `EARLY_ALPHA` alone, without the pair's budget floor (the rule before it);
``--as-measured`` judges every pair's 24 rounds as they are.

It reads results only, measuring nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.history.results.read import Measurement, ResultSet, load_asv_config, read_results
from benchkit.names import BenchmarkName, Metric
from benchkit.report.gate import check
from benchkit.report.gate.budget import FLAGS
from benchkit.report.gate.check_status import Status
from benchkit.report.gate.rounds_window import is_wall_time, keep_rounds, rounds_of
from benchkit.rounds_policy import OPERATOR_ROUNDS, RoundsPlan
from lab import command_line, wall_looks

CORPUS_FORMAT = "benchkit-noise-corpus"
GROUPS: dict[str, Callable[[Metric | None], bool]] = {
    "speedup ratio": lambda m: m is Metric.COMPILED_OVER_EAGER,
    "eager seconds": lambda m: m is Metric.EAGER_SECONDS,
    "compiled seconds": lambda m: m is Metric.COMPILED_SECONDS,
    "wall time": lambda m: m is Metric.WALL_TIME,
    "instruction count": lambda m: m is Metric.INSTRUCTIONS,
}


@dataclasses.dataclass(frozen=True)
class TwinPair:
    label: str
    base: ResultSet
    head: ResultSet
    units: Mapping[str, str | None]


# ------------------------------------------------------------------ export


def _cut(m: Measurement, keep: int) -> Measurement:
    held = rounds_of(m)
    return keep_rounds(m, held - keep) if keep and held > keep else m


def window(base: ResultSet, head: ResultSet) -> tuple[ResultSet, ResultSet]:
    """The rounds the twin's job judged (see the module's docstring)."""
    base_kept, head_kept = dict(base.measurements), dict(head.measurements)
    for key, after in head.measurements.items():
        metric = BenchmarkName.parse(key[0]).metric
        if metric is not None and metric.replicated:
            head_kept[key] = _cut(after, OPERATOR_ROUNDS)
            if key in base_kept:
                base_kept[key] = _cut(base_kept[key], OPERATOR_ROUNDS)
        elif metric is Metric.WALL_TIME and key in base_kept:
            base_kept[key] = _cut(base_kept[key], rounds_of(after))
    return dataclasses.replace(base, measurements=base_kept), dataclasses.replace(
        head, measurements=head_kept
    )


def _side(m: Measurement | None) -> dict[str, Any] | None:
    if m is None:
        return None
    samples = [float(f"{s:.6g}") for s in m.samples] if m.samples else None
    return {"value": m.value, "samples": samples, "per_round": m.per_round, "version": m.version}


def export(asv_config: Path, base_label: str, head_label: str, out: Path, machine: str | None) -> None:
    conf = load_asv_config(asv_config)
    loaded = read_results(conf)
    machine = check.pick_machine(conf.results_dir, machine)
    sides = [
        loaded.result_set(check.resolve_commit(conf, label, machine), machine)
        for label in (base_label, head_label)
    ]
    base, head = window(*sides)
    figures = [
        {"name": name, "env": env, "base": _side(base.measurements.get((name, env))), "head": _side(m)}
        for (name, env), m in sorted(head.measurements.items())
    ]
    names = {BenchmarkName.parse(f["name"]).benchmark for f in figures}
    data = {
        "format": CORPUS_FORMAT,
        "version": 1,
        "machine": machine,
        "pair": [base_label, head_label],
        "units": {key: unit for key, unit in loaded.units.items() if key in names},
        "figures": figures,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt") as stream:
        json.dump(data, stream, separators=(",", ":"))
    print(f"{out}: {len(figures)} figures of {base_label} → {head_label}")


# ------------------------------------------------------------------ judge


def _measurement(side: dict[str, Any] | None) -> Measurement | None:
    if side is None:
        return None
    return Measurement(side["value"], None, side["samples"], side["version"], side["per_round"])


def load_pair(path: Path) -> TwinPair:
    with gzip.open(path, "rt") as stream:
        data = json.load(stream)
    if data.get("format") != CORPUS_FORMAT or data.get("version") != 1:
        raise SystemExit(f"{path}: not a {CORPUS_FORMAT} file of version 1")
    base, head = {}, {}
    for figure in data["figures"]:
        key = (figure["name"], figure["env"])
        for sides, side in ((base, figure["base"]), (head, figure["head"])):
            m = _measurement(side)
            if m is not None:
                sides[key] = m
    label = f"{path.name}: {' → '.join(data['pair'])}"
    machine = data["machine"]
    return TwinPair(
        label, ResultSet("0" * 40, machine, base), ResultSet("1" * 40, machine, head), data["units"]
    )


DEFAULTS = check.parse_check_config({}, "built-in defaults")


def judge_pair(base: ResultSet, head: ResultSet, units: Mapping[str, str | None]) -> list[check.Comparison]:
    return check.compare_pair(base, head, units, DEFAULTS, interleaved=True)[0]


@dataclasses.dataclass(frozen=True)
class Judging:
    """How a pair is judged: `replayed`, its wall times' looks replayed (`lab.wall_looks`) with
    the first look's early stop at `floor` (None: the pair's budget floor)."""

    replayed: bool
    floor: float | None = None
    plan: RoundsPlan = dataclasses.field(default_factory=RoundsPlan.default)

    def __call__(self, pair: TwinPair, head: ResultSet) -> list[check.Comparison]:
        return judge_pair(*self.measured(pair, head), pair.units)

    def measured(self, pair: TwinPair, head: ResultSet) -> tuple[ResultSet, ResultSet]:
        """The pair as the judged job holds it: the looks' rounds where they are replayed."""
        if not self.replayed:
            return pair.base, head
        threshold = DEFAULTS.thresholds["instructions"]
        return wall_looks.replay(pair.base, head, threshold, self.plan, floor=self.floor)


def rounds_cost(head: ResultSet) -> str:
    """What the wall times of one build cost in rounds: processes (the most rounds of any wall
    time: a round is one process for all its wall times) and benchmark-rounds per wall time."""
    rounds = [rounds_of(m) for key, m in head.measurements.items() if is_wall_time(key) and m.has_number]
    if not rounds:
        return "no wall-time rounds"
    return f"{max(rounds)} processes a build, {sum(rounds) / len(rounds):.1f} rounds per wall time"


def trials_of(head: ResultSet, group: str, trials: int, rng: random.Random) -> list[tuple[str, str]]:
    """Up to `trials` keys of `group` with a number, one per case (or operator input)."""
    by_case: dict[str, tuple[str, str]] = {}
    for key, m in sorted(head.measurements.items()):
        parsed = BenchmarkName.parse(key[0])
        if m.has_number and GROUPS[group](parsed.metric):
            by_case.setdefault(parsed.case, key)
    chosen = list(by_case.values())
    rng.shuffle(chosen)
    return chosen[:trials]


def scaled(m: Measurement, factor: float) -> Measurement:
    assert m.value is not None
    samples = [s * factor for s in m.samples] if m.samples else m.samples
    return dataclasses.replace(m, value=m.value * factor, samples=samples)


@dataclasses.dataclass
class Tally:
    found: int = 0
    trials: int = 0
    missed: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(self, verdict: check.Comparison) -> None:
        self.trials += 1
        if verdict.status == Status.REGRESSION:
            self.found += 1
        else:
            why = verdict.status.value + _why_missed(verdict)
            self.missed[why] = self.missed.get(why, 0) + 1

    def row(self, group: str, factor: float) -> str:
        missed = ", ".join(f"{n} {status}" for status, n in sorted(self.missed.items())) or "-"
        share = f"{self.found}/{self.trials}" + (f" ({self.found / self.trials:.0%})" if self.trials else "")
        return f"| {group} ×{factor:g} | {self.trials} | {share} | {missed} |"


def by_group(judged: Sequence[check.Comparison]) -> list[str]:
    """One line per metric group: how many of its figures got each verdict."""
    lines = []
    for group, belongs in GROUPS.items():
        counts: dict[str, int] = {}
        for c in judged:
            if belongs(BenchmarkName.parse(c.name).metric):
                counts[c.status.value] = counts.get(c.status.value, 0) + 1
        if counts:
            lines.append(f"  - {group}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return lines


def _why_missed(verdict: check.Comparison) -> str:
    """What kept a can't tell from a flag: the pair's error budget, or the figure's own noise."""
    if verdict.status != Status.CANT_TELL:
        return ""
    return " (budget)" if "error budget" in verdict.note else " (noise)"


def clopper_pearson_upper(k: int, n: int, level: float = 0.95) -> float:
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))


def judge(
    paths: Sequence[Path],
    size: float,
    count_size: float,
    trials: int,
    seed: int,
    floor: float | None = None,
    replay: bool = True,
    plan: RoundsPlan | None = None,
) -> str:
    """`plan`: the main job's rounds plan the looks are replayed with (`RoundsPlan.default()`)."""
    plan = plan or RoundsPlan.default()
    rng = random.Random(seed)
    tallies = {group: Tally() for group in GROUPS}
    # The same trials of the pairs whose looks were replayed: the adaptive job's own power (on a
    # pair judged as measured an injected change keeps the rounds the twin's look gave it).
    replayed_tallies = {group: Tally() for group in GROUPS}
    flagged, rows, verdicts, replayed_pairs = 0, [], [], 0
    for path in paths:
        pair = load_pair(path)
        judging = Judging(replay and wall_looks.replayable(pair.base, pair.head, plan), floor, plan)
        held = judging.measured(pair, pair.head)  # replayed once, for the verdicts and the cost
        judged = judge_pair(*held, pair.units)
        cost = rounds_cost(held[1])
        counts: dict[str, int] = {}
        for c in judged:
            counts[c.status.value] = counts.get(c.status.value, 0) + 1
        replayed = (
            f" (wall times: the main job's looks replayed, cap {plan.cap} rounds: {cost})"
            if judging.replayed
            else ""
        )
        verdicts.append(
            f"- {pair.label}{replayed}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        )
        verdicts += by_group(judged)
        flags = [c for c in judged if c.status in FLAGS]
        flagged += bool(flags)
        replayed_pairs += judging.replayed
        rows += [f"  - {c.status.value} {c.name}" for c in flags]
        for group, tally in tallies.items():
            counted = [tally, replayed_tallies[group]] if judging.replayed else [tally]
            factor = _factor(group, size, count_size)
            for key in trials_of(pair.head, group, trials, rng):
                slowed = {**pair.head.measurements, key: scaled(pair.head.measurements[key], factor)}
                head = dataclasses.replace(pair.head, measurements=slowed)
                verdict = next(c for c in judging(pair, head) if (c.name, c.env) == key)
                for one in counted:
                    one.add(verdict)
    bound = clopper_pearson_upper(flagged, len(paths))
    lines = [
        f"Identical builds: {flagged} of {len(paths)} twin pair(s) with any flag "
        f"(Clopper-Pearson 95 % upper bound {bound:.0%}).",
        *verdicts,
        *rows,
        "",
    ]
    lines += _table(tallies, size, count_size)
    if replayed_pairs:
        heading = f"Of those, the {replayed_pairs} pair(s) whose looks were replayed (cap {plan.cap} rounds):"
        lines += ["", heading, ""]
        lines += _table(replayed_tallies, size, count_size)
    return "\n".join(lines) + "\n"


def _table(tallies: Mapping[str, Tally], size: float, count_size: float) -> list[str]:
    rows = ["| injected | figures | found | missed as |", "|---|---:|---:|---|"]
    return rows + [t.row(g, _factor(g, size, count_size)) for g, t in tallies.items()]


def _factor(group: str, size: float, count_size: float) -> float:
    """The slowdown injected into a figure of `group`."""
    return 1 + (count_size if group == "instruction count" else size)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="keep a twin pair's judged figures as a corpus file")
    out.add_argument("--asv-config", type=Path, required=True)
    out.add_argument("--machine")
    out.add_argument("base")
    out.add_argument("head")
    out.add_argument("out", type=Path)
    judged = commands.add_parser("judge", help="twin pairs as they are and with one figure slower")
    judged.add_argument("corpus", type=Path, nargs="+")
    judged.add_argument("--size", type=float, default=0.05)
    judged.add_argument("--count-size", type=float, default=0.01)
    judged.add_argument("--trials", type=int, default=30, help="figures per group and pair")
    judged.add_argument("--seed", type=int, default=1)
    judged.add_argument("--markdown", type=Path)
    judged.add_argument(
        "--early-stop-at-alpha",
        action="store_true",
        help="replayed looks stop early at EARLY_ALPHA alone, without the pair's budget floor",
    )
    judged.add_argument("--as-measured", action="store_true", help="replay no looks: every round as measured")
    judged.add_argument(
        "--max-rounds",
        type=int,
        help="the looks' cap for an open wall time (default: the main job's); pairs need as many rounds",
    )
    judged.add_argument(
        "--rounds-budget",
        type=int,
        help="the fixed design's rounds the added ones must not outspend (default: the main job's; 0: none)",
    )
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.asv_config, args.base, args.head, args.out, args.machine)
        return 0
    floor = 1.0 if args.early_stop_at_alpha else None
    plan = RoundsPlan.default()
    if args.max_rounds is not None:
        plan = dataclasses.replace(plan, cap=args.max_rounds, moved_cap=max(args.max_rounds, plan.moved_cap))
    if args.rounds_budget is not None:
        plan = dataclasses.replace(plan, budget=args.rounds_budget or None)
    text = judge(
        args.corpus, args.size, args.count_size, args.trials, args.seed, floor, not args.as_measured, plan
    )
    print(text)
    if args.markdown:
        command = command_line("bench_injected_power", sys.argv[1:] if argv is None else argv)
        args.markdown.write_text(f"# The gate on real noise\n\nGenerated by `{command}`.\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
