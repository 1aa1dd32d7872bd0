"""The rounds `benchkit main` measured itself, written into asv's results through asv's own
API, as ``asv run --record-samples --append-samples`` would have written asv's rounds: the
wall-time rounds (`benchkit.measure.walltime.batch`) of ``time_wall``, each round's samples after
those the build held, the value their median, a failed round a failed benchmark (never a number
from fewer rounds than asked), a case the build cannot run skipped (NaN); and the operator
replicates (`benchkit.operator_rounds`), whose outcomes their writer makes (`write_outcomes`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.measure.walltime.batch import CaseRound, CaseStatus
from benchkit.measure.walltime.timing import CALLS_PER_SAMPLE
from benchkit.util import atomic_path


def _outcome(rounds: Sequence[CaseRound]) -> Any:
    """asv's record of one benchmark from its rounds of this job."""
    from asv.runner import BenchmarkResult

    failed = [r for r in rounds if r.status is CaseStatus.FAILED]
    if failed:
        why = f"{len(failed)} of {len(rounds)} round(s) failed:\n{failed[0].error}"
        return BenchmarkResult(
            result=[None], samples=[None], number=[None], errcode=1, stderr=why, profile=None
        )
    if any(r.status is CaseStatus.SKIPPED for r in rounds):
        reason = next(r.error for r in rounds if r.status is CaseStatus.SKIPPED)
        return BenchmarkResult(
            result=[math.nan], samples=[None], number=[None], errcode=0, stderr=reason, profile=None
        )
    samples = [s for r in rounds for s in r.samples]
    return BenchmarkResult(
        result=[statistics.median(samples)],
        samples=[samples],
        number=[CALLS_PER_SAMPLE],
        errcode=0,
        stderr="",
        profile=None,
    )


@dataclasses.dataclass(frozen=True)
class Recorded:
    """One benchmark's record of a job's rounds: asv's ``BenchmarkResult``, the seconds it took,
    and whether its samples go after those the build held (else instead of them)."""

    outcome: Any
    seconds: float
    append: bool


class RoundsWriter:
    """Writes a job's wall-time rounds of one asv environment, build by build: what every
    results file of that environment shares (asv's benchmarks, the machine, the environment,
    the repository of commits) is read once."""

    def __init__(self, conf: Any, machine: str, env_name: str) -> None:
        from asv import environment
        from asv.benchmarks import Benchmarks
        from asv.machine import Machine
        from asv.repo import get_repo

        self.conf, self.machine = conf, machine
        self.benchmarks = Benchmarks.load(conf)
        [self.env] = [env for env in environment.get_environments(conf, None) if env.name == env_name]
        self.repo = get_repo(conf)
        params = Machine.load(machine_name=machine, interactive=False)
        self.params = {**params.__dict__, "python": self.env.python, **self.env.requirements}
        self._machine = params

    def write(
        self,
        commit: str,
        rounds: Mapping[str, Sequence[CaseRound]],
        started: dt.datetime,
        append: bool = True,
    ) -> None:
        """Add `rounds` (asv benchmark name -> this job's rounds of it) to `commit`'s results
        (the file written whole, or not at all), after the rounds it held (`append`) or
        instead of them; a benchmark's duration is its cases' seconds in these rounds."""
        outcomes = {}
        for name, measured in rounds.items():
            outcome = _outcome(measured)
            kept = append and outcome.errcode == 0 and not math.isnan(outcome.result[0])
            outcomes[name] = Recorded(outcome, sum(r.seconds for r in measured), kept)
        self.write_outcomes(commit, outcomes, started)

    def write_outcomes(self, commit: str, outcomes: Mapping[str, Recorded], started: dt.datetime) -> None:
        """Add each benchmark's `Recorded` outcome to `commit`'s results, as asv's ``add_result``
        does (the file written whole, or not at all)."""
        from asv.results import Results, get_filename

        env = self.env
        self._machine.save(self.conf.results_dir)  # as asv run does: the folder names its machine
        date = self.repo.get_date(commit)
        results = Results(self.params, env.requirements, commit, date, env.python, env.name, env.env_vars)
        results.load_data(self.conf.results_dir)
        for name, recorded in sorted(outcomes.items()):
            results.add_result(
                self.benchmarks[name],
                recorded.outcome,
                started_at=started,
                duration=recorded.seconds,
                record_samples=True,
                append_samples=recorded.append,
            )
        results_dir = Path(self.conf.results_dir)
        name = get_filename(self.machine, commit, env.name)
        with tempfile.TemporaryDirectory(prefix=".wall-rounds-", dir=results_dir) as tmp:
            results.save(tmp)
            with atomic_path(results_dir / name) as target:
                os.replace(Path(tmp) / name, target)
