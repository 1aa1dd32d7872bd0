"""The main job's operator replicates: the operator timings of every build it judges, measured
again in fresh processes, the builds interleaved.

asv times the operator set once per asv command (`benchkit.measure.operators.asv.setup_cache`),
so in the main run each build's timings come from its own stretch of time, and a predecessor's
from an earlier job: whatever the machine did in either stretch moves every timing of that
build alike, and a verdict would take it for the build's. After the main run the job therefore
runs one more ``asv run`` over the builds it judges (the new ones, their predecessors, a
baseline), selecting only the operator timings (`benchkit.names.Metric.replicated`), in
`OPERATOR_ROUNDS` interleaved asv rounds: in every round each build's ``setup_cache`` times the
operator set afresh in one process (``BENCHKIT_OPERATOR_REPLICATES``), asv alternates the
builds' order (A B, then B A) and appends the round's timing to the build's samples. The
verdict judges each pair by these replicates alone: `benchkit.report.gate.rounds_window` leaves out
those each build had before.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from benchkit import settings
from benchkit.asv_runs import Progress, asv_run_args, asv_run_settings, run_asv
from benchkit.history.builds.sources import PIP_CONFIG, PipSource
from benchkit.history.results.read import LoadedResults
from benchkit.names import BenchmarkName, Metric, metrics_regexes
from benchkit.report.gate.noise import replicated_metric
from benchkit.rounds_policy import MAIN_RUN_COMPILES, OPERATOR_ROUNDS

REPLICATED = tuple(m for m in Metric if m.replicated)


def main_run_settings(config: settings.Settings) -> settings.Settings:
    """`config` for the main run of a job that judges builds: `MAIN_RUN_COMPILES` operator
    timing processes per build, each compiling (their timings are not what the verdict reads:
    the interleaved replicates are), unless the user chose a number
    (``BENCHKIT_OPERATOR_PROCESSES``, ``BENCHKIT_COMPILE_REPLICATES``)."""
    measure = config.measure
    processes = measure.operator_processes
    if processes is None:
        processes = MAIN_RUN_COMPILES
    # At least 1: with no timing process (0) nothing compiles either way, and 0 is no valid count.
    compiling = measure.compile_replicates or max(1, min(processes, MAIN_RUN_COMPILES))
    measure = dataclasses.replace(measure, operator_processes=processes, compile_replicates=compiling)
    return dataclasses.replace(config, measure=measure)


def replicate_regexes(bench: Sequence[str], modules: Collection[str] = ()) -> list[str]:
    """asv ``-b`` regexes selecting, of what `bench` selects, the operator timings only (of
    `modules` only, when given: e.g. not the CUDA suite on a machine that recorded it skipped)."""
    regexes = metrics_regexes(bench, REPLICATED)
    if not modules:
        return regexes
    guard = "(?=(?:" + "|".join(re.escape(m) for m in sorted(modules)) + r")\.)"
    return ["^" + guard + regex.removeprefix("^") for regex in regexes]


def timed_modules(loaded: LoadedResults, machine: str, commits: Sequence[str]) -> set[str]:
    """The asv modules whose operator timings have a number in any of `commits` (a suite a
    machine skipped, as the CUDA one without a GPU, has none)."""
    found = set()
    for commit in commits:
        for (name, _env), m in loaded.result_set(commit, machine).measurements.items():
            if m.has_number and replicated_metric(name):
                found.add(BenchmarkName.parse(name).module)
    return found


def add_operator_rounds(
    conf_path: Path,
    results_dir: Path,
    machine: str,
    commits: Sequence[str],
    bench: Sequence[str],
    source: PipSource = PIP_CONFIG,
    progress: Progress | None = None,
    rounds: int = OPERATOR_ROUNDS,
    modules: Collection[str] = (),
) -> int:
    """`rounds` interleaved replicates of the selected operator timings (of `modules`, when
    given) on `commits`, appended to their samples; asv's exit code."""
    progress = progress or Progress()
    regexes = replicate_regexes(bench, modules)
    config = settings.current()
    measure = dataclasses.replace(config.measure, operator_replicates=True)
    config = dataclasses.replace(config, measure=measure)
    own = asv_run_settings(config, machine, results_dir, rounds, regexes)
    env = {**settings.child_environ(own), **dict(source.environ)}
    progress.note(
        f"operator timings: {rounds} interleaved replicates (one timing process each) of "
        f"{len(commits)} build(s) ({', '.join(c[:8] for c in commits)}): the verdict judges them"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="benchkit-main-") as scratch:
        hashfile = Path(scratch) / "commits.txt"
        hashfile.write_text("".join(f"{c}\n" for c in commits))
        args = asv_run_args(f"HASHFILE:{hashfile}", regexes, machine, append=True)
        code = run_asv([*args, "-a", f"rounds={rounds}"], conf_path, False, env)
    progress.note(f"the operator replicates took {time.monotonic() - started:.0f} s")
    return code
