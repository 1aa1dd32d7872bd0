"""What the site shows, read from asv's results and the history's git objects:
builds, benchmarks, consecutive pairs with the gate's comparisons, operator tables."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.history.results.read import (
    DamagedFile,
    LoadedResults,
    ResultSet,
    load_asv_config,
    read_results,
    unrolled_results,
)
from benchkit.names import OPERATOR_METRICS, BenchmarkName, Metric, operator_class_name
from benchkit.report.gate import check, check_config, pair_record
from benchkit.report.gate.check_types import Comparison
from benchkit.report.gate.excursions import DisturbedBuild, every_disturbance
from benchkit.report.gate.noise import HistoryNoise
from benchkit.report.site.git_facts import tag_commits
from benchkit.stats import quantiles
from benchkit.util import bulk_load, forked_map

# benchkit.history.builds.build_step.BUILD_FILE; not imported from there to keep publishing light.
BUILD_FILE = "benchkit-build.json"
# What the Changes page lists: what fails the gate first, then what got better.
CHANGED_STATUSES = (*check.FAILS_GATE, "improvement", "fixed")
# Also listed, after them: can't tell where the observed change reached the threshold
# (what a fixed threshold would have flagged), with the MDC that hides it.
LISTED_ORDER = (*CHANGED_STATUSES, "can't tell")
# operator metric -> its field in the operator suite's results (and the site's rows)
OPERATOR_RESULT_FIELDS = {
    Metric.COMPILED_OVER_EAGER: "ratio",
    Metric.EAGER_SECONDS: "eager_s",
    Metric.COMPILED_SECONDS: "compiled_s",
    Metric.COMPILE_SECONDS: "compile_s",
    Metric.COMPILE_CACHE_HIT: "compile_cache_hit",  # the cache state, shown nowhere as a timing
    Metric.KERNEL_HASH: "kernel_hash",  # what inductor generated, likewise
}


def log(message: str) -> None:
    print(f"benchkit publish: {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Build:
    """One measured commit of the history and the torch build it stands for."""

    commit: str
    revision: int
    date: int  # unix seconds (commit date = build date in a wheel history)
    torch_version: str | None
    git_version: str | None  # upstream PyTorch commit
    tags: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        return self.commit[:8]

    @property
    def label(self) -> str:
        name = self.tags[0] if self.tags else self.short
        return f"{name} (torch {self.torch_version})" if self.torch_version else name


@dataclasses.dataclass(frozen=True)
class BenchmarkInfo:
    key: str  # asv benchmark name without parameters
    params: tuple[str, ...]  # one value per parameter, as asv stores it (repr)
    param_names: tuple[str, ...]
    pretty: str
    unit: str | None


@dataclasses.dataclass(frozen=True)
class PairChanges:
    machine: str
    branch: str
    base: Build
    head: Build
    changes: tuple[Comparison, ...]  # beyond threshold, sorted within each metric
    compared: int  # benchmarks compared (changed or not)
    problems: tuple[str, ...] = ()  # metrics the pair cannot judge (`check.unjudged_metrics`)
    uncertain: tuple[tuple[str, int], ...] = ()  # (can't tell | insufficient data, how many)
    shifts: tuple[str, ...] = ()  # environment shifts (`benchkit.report.gate.shifts.EnvShift.describe`)
    # The pages that hold this pair and its head's operator table (`benchkit.report.site.paging`)
    page: str = "changes.html"
    operators_page: str = "operators.html"

    @property
    def anchor(self) -> str:
        return slug(f"pair-{self.machine}-{self.branch}-{self.base.short}-{self.head.short}")


@dataclasses.dataclass(frozen=True)
class SiteData:
    conf: Any
    machines: tuple[str, ...]
    builds: Mapping[str, Build]  # commit -> build, every commit with results
    results: Mapping[tuple[str, str], ResultSet]  # (machine, commit) -> results
    branch_commits: Mapping[tuple[str, str], tuple[str, ...]]  # (machine, branch) -> measured, oldest first
    benchmarks: Mapping[str, BenchmarkInfo]  # unrolled name -> info
    config: check_config.CheckConfig
    env_count: int
    # Results files left out (--skip-damaged); pages name them relative to the project folder.
    damaged: tuple[DamagedFile, ...] = ()
    project_dir: Path | None = None


@dataclasses.dataclass(frozen=True)
class SuiteCoverage:
    """Which of the suite's benchmarks (benchmarks.json, parameters not unrolled) the history
    holds numbers for, at any build of any machine."""

    listed: int
    with_numbers: int
    no_number: tuple[str, ...]  # results at some build, but failed or skipped at every one
    never_run: tuple[str, ...]  # no result at any build (e.g. left out by `asv run -b ...`)


def suite_coverage(data: SiteData) -> SuiteCoverage:
    listed = {info.key for info in data.benchmarks.values()}
    ran: set[str] = set()
    numbered: set[str] = set()
    for found in data.results.values():
        for (name, _env), measurement in found.measurements.items():
            info = data.benchmarks.get(name)
            key = info.key if info else name.partition("(")[0]  # asv unrolls as key(params)
            ran.add(key)
            if measurement.has_number:
                numbered.add(key)
    return SuiteCoverage(
        listed=len(listed),
        with_numbers=len(listed & numbered),
        no_number=tuple(sorted((listed & ran) - numbered)),
        never_run=tuple(sorted(listed - ran)),
    )


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def operators_anchor(machine: str, build: Build) -> str:
    """The id of a build's table on the operators pages."""
    return slug(f"ops-{machine}-{build.short}")


def unquote(value: str) -> str:
    """asv keeps parameter values as their repr; show strings without the quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def benchmark_infos_by_name(benchmarks: Mapping[str, Mapping[str, Any]]) -> dict[str, BenchmarkInfo]:
    """benchmarks.json's entries (empty without one) by unrolled benchmark name."""
    infos: dict[str, BenchmarkInfo] = {}
    for key, info in benchmarks.items():
        params = [list(map(str, p)) for p in info.get("params") or []]
        param_names = tuple(info.get("param_names") or ())
        pretty = info.get("pretty_name") or key
        if pretty == key:  # asv's default: the dotted name; say which operator it measures
            pretty = _operator_pretty_name(key) or key
        for name, combo in unrolled_results(key, params, _combos(params)):
            label = pretty if not combo else f"{pretty} ({', '.join(unquote(v) for v in combo)})"
            infos[name] = BenchmarkInfo(key, tuple(combo or ()), param_names, label, info.get("unit"))
    return infos


def _operator_pretty_name(key: str) -> str | None:
    parsed = BenchmarkName.parse(key)
    if parsed.metric not in OPERATOR_METRICS:
        return None
    operator = operator_names().get(parsed.class_name, parsed.class_name)
    on_device = "" if parsed.device == "cpu" else f" on {parsed.device.upper()}"
    return f"{operator}{on_device} [{parsed.method}]"


def _combos(params: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    return list(itertools.product(*params))


def _git_objects(git_dir: str, specs: Sequence[str]) -> dict[str, bytes | None]:
    """Contents of many git objects through one `git cat-file --batch`."""
    if not specs:
        return {}
    proc = subprocess.run(
        ["git", "-C", git_dir, "cat-file", "--batch"],
        input="".join(f"{s}\n" for s in specs).encode(),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise UserError(f"git cat-file in {git_dir} failed: {proc.stderr.decode().strip()}")
    out, pos, objects = proc.stdout, 0, {}
    for spec in specs:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if header[-1] == b"missing" or len(header) != 3:
            objects[spec] = None
            continue
        size = int(header[2])
        objects[spec] = out[pos : pos + size]
        pos += size + 1
    return objects


def read_builds(repo: Any, commits: Iterable[str]) -> dict[str, Build]:
    """Build facts for `commits`: date, and for a wheel history its torch version and git_version.

    A commit without a build record is an upstream PyTorch commit (a source
    clone as asv's repo), so it is its own git_version.
    """

    commits = sorted(set(commits))
    revisions = repo.get_revisions(set(commits))
    tags: dict[str, list[str]] = {}
    for tag, commit in tag_commits(repo).items():
        tags.setdefault(commit, []).append(tag)
    git_dir = getattr(repo, "_path", None)
    objects = _git_objects(git_dir, [*commits, *(f"{c}:{BUILD_FILE}" for c in commits)]) if git_dir else {}
    builds = {}
    for commit in commits:
        raw_commit = objects.get(commit) or b""
        match = re.search(rb"^committer .* (\d+) [+-]\d{4}$", raw_commit, re.M)
        if match:
            date = int(match.group(1))
        elif git_dir is None:  # a remote repository: asv's mirror knows the date
            date = int(repo.get_date(commit) // 1000)
        else:  # a commit outside the history (e.g. `asv run --set-commit-hash`)
            date = 0
        torch_version, git_version = None, commit
        record = objects.get(f"{commit}:{BUILD_FILE}")
        if record:
            try:
                data = json.loads(record)
                torch_version = str(data.get("torch_version")) if data.get("torch_version") else None
                git_version = str(data.get("git_version") or "") or None
            except ValueError:
                log(f"warning: commit {commit[:8]} has an unreadable {BUILD_FILE}")
        builds[commit] = Build(
            commit,
            revisions.get(commit, -1),
            date,
            torch_version,
            git_version,
            tuple(sorted(tags.get(commit, []))),
        )
    return builds


def _check_config(conf_path: Path, config_path: Path | None) -> check_config.CheckConfig:
    project = conf_path.resolve().parent
    config_path = config_path or check.find_check_config(project)
    if not config_path:
        return check_config.parse_check_config({}, "built-in defaults")
    config = check_config.load_check_config(config_path)
    # Pages are published: name the file as the project knows it, never by this machine's path.
    path = config_path.resolve()
    shown = (
        str(path.relative_to(project))
        if path.is_relative_to(project)
        else f"{path.name} (outside the project)"
    )
    return dataclasses.replace(config, source=config.source.replace(str(config_path), shown))


def load_site_data(
    conf_path: Path,
    config_path: Path | None = None,
    skip_damaged: bool = False,
    loaded: LoadedResults | None = None,
    conf: Any = None,
) -> SiteData:
    """Everything the pages show: the project's results (`loaded` when the caller has read
    them already, as the main job has) and its builds, read through asv's APIs; `conf`: asv's
    config when the caller has loaded it.

    A damaged results file fails (`DamagedResults`) unless `skip_damaged`: then it is left out
    and listed on every page."""
    from asv.repo import get_repo

    conf = loaded.conf if loaded else conf or load_asv_config(conf_path)
    if not os.path.isdir(conf.results_dir):
        raise UserError(f"no asv results in {conf.results_dir}: run asv first (`asv run`, `benchkit main`)")
    if loaded is None:
        with bulk_load():
            loaded = read_results(conf, [] if skip_damaged else None)
    machines = loaded.machines
    repo = get_repo(conf)
    results = {
        (machine, commit): found for machine in machines for commit, found in loaded.sets[machine].items()
    }
    envs = {env for found in results.values() for _, env in found.measurements}
    builds = read_builds(repo, {commit for _, commit in results})
    branch_commits: dict[tuple[str, str], tuple[str, ...]] = {}
    for branch in conf.branches or [None]:
        on_branch = set(repo.get_branch_commits(branch))
        for machine in machines:
            measured = [c for (m, c) in results if m == machine and c in on_branch]
            measured.sort(key=lambda c: (builds[c].revision, builds[c].date))
            branch_commits[(machine, repo.get_branch_name(branch))] = tuple(measured)
    return SiteData(
        conf=conf,
        machines=machines,
        builds=builds,
        results=results,
        branch_commits=branch_commits,
        benchmarks=benchmark_infos_by_name(loaded.infos),
        config=_check_config(conf_path, config_path),
        env_count=len(envs),
        damaged=loaded.damaged,
        project_dir=conf_path.resolve().parent,
    )


def listed(c: Comparison) -> bool:
    """Whether the Changes page lists `c` (see `LISTED_ORDER`)."""
    if c.status in CHANGED_STATUSES:
        return True
    if c.status != "can't tell" or c.ratio is None or not c.ratio > 0 or not c.threshold > -1:
        return False  # a record with no meaningful ratio (a 0/1 cache state, say) reaches nothing
    return abs(math.log(c.ratio)) > math.log1p(c.threshold)


def machine_history(data: SiteData, machine: str) -> list[ResultSet]:
    """The machine's history for noise estimates: its first branch's measured commits
    (pull-request branches are no step of the history); every commit when none is known."""
    first = next((commits for (m, _branch), commits in data.branch_commits.items() if m == machine), None)
    return [data.results[(machine, c)] for c in (first or history_commits(data, machine))]


# Pairs a forked worker should judge at least, for forking to pay (a pair is a whole suite).
PAIRS_PER_WORKER = 20


def pair_changes(data: SiteData) -> list[PairChanges]:
    """Every consecutive pair on every (machine, branch), judged by `benchkit.report.gate.check`
    with each benchmark's noise over the machine's whole history, as `benchkit check` does.
    A long history's pairs are judged on every core (`forked_map`)."""
    units = {info.key: info.unit for info in data.benchmarks.values()}
    noise = {m: check.history_noise(machine_history(data, m), units, data.config) for m in data.machines}
    pairs = [
        (machine, branch, base, head)
        for (machine, branch), commits in data.branch_commits.items()
        for base, head in itertools.pairwise(commits)
    ]
    # How the main job measured each pair it judged: the site judges them as it did.
    results_dir = Path(data.conf.results_dir)
    records = {pair: pair_record.read_pair_record(results_dir, pair[0], pair[2], pair[3]) for pair in pairs}
    metric_of = check.metric_judge(units, data.config)
    threshold = data.config.thresholds["instructions"]
    disturbed = {m: every_disturbance(machine_history(data, m), metric_of, threshold) for m in data.machines}
    judge = functools.partial(_judged_pair, data, units, noise, records, disturbed)
    return forked_map(judge, pairs, min_per_worker=PAIRS_PER_WORKER)


def _judged_pair(
    data: SiteData,
    units: Mapping[str, str | None],
    noise: Mapping[str, Mapping[tuple[str, str], HistoryNoise]],
    records: Mapping[tuple[str, str, str, str], pair_record.PairRecord | None],
    disturbed: Mapping[str, Mapping[str, DisturbedBuild]],
    pair: tuple[str, str, str, str],
) -> PairChanges:
    machine, branch, base, head = pair
    history = machine_history(data, machine)
    # Builds of the history's branch have their disturbances known; a branch off it is judged
    # as if it followed its base (`not_judged.disturbed_sides`).
    on_history = {r.commit for r in history} >= {base, head}
    sides = {s: disturbed[machine][c] for s, c in (("base", base), ("head", head)) if c in disturbed[machine]}
    judged = check.judge_pair(
        data.results[(machine, base)], data.results[(machine, head)], history, units, data.config,
        noise[machine], record=records[pair], base_label=data.builds[base].short,
        disturbed=sides if on_history else None,
    )  # fmt: skip
    comparisons, found = judged.comparisons, judged.noise
    metric_order = {m: i for i, m in enumerate(check.METRICS)}
    changed = [c for c in comparisons if listed(c)]
    changed.sort(
        key=lambda c: (
            metric_order.get(c.metric, 9),
            LISTED_ORDER.index(c.status),
            -abs(math.log(c.ratio)) if c.ratio else 0.0,
            c.name,
        )
    )
    compared = sum(1 for c in comparisons if c.status not in ("not compared", "ignored"))
    problems = tuple(check.unjudged_metrics(comparisons))
    uncertain = tuple(
        (s, n)
        for s in (*check.UNCERTAIN, *check.NOT_JUDGED)
        if (n := sum(1 for c in comparisons if c.status == s))
    )
    shifts = tuple(s.describe() for s in found.shifts)
    return PairChanges(
        machine,
        branch,
        data.builds[base],
        data.builds[head],
        tuple(changed),
        compared,
        problems,
        uncertain,
        shifts,
    )


@dataclasses.dataclass(frozen=True)
class OperatorRow:
    operator: str
    device: str  # cpu / cuda: the benchmark module's (`benchkit.names.OPERATOR_MODULES`)
    inputs: int
    failed: int
    speedups: tuple[float, float, float] | None  # 20/50/80th percentile of eager/compiled
    eager_s: float | None  # mean per input
    compiled_s: float | None
    compile_s: float | None


@functools.cache
def operator_names() -> dict[str, str]:
    """asv class name -> operator name, for the operators of both default sets."""
    try:
        from benchkit.measure.operators.workload import CUDA_DEFAULT_OPERATORS, DEFAULT_OPERATORS
    except ImportError:
        return {}
    return {operator_class_name(op): op for op in (*DEFAULT_OPERATORS, *CUDA_DEFAULT_OPERATORS)}


def operator_rows(result_set: ResultSet, benchmarks: Mapping[str, BenchmarkInfo]) -> list[OperatorRow]:
    """operatorbench's summary of one commit from the per-input asv results."""
    names = operator_names()
    several_envs = len({env for _, env in result_set.measurements}) > 1
    values: dict[tuple[str, str], dict[tuple[str, ...], dict[str, float | None]]] = {}
    for (name, env), measurement in result_set.measurements.items():
        info = benchmarks.get(name)
        parsed = BenchmarkName.parse(info.key if info else name)
        if parsed.metric not in OPERATOR_METRICS:
            continue
        operator = names.get(parsed.class_name, parsed.class_name) + (f" [{env}]" if several_envs else "")
        combo = info.params if info else (name,)
        value = measurement.value
        if value is not None and isinstance(value, float) and math.isnan(value):
            continue  # skipped (an op inductor falls back on; no CUDA device on this machine)
        values.setdefault((parsed.device, operator), {}).setdefault(combo, {})[
            OPERATOR_RESULT_FIELDS[parsed.metric]
        ] = value
    rows = []
    for (device, operator), inputs in sorted(values.items()):
        ok = [v for v in inputs.values() if v.get("ratio") and v.get("eager_s") and v.get("compiled_s")]

        def mean(field: str, ok: list[dict[str, float | None]] = ok) -> float | None:
            numbers = [float(v[field]) for v in ok if v.get(field) is not None]  # type: ignore[arg-type]
            return sum(numbers) / len(numbers) if numbers else None

        speedups = quantiles([1 / float(v["ratio"]) for v in ok]) if ok else None  # type: ignore[arg-type]
        rows.append(
            OperatorRow(
                operator,
                device,
                len(inputs),
                len(inputs) - len(ok),
                speedups,
                mean("eager_s"),
                mean("compiled_s"),
                mean("compile_s"),
            )
        )
    return rows


def history_commits(data: SiteData, machine: str) -> list[str]:
    """The machine's measured commits in history order: the first branch, then commits only elsewhere."""
    ordered: list[str] = []
    for (m, _branch), commits in data.branch_commits.items():
        if m == machine:
            ordered += [c for c in commits if c not in ordered]
    rest = [c for (m, c) in data.results if m == machine and c not in ordered]
    return ordered + sorted(rest, key=lambda c: data.builds[c].revision)
