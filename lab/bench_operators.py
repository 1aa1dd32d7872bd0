#!/usr/bin/env python3
"""How long the operator-speedup suite takes per commit, and how well it repeats.

Runs the asv operator benchmarks (``asv run --python=same --quick -b operators``)
several times against one fresh benchkit cache:

* run 1 is cold: empty inductor cache, every kernel is compiled (what the
  first measurement of a new torch commit costs);
* runs 2.. are warm: the cache from run 1 is found, nothing is recompiled.

Each run also writes its measurements (``BENCHKIT_OPERATORS_JSON``); the script
prints wall times, the size of the default set, and per operator the median
speedup (eager/compiled, median over its inputs) of every run with the largest
run-to-run difference. Targets (issue 4): cold <= 10 min, warm <= 3 min,
median speedups within 5% between runs.

    python -m lab.bench_operators            # 3 runs through asv (~5 min here)
    python -m lab.bench_operators --direct   # skip asv, call the setup_cache body
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import REPO_ROOT as ROOT

TARGET_COLD_S = 600.0
TARGET_WARM_S = 180.0
TARGET_REPEAT = 0.05


def run_once(env: dict[str, str], direct: bool) -> float:
    if direct:
        command = [
            sys.executable,
            "-c",
            "from benchkit.measure.operators.asv import measure_default_set_for_asv as m; m()",
        ]
    else:
        command = ["asv", "run", "--python=same", "--quick", "-b", "^operators\\."]
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout[-3000:] + completed.stderr[-3000:])
        raise SystemExit(f"run failed with exit code {completed.returncode}: {' '.join(command)}")
    return elapsed


def median_speedups(data: dict) -> dict[str, float]:
    speedups = {}
    for operator, entry in data["operators"].items():
        ratios = [r["eager_s"] / r["compiled_s"] for r in entry.get("inputs", {}).values() if not r["error"]]
        if ratios:
            speedups[operator] = statistics.median(ratios)
    return speedups


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="total runs, the first one cold (default: 3)")
    parser.add_argument("--direct", action="store_true", help="call the setup_cache body instead of asv")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2 (one cold, one warm)")
    if not args.direct:
        from benchkit.mainjob import ensure_machine

        ensure_machine(ROOT / "asv.conf.json", None)  # a fresh machine has no asv machine file yet

    with tempfile.TemporaryDirectory(prefix="bench-operators-") as scratch:
        env = dict(os.environ, BENCHKIT_CACHE_DIR=str(Path(scratch) / "cache"))
        env.pop("TORCHINDUCTOR_CACHE_DIR", None)
        env.pop("BENCHKIT_INDUCTOR_COLD", None)
        walls: list[float] = []
        runs: list[dict] = []
        for index in range(args.runs):
            kind = "cold" if index == 0 else "warm"
            dump = Path(scratch) / f"run{index}.json"
            print(f"run {index + 1}/{args.runs} ({kind}) ...", file=sys.stderr, flush=True)
            walls.append(run_once(dict(env, BENCHKIT_OPERATORS_JSON=str(dump)), args.direct))
            runs.append(json.loads(dump.read_text()))

    first = runs[0]
    measured = {op: e for op, e in first["operators"].items() if "inputs" in e}
    n_inputs = sum(len(e["inputs"]) for e in measured.values())
    n_failed = sum(1 for e in measured.values() for r in e["inputs"].values() if r["error"])
    skipped = {op: e["skip"] for op, e in first["operators"].items() if "skip" in e}
    via_asv = "asv run --python=same --quick -b ^operators\\."
    how = "setup_cache body in a subprocess" if args.direct else via_asv
    print(
        f"\nDefault operator set: {len(measured)} operators, {n_inputs} inputs "
        f"({n_failed} failed, {len(skipped)} operators skipped); measured with: {how}"
    )
    for op, reason in skipped.items():
        print(f"  skipped {op}: {reason}")

    cold, warm = walls[0], walls[1:]
    print(
        f"\nWall time per commit: cold {cold:.0f} s (target <= {TARGET_COLD_S:.0f}), "
        f"warm {', '.join(f'{w:.0f}' for w in warm)} s (target <= {TARGET_WARM_S:.0f})"
    )
    compile_cold = sum(r["compile_s"] for e in measured.values() for r in e["inputs"].values())
    compile_warm = sum(
        r["compile_s"] for e in runs[1]["operators"].values() for r in e.get("inputs", {}).values()
    )
    print(
        f"Sum of per-input compile times: cold {compile_cold:.1f} s, warm {compile_warm:.1f} s; "
        f"process warm-up compile: cold {first['warm_up_s']:.1f} s, warm {runs[1]['warm_up_s']:.1f} s"
    )
    print("Measurement inside setup_cache: " + ", ".join(f"{r['elapsed_s']:.0f} s" for r in runs))

    speedups = [median_speedups(r) for r in runs]
    print(f"\nMedian speedup (eager/compiled) per operator, runs 1..{len(runs)}, and max/min - 1:")
    worst_pair = 0.0
    worst_all = 0.0
    within = 0
    for op in speedups[0]:
        values = [s[op] for s in speedups if op in s]
        spread = max(values) / min(values) - 1
        consecutive = max(max(a, b) / min(a, b) - 1 for a, b in itertools.pairwise(values))
        worst_all = max(worst_all, spread)
        worst_pair = max(worst_pair, consecutive)
        within += consecutive <= TARGET_REPEAT
        row = " ".join(f"{v:7.3f}" for v in values)
        print(f"  {op:48s} {row}   {spread * 100:5.1f}%")
    print(
        f"\nRepeatability: worst difference between consecutive runs {worst_pair * 100:.1f}% "
        f"({within}/{len(speedups[0])} operators within {TARGET_REPEAT * 100:.0f}%); "
        f"worst spread over all {len(runs)} runs {worst_all * 100:.1f}%"
    )
    overall = [statistics.median(s.values()) for s in speedups]
    overall_spread = max(overall) / min(overall) - 1
    print(
        f"Median speedup over all operators, per run: {', '.join(f'{v:.3f}' for v in overall)} "
        f"(spread {overall_spread * 100:.1f}%)"
    )
    print("Timings are from a shared 2-core machine: expect noise from other work on it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
