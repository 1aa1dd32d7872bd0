#!/usr/bin/env python3
"""What limits a wall-time verdict on this machine: how its noise is built, and how many
rounds the gate's test would need to see a 2 % and a 5 % change.

Two measurements, with benchkit's own timing code (`benchkit.measure.walltime.timing`: a case
prepared, calibrated to `ROUND_BLOCK_SECONDS` blocks, samples of one block):

* **over time**: one process times blocks of each case in turn for ``--seconds``, and the
  blocks are classed as slow (at least 1.3x the case's fast level, its 2nd percentile) or fast;
  printed: the slow share, how long slow and fast stretches last, and how much the other cases
  slow down while the first one is slow (does a slow stretch hit all code alike?);
* **over processes**: ``--processes`` forked processes (as asv's forkserver forks a round),
  each preparing the first case ``--instances`` times (setup run again: other addresses for its
  tensors and modules) and taking 3 samples of each. Printed: the share of processes at the
  slow level, and among the fast ones the spread between processes (of one instance, and of
  the mean over the instances) and within a process (between its instances). If the spread
  between processes came from where a process's data landed, the mean over instances would
  spread less than one instance.

From the fast processes' spread and the slow share, the rounds per build the gate's rounds
test (`benchkit.stats.fast_level_test`, Welch's test at `ROUNDS_ALPHA`) needs for a minimum
detectable change of 2 % and of 5 %.

    python -m lab.bench_wall_noise --markdown lab/reports/wall-noise.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lab import command_line

CASES = {  # the first is the one the process measurement prepares again and again
    "Linear": ("y = model(x)", "model = torch.nn.Linear(4, 2)\nx = torch.ones(8, 4)"),
    "add": ("y = x + x", "x = torch.ones(8, 4)"),
    "python loop": ("y = sum(r)", "r = list(range(256))"),
}
SLOW = 1.3  # a block or process this many times its case's fast level is in a slow stretch
SAMPLES = 3  # a `time_wall` round's samples (`SAMPLES_PER_ROUND`)
MOST_SAMPLES = 7
ROUND_DESIGNS = {  # a round's value: (samples, statistic of them)
    "3 samples, their median": (3, statistics.median),
    "3 samples, the fastest": (3, min),
    "7 samples, their median": (7, statistics.median),
    "7 samples, the fastest": (7, min),
}
PREPARATION_DESIGNS = {  # a round's value from one sample of each of SAMPLES preparations
    f"{SAMPLES} preparations, a sample each, their median": statistics.median,
    f"{SAMPLES} preparations, a sample each, the fastest": min,
}


def _prepared(name: str) -> Any:
    from benchkit.define.api import TimerArgs
    from benchkit.measure.walltime.timing import ROUND_BLOCK_SECONDS, prepare

    stmt, setup = CASES[name]
    case = prepare(TimerArgs(stmt, setup=setup), name)
    case.calibrate(ROUND_BLOCK_SECONDS)
    return case


def _fast_level(values: list[float]) -> float:
    return sorted(values)[len(values) // 50]


def over_time(seconds: float) -> dict[str, Any]:
    cases = {name: _prepared(name) for name in CASES}
    blocks: dict[str, list[float]] = {name: [] for name in CASES}
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        for name, case in cases.items():
            blocks[name].append(case.run_block(case.block_size) / case.block_size)
    elapsed = time.perf_counter() - began
    first = next(iter(CASES))
    level = _fast_level(blocks[first])
    slow = [v >= SLOW * level for v in blocks[first]]
    stretches: dict[bool, list[float]] = {True: [], False: []}
    step = elapsed / len(slow)  # seconds between two blocks of the first case
    run = 1
    for before, now in itertools.pairwise(slow):
        if now == before:
            run += 1
        else:
            stretches[before].append(run * step)
            run = 1
    stretches[slow[-1]].append(run * step)
    others = {}
    for name in list(CASES)[1:]:
        in_slow = [v for v, s in zip(blocks[name], slow, strict=True) if s]
        in_fast = [v for v, s in zip(blocks[name], slow, strict=True) if not s]
        if in_slow and in_fast:
            others[name] = statistics.median(in_slow) / statistics.median(in_fast)
    first_slow = [v for v, s in zip(blocks[first], slow, strict=True) if s]
    return {
        "seconds": elapsed,
        "blocks": len(slow),
        "slow_share": sum(slow) / len(slow),
        "slow_factor": statistics.median(first_slow) / level if first_slow else None,
        "slow_stretches": stretches[True],
        "fast_stretches": stretches[False],
        "others_in_slow": others,
    }


def _one_process(instances: int) -> dict[str, Any]:
    """In a forked child: the first case prepared `instances` times. The first preparation
    takes `MOST_SAMPLES` samples (seconds per execution), the others `SAMPLES` each; with the
    seconds from the fork until the first preparation was calibrated, and one block's seconds."""
    read, write = os.pipe()
    forked = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            first = _prepared(next(iter(CASES)))
            ready = time.perf_counter() - forked
            others = [_prepared(next(iter(CASES))) for _ in range(instances - 1)]

            def samples(case: Any, count: int) -> list[float]:
                return [case.run_block(case.block_size) / case.block_size for _ in range(count)]

            row = {
                "ready": ready,
                "block": first.run_block(first.block_size),
                "first": samples(first, MOST_SAMPLES),
                "others": [samples(case, SAMPLES) for case in others],
            }
            os.write(write, json.dumps(row).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    if not data:
        raise SystemExit("bench_wall_noise: a measuring process died without a result")
    return json.loads(data)


def _gate_kept(values: list[float]) -> list[float]:
    """The rounds the gate's rounds test keeps at the fast level (`benchkit.stats.fast_rounds`)
    when two identical builds share them: every other round on each side."""
    from benchkit.stats import fast_rounds

    before, after = fast_rounds(values[::2], values[1::2])
    return [*before, *after]


def _design(values: list[float], samples: int) -> dict[str, Any]:
    kept = _gate_kept(values)
    return {
        "samples": samples,
        "left_out": 1 - len(kept) / len(values),
        "band_sd": statistics.stdev(kept) if len(kept) >= 3 else None,
    }


def over_processes(processes: int, instances: int) -> dict[str, Any]:
    """The rounds as the gate sees them, per round design (`ROUND_DESIGNS`: from the first
    preparation's samples), and, among the processes whose every preparation lies in the
    gate's fast level, the spreads between and within processes."""
    import torch  # noqa: F401 - imported before the forks, as asv's forkserver does

    rows = [_one_process(instances) for _ in range(processes)]
    designs = {}
    for name, (count, statistic) in ROUND_DESIGNS.items():
        values = [math.log(statistic(r["first"][:count])) for r in rows]
        designs[name] = _design(values, count)
    for name, statistic in PREPARATION_DESIGNS.items():
        # one sample of each of SAMPLES preparations: the first, and the first of each other one
        values = [
            math.log(statistic([r["first"][0], *(o[0] for o in r["others"][: SAMPLES - 1])])) for r in rows
        ]
        designs[name] = _design(values, SAMPLES)
    one = [math.log(statistics.median(r["first"][:SAMPLES])) for r in rows]
    fastest = sorted(one)[1]
    result: dict[str, Any] = {
        "processes": len(rows),
        "slow_share": sum(v >= fastest + math.log(SLOW) for v in one) / len(one),
        "designs": designs,
        "ready": statistics.median(r["ready"] for r in rows),
        "block": statistics.median(r["block"] for r in rows),
    }
    kept = set(_gate_kept(one))
    top = max(kept)
    every = [
        [v, *(math.log(statistics.median(o)) for o in r["others"])] for v, r in zip(one, rows, strict=True)
    ]
    whole = [r for r in every if max(r) <= top]
    result["whole_processes"] = len(whole)
    if len(whole) >= 3:
        result["between_one"] = statistics.stdev(r[0] for r in whole)
        result["between_mean"] = statistics.stdev(statistics.fmean(r) for r in whole)
        result["within"] = statistics.median(statistics.stdev(r) for r in whole)
    return result


def rounds_needed(sd: float, slow_share: float, change: float) -> int | None:
    """Rounds per build for the rounds test's MDC to reach `change`, with the fast rounds'
    spread `sd` (log) and `slow_share` of the rounds left out; None beyond 1,000."""
    from scipy.stats import t

    from benchkit.rounds_policy import ROUNDS_ALPHA
    from benchkit.stats import minimum_detectable_change

    for fast in range(3, 1000):
        se = sd * math.sqrt(2 / fast)
        if minimum_detectable_change(se, float(t.isf(ROUNDS_ALPHA / 2, 2 * fast - 2))) <= change:
            return math.ceil(fast / max(1e-9, 1 - slow_share))
    return None


def markdown(command: str, timeline: dict[str, Any], procs: dict[str, Any], instances: int) -> str:
    import torch

    first = next(iter(CASES))

    def stretch(values: list[float]) -> str:
        if not values:
            return "none"
        return f"{len(values)}, median {statistics.median(values):.2f} s, longest {max(values):.2f} s"

    lines = [
        "# What limits a wall-time verdict on this machine",
        "",
        f"Generated by `{command}` on {dt.date.today()} on this project's 2-core development machine",
        f"(torch {torch.__version__}), with benchkit's wall-time code (blocks of `ROUND_BLOCK_SECONDS`).",
        "",
        f"**Over time**: one process timed blocks of {', '.join(CASES)} in turn for",
        f"{timeline['seconds']:.0f} s ({timeline['blocks']} blocks of each). A block of {first} at",
        f"least {SLOW}x its fast level (its 2nd percentile) is in a slow stretch.",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| share of {first}'s blocks in slow stretches | {timeline['slow_share']:.0%} |",
    ]
    if timeline["slow_factor"]:
        lines.append(
            f"| {first} in a slow stretch, median, against its fast level | ×{timeline['slow_factor']:.2f} |"
        )
    lines += [
        f"| slow stretches | {stretch(timeline['slow_stretches'])} |",
        f"| fast stretches | {stretch(timeline['fast_stretches'])} |",
    ]
    lines += [
        f"| {name} during {first}'s slow stretches, against its fast stretches | ×{factor:.2f} |"
        for name, factor in timeline["others_in_slow"].items()
    ]
    lines += [
        "",
        f"**Over processes**: {procs['processes']} forked processes (rounds). Each prepared {first}",
        f"once and took {MOST_SAMPLES} samples of it, then prepared it {instances - 1} times more",
        f"(setup run again) and took {SAMPLES} samples of each. The rounds test keeps a build's",
        "rounds at the fast level (`benchkit.stats.fast_rounds`, here with every other round on",
        "each side, as for two identical builds). A round's fixed cost here (fork, preparation,",
        f"calibration) was {procs['ready'] * 1e3:.0f} ms, a sample {procs['block'] * 1e3:.1f} ms;",
        "asv's own bookkeeping per round comes on top.",
        "",
        f"Rounds at least {SLOW}x the second-fastest: {procs['slow_share']:.0%}.",
        "",
        "Per round design (a round's value from the first preparation's samples): the rounds the",
        "test leaves out, the spread of those it keeps, and the rounds per build Welch's test at",
        "`ROUNDS_ALPHA` would need for its minimum detectable change to reach 2 % and 5 %:",
        "",
        "| a round's value | left out | spread kept (sd of log) | rounds for 2 % | rounds for 5 % |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, design in procs["designs"].items():
        sd = design["band_sd"]
        needed = [rounds_needed(sd, design["left_out"], c) if sd is not None else None for c in (0.02, 0.05)]
        cells = [str(n) if n is not None else "–" for n in needed]
        spread = f"{sd:.2%}" if sd is not None else "–"
        lines.append(f"| {name} | {design['left_out']:.0%} | {spread} | {cells[0]} | {cells[1]} |")
    if "between_one" in procs:
        lines += [
            "",
            f"Rounds whose every preparation lies at the fast level ({procs['whole_processes']}), each",
            f"preparation's value the median of its first {SAMPLES} samples:",
            "",
            "| figure | value |",
            "|---|---:|",
            f"| spread between rounds, first preparation | {procs['between_one']:.2%} |",
            f"| spread between rounds, mean of the {instances} preparations | {procs['between_mean']:.2%} |",
            f"| spread between the preparations of one round (median) | {procs['within']:.2%} |",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the measurement over time")
    parser.add_argument("--processes", type=int, default=120, help="forked processes")
    parser.add_argument("--instances", type=int, default=8, help="preparations of the case per process")
    parser.add_argument("--markdown", type=Path, help="write the tables there")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    timeline = over_time(args.seconds)
    procs = over_processes(args.processes, args.instances)
    command = command_line("bench_wall_noise", sys.argv[1:])
    text = markdown(command, timeline, procs, args.instances)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
