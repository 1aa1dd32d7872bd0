"""What a run measured: per torch build and metric, how many benchmarks have numbers.

`benchkit main` ends with this table, read back from asv's result files through
asv's Results API, so it reports what was recorded rather than what was meant to
happen. Every benchmark of the suite that the run selected counts once per
parameter combination, as:

* **measured** -- a number;
* **failed** -- asv recorded a failure (including every benchmark behind a failed
  ``setup_cache``);
* **skipped** -- asv recorded a skip (NaN: e.g. no valgrind, an operator without
  an input generator);
* **missing** -- selected, but no result at all for this build.

A metric with no number for a build, or any failed or missing benchmark, is a
problem: the job does not call itself finished without saying so. The one
exception: CUDA operator timings all skipped, which is what a machine without a
GPU records (the gate still fails a CUDA benchmark that had a number on base).

With each build the settings that shaped its numbers are read back from what the job
recorded beside asv's results (`benchkit.settings_record`): the rounds, the selection,
the inductor cache state asked for, ...; builds measured differently are named.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit import settings_record
from benchkit.history.results.read import LoadedResults
from benchkit.names import BenchmarkName, Metric, RunGroup

METRICS = tuple(RunGroup)
# A machine without a GPU records every CUDA benchmark as skipped (no CUDA device): not a
# problem of the run. A CUDA history that loses its numbers still fails the gate ("newly skipped").
_SKIPPED_WITHOUT_DEVICE = RunGroup.OPERATOR_TIMINGS_CUDA
STATES = ("measured", "failed", "skipped", "missing")


def metric_of(name: str) -> RunGroup:
    """The metric a benchmark belongs to, from its asv name ``module.Class.method``."""
    return BenchmarkName.parse(name).run_group


@dataclasses.dataclass(frozen=True)
class BuildSummary:
    commit: str
    label: str  # e.g. the history tag: torch version
    counts: Mapping[str, Mapping[str, int]]  # metric -> state -> number of benchmarks
    examples: Mapping[str, Sequence[str]]  # "metric/state" -> a few benchmark names
    # environment -> the settings recorded for this build's run there (none before they were)
    records: Mapping[str, settings_record.RunRecord] = dataclasses.field(default_factory=dict)

    def problems(self) -> list[str]:
        found = []
        for metric, states in self.counts.items():
            total = sum(states.values())
            if total == 0:
                continue
            bad = {state: states[state] for state in ("failed", "missing") if states[state]}
            if metric == _SKIPPED_WITHOUT_DEVICE and states["skipped"] == total:
                continue
            if states["measured"] == 0:
                found.append(f"{self.label}: no {metric} numbers ({_describe(states)})")
            elif bad:
                found.append(f"{self.label}: {metric}: {_describe(bad)}")
        return found


@dataclasses.dataclass(frozen=True)
class Summary:
    builds: Sequence[BuildSummary]

    @property
    def problems(self) -> list[str]:
        return [problem for build in self.builds for problem in build.problems()]

    @property
    def table(self) -> str:
        metrics = [m for m in METRICS if any(sum(b.counts[m].values()) for b in self.builds)]
        header = ["torch build", "metric", *STATES]
        rows = [
            [build.label, metric, *(str(build.counts[metric][s]) for s in STATES)]
            for build in self.builds
            for metric in metrics
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *rows]
        )

    @property
    def measured_with(self) -> list[str]:
        """One line per build and environment: the recorded settings of its run."""
        return [
            f"{build.label} ({env}): {record.describe()}"
            for build in self.builds
            for env, record in sorted(build.records.items())
        ]


def _describe(states: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in states.items() if n)


def expected_names(benchmarks: Mapping[str, Mapping[str, Any]], regexes: Sequence[str]) -> list[str]:
    """Every benchmark x parameter combination asv selects with these ``-b`` regexes (asv's rule)."""
    names = []
    for name, info in benchmarks.items():
        params = info.get("params") or []
        combos = [f"{name}({', '.join(combo)})" for combo in itertools.product(*params)] if params else [name]
        for full in combos:
            if not regexes or any(re.search(regex, full) for regex in regexes):
                names.append(full)
    return names


def summarize_build(
    commit: str, label: str, expected: Iterable[str], measurements: Mapping[str, Any]
) -> BuildSummary:
    """``measurements``: benchmark name (with params) -> `benchkit.history.results.read.Measurement`."""
    counts = {metric: dict.fromkeys(STATES, 0) for metric in METRICS}
    examples: dict[str, list[str]] = {}
    for name in expected:
        found = measurements.get(name)
        if found is None:
            state = "missing"
        elif found.failed:
            state = "failed"
        elif found.skipped:
            state = "skipped"
        else:
            state = "measured"
        metric = metric_of(name)
        counts[metric][state] += 1
        examples.setdefault(f"{metric}/{state}", []).append(name)
    return BuildSummary(commit, label, counts, {k: v[:3] for k, v in examples.items()})


def summarize(
    loaded: LoadedResults,
    machine: str,
    commits: Sequence[tuple[str, str]],
    regexes: Sequence[str] = (),
) -> Summary:
    """The table for these ``(commit, label)`` builds of the project's results (read once
    by the caller, `benchkit.history.results.read.read_results`)."""
    expected = expected_names(loaded.infos, regexes)
    builds = []
    for commit, label in commits:
        result_set = loaded.result_set(commit, machine)
        by_name = {name: m for (name, _env), m in result_set.measurements.items()}
        build = summarize_build(commit, label, expected, by_name)
        records = settings_record.records_of(Path(loaded.conf.results_dir), machine, commit)
        builds.append(dataclasses.replace(build, records=records))
    return Summary(builds)


@dataclasses.dataclass(frozen=True)
class Expected:
    """What a job expects of each build: the machine, the ``-b`` selection, and how many
    samples every wall time holds (rounds x samples per round)."""

    machine: str
    regexes: tuple[str, ...]
    wall_samples: int


def _incomplete(name: str, found: Any, expected: Expected) -> bool:
    if found is not None and found.skipped and metric_of(name) == _SKIPPED_WITHOUT_DEVICE:
        return False  # what a machine without a GPU records: nothing more to measure here
    if found is None or not found.has_number:
        return True
    wall = BenchmarkName.parse(name).metric is Metric.WALL_TIME
    return wall and len(found.samples or ()) < expected.wall_samples


def complete_builds(conf: Any, expected: Expected, commits: Sequence[str]) -> list[str]:
    """The commits whose results hold every number the job expected: each selected benchmark
    measured, each wall time with all its rounds. Unreadable results are never complete.
    `conf`: asv's config as the job loaded it."""
    from benchkit.errors import UserError
    from benchkit.history.results.read import benchmark_infos, load_result_set

    try:
        names = expected_names(benchmark_infos(conf), expected.regexes)
    except UserError:
        return []
    complete = []
    for commit in commits:
        try:
            result_set = load_result_set(conf, commit, expected.machine)
        except UserError:
            continue
        by_name = {name: m for (name, _env), m in result_set.measurements.items()}
        if names and not any(_incomplete(name, by_name.get(name), expected) for name in names):
            complete.append(commit)
    return complete
