#!/usr/bin/env python3
"""A wall-time round as one process per case (asv's ``time_wall`` today) or as one process for
every case (a batch): what each costs, and what the gate's rounds test would see.

Issue 55's first lever ("prepare once, measure many"): a round of a ``time_wall`` is a process
asv forks for one case, which prepares it, calibrates a block and takes three samples; most of
that process is not the samples. A batch round forks one process that does the same for every
case in turn. Both designs use benchkit's own timing code (`benchkit.measure.walltime.timing`),
fork from a process that imported torch (as asv's forkserver does), and alternate round by
round, so the machine's drift reaches both alike.

Per design it prints:

* the cost per case and round (fork to exit, asv's own bookkeeping per benchmark not included:
  it only adds to the per-case design) and the share of it spent in the timed samples;
* per case, the spread of the round values (each round's fastest sample, log scale) over the
  rounds, all of them and those within `benchkit.stats.FAST_BAND` of the second-fastest (the
  rounds the gate's test keeps), the median over cases: what a rounds test's MDC scales with;
* the common part: per round, the median over cases of each case's deviation from its own mean;
  its spread says how much a round moves every case at once (a batch's cases share a process);
* the gate's rounds test between a design's odd and even rounds (as between twin builds): its
  MDC and how many cases it flags;
* the median ratio batch / per-case of each case's fastest rounds: whether a case measures the
  same in a process that ran other cases before it.

    python -m lab.bench_batch_rounds --cases 60 --rounds 16 --markdown lab/reports/batch-rounds.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab import command_line

DESIGNS = ("per case", "batch")


def _measure(case: Any, samples: int) -> tuple[list[float], float]:
    """Prepare, calibrate and time `case` here: its samples (seconds per execution) and the
    seconds the samples took."""
    from benchkit.measure.walltime.timing import ROUND_BLOCK_SECONDS, prepare

    prepared = prepare(case.timer_args, case.key)
    prepared.calibrate(ROUND_BLOCK_SECONDS)
    taken = [prepared.run_block(prepared.block_size) for _ in range(samples)]
    return [t / prepared.block_size for t in taken], sum(taken)


def _in_child(cases: Sequence[Any], samples: int) -> tuple[dict[str, list[float]], float, float]:
    """Measure `cases` in turn in one forked process: their samples, the seconds in samples, and
    the seconds from fork to the process's exit."""
    read, write = os.pipe()
    forked = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        found, in_samples = {}, 0.0
        for case in cases:
            try:
                found[case.key], seconds = _measure(case, samples)
                in_samples += seconds
            except Exception:  # a case this torch cannot run: left out of both designs
                pass
        os.write(write, json.dumps([found, in_samples]).encode())
        os._exit(0)
    os.close(write)
    message = b""
    while chunk := os.read(read, 1 << 16):
        message += chunk
    os.close(read)
    os.waitpid(pid, 0)
    found, in_samples = json.loads(message)
    return found, in_samples, time.perf_counter() - forked


def _round(design: str, cases: Sequence[Any], samples: int) -> tuple[dict[str, float], float, float]:
    """One round of `design`: each case's round value (its fastest sample), seconds in samples,
    seconds in all."""
    if design == "batch":
        found, in_samples, total = _in_child(cases, samples)
        return {k: min(v) for k, v in found.items()}, in_samples, total
    values, in_samples, total = {}, 0.0, 0.0
    for case in cases:
        found, seconds, took = _in_child([case], samples)
        values.update({k: min(v) for k, v in found.items()})
        in_samples += seconds
        total += took
    return values, in_samples, total


def _spread(values: Sequence[float]) -> float:
    logs = [math.log(v) for v in values]
    return statistics.stdev(logs) if len(logs) > 1 else math.nan


def _fast_spread(values: Sequence[float]) -> float:
    """The spread of the rounds the gate's test keeps: within `FAST_BAND` of the second-fastest."""
    from benchkit.stats import FAST_BAND

    logs = sorted(math.log(v) for v in values)
    kept = [v for v in logs if v <= logs[1] + FAST_BAND]
    return statistics.stdev(kept) if len(kept) > 1 else math.nan


def _common(rounds: Sequence[dict[str, float]], keys: Sequence[str]) -> float:
    """Spread over rounds of the median (over cases) deviation of a case from its own log mean."""
    means = {k: statistics.fmean(math.log(r[k]) for r in rounds) for k in keys}
    per_round = [statistics.median(math.log(r[k]) - means[k] for k in keys) for r in rounds]
    return statistics.stdev(per_round)


def _table(rounds: dict[str, list[dict[str, float]]], cost: dict[str, list[tuple[float, float]]],
           n_cases: int) -> list[str]:  # fmt: skip
    keys = sorted(set.intersection(*(set(r) for rs in rounds.values() for r in rs)))
    lines = [
        "| design | ms per case and round | share in samples | spread of rounds (median over cases) "
        "| at the fast level | common to a round |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for design in DESIGNS:
        total = sum(t for _, t in cost[design])
        in_samples = sum(s for s, _ in cost[design])
        per = total / (len(cost[design]) * n_cases) * 1e3
        spread = statistics.median(_spread([r[k] for r in rounds[design]]) for k in keys)
        fast = statistics.median(_fast_spread([r[k] for r in rounds[design]]) for k in keys)
        common = _common(rounds[design], keys)
        lines.append(
            f"| {design} | {per:.1f} | {in_samples / total:.0%} | {spread:.2%} | {fast:.2%} | {common:.2%} |"
        )
    lines += ["", *_twin_halves(rounds, keys)]
    ratios = [min(r[k] for r in rounds["batch"]) / min(r[k] for r in rounds["per case"]) for k in keys]
    quartiles = statistics.quantiles(ratios, n=4)
    lines += [
        "",
        f"Batch / per case, each case's fastest round: median ×{statistics.median(ratios):.3f}, "
        f"middle half ×{quartiles[0]:.3f} to ×{quartiles[2]:.3f} ({len(keys)} cases).",
    ]
    return lines


def _twin_halves(rounds: dict[str, list[dict[str, float]]], keys: Sequence[str]) -> list[str]:
    """The gate's rounds test (`benchkit.stats.fast_level_test`) between a design's odd and even
    rounds, as between two identical builds measured interleaved: its MDC at `ALPHA` and the
    cases it flags. A round that moves every case at once moves them all to one side."""
    from benchkit.stats import ALPHA, fast_level_test

    lines = [
        f"Odd rounds against even rounds of each design, per case (the gate's rounds test, α = {ALPHA:g}):",
        "",
        "| design | median MDC | cases flagged | median p |",
        "|---|---:|---:|---:|",
    ]
    for design in DESIGNS:
        mdcs, flagged, ps = [], 0, []
        for key in keys:
            logs = [math.log(r[key]) for r in rounds[design]]
            test = fast_level_test(logs[0::2], logs[1::2])
            if test is None:
                continue
            mdcs.append(math.expm1(test.critical(ALPHA) * test.se))
            ps.append(test.p_value())
            flagged += test.p_value() < ALPHA
        mdc, p = statistics.median(mdcs), statistics.median(ps)
        lines.append(f"| {design} | {mdc:.1%} | {flagged} of {len(mdcs)} | {p:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60, help="Python cases of the standard suite")
    parser.add_argument("--rounds", type=int, default=16, help="rounds per design")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args()

    import torch  # imported before forking, as asv's forkserver does

    from benchkit.define.api import Language
    from benchkit.expand import load_cases
    from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

    cases = [c for c in load_cases() if c.timer_args.language is Language.PYTHON][: args.cases]
    rounds: dict[str, list[dict[str, float]]] = {d: [] for d in DESIGNS}
    cost: dict[str, list[tuple[float, float]]] = {d: [] for d in DESIGNS}
    for index in range(args.rounds):
        for design in DESIGNS if index % 2 == 0 else DESIGNS[::-1]:
            values, in_samples, total = _round(design, cases, SAMPLES_PER_ROUND)
            rounds[design].append(values)
            cost[design].append((in_samples, total))
        print(f"round {index + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    command = command_line("bench_batch_rounds", sys.argv[1:])
    lines = [
        "# A wall-time round: one process per case, or one for every case",
        "",
        f"Generated by `{command}` on {dt.date.today()} on this project's 2-core development machine",
        f"(torch {torch.__version__}): {len(cases)} Python cases of the standard suite, {args.rounds} rounds",
        f"per design, {SAMPLES_PER_ROUND} samples a round, the designs alternating round by round. A round",
        "value is the round's fastest sample; spreads are standard deviations of its log.",
        "",
        *_table(rounds, cost, len(cases)),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
