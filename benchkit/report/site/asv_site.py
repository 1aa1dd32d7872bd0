"""asv's part of the site (its grid, list and graph views: ``index.json``, ``graphs/``, its
pages), written by asv's own classes from the results benchkit has already read.

``asv publish`` reads every results file twice, once for the parameters and dates and once
for its graphs, and benchkit's pages need the same files: on a synthetic history of 1,000
builds x 1,400 benchmarks that reading was 116 s of asv's 179 s (lab/reports/publish-scale.md).
Here asv's `Graph` objects get their points from `LoadedResults` (each measurement's value
and asv's weight of its statistics), and asv's step detection, graph files and page
publishers (its `OutputPublisher` plugins) then run as in ``asv publish``, but for its
regressions view where asv's own search is off (benchkit's configs turn it off: benchkit's
regressions page replaces it). tests/test_asv_site.py compares the folder with the one
``asv publish`` writes, file by file.
"""

from __future__ import annotations

import copy
import datetime
import functools
import importlib.metadata
import itertools
import multiprocessing
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchkit.history.results.read import LoadedResults, Measurement, RunParams, unrolled_results
from benchkit.report.site.git_facts import commit_dates_ms, tag_commits

Params = dict[str, Any]


def write_asv_site(loaded: LoadedResults, html_dir: Path) -> None:
    """asv's site for `loaded` into `html_dir` (an empty or new folder)."""
    from asv.benchmarks import Benchmarks
    from asv.graph import GraphSet
    from asv.repo import get_repo

    conf = copy.copy(loaded.conf)
    conf.html_dir = str(html_dir)  # asv's publishers write into the config's html_dir
    repo = get_repo(conf)
    benchmarks = Benchmarks.load(conf)
    _copy_template(html_dir)
    params = _run_params(loaded.runs)
    repo.pull()
    tags = tag_commits(repo)
    dates = {run.commit: run.date for run in loaded.runs}
    revisions = repo.get_revisions(set(dates) | set(tags.values()))
    dates.update(commit_dates_ms(repo, tags.values()))
    branches = {branch: set(repo.get_branch_commits(branch)) for branch in conf.branches}
    tagged = set(tags.values())
    graphs = GraphSet()
    lines: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
    for run in loaded.runs:
        on = [b for b, commits in branches.items() if run.commit in commits]
        if not on and run.commit in tagged:
            on = list(branches)  # asv's rule: a tagged commit off every branch joins them all
        points = list(_points(loaded, run, benchmarks))
        for branch in on:
            line_params = _line_params(run, repo.get_branch_name(branch), params)
            frozen = tuple(line_params.items())
            for key, value, weight in points:
                graph = lines.get((key, frozen))
                if graph is None:
                    graph = lines[(key, frozen)] = graphs.get_graph(key, line_params)
                graph.add_data_point(revisions[run.commit], value, weight)
    for graph in lines.values():
        # Every point is in: asv sorts and averages them again for each use (the steps, the
        # graph file, the summary graph, the list view), the same every time.
        graph.get_data = functools.cache(graph.get_data)
    _write_graphs(graphs, html_dir)
    pages = _publish_pages(conf, repo, benchmarks, graphs, revisions)
    _write_index(conf, repo, benchmarks, graphs, params, revisions, dates, tags, pages)


def _copy_template(html_dir: Path) -> None:
    """asv's static pages and scripts; of its vendor folder only the .js and .css files."""
    import asv

    template = Path(asv.__file__).with_name("www")

    def left_out(folder: str, names: list[str]) -> list[str]:
        if Path(folder).name.lower() != "vendor":
            return []
        return [n for n in names if not n.lower().endswith((".js", ".css"))]

    shutil.copytree(template, html_dir, ignore=left_out, dirs_exist_ok=True)
    html_dir.chmod(0o755)
    for folder, subfolders, files in os.walk(html_dir):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
        for name in subfolders:
            os.chmod(os.path.join(folder, name), 0o755)


def _run_params(runs: Iterable[RunParams]) -> dict[str, set[Any]]:
    """Every graph parameter and the values it takes: the runs' parameters (None as ''), then
    their environment variables as ``env-NAME``."""
    params: dict[str, set[Any]] = {}
    env_vars: dict[str, set[Any]] = {}
    for run in runs:
        for key, value in run.params:
            params.setdefault(key, set()).add("" if value is None else value)
        for name, value in run.env_vars:
            env_vars.setdefault(f"env-{name}", set()).add(value)
    params.update(env_vars)
    return params


def _line_params(run: RunParams, branch: str, params: dict[str, set[Any]]) -> Params:
    """The parameters naming the graph line of `run` on `branch`; a parameter the run lacks is
    None (and None joins that parameter's values)."""
    line: Params = {key: "" if value is None else value for key, value in run.params}
    line.update((f"env-{name}", value) for name, value in run.env_vars)
    line["branch"] = branch
    for key in params:
        if key not in line:
            line[key] = None
            params[key].add(None)
    return line


def _points(
    loaded: LoadedResults, run: RunParams, benchmarks: Mapping[str, Any]
) -> Iterable[tuple[str, Any, Any]]:
    """(benchmark key, value, weight) of every benchmark of benchmarks.json that `run`'s
    results hold in the benchmark's current version: one value per parameter combination
    (None where the results lack it) for a parameterized one."""
    from asv._stats import get_weight

    found = loaded.sets.get(run.machine, {}).get(run.commit)
    measurements = found.measurements if found else {}
    for key, benchmark in benchmarks.items():
        params = benchmark["params"]
        names = [row[0] for row in unrolled_results(key, params, list(itertools.product(*params)))]
        measured: list[Measurement | None] = [measurements.get((name, run.env)) for name in names]
        held = [m for m in measured if m is not None]
        if not held:
            continue
        version = held[0].version
        if version is not None and version != benchmark.get("version"):
            continue
        values = [None if m is None else m.value for m in measured]
        weights = [None if m is None else get_weight(m.stats) for m in measured]
        if params:
            yield key, values, weights
        else:
            yield key, values[0], weights[0]


def _write_graphs(graphs: Any, html_dir: Path) -> None:
    """asv's steps of every graph line (on every core), then its graph files."""
    from asv import util as asv_util

    pool = asv_util.get_multiprocessing_pool(multiprocessing.cpu_count())
    try:
        graphs.detect_steps(pool)
        pool.close()
        pool.join()
    finally:
        pool.terminate()
    graphs.save(str(html_dir))


def asv_search_off(conf: Any) -> bool:
    """Whether asv's config turns asv's own regression search off for every benchmark, as
    benchkit's configs do (`ASV_PUBLISH_SETTINGS`): its regressions view is then always empty."""
    first_commits = getattr(conf, "regressions_first_commits", None) or {}
    return ".*" in first_commits and first_commits[".*"] is None


def _publish_pages(conf: Any, repo: Any, benchmarks: Any, graphs: Any, revisions: Any) -> list[list[str]]:
    """asv's pages (its grid and list views, and its regressions view unless its search is
    off: benchkit's regressions page takes its place), each by its `OutputPublisher` plugin in
    asv's order; returns their entries for index.json."""
    from asv import util as asv_util
    from asv.plugin_manager import plugin_manager  # noqa: F401 (loads asv's plugins)
    from asv.plugins.regressions import Regressions
    from asv.publishing import OutputPublisher

    pages = []
    for publisher in sorted(asv_util.iter_subclasses(OutputPublisher), key=lambda cls: cls.order):
        if publisher is Regressions and asv_search_off(conf):
            continue  # an empty view, whose feed alone reads every results file again
        publisher.publish(conf, repo, benchmarks, graphs, revisions)
        pages.append([publisher.name, publisher.button_label, publisher.description])
    return pages


def _write_index(
    conf: Any,
    repo: Any,
    benchmarks: Any,
    graphs: Any,
    params: dict[str, set[Any]],
    revisions: Mapping[str, int],
    dates: Mapping[str, int],
    tags: Mapping[str, str],
    pages: list[list[str]],
) -> None:
    """index.json (what asv's scripts load first) and info.json."""
    from asv import util as asv_util
    from asv.commands.publish import check_benchmark_params
    from asv.machine import iter_machine_files

    for key, benchmark in benchmarks.items():
        check_benchmark_params(key, benchmark)
    machines = {}
    for path in iter_machine_files(conf.results_dir):
        machine = asv_util.load_json(path)
        machines[machine["machine"]] = machine
    listed = {
        key: sorted(values, key=lambda v: "[none]" if v is None else str(v)) for key, values in params.items()
    }
    listed["branch"] = [repo.get_branch_name(branch) for branch in conf.branches]
    line_params: list[Params] = []
    for _path, graph in graphs:
        if "summary" not in graph.params and graph.params not in line_params:
            line_params.append(graph.params)
    index = {
        "project": conf.project,
        "project_url": conf.project_url,
        "show_commit_url": conf.show_commit_url,
        "hash_length": conf.hash_length,
        "revision_to_hash": {r: h for h, r in revisions.items()},
        "revision_to_date": {r: dates[h] for h, r in revisions.items()},
        "params": listed,
        "graph_param_list": line_params,
        "benchmarks": dict(benchmarks),
        "machines": machines,
        "tags": {tag: revisions[commit] for tag, commit in tags.items()},
        "pages": pages,
    }
    html_dir = Path(conf.html_dir)
    asv_util.write_json(str(html_dir / "index.json"), index, compact=True)
    now = datetime.datetime.now(datetime.UTC)
    info = {
        "asv-version": importlib.metadata.version("asv"),
        "timestamp": asv_util.datetime_to_js_timestamp(now),
    }
    asv_util.write_json(str(html_dir / "info.json"), info)
