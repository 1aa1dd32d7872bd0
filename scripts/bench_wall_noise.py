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

    flock /tmp/benchkit-heavy.lock python3 scripts/bench_wall_noise.py \
        --markdown docs/measurements/wall-noise.md
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = {  # the first is the one the process measurement prepares again and again
    "Linear": ("y = model(x)", "model = torch.nn.Linear(4, 2)\nx = torch.ones(8, 4)"),
    "add": ("y = x + x", "x = torch.ones(8, 4)"),
    "python loop": ("y = sum(r)", "r = list(range(256))"),
}
SLOW = 1.3  # a block or process this many times its case's fast level is in a slow stretch
SAMPLES = 3


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


def _one_process(instances: int) -> list[float]:
    """In a forked child: the first case prepared `instances` times, the median of 3 samples of
    each (seconds per execution)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            prepared = [_prepared(next(iter(CASES))) for _ in range(instances)]
            medians = []
            for case in prepared:
                samples = [case.run_block(case.block_size) / case.block_size for _ in range(SAMPLES)]
                medians.append(statistics.median(samples))
            os.write(write, json.dumps(medians).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    if not data:
        raise SystemExit("bench_wall_noise: a measuring process died without a result")
    return json.loads(data)


def over_processes(processes: int, instances: int) -> dict[str, Any]:
    """The rounds as the gate sees them (the first instance of each process: a round's value)
    and, among the processes whose every instance lies in the gate's fast band, the spreads."""
    import torch  # noqa: F401 - imported before the forks, as asv's forkserver does

    from benchkit.stats import FAST_BAND

    rows = [[math.log(v) for v in _one_process(instances)] for _ in range(processes)]
    top = sorted(r[0] for r in rows)[1] + FAST_BAND  # the gate's band: 2nd-fastest round x1.10
    kept = [r[0] for r in rows if r[0] <= top]
    result: dict[str, Any] = {
        "processes": len(rows),
        "left_out": 1 - len(kept) / len(rows),
        "slow_share": sum(r[0] >= top - FAST_BAND + math.log(SLOW) for r in rows) / len(rows),
        "band_sd": statistics.stdev(kept) if len(kept) >= 3 else None,
    }
    whole = [r for r in rows if max(r) <= top]
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

    from benchkit.stats import ROUNDS_ALPHA, minimum_detectable_change

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
        f"**Over processes**: {procs['processes']} forked processes (rounds), each preparing",
        f"{first} {instances} times and taking {SAMPLES} samples of each. A round's value is the",
        "median of its first preparation's samples, as in a `time_wall` round; the gate's rounds",
        "test keeps the rounds within ×1.10 of the second-fastest (`FAST_BAND`).",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| rounds at least {SLOW}x the second-fastest | {procs['slow_share']:.0%} |",
        f"| rounds outside the gate's band (left out) | {procs['left_out']:.0%} |",
    ]
    if procs["band_sd"] is not None:
        lines.append(f"| spread of the rounds in the band (sd of log) | {procs['band_sd']:.2%} |")
    if "between_one" in procs:
        lines += [
            f"| rounds whose every preparation lies in the band | {procs['whole_processes']} |",
            f"| of those: spread between rounds, first preparation | {procs['between_one']:.2%} |",
            f"| of those: spread between rounds, mean of the {instances} preparations"
            f" | {procs['between_mean']:.2%} |",
            f"| of those: spread between the preparations of one round (median) | {procs['within']:.2%} |",
        ]
    if procs["band_sd"] is not None:
        lines += [
            "",
            "Rounds per build the gate's rounds test (Welch's test at `ROUNDS_ALPHA`) would need",
            "for its minimum detectable change to reach a size, with the spread of the rounds in",
            "the band and that share of rounds left out:",
            "",
            "| change | rounds per build |",
            "|---:|---:|",
        ]
        for change in (0.02, 0.05):
            needed = rounds_needed(procs["band_sd"], procs["left_out"], change)
            lines.append(f"| {change:.0%} | {needed if needed is not None else 'more than 1,000'} |")
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
    command = "python3 scripts/bench_wall_noise.py " + " ".join(sys.argv[1:])
    text = markdown(command.strip(), timeline, procs, args.instances)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
