"""Writes a history of asv results with asv's own Results API, one commit per build,
each with its own commit date (so benchkit orders them as asv would); a labelled
history with known steps and one disturbed build (`disturbed_history`); and labelled
histories whose wall times carry their rounds as `benchkit main` records them
(`stepped_history`).

`lab.bench_changepoints` scores `benchkit regressions` on many stepped histories; the gate's
and the change-point tests judge small ones."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult

ENV = "virtualenv-py3.11"
MACHINE = "box"


def commit_hash(index: int) -> str:
    return f"{index:08x}" + "c" * 32


class History:
    """An asv project folder whose results are a history of `commit_hash(i)` commits."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.results = root / "results"
        self.benchmarks: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, Results] = {}
        conf = {"version": 1, "project": "torch", "repo": "no-history-here", "results_dir": "results"}
        (root / "asv.conf.json").write_text(json.dumps(conf))

    @property
    def config(self) -> Path:
        return self.root / "asv.conf.json"

    def bench(
        self, name: str, unit: str, repeat: int | None = None, params: list[list[str]] | None = None
    ) -> None:
        """`repeat`: samples per asv round, as benchmarks.json records it (the gate cuts rounds by
        it); `params`: one parameter, ``input``, with these values (as the operator suite's)."""
        kind = "time" if unit == "seconds" and not params else "track"
        self.benchmarks[name] = {
            "name": name, "unit": unit, "type": kind, "params": params or [],
            "param_names": ["input"] if params else [], "version": "v1",
            **({"repeat": repeat} if repeat else {}),
        }  # fmt: skip

    def add(self, index: int, name: str, value: float, samples: list[float] | None = None) -> str:
        commit = commit_hash(index)
        if commit not in self.runs:
            params = {"machine": MACHINE, "python": "3.11"}
            date = 1_700_000_000_000 + index * 60_000
            self.runs[commit] = Results(params, {}, commit, date, "3.11", ENV, {})
        result = BenchmarkResult(
            result=[value],
            samples=[samples],
            number=[1 if samples is not None else None],
            errcode=0,
            stderr="",
            profile=None,
        )
        self.runs[commit].add_result(self.benchmarks[name], result, record_samples=True)
        return commit

    def save(self) -> None:
        for result in self.runs.values():
            result.save(str(self.results))
        asv_util.write_json(str(self.results / MACHINE / "machine.json"), {"machine": MACHINE}, api_version=1)
        asv_util.write_json(str(self.results / "benchmarks.json"), self.benchmarks, api_version=2)


COMMITS = 30
BUSY = 12  # the build measured while the machine was busy
WALL, COUNTS = "instruction_counts.{}.time_wall", "instruction_counts.{}.track_instructions"


def disturbed_history(root: Path, flat: int, seed: int) -> History:
    """`flat` flat cases plus: a +1 % count step at 20 (`Counted`), a +10 % wall step at 8
    (`Slower`) and a +8 % wall step at 24 (`Slower2`); every wall time ×1.6 at BUSY only."""
    rng = random.Random(seed)
    steps = {"Counted": (None, (20, 1.01)), "Slower": ((8, 1.10), None), "Slower2": ((24, 1.08), None)}
    cases = {**{f"Flat{k}": (None, None) for k in range(flat)}, **steps}
    project = History(root)
    for case, (wall_step, count_step) in cases.items():
        project.bench(WALL.format(case), "seconds")
        project.bench(COUNTS.format(case), "instructions")
        for i in range(COMMITS):
            wall = 1e-5 * (wall_step[1] if wall_step and i >= wall_step[0] else 1.0)
            busy = 1.6 if i == BUSY else 1.0
            # run-to-run noise 1 %, the median of 12 rounds with 1.5 % each
            noise = math.exp(rng.gauss(0, 0.01) + rng.gauss(0, 0.015 / math.sqrt(12)))
            project.add(i, WALL.format(case), wall * busy * noise)
            count = 2_000_000 * (count_step[1] if count_step and i >= count_step[0] else 1.0)
            project.add(i, COUNTS.format(case), round(count))
    project.save()
    return project


# Wall time as `benchkit main` records it: ROUNDS rounds (processes) of PER_ROUND samples each,
# with log-normal noise: an offset per build's run, one per round, and one per sample.
ROUNDS, PER_ROUND = 12, 3
RUN_SIGMA, ROUND_SIGMA, SAMPLE_SIGMA = 0.01, 0.015, 0.005
BUSY_FACTOR = 1.6  # every wall time of a build measured while the machine was busy


def wall_samples(rng: random.Random, level: float, bursts: float = 0.0) -> list[float]:
    """One build's wall-time samples, round after round as asv records them; a share `bursts` of
    the rounds falls into another tenant's burst on a shared machine and runs x1.3-2.0 slower."""
    run = rng.gauss(0, RUN_SIGMA)
    samples = []
    for _ in range(ROUNDS):
        offset = run + rng.gauss(0, ROUND_SIGMA)
        if rng.random() < bursts:
            offset += math.log(rng.uniform(1.3, 2.0))
        samples += [level * math.exp(offset + rng.gauss(0, SAMPLE_SIGMA)) for _ in range(PER_ROUND)]
    return samples


@dataclasses.dataclass(frozen=True)
class SteppedHistory:
    """A labelled history: which wall time steps where, which stay flat, which build was busy."""

    project: History
    stepped: str | None  # the wall-time benchmark that steps
    position: int | None  # its first build on the new level
    flat: tuple[str, ...]  # wall-time benchmarks with no step
    busy: int | None


def stepped_history(
    root: Path,
    walls: int,
    seed: int,
    step: tuple[int, float] | None = None,
    busy: int | None = None,
    builds: int = COMMITS,
    bursts: float = 0.0,
) -> SteppedHistory:
    """`walls` cases with a wall time (12 rounds x 3 samples, `wall_samples`, `bursts` of the
    rounds in another tenant's bursts) and a flat instruction count each; `step` = (build,
    factor): the first case's wall time is that factor slower from that build on, the others
    stay flat; `busy`: every wall time of that build x`BUSY_FACTOR`."""
    rng = random.Random(seed)
    project = History(root)
    cases = [f"Case{k}" for k in range(walls)]
    for case in cases:
        project.bench(WALL.format(case), "seconds", repeat=PER_ROUND)
        project.bench(COUNTS.format(case), "instructions")
    for i in range(builds):
        for k, case in enumerate(cases):
            level = 1e-5 * (1 + k / walls)
            if step is not None and k == 0 and i >= step[0]:
                level *= step[1]
            if i == busy:
                level *= BUSY_FACTOR
            samples = wall_samples(rng, level, bursts)
            project.add(i, WALL.format(case), statistics.median(samples), samples)
            project.add(i, COUNTS.format(case), 2_000_000 + 1000 * k)
    project.save()
    stepped = WALL.format(cases[0]) if step is not None else None
    flat = tuple(WALL.format(c) for c in cases[1 if step is not None else 0 :])
    return SteppedHistory(project, stepped, step[0] if step else None, flat, busy)
