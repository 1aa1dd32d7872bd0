"""Time the CI command from a fresh clone with empty caches; write lab/reports/ci-time.md.

    python -m lab.measure_ci [--ref HEAD] [--timeout 5400]

Clones this repository at REF into a temporary folder and runs its ``.ci/run`` (the README's
test command: the install, then every test with ``BENCHKIT_SLOW=1``) with ``HOME``,
``BENCHKIT_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR`` in empty temporary folders and
``CI=true``. The whole output goes to ``benchkit-ci-<commit>.log`` in the temporary
folder's parent (the clone is removed after a passing run); the measurement file gets the
command, the commit, the date, the machine, the wall time, the peak disk use (the most the
filesystem of the temporary folder held above its level at the start, sampled every 5 s),
pytest's last line, the slowest test phases and the costliest test files (every phase is listed:
``PYTEST_ADDOPTS=--durations=0``, which changes only pytest's report). The install step points
benchkit's editable install at the clone; run ``pip install -e .`` here afterwards to point it back.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lab import REPO_ROOT as REPO
from lab import REPORTS, shown_path

OUT = REPORTS / "ci-time.md"


def _machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:  # the tests' results depend on it (default builds, CUDA or CPU wheels)
        torch = f", torch {importlib.metadata.version('torch')} installed"
    except importlib.metadata.PackageNotFoundError:
        torch = ", no torch installed"
    return f"{os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.machine()}{torch}"


class DiskPeak(threading.Thread):
    """Samples how much the filesystem of ``path`` holds above its level at the start."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.start_used = shutil.disk_usage(path).used
        self.peak = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(5.0):
            self.peak = max(self.peak, shutil.disk_usage(self.path).used - self.start_used)


SLOWEST_SHOWN = 15


def slowest_tests(lines: list[str], shown: int | None = SLOWEST_SHOWN) -> list[tuple[float, str, str]]:
    """(seconds, phase, test) of pytest's own durations section (``--durations``), slowest first;
    all of them where ``shown`` is None."""
    rows = []
    inside = False
    for line in lines:
        if "slowest" in line and "durations" in line and line.startswith("="):
            inside = True
            continue
        if inside:
            parts = line.split(maxsplit=2)
            if len(parts) != 3 or not parts[0].endswith("s"):
                break
            try:
                rows.append((float(parts[0][:-1]), parts[1], parts[2]))
            except ValueError:
                break
    return rows[:shown]


def seconds_per_file(rows: list[tuple[float, str, str]]) -> list[tuple[float, str]]:
    """(seconds, test file) summed over every phase of its tests, most first: what each file
    costs a worker (files go to workers whole: ``--dist loadfile``)."""
    totals: dict[str, float] = {}
    for seconds, _phase, test in rows:
        path = test.split("::", 1)[0]
        totals[path] = totals.get(path, 0.0) + seconds
    return sorted(((s, f) for f, s in totals.items()), reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--timeout", type=float, default=5400.0, help="seconds before the run is stopped")
    args = parser.parse_args(argv)

    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", args.ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    scratch = Path(tempfile.mkdtemp(prefix="benchkit-ci-"))
    clone = scratch / "benchkit"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", commit], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHKIT_", "PYTHONPATH"))}
    for name in ("home", "cache", "inductor"):
        (scratch / name).mkdir()
    env.update(
        HOME=str(scratch / "home"),
        BENCHKIT_CACHE_DIR=str(scratch / "cache"),
        TORCHINDUCTOR_CACHE_DIR=str(scratch / "inductor"),
        CI="true",
        PYTEST_ADDOPTS="--durations=0",  # every test's phases, for the per-file sums
    )
    log = scratch.parent / f"benchkit-ci-{commit[:10]}.log"
    print(f"measure_ci: .ci/run of {commit[:10]} in {clone}; output in {log}", flush=True)
    disk = DiskPeak(scratch)
    disk.start()
    started = time.perf_counter()
    with open(log, "wb") as out:
        try:
            done = subprocess.run(
                ["bash", ".ci/run"],
                cwd=clone,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=args.timeout,
            )
            code: int | str = done.returncode
        except subprocess.TimeoutExpired:
            code = f"stopped after {args.timeout:.0f} s"
    seconds = time.perf_counter() - started
    disk.stopped.set()
    disk.join()
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    phases = slowest_tests(lines, None)
    last = lines[-1] if lines else "(no output)"
    OUT.write_text(
        "# CI time\n\n"
        f"Generated by `python -m lab.measure_ci --ref {args.ref}` on "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC: `.ci/run` (the README's test "
        "command) in a fresh clone, with empty `HOME`, `BENCHKIT_CACHE_DIR` and `TORCHINDUCTOR_CACHE_DIR` "
        "and `CI=true`.\n\n"
        "| commit | machine | wall time | peak disk use | exit status | pytest's last line |\n"
        "|---|---|---:|---:|---|---|\n"
        f"| {commit[:10]} | {_machine()} | {seconds / 60:.1f} min ({seconds:,.0f} s) | "
        f"{disk.peak / 2**30:.1f} GiB | {code} | "
        f"`{last.replace('|', '/').replace('`', '')}` |\n"
        + _slowest_table(phases[:SLOWEST_SHOWN])
        + _files_table(seconds_per_file(phases))
    )
    print(
        f"measure_ci: exit {code} after {seconds:,.0f} s, "
        f"peak disk use {disk.peak / 2**30:.1f} GiB; wrote {shown_path(OUT)}",
        flush=True,
    )
    if code == 0:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if code == 0 else 1


def _slowest_table(rows: list[tuple[float, str, str]]) -> str:
    if not rows:
        return ""
    body = "".join(f"| {seconds:,.0f} | {phase} | `{test}` |\n" for seconds, phase, test in rows)
    return (
        f"\nThe {len(rows)} slowest test phases of that run (pytest's `--durations`). The setup of a "
        "file's first test includes its wait for the machine when that file runs alone "
        "(`quiet`, tests/support/quiet.py) or waits for one that does:\n\n"
        "| seconds | phase | test |\n|---:|---|---|\n" + body
    )


def _files_table(files: list[tuple[float, str]]) -> str:
    if not files:
        return ""
    body = "".join(f"| {seconds:,.0f} | `{path}` |\n" for seconds, path in files[:SLOWEST_SHOWN])
    total = sum(seconds for seconds, _ in files)
    return (
        f"\nThe {min(len(files), SLOWEST_SHOWN)} costliest of {len(files)} test files: seconds summed over "
        f"their tests' phases ({total:,.0f} s over all files, the two workers' time together; "
        "`PYTEST_ADDOPTS=--durations=0` lists them all):\n\n"
        "| seconds | file |\n|---:|---|\n" + body
    )


if __name__ == "__main__":
    sys.exit(main())
