"""How far one input's cold compile time moves between two fresh processes of one torch build.

    python -m lab.bench_compile_noise [--pairs 2] [--markdown lab/reports/compile-noise.md]

The gate judges a compile time, measured once per build, by a prior (`benchkit.report.gate.noise.
COMPILE_SIGMA`, the robust sigma of the log ratio of two cold compiles of one build) under heavy
tails (`compile_noise`): nothing else says how far it moves. This program measures that spread as the
operator suite does it: each process is one timing process of the default CPU set
(``python -m benchkit.measure.operators.asv --time-default-set 1 OUT cpu``) with an empty
inductor cache of its own, so every input compiles cold after the process's warm-up compile.
Each pair is two such processes one after the other, once with inductor's default compile
threads and once with ``TORCHINDUCTOR_COMPILE_THREADS=1``, the settings alternating (A B A B).
Per setting and pair: the robust sigma (1.4826 MAD) of the 51 inputs' log ratios, their median,
the largest, how many inputs the gate's noise for the pair would leave outside its interval or
flag (all falsely: one build), and the sums of the inputs' compile seconds. Run it on an
otherwise idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit.report.gate.noise import COMPILE_SIGMA, compile_noise
from benchkit.stats import robust_sigma
from lab import REPO_ROOT, command_line

SETTINGS = {"default threads": None, "compile_threads=1": "1"}
Compiles = dict[tuple[str, str], float]  # (operator, input label) -> cold compile seconds


def _timing_process(scratch: Path, name: str, threads: str | None) -> tuple[Compiles, float, float]:
    """One cold timing process of the default CPU set: its per-input compile seconds, its
    warm-up compile's seconds and its wall time."""
    out = scratch / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_COMPILE_THREADS"}
    env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=scratch)
    if threads is not None:
        env["TORCHINDUCTOR_COMPILE_THREADS"] = threads
    module = "benchkit.measure.operators.asv"
    command = [sys.executable, "-m", module, "--time-default-set", "1", str(out), "cpu"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}")
    data = json.loads(out.read_text())
    compiles = {
        (operator, label): float(measured["compile_s"])
        for operator, entry in data["operators"].items()
        for label, measured in entry.get("inputs", {}).items()
        if measured.get("compile_s") is not None and math.isfinite(measured["compile_s"])
    }
    return compiles, float(data["warm_up_s"]), seconds


def _pair_row(setting: str, index: int, first: Compiles, second: Compiles) -> str:
    shared = sorted(set(first) & set(second))
    logs = [math.log(first[key] / second[key]) for key in shared]
    median = statistics.median(logs)
    sigma = robust_sigma(logs, median) or 0.0
    largest = max(logs, key=abs)
    # The gate's noise for this pair (`compile_noise`): how often one build's inputs leave the
    # interval "unchanged" vouches for, and how many it would flag (every flag here is false).
    noise = compile_noise(None, robust_sigma(logs))
    half = noise.half_width or 0.0
    outside = sum(1 for d in logs if abs(d) > half)
    flagged = sum(1 for d in logs if noise.detects(d))
    sums = f"{sum(first[k] for k in shared):.1f} / {sum(second[k] for k in shared):.1f}"
    return (
        f"| {setting} | {index} | {len(shared)} | {sigma:.3f} | {median:+.3f} | {largest:+.3f} "
        f"| {outside} | {flagged} | {sums} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="pairs of processes per setting")
    parser.add_argument("--markdown", type=Path, help="write the report here (default: print it)")
    args = parser.parse_args()
    rows, processes = [], []
    with tempfile.TemporaryDirectory(prefix="benchkit-compile-noise-") as folder:
        scratch = Path(folder)
        runs: dict[str, list[Compiles]] = {setting: [] for setting in SETTINGS}
        for index in range(2 * args.pairs):
            for number, (setting, threads) in enumerate(SETTINGS.items()):
                compiles, warm_up, seconds = _timing_process(scratch, f"{index}-{number}", threads)
                runs[setting].append(compiles)
                processes.append(f"{setting}: {seconds:.0f} s, warm-up compile {warm_up:.1f} s")
                print(f"bench_compile_noise: {processes[-1]}", file=sys.stderr, flush=True)
        for setting, done in runs.items():
            for pair in range(args.pairs):
                rows.append(_pair_row(setting, pair + 1, done[2 * pair], done[2 * pair + 1]))
    command = command_line("bench_compile_noise", sys.argv[1:])
    report = "\n".join(
        [
            "# Cold compile time: two fresh processes of one build",
            "",
            f"Generated by `{command}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC "
            f"(torch {_torch_version()}). The gate's prior: σ = {COMPILE_SIGMA} of the log ratio; "
            "*outside*: inputs beyond the interval the gate's unchanged vouches for (±3.29 σ), "
            "*flagged*: those it would flag (t, 3 df): both pairs' builds are one build.",
            "",
            "| setting | pair | inputs | robust σ of the log ratio | median | largest | outside "
            "| flagged | sums (s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
            "Processes, in the order they ran: " + "; ".join(processes) + ".",
            "",
        ]
    )
    if args.markdown:
        args.markdown.write_text(report)
    else:
        print(report)
    return 0


def _torch_version() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    raise SystemExit(main())
