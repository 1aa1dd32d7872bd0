"""Which of a build's wall-time rounds a verdict uses: a window of them, as data.

asv appends a re-measured build's rounds to those it had (``--append-samples``), one round's
samples after another's. The main job measures the predecessor of a new build again, beside
it, when an earlier job measured it (hours earlier: the machine's fast level moves by a
percent between jobs, which the rounds test would take for a change). Its verdict then judges
the predecessor by this job's rounds only: `held` says how many rounds each wall time of each
such build had before the job, and `this_jobs_rounds` leaves them out. The operator timings'
replicates are windowed the same way (`benchkit.operator_rounds`): a verdict judges them by the
replicates the job measured interleaved.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence

from benchkit.history.results.read import LoadedResults, Measurement, ResultSet
from benchkit.names import BenchmarkName, Metric

Key = tuple[str, str]  # (benchmark name with params, environment)
Held = Mapping[str, Mapping[Key, int]]  # full commit -> wall time -> rounds it held before


def is_wall_time(key: Key) -> bool:
    return BenchmarkName.parse(key[0]).metric is Metric.WALL_TIME


def is_replicate_timing(key: Key) -> bool:
    """An operator timing, whose samples are replicates (`Metric.replicated`): a round of one."""
    metric = BenchmarkName.parse(key[0]).metric
    return metric is not None and metric.replicated


def is_windowed(key: Key) -> bool:
    """Whether a verdict may judge `key` by a window of its rounds: a wall time or an operator timing."""
    return is_wall_time(key) or is_replicate_timing(key)


def rounds_of(m: Measurement) -> int:
    """How many whole rounds `m` holds (0 when its samples cannot be cut into rounds)."""
    values = m.round_logs
    return len(values) if values else 0


def keep_rounds(m: Measurement, first: int, last: int | None = None) -> Measurement:
    """`m` with only its rounds ``first:last`` (asv's order), its value their samples' median as
    asv's is; `m` itself when its samples are not in rounds or the window holds none."""
    if not m.has_number or not m.samples or not m.per_round:
        return m
    stop = None if last is None else last * m.per_round
    samples = list(m.samples[first * m.per_round : stop])
    if not samples:
        return m
    return dataclasses.replace(m, samples=samples, value=statistics.median(samples))


def held_rounds(
    loaded: LoadedResults, machine: str, commits: Sequence[str], keep: Callable[[Key], bool] = is_wall_time
) -> dict[str, dict[Key, int]]:
    """Per commit (full hash) that holds any, the rounds each of its benchmarks that `keep`
    selects (its wall times; or its operator timings, a replicate a round) holds now."""
    held: dict[str, dict[Key, int]] = {}
    for commit in commits:
        result_set = loaded.result_set(commit, machine)
        rounds = {k: rounds_of(m) for k, m in result_set.measurements.items() if keep(k)}
        if any(rounds.values()):
            held[commit] = rounds
    return held


def cut_wall_times(
    loaded: LoadedResults, machine: str, cut: Callable[[str, Key, Measurement], Measurement]
) -> LoadedResults:
    """`loaded` with every wall time and operator timing of `machine` (`is_windowed`) replaced by
    ``cut(commit, key, measurement)``."""
    sets: dict[str, ResultSet] = {}
    for commit, result_set in loaded.sets.get(machine, {}).items():
        measurements = {
            key: cut(commit, key, m) if is_windowed(key) else m for key, m in result_set.measurements.items()
        }
        sets[commit] = dataclasses.replace(result_set, measurements=measurements)
    return dataclasses.replace(loaded, sets={**loaded.sets, machine: sets})


def this_jobs_rounds(loaded: LoadedResults, machine: str, held: Held) -> LoadedResults:
    """`loaded` with the wall times and operator timings of the builds in `held` cut to the
    rounds after those they held (one this job added no rounds to keeps all of its)."""
    if not held:
        return loaded

    def cut(commit: str, key: Key, m: Measurement) -> Measurement:
        before = held.get(commit, {}).get(key, 0)
        return keep_rounds(m, before) if before and rounds_of(m) > before else m

    return cut_wall_times(loaded, machine, cut)
