"""How long does a quick asv pass take, and how much of it is per-process overhead?

Runs `asv run --python=same --quick` twice, side by side:

1. the whole standard suite (`-b time_wall`): the figure users see;
2. N trivial cases (`torch.empty(())`, Python): per benchmark this is asv's
   process overhead (fork from the forkserver, result passing) plus our
   preparation and one calibrated block (~20-40 ms of measuring).

Prints totals and seconds per benchmark. Target: <= 0.3 s of overhead per
benchmark; torch is imported once per environment by the forkserver.

    python -m lab.bench_asv_overhead [--trivial 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from lab import REPO_ROOT as ROOT


def _asv_quick(env: dict[str, str], bench: str) -> tuple[float, int, int]:
    start = time.monotonic()
    out = subprocess.run(
        ["asv", "run", "--python=same", "--quick", "-b", bench],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - start
    lines = [line for line in out.stdout.splitlines() if ".time_wall" in line]
    failed = sum(line.rstrip().endswith("failed") for line in lines)
    return elapsed, len(lines), failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trivial", type=int, default=100, help="number of trivial cases")
    args = parser.parse_args()
    subprocess.run(["asv", "machine", "--yes"], cwd=ROOT, capture_output=True, check=True)

    with tempfile.TemporaryDirectory() as tmp:
        defs = Path(tmp) / "trivial.py"
        defs.write_text(
            "from benchkit.define.api import TimerArgs\n"
            f"BENCHMARKS = {{'trivial': {{str(i): TimerArgs('torch.empty(())', setup='pass  # {{i}}') "
            f"for i in range({args.trivial})}}}}\n".replace("{{i}}", "{i}")
        )
        env_trivial = {**os.environ, "BENCHKIT_STANDARD": "0", "BENCHKIT_DEFINITIONS": str(defs)}
        env_suite = {**os.environ, "BENCHKIT_DEFINITIONS": ""}
        suite_t, suite_n, suite_failed = _asv_quick(env_suite, "time_wall")
        triv_t, triv_n, _ = _asv_quick(env_trivial, "time_wall")

    print(
        f"standard suite, quick pass: {suite_t:6.1f} s for {suite_n} benchmarks "
        f"({suite_t / max(suite_n, 1):.3f} s each), {suite_failed} failed"
    )
    print(
        f"{triv_n} trivial benchmarks:     {triv_t:6.1f} s "
        f"({triv_t / max(triv_n, 1):.3f} s each, including discovery and ~30 ms of measuring each)"
    )
    print("target: <= 0.3 s of overhead per benchmark")


if __name__ == "__main__":
    main()
