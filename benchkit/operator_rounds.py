"""The main job's operator replicates: the operator timings of every build it judges, measured
again in fresh processes, the builds interleaved.

asv times the operator set once per asv command (`benchkit.measure.operators.asv.setup_cache`),
so in the main run each build's timings come from its own stretch of time, and a predecessor's
from an earlier job: whatever the machine did in either stretch moves every timing of that
build alike, and a verdict would take it for the build's. After the main run the job therefore
times the selected operators of the builds it judges (the new ones, their predecessors, a
baseline) again, `OPERATOR_ROUNDS` times each, the builds alternating (A B, then B A), or side by
side, one core each, where the machine has a core per build (`benchkit.measure.side_by_side`): every
replicate is one timing process of one build (``python -m benchkit.measure.operators.asv
--time-default-set``) run with the build's unpacked tree on its path, as the wall-time rounds
are (`benchkit.measure.walltime.batch.BuildPlace`), so no build is installed between replicates
and no asv process is started for one. The replicates are appended to the build's samples of
each operator timing as asv's own rounds would be (`benchkit.history.results.rounds_writer`);
the verdict judges each pair by these replicates alone (`benchkit.report.gate.rounds_window`
leaves out those each build had before).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit import settings
from benchkit.asv_runs import Progress, run_asv
from benchkit.history.builds.places import places_of
from benchkit.history.builds.sources import PIP_CONFIG, PipSource
from benchkit.history.results.read import LoadedResults, benchmark_infos
from benchkit.history.results.rounds_writer import Recorded, RoundsWriter
from benchkit.measure import side_by_side
from benchkit.measure.operators.asv import ReplicateFigure, replicate_figure, replicate_rounds_per_process
from benchkit.measure.selection import selected
from benchkit.measure.walltime.batch import BuildPlace, round_order
from benchkit.names import OPERATOR_MODULES, BenchmarkName, Metric, metrics_regexes, operator_class_name
from benchkit.report.gate.noise import replicated_metric
from benchkit.rounds_policy import MAIN_RUN_COMPILES, OPERATOR_ROUNDS
from benchkit.util import REPO_ROOT

# A replicate process times the selected operators from the build's warm inductor cache: about
# 10 s on the project's 2-core machine; one that compiles (a cache lost) takes minutes.
REPLICATE_TIMEOUT_SECONDS = 1800.0

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
    conf: Any,
    conf_path: Path,
    machine: str,
    commits: Sequence[str],
    bench: Sequence[str],
    source: PipSource = PIP_CONFIG,
    progress: Progress | None = None,
    rounds: int | None = None,
    modules: Collection[str] = (),
) -> int:
    """`rounds` interleaved replicates of the selected operator timings (of `modules`, when
    given) on `commits`, appended to their samples: 0, or 2 when some figure failed. `rounds`
    None: ``BENCHKIT_OPERATOR_REPLICATES``, else `OPERATOR_ROUNDS`."""
    progress = progress or Progress()
    rounds = rounds or settings.current().measure.operator_replicates or OPERATOR_ROUNDS
    names = sorted(selected(benchmark_infos(conf), replicate_regexes(bench, modules)))
    if not names or not commits:
        return 0
    environ = {**settings.child_environ(settings.current()), **dict(source.environ)}
    progress.note(
        f"operator timings: {rounds} interleaved replicates (one timing process each) of "
        f"{len(commits)} build(s) ({', '.join(c[:8] for c in commits)}): the verdict judges them"
    )
    started = time.monotonic()

    def ensure_environments() -> None:
        run_asv(["setup"], conf_path, True, environ)

    failed = False
    suites = _suites(names)
    for env_name, places in places_of(conf, conf_path, commits, environ, ensure_environments).items():
        writer = RoundsWriter(conf, machine, env_name)
        began = dt.datetime.now(dt.UTC)
        runs = _replicates(places, suites, rounds, environ, progress)
        for place in places:
            outcomes = {
                name: _outcome(writer.benchmarks[name], suite, runs[place.commit])
                for suite in suites
                for name in suite.operator_of
            }
            failed |= any(outcome.errcode for outcome in outcomes.values())
            # the benchmarks share their processes: each gets its share of their seconds
            share = sum(r.seconds for r in runs[place.commit]) / len(outcomes)
            recorded = {name: Recorded(outcome, share, append=True) for name, outcome in outcomes.items()}
            writer.write_outcomes(place.commit, recorded, began)
    progress.note(f"the operator replicates took {time.monotonic() - started:.0f} s")
    return 2 if failed else 0


@dataclasses.dataclass(frozen=True)
class _Suite:
    """The operators of one asv module to time on its device, and what its benchmarks name."""

    device: str
    operators: tuple[str, ...]
    operator_of: dict[str, str]  # asv benchmark name -> operator ("" when not in the workload)
    labels: dict[str, str]  # an input as asv shows its parameter (repr) -> the input's label


@dataclasses.dataclass(frozen=True)
class _Run:
    """One replicate process of one build and device: its result, or why it has none."""

    device: str
    data: dict[str, Any] | None
    error: str
    seconds: float


def _suites(names: Sequence[str]) -> list[_Suite]:
    from benchkit.measure.operators.workload import asv_workload, input_labels

    suites = []
    for module, device in OPERATOR_MODULES.items():
        mine = [n for n in names if BenchmarkName.parse(n).module == module]
        if not mine:
            continue
        workload = asv_workload(device)
        by_class = {operator_class_name(o): o for o in workload.operators}
        operator_of = {n: by_class.get(BenchmarkName.parse(n).class_name, "") for n in mine}
        chosen = tuple(dict.fromkeys(o for o in operator_of.values() if o))
        labels = {repr(label): label for o in chosen for label in input_labels(workload.inputs(o))}
        suites.append(_Suite(device, chosen, operator_of, labels))
    return suites


def _replicates(
    places: Sequence[BuildPlace], suites: Sequence[_Suite], rounds: int, environ: Mapping[str, str],
    progress: Progress,
) -> dict[str, list[_Run]]:  # fmt: skip
    """Per commit, its replicate processes in order: round after round, the builds alternating;
    a round's CPU processes side by side, one core each, where the machine has a core per
    build (`benchkit.measure.side_by_side`; a CPU timing process times on one thread)."""
    runs: dict[str, list[_Run]] = {place.commit: [] for place in places}
    lanes = side_by_side.lanes(environ, len(places))
    for index in range(rounds):
        began = time.monotonic()
        order = round_order(places, index)
        for suite in suites:
            if lanes is not None and suite.device == "cpu":
                core = {place.commit: lanes.core_of(index, build) for build, place in enumerate(places)}
                tasks = [functools.partial(_time_once, p, suite, environ, core[p.commit]) for p in order]
                done = side_by_side.at_once(tasks)
            else:
                done = [_time_once(place, suite, environ) for place in order]
            for place, run in zip(order, done, strict=True):
                runs[place.commit].append(run)
        took = time.monotonic() - began
        how = ", side by side" if lanes is not None else ""
        progress.note(f"operator replicate {index + 1}/{rounds}: {len(places)} build(s){how} in {took:.1f} s")
    return runs


def _time_once(place: BuildPlace, suite: _Suite, environ: Mapping[str, str], core: int | None = None) -> _Run:
    """One timing process of `suite` on `place`'s build (on `core` alone when given)."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="benchkit-replicate-") as scratch:
        out = Path(scratch) / "timing.json"
        command = [place.python, "-m", "benchkit.measure.operators.asv", "--time-default-set",
                   str(replicate_rounds_per_process(suite.device)), str(out), suite.device,
                   ",".join(suite.operators)]  # fmt: skip
        process = subprocess.Popen(
            command, env=place.environ(environ), cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        if core is not None:
            side_by_side.pin(process.pid, core)
        try:
            _, stderr = process.communicate(timeout=REPLICATE_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            return _Run(suite.device, None, f"no result after {REPLICATE_TIMEOUT_SECONDS:.0f} s", 0.0)
        seconds = time.monotonic() - began
        if process.returncode != 0 or not out.exists():
            why = f"the timing process exited with status {process.returncode}: {stderr.strip()[-800:]}"
            return _Run(suite.device, None, why, seconds)
        data = json.loads(out.read_text())
    if "torch" in data:
        place.check_torch(data["torch"])
    return _Run(suite.device, data, "", seconds)


def _outcome(benchmark: Mapping[str, Any], suite: _Suite, runs: Sequence[_Run]) -> Any:
    """One operator timing's asv record of this job's replicates: per input, a sample per replicate;
    an input that failed in any replicate failed (no number from fewer replicates than asked),
    one its build cannot time skipped (NaN)."""
    from asv.runner import BenchmarkResult

    name = benchmark["name"]
    metric = BenchmarkName.parse(name).metric
    operator = suite.operator_of[name]
    mine = [r for r in runs if r.device == suite.device]
    results: list[float | None] = []
    samples: list[list[float] | None] = []
    errors: list[str] = []
    for shown in benchmark["params"][0] if benchmark["params"] else []:
        label = suite.labels.get(shown)
        if not operator or label is None or metric is None:
            figures = [ReplicateFigure(error=f"{name}({shown}): not in this checkout's operator set")]
        else:
            figures = [
                replicate_figure(r.data, operator, label, metric) if r.data is not None
                else ReplicateFigure(error=r.error)
                for r in mine
            ]  # fmt: skip
        failed = next((f.error for f in figures if f.error), "" if figures else "no replicate ran")
        if failed:
            errors.append(failed)
            results.append(None)
            samples.append(None)
        elif any(f.skipped for f in figures):
            results.append(math.nan)
            samples.append(None)
        else:
            values = [f.value for f in figures]
            results.append(statistics.median(values))
            samples.append(values)
    numbers = [None if s is None else 1 for s in samples]
    return BenchmarkResult(
        result=results, samples=samples, number=numbers, errcode=1 if errors else 0,
        stderr="\n".join(errors), profile=None,
    )  # fmt: skip
