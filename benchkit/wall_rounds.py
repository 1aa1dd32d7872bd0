"""The main job's wall-time rounds: benchkit measures them itself, every build's round one
process for all of its selected cases, the builds alternating round by round
(`benchkit.measure.walltime.batch`), and writes them into asv's results as asv's own rounds
(`benchkit.history.results.rounds_writer`). Where the machine has a core per build, the builds'
processes of a round run side by side (`benchkit.measure.side_by_side`).

asv still measures everything else (instruction counts, operator timings), and a plain
``asv run`` still measures ``time_wall`` its own way, a process per case and round; both use the
same timing code (`benchkit.measure.walltime.timing`). What the job gains: a case is prepared
once per round instead of in a process of its own, and no build is installed between rounds
(lab/reports/batch-rounds.md; docs/wall_time.md).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.asv_runs import Progress, run_asv
from benchkit.history.builds.places import places_of
from benchkit.history.results.read import benchmark_infos
from benchkit.history.results.rounds_writer import RoundsWriter
from benchkit.measure.selection import selected
from benchkit.measure.walltime.batch import (
    BuildPlace,
    CaseRound,
    CaseStatus,
    interleaved_rounds,
    prepare_build,
)
from benchkit.names import BenchmarkName, CaseKeys, Metric


def selected_walls(conf: Any, bench: Sequence[str]) -> dict[str, str]:
    """asv name -> case key of every ``time_wall`` that asv's ``-b`` `bench` selects (all when
    empty), from asv's benchmarks.json."""
    from benchkit.expand import load_cases

    infos = benchmark_infos(conf)
    walls = [name for name in infos if BenchmarkName.parse(name).metric is Metric.WALL_TIME]
    keys = CaseKeys(case.key for case in load_cases())
    chosen = sorted(selected(walls, list(bench) or None))
    return {name: key for name in chosen if (key := keys.of_benchmark(name)) is not None}


def several_threads() -> frozenset[str]:
    """Keys of the cases that time more than one thread: they need the machine to themselves,
    so no other build's process measures beside them (`interleaved_rounds`)."""
    from benchkit.expand import load_cases

    return frozenset(case.key for case in load_cases() if case.timer_args.num_threads > 1)


def measure(
    conf: Any,
    conf_path: Path,
    machine: str,
    commits: Sequence[str],
    bench: Sequence[str],
    rounds_of: Callable[[str], int],
    environ: Mapping[str, str],
    progress: Progress,
    replace: Collection[str] = (),
) -> int:
    """`rounds_of(name)` interleaved rounds of each wall time that asv's ``-b`` `bench` selects
    on every build of `commits` (in their order; one environment after another), appended to
    their results (for the builds in `replace`, instead of the rounds they held: builds this job
    measures from scratch); the C++ shards are those of `bench`'s layout. The number of
    benchmarks that failed on some build (0 when all have their rounds)."""
    walls = {name: key for name, key in selected_walls(conf, bench).items() if rounds_of(name) > 0}
    if not walls or not commits:
        return 0
    regexes = list(bench) or None
    failed: set[str] = set()
    for env_name, places in _ready(
        conf, conf_path, commits, list(walls.values()), regexes, environ, progress
    ):
        by_key = {key: name for name, key in walls.items()}
        most = max(rounds_of(name) for name in walls)

        def keys_of_round(index: int) -> list[str]:
            return [key for name, key in walls.items() if rounds_of(name) > index]

        progress.note(
            f"wall time: {most} interleaved round(s) of {len(walls)} case(s) on {len(places)} build(s) "
            f"({', '.join(c[:8] for c in commits)}), each round of a build one process"
        )
        writer = RoundsWriter(conf, machine, env_name)
        started = dt.datetime.now(dt.UTC)
        taken = interleaved_rounds(
            places, keys_of_round, most, regexes, environ, progress.note, alone=several_threads()
        )
        for place in places:
            per_name: dict[str, list[CaseRound]] = {}
            for one_round in taken.rounds[place.commit]:
                for key, outcome in one_round.items():
                    per_name.setdefault(by_key[key], []).append(outcome)
            failed |= {n for n, rs in per_name.items() if any(r.status is CaseStatus.FAILED for r in rs)}
            try:
                writer.write(place.commit, per_name, started, place.commit not in replace)
            except OSError as e:  # a full disk, a read-only folder: this build lacks them
                progress.note(f"{place.commit[:8]}: its wall-time rounds could not be written: {e}")
                failed |= set(per_name)
        progress.note(f"the wall-time rounds took {taken.describe()}")
    return len(failed)


def _ready(
    conf: Any, conf_path: Path, commits: Sequence[str], keys: Sequence[str], regexes: Sequence[str] | None,
    environ: Mapping[str, str], progress: Progress,
) -> list[tuple[str, list[BuildPlace]]]:  # fmt: skip
    """Every build in every environment ready for its rounds: dependencies, unpacked tree,
    C++ shards compiled and TorchScript models scripted (no round pays for them)."""

    def ensure_environments() -> None:
        run_asv(["setup"], conf_path, True, environ)

    began = time.monotonic()
    ready = []
    for env_name, places in places_of(conf, conf_path, commits, environ, ensure_environments).items():
        prepared = [prepare_build(place, keys, regexes, environ) for place in places]
        for build in prepared:
            if build.errors:
                failed = len(build.errors)
                progress.note(f"{build.place.commit[:8]}: {failed} C++ snippet(s) failed to compile")
        ready.append((env_name, [build.place for build in prepared]))
    builds = sum(len(places) for _, places in ready)
    progress.note(f"{builds} build(s) prepared for the wall-time rounds in {time.monotonic() - began:.0f} s")
    return ready
