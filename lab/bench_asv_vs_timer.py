"""Does asv's `time_wall` agree with `torch.utils.benchmark.Timer` on µs-scale statements?

For a few microsecond-scale cases this runs, side by side and interleaved
(several rounds, so drift on a shared machine hits both equally):

* ``Timer(stmt, setup).blocked_autorange()`` — the reference;
* the asv benchmark `time_wall` of the same case, through asv_runner's own
  `TimeBenchmark` timing loop (the code `asv run` executes in its benchmark
  processes), each round in a fresh process.

Each process reports its median; over rounds the script prints the best (min)
of those medians for both sides, the figure least disturbed by other load on
a shared machine, and their ratio. Target: within 10%.

    python -m lab.bench_asv_vs_timer [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from lab import REPO_ROOT as ROOT

CASES = {
    # key prefix -> (stmt, setup) as Timer sees them
    "x * w (4x4)": ("y = x * w", "x = torch.ones((4, 4))\nw = torch.ones((4, 4), requires_grad=True)"),
    "x + y (4x4)": ("x + y_float", "x = torch.rand((4, 4))\ny_float = torch.ones((4, 4))"),
    "torch.empty(())": ("torch.empty(())", "pass"),
    "x.view(-1, 1)": ("x.view(-1, 1)", "x = torch.ones((4, 4))"),
}

_CHILD = r"""
import json, statistics, sys, torch
from torch.utils.benchmark import Timer
from asv_runner.discovery import disc_benchmarks
mode, stmt, setup, defs = sys.argv[1:5]
torch.set_num_threads(1)
if mode == "timer":
    m = Timer(stmt=stmt, setup=setup).blocked_autorange(min_run_time=1.0)
    print(json.dumps(m.median))
else:
    import os
    os.environ["BENCHKIT_DEFINITIONS"] = defs
    os.environ["BENCHKIT_STANDARD"] = "0"
    bench = next(b for b in disc_benchmarks(%(root)r + "/benchmarks") if b.name.endswith("time_wall")
                 and "instruction_counts" in b.name)
    bench.do_setup()
    result = bench.run()
    print(json.dumps(statistics.median(result["samples"])))
"""


def _definitions_file(stmt: str, setup: str, directory: Path) -> Path:
    path = directory / "one_case.py"
    path.write_text(
        "from benchkit.define.api import TimerArgs\n"
        f"BENCHMARKS = {{'probe': TimerArgs(stmt={stmt!r}, setup={setup!r})}}\n"
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tmp = ROOT / ".benchkit" / "bench_asv_vs_timer"
    tmp.mkdir(parents=True, exist_ok=True)
    child = _CHILD % {"root": str(ROOT)}
    print(f"best of {args.rounds} process medians per side")
    print(f"{'case':<18} {'Timer':>14} {'asv':>12} {'asv/Timer':>10}")
    worst = 0.0
    for name, (stmt, setup) in CASES.items():
        defs = _definitions_file(stmt, setup, tmp)
        timer_runs, asv_runs = [], []
        for _ in range(args.rounds):
            for mode, sink in (("timer", timer_runs), ("asv", asv_runs)):
                out = subprocess.run(
                    [sys.executable, "-c", child, mode, stmt, setup, str(defs)],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                )
                sink.append(json.loads(out.stdout.strip().splitlines()[-1]))
        t, a = min(timer_runs), min(asv_runs)
        worst = max(worst, abs(a / t - 1))
        print(f"{name:<18} {t * 1e6:>11.3f} us {a * 1e6:>9.3f} us {a / t:>10.3f}")
    print(f"largest deviation: {worst:.1%} (target <= 10%)")


if __name__ == "__main__":
    main()
