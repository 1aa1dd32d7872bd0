#!/usr/bin/env python3
"""What one wall-time round of a case costs, part by part, for two round designs side by side.

A round of a ``time_wall`` is a process asv forks from its forkserver (which imported torch and
the suite). In it the case is prepared, its block size calibrated, and asv takes its samples.
This script does the same with benchkit's own code (`benchkit.measure.walltime.timing`) for the
Python cases of the standard suite. Each case is measured in turn under both designs, so the
machine's drift reaches both alike:

* ``before``: blocks of `TARGET_BLOCK_SECONDS`, plus the one block asv runs to choose ``number``
  when a benchmark leaves it at 0;
* ``now``: blocks of `ROUND_BLOCK_SECONDS` and ``number = 1`` (no block before the samples).

Per design it prints the mean seconds per round of each part: the fork, preparing the case,
calibrating, asv's ``number`` block, the samples, and the whole round until the process has
exited. asv's own bookkeeping per benchmark (sending the result, writing it) is not included;
`lab.profile_main_job` measures whole main jobs.

Then what a round measures, per design, for a few small statements (`NOISE_CASES`) in
``--processes`` rounds each, the designs alternating: the share of rounds at least 1.3x slower
than the second-fastest round (the gate leaves those out, docs/verdicts.md) and the spread of the
rounds within 1.10x of it (what the gate's test sees).

    python -m lab.bench_round_cost --cases 60 --processes 60 --markdown lab/reports/round-cost.md
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lab import command_line

PARTS = ("fork", "prepare", "calibrate", "number block", "samples", "whole round")
NOISE_CASES = {
    "Linear": ("y = model(x)", "model = torch.nn.Linear(4, 2)\nx = torch.ones(8, 4)"),
    "add": ("y = x + x", "x = torch.ones(8, 4)"),
    "sigmoid": ("y = torch.sigmoid(x)", "x = torch.ones(8, 4)"),
}


def _round(case, block_seconds: float, number_block: bool, samples: int) -> list[float]:
    """Seconds of each of `PARTS` for one round of `case` in a forked process, then the median
    of its samples and their range relative to it."""
    from benchkit.measure.walltime.timing import prepare

    read, write = os.pipe()
    forked = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        began = time.perf_counter()
        prepared = prepare(case.timer_args, case.key)
        prepared_at = time.perf_counter()
        prepared.calibrate(block_seconds)
        calibrated_at = time.perf_counter()
        if number_block:
            prepared.run_block(prepared.block_size)
        chosen_at = time.perf_counter()
        sample_seconds = [
            prepared.run_block(prepared.block_size) / prepared.block_size for _ in range(samples)
        ]
        ended = time.perf_counter()
        parts = [began - forked, prepared_at - began, calibrated_at - prepared_at]
        parts += [chosen_at - calibrated_at, ended - chosen_at]
        median = statistics.median(sample_seconds)
        within = (max(sample_seconds) - min(sample_seconds)) / median
        os.write(write, json.dumps([*parts, median, within]).encode())
        os._exit(0)
    os.close(write)
    message = b""
    while chunk := os.read(read, 4096):
        message += chunk
    os.close(read)
    os.waitpid(pid, 0)
    *parts, median, within = json.loads(message)
    return [*parts, time.perf_counter() - forked, median, within]


@dataclasses.dataclass(frozen=True)
class _Case:
    key: str
    timer_args: Any


def _alternating(cases: list[Any], designs: dict[str, tuple[float, bool]], times: int) -> dict:
    """`times` rounds of every case per design, the designs' order flipping each time."""
    from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

    rows: dict[tuple[str, str], list[list[float]]] = {(c.key, d): [] for c in cases for d in designs}
    for index in range(times):
        for case in cases:
            order = list(designs.items())
            if index % 2:
                order.reverse()
            for name, (block_seconds, number_block) in order:
                rows[case.key, name].append(_round(case, block_seconds, number_block, SAMPLES_PER_ROUND))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60, help="Python cases of the standard suite")
    parser.add_argument("--processes", type=int, default=60, help="rounds per design of each noise case")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args()

    import torch  # imported before forking, as asv's forkserver does

    from benchkit.define.api import Language, TimerArgs
    from benchkit.expand import load_cases
    from benchkit.measure.walltime import timing

    cases = [c for c in load_cases() if c.timer_args.language is Language.PYTHON][: args.cases]
    designs = {
        f"before: {timing.TARGET_BLOCK_SECONDS * 1e3:g} ms blocks, asv's number block": (
            timing.TARGET_BLOCK_SECONDS,
            True,
        ),
        f"now: {timing.ROUND_BLOCK_SECONDS * 1e3:g} ms blocks, number = {timing.CALLS_PER_SAMPLE}": (
            timing.ROUND_BLOCK_SECONDS,
            False,
        ),
    }
    cost = _alternating(cases, designs, 1)
    noise_cases = [_Case(name, TimerArgs(stmt, setup=setup)) for name, (stmt, setup) in NOISE_CASES.items()]
    noise = _alternating(noise_cases, designs, args.processes)

    command = command_line("bench_round_cost", sys.argv[1:])
    lines = [
        "# What one wall-time round costs, part by part, and what it measures",
        "",
        f"Generated by `{command}` on {dt.date.today()} on this project's 2-core development machine",
        f"(torch {torch.__version__}), each case measured in one forked process per round and design,",
        f"{timing.SAMPLES_PER_ROUND} samples a round, the designs alternating.",
        "",
        f"Cost: {len(cases)} Python cases of the standard suite, one round each per design; mean",
        "milliseconds per round (asv's own bookkeeping per benchmark not included).",
        "",
        "| design | " + " | ".join(PARTS) + " |",
        "|---|" + "---:|" * len(PARTS),
    ]
    for name in designs:
        measured = [row for (_, design), found in cost.items() if design == name for row in found]
        means = [statistics.mean(row[i] for row in measured) * 1e3 for i in range(len(PARTS))]
        lines.append(f"| {name} | " + " | ".join(f"{m:.1f}" for m in means) + " |")
    before, now = designs
    lines += [
        "",
        f"What a round measures: {args.processes} rounds per case and design, each round of one design",
        "next to one of the other. `within a round`: the median over rounds of the range of a round's",
        "samples relative to their median (what the block's length can change). `now / before`: the",
        "median ratio of neighbouring rounds' medians, and the spread of those ratios (half the range",
        "of their middle 50 %: the machine's drift between neighbouring processes included).",
        "",
        "| case | within a round, before | within a round, now | now / before | spread of now / before |",
        "|---|---:|---:|---:|---:|",
    ]
    for case in noise_cases:
        old_rows, new_rows = noise[case.key, before], noise[case.key, now]
        ratios = sorted(n[-2] / o[-2] for o, n in zip(old_rows, new_rows, strict=True))
        quartiles = statistics.quantiles(ratios, n=4)
        within = [statistics.median(row[-1] for row in rows) for rows in (old_rows, new_rows)]
        lines.append(
            f"| {case.key} | {within[0]:.2%} | {within[1]:.2%} | ×{statistics.median(ratios):.3f} "
            f"| ±{(quartiles[2] - quartiles[0]) / 2:.1%} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
