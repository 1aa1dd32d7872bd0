"""asv's results of a history, read through asv's own API: config, commits, measurements.

Everything that reports on history (the gate, the run summary, the site, profile
lookup) reads results through this module.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit import stats as sample_stats
from benchkit.errors import UserError
from benchkit.names import BenchmarkName, Metric


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One benchmark (one parameter combination) of one commit, as asv recorded it."""

    value: float | None  # None: the benchmark failed
    stats: Mapping[str, Any] | None
    samples: Sequence[float] | None
    version: str | None
    # Samples each asv round recorded (a fixed `repeat`), so that `samples` can be cut into
    # rounds, i.e. processes; None: not known (an adaptive repeat).
    per_round: int | None = None

    @property
    def failed(self) -> bool:
        return self.value is None

    @property
    def skipped(self) -> bool:
        return isinstance(self.value, float) and math.isnan(self.value)

    @property
    def has_number(self) -> bool:
        return not (self.failed or self.skipped)

    # Cached: the gate and a history's pages ask for these several times per measurement.
    @functools.cached_property
    def log_samples(self) -> tuple[float, ...]:
        """The log of every positive sample (`benchkit.stats.log_samples`)."""
        return tuple(sample_stats.log_samples(self.samples))

    @functools.cached_property
    def round_logs(self) -> tuple[float, ...] | None:
        """The log of each round's fastest sample (`benchkit.stats.round_values`); None where
        the samples cannot be cut into rounds."""
        values = sample_stats.round_values(self.samples, self.per_round)
        return None if values is None else tuple(values)


@dataclasses.dataclass(frozen=True)
class DamagedFile:
    """A results file asv cannot read (cut short by a full disk or a killed writer, emptied...)."""

    path: Path
    reason: str

    def describe(self, root: Path | None = None) -> str:
        shown = self.path.relative_to(root) if root and self.path.is_relative_to(root) else self.path
        return f"{shown}: {self.reason}"


class DamagedResults(UserError):
    """Results files that cannot be read; every reader fails on them unless told to skip them."""

    def __init__(self, files: Sequence[DamagedFile]) -> None:
        listed = "".join(f"\n  {f.describe()}" for f in files)
        super().__init__(
            f"{len(files)} damaged results file(s):{listed}\n"
            "Measure those builds again (`benchkit main` does), delete the files, "
            "or pass --skip-damaged to leave them out."
        )
        self.files = list(files)


# Where damaged files go: None means "fail on the first read" (the default: fail closed), a list
# collects them while the reader goes on without them (--skip-damaged).
Damaged = list[DamagedFile] | None


def _damage(damaged: Damaged, path: str | Path, error: Exception) -> None:
    reason = str(error).replace(f" in file '{path}'", "").replace(f"{path}", "").strip(" :")
    reason = reason or type(error).__name__
    found = DamagedFile(Path(path), reason)
    if damaged is None:
        raise DamagedResults([found])
    if found not in damaged:
        damaged.append(found)


def _iter_results(
    results_dir: str, machine: str, damaged: Damaged, commit: str | None = None
) -> Iterable[Any]:
    """asv's results of a machine (of one commit): asv's own iterators skip an unreadable file
    with a log line; here it is reported (`Damaged`)."""
    from asv import util as asv_util
    from asv.machine import Machine
    from asv.results import Results

    folder = Path(results_dir) / machine
    machine_json = folder / "machine.json"
    try:
        asv_util.load_json(str(machine_json), api_version=Machine.api_version)
    except FileNotFoundError:
        pass  # results written without asv machine (e.g. copied): nothing to check
    except (asv_util.UserError, OSError, ValueError) as e:
        _damage(damaged, machine_json, e)
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return
    for name in names:
        if not name.endswith(".json") or name == "machine.json" or name.startswith("."):
            continue
        if commit is not None and name.split("-")[0] != commit[:8]:  # asv names files by 8
            continue
        path = folder / name
        try:
            yield Results.load(str(path), machine_name=machine)
        except (asv_util.UserError, OSError, ValueError, KeyError, TypeError) as e:
            _damage(damaged, path, e)


@dataclasses.dataclass(frozen=True)
class RunParams:
    """What asv recorded about one results file beside its measurements: the machine and
    environment parameters (python, requirements...) and environment variables that name
    its graphs on asv's pages (`benchkit.report.site.asv_site`), and its date."""

    machine: str
    commit: str
    env: str
    date: int  # asv's date of the results (the commit's, in ms)
    params: tuple[tuple[str, str | None], ...]
    env_vars: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, result: Any, machine: str) -> RunParams:
        return cls(
            machine,
            result.commit_hash,
            result.env_name,
            result.date or 0,
            tuple(result.params.items()),
            tuple(result.env_vars.items()),
        )


@dataclasses.dataclass(frozen=True)
class ResultSet:
    commit: str
    machine: str
    measurements: Mapping[tuple[str, str], Measurement]  # (benchmark name with params, env) -> measurement


def load_asv_config(path: Path) -> Any:
    from asv import config as asv_config
    from asv import util as asv_util

    if not path.is_file():
        raise UserError(f"asv config {path} not found")
    try:
        conf = asv_config.Config.load(str(path))
    except asv_util.UserError as e:
        raise UserError(f"{path}: {e}") from None
    conf_dir = path.resolve().parent
    # asv resolves paths against the config's folder (it chdirs there); do the same without chdir.
    conf.results_dir = str(conf_dir / conf.results_dir)
    if isinstance(conf.repo, str) and not re.match(r"^[a-z]+://|^git@", conf.repo):
        conf.repo = str(conf_dir / conf.repo)
    return conf


def resolve_commit(conf: Any, name: str, machine: str) -> str:
    """A branch/tag/hash of the history, or a hash prefix of stored results."""
    from asv import results as asv_results
    from asv import util as asv_util
    from asv.repo import NoSuchNameError, get_repo

    try:
        repo = get_repo(conf)
        return str(repo.get_hash_from_name(name))
    except (NoSuchNameError, asv_util.UserError, asv_util.ProcessError, OSError):
        pass
    try:
        prefix = asv_results.get_result_hash_from_prefix(conf.results_dir, machine, name)
    except asv_util.UserError as e:
        raise UserError(f"{name!r}: {e}") from None
    if prefix is None:
        raise UserError(f"{name!r} is neither a name in the history {conf.repo} nor a commit with results")
    return str(prefix)


def result_machines(results_dir: str) -> list[str]:
    from asv.machine import iter_machine_files

    return sorted({Path(p).parent.name for p in iter_machine_files(results_dir)})


def pick_machine(results_dir: str, machine: str | None) -> str:
    """The machine to read: the one asked for, or the only one with results."""
    machines = result_machines(results_dir)
    if not machines:
        raise UserError(f"no asv results in {results_dir}: run asv first (`benchkit main`, `asv run`)")
    if machine is None:
        if len(machines) != 1:
            listed = ", ".join(machines) or "none"
            raise UserError(
                f"results of several machines ({listed}) in {results_dir}: choose one with --machine"
            )
        return machines[0]
    if machine not in machines:
        raise UserError(f"no results for machine {machine!r} (have: {', '.join(machines) or 'none'})")
    return machine


def unrolled_results(key: str, params: list[Any], *columns: Any) -> Iterable[tuple[Any, ...]]:
    from asv.commands.compare import unroll_result

    return unroll_result(key, params, *columns)


def benchmark_infos(conf: Any, damaged: Damaged = None) -> Mapping[str, Mapping[str, Any]]:
    """benchmarks.json: name -> what asv discovered (unit, repeat, rounds...); empty without one.

    Read once per version of the file: the site loads every commit's results, each needing it."""
    from asv import util as asv_util
    from asv.benchmarks import Benchmarks

    path = Benchmarks.get_benchmark_file_path(conf.results_dir)
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    try:
        return _load_benchmark_infos(path, stat.st_mtime_ns, stat.st_size)
    except (asv_util.UserError, OSError, ValueError) as e:
        _damage(damaged, path, e)
        return {}


@functools.lru_cache(maxsize=4)
def _load_benchmark_infos(path: str, mtime_ns: int, size: int) -> Mapping[str, Mapping[str, Any]]:
    from asv import util as asv_util
    from asv.benchmarks import Benchmarks

    data = asv_util.load_json(path, api_version=Benchmarks.api_version)
    if not isinstance(data, dict):
        raise asv_util.UserError("not a mapping of benchmarks")
    return {name: info for name, info in data.items() if isinstance(info, dict)}


def samples_per_round(conf: Any, damaged: Damaged = None) -> Callable[[str], int | None]:
    """Benchmark key -> samples per asv round: 1 for an operator timing (a sample is a process,
    `Metric.replicated`), a benchmark's fixed ``repeat`` in benchmarks.json, else
    (a benchmark that a later ``asv run -b`` left out of benchmarks.json) benchkit's own for a
    ``time_wall``. asv's ``-a repeat=...`` on the command line is not recorded anywhere."""
    from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

    infos = benchmark_infos(conf, damaged)

    @functools.cache  # asked once per benchmark and results file: a history asks it millions of times
    def per_round(key: str) -> int | None:
        metric = BenchmarkName.parse(key).metric
        if metric is not None and metric.replicated:  # one sample per timing process
            return 1
        if key in infos:
            repeat = infos[key].get("repeat")
            return repeat if isinstance(repeat, int) and repeat > 0 else None
        return SAMPLES_PER_ROUND if BenchmarkName.parse(key).metric is Metric.WALL_TIME else None

    return per_round


def _add_measurements(
    result: Any, measurements: dict[tuple[str, str], Measurement], per_round: Callable[[str], int | None]
) -> None:
    for key in result.get_all_result_keys():
        params = result.get_result_params(key)
        version = result.benchmark_version.get(key)
        repeat = per_round(key)
        columns = (
            result.get_result_value(key, params),
            result.get_result_stats(key, params),
            result.get_result_samples(key, params),
        )
        for name, value, stats, samples in unrolled_results(key, params, *columns):
            measurements[(name, result.env_name)] = Measurement(value, stats, samples, version, repeat)


def load_result_set(
    conf: Any, commit: str, machine: str, env: str | None = None, damaged: Damaged = None
) -> ResultSet:
    """One commit's results; a damaged file fails (`DamagedResults`) unless `damaged` collects it."""
    from asv import results as asv_results

    measurements: dict[tuple[str, str], Measurement] = {}
    per_round = samples_per_round(conf, damaged)
    full = asv_results.get_result_hash_from_prefix(conf.results_dir, machine, commit) or commit
    for result in _iter_results(conf.results_dir, machine, damaged, full):
        if env is None or result.env_name == env:
            _add_measurements(result, measurements, per_round)
    return ResultSet(commit, machine, measurements)


def _branch_order(conf: Any) -> dict[str, int]:
    """Position of each commit on the first configured branch (oldest 0); empty without a repository."""
    from asv import util as asv_util
    from asv.repo import NoSuchNameError, get_repo

    try:
        repo = get_repo(conf)
        branch = conf.branches[0] if conf.branches else None
        newest_first = repo.get_branch_commits(branch)
    except (NoSuchNameError, asv_util.UserError, asv_util.ProcessError, OSError):
        return {}
    return {commit: i for i, commit in enumerate(reversed(newest_first))}


def load_history(conf: Any, machine: str, env: str | None = None, damaged: Damaged = None) -> list[ResultSet]:
    """The history's results on `machine`, oldest first (`LoadedResults.history`).
    A damaged file fails (`DamagedResults`) unless `damaged` collects it."""
    return read_results(conf, damaged, (machine,)).history(machine, env)


@dataclasses.dataclass(frozen=True)
class LoadedResults:
    """An asv project's results, read once: the main job and `benchkit publish` hand the same
    object to the run summary, the gate and the site instead of each reading the files again."""

    conf: Any
    infos: Mapping[str, Mapping[str, Any]]  # benchmarks.json
    sets: Mapping[str, Mapping[str, ResultSet]]  # machine -> full commit hash -> every environment's
    dates: Mapping[str, Mapping[str, int]]  # machine -> full commit hash -> asv's date of the run
    branch_order: Mapping[str, int]  # commit -> position on the first configured branch (oldest 0)
    damaged: tuple[DamagedFile, ...] = ()  # files left out (read with a `damaged` list)
    runs: tuple[RunParams, ...] = ()  # one per results file read, in the order read

    @property
    def machines(self) -> tuple[str, ...]:
        return tuple(sorted(self.sets))

    @property
    def units(self) -> dict[str, str | None]:
        return {name: info.get("unit") for name, info in self.infos.items()}

    def full_commit(self, machine: str, commit: str) -> str | None:
        """The measured commit `commit` names (a full hash or a unique prefix), else None."""
        known = self.sets.get(machine, {})
        if commit in known:
            return commit
        matches = [c for c in known if c.startswith(commit)]
        return matches[0] if len(matches) == 1 else None

    def result_set(self, commit: str, machine: str, env: str | None = None) -> ResultSet:
        """One commit's results (empty when it has none), under the name it was asked by."""
        full = self.full_commit(machine, commit)
        found = self.sets.get(machine, {}).get(full) if full else None
        measurements = {} if found is None else found.measurements
        if env is not None:
            measurements = {key: m for key, m in measurements.items() if key[1] == env}
        return ResultSet(commit, machine, measurements)

    def history(self, machine: str, env: str | None = None) -> list[ResultSet]:
        """The history's results on `machine`, oldest first: the commits of the first
        configured branch when the repository can tell (commits only on other branches,
        e.g. pull requests, are no step of the history), else every commit by the date
        asv recorded. Noise estimates and change points pair each commit with the one before."""
        sets, dates = self.sets.get(machine, {}), self.dates.get(machine, {})
        if self.branch_order:
            commits = sorted((c for c in sets if c in self.branch_order), key=self.branch_order.__getitem__)
        else:
            commits = sorted(sets, key=lambda c: (dates[c], c))
        out = [self.result_set(c, machine, env) for c in commits]
        return [r for r in out if r.measurements or env is None]


def read_results(conf: Any, damaged: Damaged = None, machines: Sequence[str] | None = None) -> LoadedResults:
    """Every results file of `machines` (default: all) and benchmarks.json, read once.
    A damaged file fails (`DamagedResults`) unless `damaged` collects it."""
    infos = benchmark_infos(conf, damaged)
    per_round = samples_per_round(conf, damaged)
    sets: dict[str, dict[str, ResultSet]] = {}
    dates: dict[str, dict[str, int]] = {}
    runs: list[RunParams] = []
    for machine in machines if machines is not None else result_machines(conf.results_dir):
        found: dict[str, dict[tuple[str, str], Measurement]] = {}
        for result in _iter_results(conf.results_dir, machine, damaged):
            _add_measurements(result, found.setdefault(result.commit_hash, {}), per_round)
            dates.setdefault(machine, {})[result.commit_hash] = result.date or 0
            runs.append(RunParams.of(result, machine))
        sets[machine] = {commit: ResultSet(commit, machine, m) for commit, m in found.items()}
    order = _branch_order(conf)
    return LoadedResults(conf, infos, sets, dates, order, tuple(damaged or ()), tuple(runs))


def benchmark_units(conf: Any, damaged: Damaged = None) -> dict[str, str | None]:
    return {name: info.get("unit") for name, info in benchmark_infos(conf, damaged).items()}


def set_aside_damaged(conf: Any, machine: str, commits: Iterable[str]) -> list[DamagedFile]:
    """Rename the damaged results files of these commits to ``*.json.damaged`` (which asv does not
    read), so that measuring them again starts afresh: asv's run loads a commit's results file
    before adding to it, and fails on one it cannot read."""
    found: list[DamagedFile] = []
    for commit in commits:
        for _ in _iter_results(conf.results_dir, machine, found, commit):
            pass
    for damaged in found:
        if damaged.path.name != "machine.json":
            os.replace(damaged.path, damaged.path.with_name(damaged.path.name + ".damaged"))
    return found
