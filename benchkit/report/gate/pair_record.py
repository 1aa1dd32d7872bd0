"""What the main job knew about a pair it judged, kept beside asv's results for every later reader.

A job measures a pair's wall times and operator replicates interleaved, and a predecessor an
earlier job measured gets this job's rounds appended to those it had (`rounds_window`). asv's
result file of that predecessor then holds rounds of two jobs. `benchkit check`, the site and
`benchkit export`, which read the results later, must judge the pair as the job did: by the
rounds the job measured beside each other, as builds measured interleaved, its compile times
compared only when the job compiled both. The job writes one `PairRecord` per pair::

    <results_dir>/<machine>/benchkit-pairs/<base[:8]>-<head[:8]>.pair

(JSON; not ``.json``, which asv would read as a result file). Each build's window is a range of
rounds per benchmark, with a digest of the samples in it: results measured again since (a
``--rerun``) no longer match, and the pair is then judged as builds measured apart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from benchkit.history.results.read import LoadedResults, Measurement, ResultSet
from benchkit.report.gate.rounds_window import Held, Key, is_windowed, keep_rounds, rounds_of
from benchkit.util import atomic_write_json

RECORD_DIR = "benchkit-pairs"
RECORD_FORMAT = "benchkit-judged-pair"
RECORD_VERSION = 1
RECORD_SUFFIX = ".pair"

Window = Mapping[Key, tuple[int, int]]  # benchmark -> its rounds first:stop this pair judges


@dataclasses.dataclass(frozen=True)
class PairRecord:
    machine: str
    base: str  # full commit hashes
    head: str
    interleaved: bool  # both builds' wall times came from one interleaved run
    base_from_earlier_job: bool  # the base was measured (and compiled) by an earlier job
    windows: Mapping[str, Window]  # commit -> its window
    digests: Mapping[str, str]  # commit -> digest of the samples in its window


def _digest(result_set: ResultSet, window: Window) -> str:
    digest = hashlib.sha256()
    for key in sorted(window):
        first, stop = window[key]
        m = result_set.measurements.get(key)
        samples = list(m.samples or ()) if m is not None and m.per_round else []
        per_round = m.per_round if m is not None and m.per_round else 0
        digest.update(json.dumps([key, samples[first * per_round : stop * per_round]]).encode())
    return digest.hexdigest()[:16]


def _window_of(result_set: ResultSet, held: Mapping[Key, int]) -> dict[Key, tuple[int, int]]:
    """Each windowed benchmark's rounds after those it held before the job (all of them when the
    job added none, as `rounds_window.this_jobs_rounds` cuts)."""
    window = {}
    for key, m in result_set.measurements.items():
        stop = rounds_of(m)
        if not is_windowed(key) or not stop:
            continue
        before = held.get(key, 0)
        window[key] = (before, stop) if before and stop > before else (0, stop)
    return window


def pair_record_of(
    loaded: LoadedResults, machine: str, base: str, head: str, held: Held, base_from_earlier_job: bool
) -> PairRecord:
    """The record of a pair the job measured interleaved, from its results as they are now."""
    windows, digests = {}, {}
    for commit in (base, head):
        result_set = loaded.result_set(commit, machine)
        windows[commit] = _window_of(result_set, held.get(commit, {}))
        digests[commit] = _digest(result_set, windows[commit])
    return PairRecord(machine, base, head, True, base_from_earlier_job, windows, digests)


def record_path(results_dir: Path, machine: str, base: str, head: str) -> Path:
    return results_dir / machine / RECORD_DIR / f"{base[:8]}-{head[:8]}{RECORD_SUFFIX}"


def write_pair_record(results_dir: Path, record: PairRecord) -> None:
    windows = {
        commit: [[name, env, first, stop] for (name, env), (first, stop) in sorted(window.items())]
        for commit, window in record.windows.items()
    }
    data = {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "machine": record.machine,
        "base": record.base,
        "head": record.head,
        "interleaved": record.interleaved,
        "base_from_earlier_job": record.base_from_earlier_job,
        "windows": windows,
        "digests": dict(record.digests),
    }
    path = record_path(results_dir, record.machine, record.base, record.head)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, data)


def read_pair_record(results_dir: Path, machine: str, base: str, head: str) -> PairRecord | None:
    """The job's record of the pair (full hashes), or None: none written, or not one this version
    of benchkit reads (the pair is then judged as builds measured apart)."""
    try:
        data = json.loads(record_path(results_dir, machine, base, head).read_text())
    except (OSError, ValueError):
        return None
    known = (RECORD_FORMAT, RECORD_VERSION)
    if not isinstance(data, dict) or (data.get("format"), data.get("version")) != known:
        return None
    if (data.get("base"), data.get("head"), data.get("machine")) != (base, head, machine):
        return None  # another pair whose hashes share the first 8 characters
    try:
        windows = {
            commit: {(str(name), str(env)): (int(first), int(stop)) for name, env, first, stop in rows}
            for commit, rows in data["windows"].items()
        }
        digests = {str(c): str(d) for c, d in data["digests"].items()}
        interleaved, earlier = bool(data["interleaved"]), bool(data["base_from_earlier_job"])
        return PairRecord(machine, base, head, interleaved, earlier, windows, digests)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def windowed(record: PairRecord, base: ResultSet, head: ResultSet) -> tuple[ResultSet, ResultSet] | None:
    """The results of `record.base` and `record.head` (under any name) cut to the rounds the job
    judged them by; None when either's samples no longer match the record (measured again since)."""
    out = []
    for commit, result_set in ((record.base, base), (record.head, head)):
        window = record.windows.get(commit, {})
        if _digest(result_set, window) != record.digests.get(commit):
            return None
        measurements = {key: _cut(m, window.get(key)) for key, m in result_set.measurements.items()}
        out.append(dataclasses.replace(result_set, measurements=measurements))
    return out[0], out[1]


def _cut(m: Measurement, rounds: tuple[int, int] | None) -> Measurement:
    """`m` cut to its `rounds`; `m` itself (asv's value) when they are all it holds."""
    if rounds is None or rounds == (0, rounds_of(m)):
        return m
    return keep_rounds(m, *rounds)
