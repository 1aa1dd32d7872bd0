"""Power and false alarms of the gate on real rounds: twin pairs (the same wheel measured twice
by `benchkit main`) judged as they are, and again with one figure's head made slower.

    python3 scripts/bench_injected_power.py --asv-config DIR/asv.conf.json --pair BASE HEAD [--pair ...]

Per twin pair (BASE HEAD: commits or tags of the history, HEAD the twin), the window the main
job's verdict read: the last `OPERATOR_ROUNDS` replicates of each operator timing and, for a
wall time, base's rounds cut to as many as head holds (head's all came from the twin's job).
Then:

* **identical builds**: the pair through `benchkit.report.check.compare_pair` as the main job
  judges it (interleaved): every flag is false. Over all pairs: the share of pairs with any
  flag, and its Clopper-Pearson 95 % upper bound;
* **injected**: per metric group (operator speedup ratio, eager and compiled seconds, wall
  time, instruction count), `--trials` figures of distinct cases or inputs, each judged with
  its head samples (and value) multiplied by ``1 + --size`` (counts: ``1 + --count-size``),
  everything else as measured: found when that figure is a regression. The trials of one pair
  share its noise; several pairs give independent draws.

It reads results only (no measuring); `--markdown FILE` writes the report with its command.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from benchkit.history.results.read import LoadedResults, Measurement, ResultSet, load_asv_config, read_results
from benchkit.names import BenchmarkName, Metric
from benchkit.operator_rounds import OPERATOR_ROUNDS
from benchkit.report import check
from benchkit.report.budget import FLAGS
from benchkit.report.check_status import Status
from benchkit.report.rounds_window import keep_rounds, rounds_of

GROUPS: dict[str, Callable[[Metric | None], bool]] = {
    "speedup ratio": lambda m: m is Metric.COMPILED_OVER_EAGER,
    "eager seconds": lambda m: m is Metric.EAGER_SECONDS,
    "compiled seconds": lambda m: m is Metric.COMPILED_SECONDS,
    "wall time": lambda m: m is Metric.WALL_TIME,
    "instruction count": lambda m: m is Metric.INSTRUCTIONS,
}


def window(base: ResultSet, head: ResultSet) -> tuple[ResultSet, ResultSet]:
    """The rounds the twin's job judged: see the module's docstring."""

    def cut(m: Measurement, keep: int) -> Measurement:
        held = rounds_of(m)
        return keep_rounds(m, held - keep) if keep and held > keep else m

    base_kept, head_kept = dict(base.measurements), dict(head.measurements)
    for key, after in head.measurements.items():
        metric = BenchmarkName.parse(key[0]).metric
        if metric is not None and metric.replicated:
            head_kept[key] = cut(after, OPERATOR_ROUNDS)
            if key in base_kept:
                base_kept[key] = cut(base_kept[key], OPERATOR_ROUNDS)
        elif metric is Metric.WALL_TIME and key in base_kept:
            base_kept[key] = cut(base_kept[key], rounds_of(after))
    return dataclasses.replace(base, measurements=base_kept), dataclasses.replace(
        head, measurements=head_kept
    )


def scaled(m: Measurement, factor: float) -> Measurement:
    assert m.value is not None
    samples = [s * factor for s in m.samples] if m.samples else m.samples
    return dataclasses.replace(m, value=m.value * factor, samples=samples)


def judge(base: ResultSet, head: ResultSet, loaded: LoadedResults) -> list[check.Comparison]:
    config = check.parse_check_config({}, "built-in defaults")
    return check.compare_pair(base, head, loaded.units, config, interleaved=True)[0]


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


@dataclasses.dataclass
class Tally:
    found: int = 0
    trials: int = 0
    missed: dict[str, int] = dataclasses.field(default_factory=dict)


def clopper_pearson_upper(k: int, n: int, level: float = 0.95) -> float:
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asv-config", type=Path, required=True)
    parser.add_argument("--pair", nargs=2, action="append", required=True, metavar=("BASE", "HEAD"))
    parser.add_argument("--machine")
    parser.add_argument("--size", type=float, default=0.05)
    parser.add_argument("--count-size", type=float, default=0.01)
    parser.add_argument("--trials", type=int, default=30, help="figures per group and pair")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    conf = load_asv_config(args.asv_config)
    loaded = read_results(conf)
    machine = check.pick_machine(conf.results_dir, args.machine)
    rng = random.Random(args.seed)
    lines = [f"Generated by `python3 {shlex.join(['scripts/bench_injected_power.py', *sys.argv[1:]])}`.", ""]
    tallies = {group: Tally() for group in GROUPS}
    flagged_pairs, flag_rows = 0, []
    for base_label, head_label in args.pair:
        base = loaded.result_set(check.resolve_commit(conf, base_label, machine), machine)
        head = loaded.result_set(check.resolve_commit(conf, head_label, machine), machine)
        base, head = window(base, head)
        flags = [c for c in judge(base, head, loaded) if c.status in FLAGS]
        flagged_pairs += bool(flags)
        flag_rows += [f"{base_label} → {head_label}: {c.status.value} {c.name}" for c in flags]
        for group, tally in tallies.items():
            factor = 1 + (args.count_size if group == "instruction count" else args.size)
            for key in trials_of(head, group, args.trials, rng):
                slowed = dataclasses.replace(
                    head, measurements={**head.measurements, key: scaled(head.measurements[key], factor)}
                )
                verdict = next(c for c in judge(base, slowed, loaded) if (c.name, c.env) == key)
                tally.trials += 1
                if verdict.status == Status.REGRESSION:
                    tally.found += 1
                else:
                    tally.missed[verdict.status.value] = tally.missed.get(verdict.status.value, 0) + 1
    pairs = len(args.pair)
    bound = clopper_pearson_upper(flagged_pairs, pairs)
    lines += [
        f"Identical builds: {flagged_pairs} of {pairs} twin pair(s) with any flag "
        f"(Clopper-Pearson 95 % upper bound {bound:.0%}).",
        *(f"- {row}" for row in flag_rows),
        "",
        "| injected | figures | found | missed as |",
        "|---|---:|---:|---|",
    ]
    for group, tally in tallies.items():
        size = args.count_size if group == "instruction count" else args.size
        missed = ", ".join(f"{n} {status}" for status, n in sorted(tally.missed.items())) or "-"
        share = f"{tally.found}/{tally.trials}" + (
            f" ({tally.found / tally.trials:.0%})" if tally.trials else ""
        )
        lines.append(f"| {group} ×{1 + size:g} | {tally.trials} | {share} | {missed} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(f"# Gate power on real rounds\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
