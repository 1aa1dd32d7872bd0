"""`benchkit publish`: asv's site plus pages that explain the history.

``asv publish`` answers *did anything get slower* with one graph per
benchmark. benchkit adds, into the same ``html/`` folder:

* ``changes.html``: for every consecutive pair of measured commits on each
  branch (and machine), the benchmarks that changed beyond their threshold,
  grouped by metric. Thresholds and the comparison itself are `benchkit.check`'s,
  so the site and the regression gate never disagree about what changed.
  Each build's upstream PyTorch commit (``git_version``) is shown and linked.
* ``why.html`` and ``why/*.html``: for every instruction-count change, where
  the instructions went -- the function-level Callgrind diff between the two
  commits (`benchkit.profiles`), grouped into ATen/c10, the Python interpreter,
  the allocator, torch's bindings/autograd and everything else.
* ``operators.html``: per commit, operatorbench's table (20/50/80th percentile
  speedups, eager and compiled time, compile time), sortable, with each
  operator's median speedup over history as an inline SVG plot.

Everything is static: data is written into the pages (no XHR), so they open
from ``file://`` as well as from any static server, and the third-party
scripts asv's ``index.html`` takes from CDNs are pointed at local copies
(``benchkit/site_assets/vendor``), so the site fetches nothing from the network.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import html
import importlib
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit import check
from benchkit.errors import UserError
from benchkit.util import atomic_write_text, content_key

ASSETS_DIR = Path(__file__).with_name("site_assets")
VENDOR_DIR = ASSETS_DIR / "vendor"
UPSTREAM_COMMIT_URL = "https://github.com/pytorch/pytorch/commit/{}"
# benchkit.build_torch.BUILD_FILE; not imported from there to keep publishing light.
BUILD_FILE = "benchkit-build.json"

# Our pages, in nav order: (file, label). asv's own page is index.html.
PAGES = (("changes.html", "Changes"), ("why.html", "Why"), ("operators.html", "Operators"))
# What the Changes page lists: what fails the gate first, then what got better.
CHANGED_STATUSES = (*check.FAILS_GATE, "improvement", "fixed")
METRIC_HEADINGS = {
    "instructions": "Instruction counts",
    "wall_time": "Wall time",
    "ratio": "Operator ratios and other tracked values",
}
# Which asv CDN file each local copy replaces, by the URL's last path component.
VENDORED = {
    "jquery-3.3.1.min.js": "jquery-3.3.1.min.js",
    "jquery.flot.min.js": "jquery.flot.js",
    "jquery.flot.time.min.js": "jquery.flot.time.js",
    "jquery.flot.selection.min.js": "jquery.flot.selection.js",
    "jquery.flot.categories.min.js": "jquery.flot.categories.js",
    "jquery.flot.orderBars.js": "jquery.flot.orderBars.js",
    "stupidtable.min.js": "stupidtable.min.js",
    "md5.min.js": "md5.min.js",
    "bootstrap.min.js": "bootstrap.min.js",
    "bootstrap.min.css": "css/bootstrap.min.css",
}
OPERATOR_MODULE = "operators"
OPERATOR_METRICS = {
    "track_compiled_over_eager": "ratio",
    "track_eager_seconds": "eager_s",
    "track_compiled_seconds": "compiled_s",
    "track_compile_seconds": "compile_s",
}
TOP_FUNCTIONS = 12  # per group and direction on a why page


def _log(message: str) -> None:
    print(f"benchkit publish: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the data


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
    changes: tuple[check.Comparison, ...]  # beyond threshold, sorted within each metric
    compared: int  # benchmarks compared (changed or not)
    problems: tuple[str, ...] = ()  # metrics the pair cannot judge (`check.unjudged_metrics`)

    @property
    def anchor(self) -> str:
        return _slug(f"pair-{self.machine}-{self.branch}-{self.base.short}-{self.head.short}")


@dataclasses.dataclass(frozen=True)
class SiteData:
    conf: Any
    machines: tuple[str, ...]
    builds: Mapping[str, Build]  # commit -> build, every commit with results
    results: Mapping[tuple[str, str], check.ResultSet]  # (machine, commit) -> results
    branch_commits: Mapping[tuple[str, str], tuple[str, ...]]  # (machine, branch) -> measured, oldest first
    benchmarks: Mapping[str, BenchmarkInfo]  # unrolled name -> info
    config: check.CheckConfig
    env_count: int


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def _unquote(value: str) -> str:
    """asv keeps parameter values as their repr; show strings without the quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _benchmark_infos(conf: Any) -> dict[str, BenchmarkInfo]:
    from asv import util as asv_util
    from asv.benchmarks import Benchmarks

    try:
        benchmarks = Benchmarks.load(conf)
    except asv_util.UserError:
        return {}
    infos: dict[str, BenchmarkInfo] = {}
    for key, info in benchmarks.items():
        params = [list(map(str, p)) for p in info.get("params") or []]
        param_names = tuple(info.get("param_names") or ())
        pretty = info.get("pretty_name") or key
        if pretty == key:  # asv's default: the dotted name; say which operator it measures
            pretty = _operator_pretty_name(key) or key
        for name, combo in check.unrolled_results(key, params, _combos(params)):
            label = pretty if not combo else f"{pretty} ({', '.join(_unquote(v) for v in combo)})"
            infos[name] = BenchmarkInfo(key, tuple(combo or ()), param_names, label, info.get("unit"))
    return infos


def _operator_pretty_name(key: str) -> str | None:
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != OPERATOR_MODULE or parts[2] not in OPERATOR_METRICS:
        return None
    return f"{_operator_names().get(parts[1], parts[1])} [{parts[2]}]"


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


def _read_builds(repo: Any, commits: Iterable[str]) -> dict[str, Build]:
    """Build facts for `commits`: date, and for a wheel history its torch version and git_version.

    A commit without a build record is an upstream PyTorch commit (a source
    clone as asv's repo), so it is its own git_version.
    """

    commits = sorted(set(commits))
    revisions = repo.get_revisions(set(commits))
    tags: dict[str, list[str]] = {}
    for tag, commit in repo.get_tags().items():
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
                _log(f"warning: commit {commit[:8]} has an unreadable {BUILD_FILE}")
        builds[commit] = Build(
            commit,
            revisions.get(commit, -1),
            date,
            torch_version,
            git_version,
            tuple(sorted(tags.get(commit, []))),
        )
    return builds


def _check_config(conf_path: Path, config_path: Path | None) -> check.CheckConfig:
    config_path = config_path or check.find_check_config(conf_path.resolve().parent)
    if config_path:
        return check.load_check_config(config_path)
    return check.parse_check_config({}, "built-in defaults")


def _measured_commits(conf: Any, repo: Any, machine: str) -> list[str]:
    """Full hashes of the commits with results, from the result file names (no file is read)."""
    from asv import results as asv_results

    prefixes = {
        name.split("-", 1)[0]
        for name in os.listdir(os.path.join(conf.results_dir, machine))
        if name.endswith(".json") and name != "machine.json"
    }
    git_dir = getattr(repo, "_path", None)
    if git_dir:
        proc = subprocess.run(
            ["git", "-C", git_dir, "rev-list", "--all"], capture_output=True, text=True, check=False
        )
        if proc.returncode == 0:
            full = {c[:8]: c for c in proc.stdout.split()}
            if prefixes <= set(full):
                return sorted(full[p] for p in prefixes)
    # Commits the history does not hold (or a remote repository): read them from the results.
    return sorted({r.commit_hash for r in asv_results.iter_results_for_machine(conf.results_dir, machine)})


def load_site_data(conf_path: Path, config_path: Path | None = None) -> SiteData:
    """Everything the pages show, read through asv's and benchkit.check's APIs."""
    from asv.repo import get_repo

    conf = check.load_asv_config(conf_path)
    if not os.path.isdir(conf.results_dir):
        raise UserError(f"no asv results in {conf.results_dir}: run asv first (`asv run`, `benchkit main`)")
    machines = tuple(check.result_machines(conf.results_dir))
    repo = get_repo(conf)
    results: dict[tuple[str, str], check.ResultSet] = {}
    envs: set[str] = set()
    for machine in machines:
        for commit in _measured_commits(conf, repo, machine):
            result_set = check.load_result_set(conf, commit, machine)
            results[(machine, commit)] = result_set
            envs.update(env for _, env in result_set.measurements)
    builds = _read_builds(repo, {commit for _, commit in results})
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
        benchmarks=_benchmark_infos(conf),
        config=_check_config(conf_path, config_path),
        env_count=len(envs),
    )


def pair_changes(data: SiteData) -> list[PairChanges]:
    """Every consecutive pair on every (machine, branch), judged by `benchkit.check`."""
    units = {info.key: info.unit for info in data.benchmarks.values()}
    pairs = []
    metric_order = {m: i for i, m in enumerate(check.METRICS)}
    for (machine, branch), commits in data.branch_commits.items():
        for base, head in itertools.pairwise(commits):
            comparisons = check.compare(
                data.results[(machine, base)], data.results[(machine, head)], units, data.config
            )
            changed = [c for c in comparisons if c.status in CHANGED_STATUSES]
            changed.sort(
                key=lambda c: (
                    metric_order.get(c.metric, 9),
                    CHANGED_STATUSES.index(c.status),
                    -abs(math.log(c.ratio)) if c.ratio else 0.0,
                    c.name,
                )
            )
            compared = sum(1 for c in comparisons if c.status not in ("not compared", "ignored"))
            problems = tuple(check.unjudged_metrics(comparisons))
            pairs.append(
                PairChanges(
                    machine, branch, data.builds[base], data.builds[head], tuple(changed), compared, problems
                )
            )
    return pairs


# ------------------------------------------------------------- the profiles


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Where one case's instructions went between two commits (per execution of its statement)."""

    diff: Any  # benchkit.profiles.CaseDiff with every function that moved
    groups: tuple[tuple[str, float, float], ...]  # (group, base, head), in FUNCTION_GROUPS order


class ProfileStore:
    """The profiles `benchkit.profiles` stored beside asv's results, each file read once.

    Only the few most recent files stay loaded: pairs are visited in history
    order, so each commit's profile serves its two pairs and is then dropped.
    """

    KEEP = 4

    def __init__(self, results_dir: str) -> None:
        try:
            self.profiles: Any = importlib.import_module("benchkit.profiles")
        except ModuleNotFoundError as e:
            if e.name != "benchkit.profiles":
                raise
            self.profiles = None
        found = self.profiles.find_profiles(results_dir) if self.profiles else []
        self.paths = {(p.machine, p.commit, p.env_name): p.path for p in found}
        self.loaded: dict[tuple[str, str, str], tuple[Any, dict[str, str]] | None] = {}

    def case(self, machine: str, commit: str, env: str, benchmark: str, key: str | None) -> Any | None:
        """One case of a stored profile, by its key, else by the asv class name of `benchmark`."""
        slot = (machine, commit, env)
        if slot not in self.loaded:
            path = self.paths.get(slot)
            if path is None:
                return None
            try:
                profile = self.profiles.load_profile(path)
                # asv class names end in content_key(case key, length=8) (benchkit.expand.asv_class_name),
                # which finds the case when benchmarks.json (with the pretty name) lacks the benchmark.
                by_hash = {content_key(k, length=8): k for k in profile.cases}
                self.loaded[slot] = (profile, by_hash)
            except UserError as e:
                _log(f"warning: {e}")
                self.loaded[slot] = None
            while len(self.loaded) > self.KEEP:
                del self.loaded[next(iter(self.loaded))]
        entry = self.loaded[slot]
        if entry is None:
            return None
        profile, by_hash = entry
        if key is None:
            parts = benchmark.split(".")
            key = by_hash.get(parts[-2].rsplit("_", 1)[-1]) if len(parts) >= 3 else None
        return None if key is None else profile.cases.get(key)


def case_key(info: BenchmarkInfo | None) -> str | None:
    """The profile's case key of an instruction-count benchmark: its pretty name without the method."""
    if info is None or info.params:
        return None
    return re.sub(r" \[track_instructions\]$", "", info.pretty)


def explain(
    store: ProfileStore, pair: PairChanges, c: check.Comparison, info: BenchmarkInfo | None
) -> Explanation | None:
    """The function-level diff behind an instruction-count change; None without both profiles."""
    if store.profiles is None:
        return None
    key = case_key(info)
    base = store.case(pair.machine, pair.base.commit, c.env, c.name, key)
    head = store.case(pair.machine, pair.head.commit, c.env, c.name, key)
    if base is None or head is None:
        return None
    diff = store.profiles.diff_case(base, head, top=sys.maxsize)
    totals = {group: [0.0, 0.0] for group in GROUP_ORDER}
    for side, case in enumerate((base, head)):
        for function, count in case.per_execution().items():
            totals[function_group(function)][side] += count
    return Explanation(diff, tuple((g, b, h) for g, (b, h) in totals.items()))


# (group, pattern over the function's name, pattern over its file and object), checked in
# order. Names are matched without their argument lists: `at::empty_generic(..., c10::Allocator*)`
# is ATen, not the allocator.
FUNCTION_GROUPS = (
    ("allocator",
     r"^(malloc|free|cfree|calloc|realloc|posix_memalign|memalign|aligned_alloc|sysmalloc|_int_\w+|"
     r"malloc_\w+|unlink_chunk|tcache_\w+|arena_\w+|je_\w+|tc_\w+|operator new|operator delete|PyMem_\w+|"
     r"_?PyObject_(Malloc|Calloc|Realloc|Free)|pymalloc_\w+)$|(^|::)(alloc_cpu|free_cpu)$|Allocator\w*::",
     r"(^|/)(malloc|obmalloc|arena|CPUAllocator|alloc_cpu)\.(c|cpp)$|/malloc/|libjemalloc|libtcmalloc"),
    ("Python interpreter",
     r"^_?Py[A-Z_]\w*|^_Py",
     r"(^|/)(Objects|Python|Include|Modules|Parser)/|libpython"),
    ("torch bindings, autograd, JIT",
     r"^(torch::|pybind11::|THP)",
     r"(^|/)torch/csrc/|libtorch_python"),
    ("ATen/c10",
     r"(^|[\s<,])(at|c10|caffe2)::",
     r"(^|/)(aten|ATen|c10)/|libc10\b"),
    ("math libraries (MKL, oneDNN, OpenMP, Sleef)",
     r"^(mkl_|MKL_|dnnl|mkldnn|cblas_|[sd]gemm|Sleef_|__kmp|omp_|GOMP_|gomp_)",
     r"libmkl|libdnnl|libgomp|libiomp|libsleef|/(mkl|ideep|onednn|sleef)/"),
)  # fmt: skip
OTHER_GROUP = "other"
GROUP_ORDER = (*(group for group, _, _ in FUNCTION_GROUPS), OTHER_GROUP)
_COMPILED_GROUPS = tuple((g, re.compile(n), re.compile(w)) for g, n, w in FUNCTION_GROUPS)
# Callgrind's "file:symbol [object]"; the file is absent when `symbol` starts right away (`at::f`).
_FUNCTION = re.compile(r"^(?:(?P<file>[^:]*?):(?!:))?(?P<symbol>.*?)(?: \[(?P<object>[^\]]*)\])?$")


@functools.lru_cache(maxsize=65536)
def function_group(function: str) -> str:
    """Where a function's instructions belong (the allocator wins over the library it lives in)."""
    match = _FUNCTION.match(function)
    assert match is not None  # every string matches
    symbol = match.group("symbol").replace("(anonymous namespace)", "{anonymous}")
    name = re.sub(r"'\d+$", "", symbol.split("(", 1)[0]).strip()  # no arguments, no recursion mark
    where = " ".join(filter(None, (match.group("file"), match.group("object"))))
    for group, name_pattern, where_pattern in _COMPILED_GROUPS:
        if name_pattern.search(name) or where_pattern.search(where):
            return group
    return OTHER_GROUP


# ------------------------------------------------------------ the operators


@dataclasses.dataclass(frozen=True)
class OperatorRow:
    operator: str
    inputs: int
    failed: int
    speedups: tuple[float, float, float] | None  # 20/50/80th percentile of eager/compiled
    eager_s: float | None  # mean per input
    compiled_s: float | None
    compile_s: float | None


@functools.cache
def _operator_names() -> dict[str, str]:
    """asv class name -> operator name (the class name is the name with dots made underscores)."""
    try:
        from benchkit.operators import DEFAULT_OPERATORS
    except ImportError:
        return {}
    return {op.replace(".", "_"): op for op in DEFAULT_OPERATORS}


def operator_rows(result_set: check.ResultSet, benchmarks: Mapping[str, BenchmarkInfo]) -> list[OperatorRow]:
    """operatorbench's summary of one commit from the per-input asv results."""
    from benchkit.operators import quantiles

    names = _operator_names()
    several_envs = len({env for _, env in result_set.measurements}) > 1
    values: dict[str, dict[tuple[str, ...], dict[str, float | None]]] = {}
    for (name, env), measurement in result_set.measurements.items():
        info = benchmarks.get(name)
        key = info.key if info else name.split("(")[0]
        parts = key.split(".")
        if len(parts) != 3 or parts[0] != OPERATOR_MODULE or parts[2] not in OPERATOR_METRICS:
            continue
        operator = names.get(parts[1], parts[1]) + (f" [{env}]" if several_envs else "")
        combo = info.params if info else (name,)
        value = measurement.value
        if value is not None and isinstance(value, float) and math.isnan(value):
            continue  # skipped (e.g. an op inductor falls back on)
        values.setdefault(operator, {}).setdefault(combo, {})[OPERATOR_METRICS[parts[2]]] = value
    rows = []
    for operator, inputs in sorted(values.items()):
        ok = [v for v in inputs.values() if v.get("ratio") and v.get("eager_s") and v.get("compiled_s")]

        def mean(field: str, ok: list[dict[str, float | None]] = ok) -> float | None:
            numbers = [float(v[field]) for v in ok if v.get(field) is not None]  # type: ignore[arg-type]
            return sum(numbers) / len(numbers) if numbers else None

        speedups = quantiles([1 / float(v["ratio"]) for v in ok]) if ok else None  # type: ignore[arg-type]
        rows.append(
            OperatorRow(
                operator,
                len(inputs),
                len(inputs) - len(ok),
                speedups,
                mean("eager_s"),
                mean("compiled_s"),
                mean("compile_s"),
            )
        )
    return rows


# ------------------------------------------------------------------ rendering


def _write_public(path: Path, text: str) -> None:
    """Write atomically, readable by everyone: a web server usually runs as another user
    (the temporary file `atomic_write_text` renames into place is private)."""
    atomic_write_text(path, text)
    path.chmod(0o644)


def _breakable(name: str) -> str:
    """Escaped, with line-break opportunities after dots and underscores of a long dotted name."""
    escaped = _e(name)
    if " " in name:
        return escaped
    return escaped.replace(".", ".<wbr>").replace("_", "_<wbr>")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, active: str, depth: int = 0) -> str:
    up = "../" * depth
    links = [f'<a href="{up}index.html">Graphs (asv)</a>']
    for file, label in PAGES:
        cls = ' class="active"' if file == active else ""
        links.append(f'<a href="{up}{file}"{cls}>{label}</a>')
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)} · benchkit</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f'<link rel="stylesheet" href="{up}benchkit/site.css">'
        f'<script src="{up}benchkit/site.js" defer></script></head>\n'
        f'<body><nav class="bk-nav"><span class="bk-brand">benchkit</span>{"".join(links)}</nav>\n'
        f"<main>\n<h1>{_e(title)}</h1>\n{body}\n</main></body></html>\n"
    )


def _build_html(build: Build) -> str:
    parts = [f'<span class="commit" title="{_e(build.commit)}">{_e(build.short)}</span>']
    if build.tags:
        parts.append(f'<span class="tag">{_e(", ".join(build.tags))}</span>')
    if build.torch_version:
        parts.append(f"torch {_e(build.torch_version)}")
    if build.git_version:
        url = UPSTREAM_COMMIT_URL.format(urllib.parse.quote(build.git_version))
        parts.append(
            f'git_version <a class="upstream" href="{_e(url)}" title="upstream PyTorch commit">'
            f"{_e(build.git_version[:12])}</a>"
        )
    if build.date:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(build.date))
        parts.append(f'<span class="date">{when} UTC</span>')
    return " · ".join(parts)


def graph_url(info: BenchmarkInfo | None, name: str, machine: str, branch: str, pair: PairChanges) -> str:
    """asv's URL of a benchmark's graph: ``index.html#<name>?machine=..&p-<param>=..&commits=a-b``."""
    key = info.key if info else name.split("(")[0]
    query: list[tuple[str, str]] = [("machine", machine), ("branch", branch)]
    if info:
        query += [(f"p-{n}", v) for n, v in zip(info.param_names, info.params, strict=True)]
    query.append(("commits", f"{pair.base.short}-{pair.head.short}"))
    encoded = "&".join(f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}" for k, v in query)
    return f"index.html#{urllib.parse.quote(key, safe='')}?{encoded}"


def why_file(pair: PairChanges, name: str) -> str:
    return f"why/{content_key(pair.machine, pair.base.commit, pair.head.commit, name)}.html"


def _display_unit(c: check.Comparison) -> str | None:
    """The unit to print a value in; from the method name when benchmarks.json lacks the benchmark
    (asv rewrites that file for the benchmarks of its last run)."""
    if c.unit is not None:
        return c.unit
    method = c.name.split("(")[0].rsplit(".", 1)[-1]
    if method.startswith("time_") or method in (
        "track_eager_seconds",
        "track_compiled_seconds",
        "track_compile_seconds",
    ):
        return "seconds"
    return "instructions" if method == "track_instructions" else None


def _fmt_value(c: check.Comparison, measurement: check.Measurement | None) -> str:
    return str(check.format_value(measurement, _display_unit(c)))


def _log_ratio(ratio: float | None) -> str:
    """Sort key of a ratio: ×2 and ×0.5 are equally far from no change."""
    return f"{math.log(ratio):.6f}" if ratio else "0"


def _fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"×{ratio:.3f} ({(ratio - 1) * 100:+.1f}%)"


def _change_row(c: check.Comparison, data: SiteData, pair: PairChanges, why_pages: Mapping[str, str]) -> str:
    info = data.benchmarks.get(c.name)
    pretty = info.pretty if info else c.name
    env = f' <span class="env">[{_e(c.env)}]</span>' if data.env_count > 1 and c.env else ""
    link = graph_url(info, c.name, pair.machine, pair.branch, pair)
    why = ""
    if c.metric == "instructions":
        page = why_pages.get(c.name)
        why = f'<a href="{_e(page)}">where?</a>' if page else '<span class="muted">no profiles</span>'
    ratio = c.ratio
    return (
        f'<tr class="{_slug(c.status)}"><td>{_e(c.status)}</td>'
        f'<td><a href="{_e(link)}" title="{_e(c.name)}">{_breakable(pretty)}</a>{env}</td>'
        f'<td class="num">{_e(_fmt_value(c, c.before))}</td>'
        f'<td class="num">{_e(_fmt_value(c, c.after))}</td>'
        f'<td class="num" data-v="{_log_ratio(ratio)}">{_e(_fmt_ratio(ratio))}</td>'
        f'<td class="num">{_e(check.format_threshold(c))}</td>'
        f"<td>{why}</td><td>{_e(c.note)}</td></tr>"
    )


def render_changes(
    data: SiteData, pairs: Sequence[PairChanges], why_pages: Mapping[str, dict[str, str]]
) -> str:
    out = [
        '<p class="lead">Each consecutive pair of measured commits per branch and machine; a benchmark '
        "is listed when <code>benchkit check</code> would flag it: a change beyond its threshold "
        f"(thresholds: {_e(data.config.source)}) or a number on base that head lost (newly failing, "
        "newly skipped, missing on head). Names link to asv's graph of the benchmark; "
        "instruction-count changes link to where the instructions went.</p>"
    ]
    if not pairs:
        out.append('<p class="empty">No branch has two measured commits yet: nothing to compare.</p>')
    groups: dict[tuple[str, str], list[PairChanges]] = {}
    for pair in pairs:
        groups.setdefault((pair.machine, pair.branch), []).append(pair)
    toc = []
    for (machine, branch), group in groups.items():
        changed = sum(1 for p in group if p.changes)
        toc.append(
            f'<li><a href="#{_slug(f"{machine}-{branch}")}">{_e(branch)} on {_e(machine)}</a>: '
            f"{len(group)} pair(s), {changed} with changes</li>"
        )
    if len(groups) > 1:
        out.append(f'<ul class="toc">{"".join(toc)}</ul>')
    for (machine, branch), group in groups.items():
        heading = f"Branch {_e(branch)} · machine {_e(machine)}"
        out.append(f'<h2 id="{_slug(f"{machine}-{branch}")}">{heading}</h2>')
        for pair in reversed(group):  # newest first
            out.append(_render_pair(data, pair, why_pages.get(pair.anchor, {})))
    return "\n".join(out)


def _render_pair(data: SiteData, pair: PairChanges, why_pages: Mapping[str, str]) -> str:
    counts: dict[str, int] = {}
    for c in pair.changes:
        counts[c.status] = counts.get(c.status, 0) + 1
    summary = ", ".join(check.count_phrase(n, s) for s, n in counts.items())
    summary = summary or ("nothing flagged" if pair.problems else "no change beyond thresholds")
    ops = f"operators.html#{_slug(f'ops-{pair.machine}-{pair.head.short}')}"
    lines = [
        f'<section class="pair" id="{pair.anchor}">',
        f'<h3><a href="#{pair.anchor}">{_e(pair.base.label)} → {_e(pair.head.label)}</a></h3>',
        f'<div class="builds"><div>base: {_build_html(pair.base)}</div>'
        f"<div>head: {_build_html(pair.head)}</div></div>",
        f'<p class="counts">{_e(summary)} '
        f'<span class="muted">({pair.compared} compared · <a href="{ops}">operators at head</a>)</span></p>',
    ]
    if pair.problems:
        items = "".join(f"<li>{_e(p)}</li>" for p in pair.problems)
        lines.append(f'<div class="problems"><p>Could not compare:</p><ul>{items}</ul></div>')
    by_metric: dict[str, list[check.Comparison]] = {}
    for c in pair.changes:
        by_metric.setdefault(c.metric, []).append(c)
    for metric, rows in by_metric.items():
        lines.append(f"<h4>{_e(METRIC_HEADINGS.get(metric, metric))} ({len(rows)})</h4>")
        lines.append(
            '<table class="sortable changes"><thead><tr><th>status</th><th>benchmark</th>'
            '<th class="num">before</th><th class="num">after</th><th class="num">ratio</th>'
            '<th class="num">threshold</th><th>why</th><th>note</th></tr></thead><tbody>'
        )
        lines.extend(_change_row(c, data, pair, why_pages) for c in rows)
        lines.append("</tbody></table>")
    lines.append("</section>")
    return "\n".join(lines)


def _fmt_instructions(n: float, signed: bool = False) -> str:
    """Instructions per execution: whole numbers, a decimal when small (they are medians/number)."""
    text = f"{n:+,.1f}" if signed else f"{n:,.1f}"
    if abs(n) >= 100:
        text = f"{n:+,.0f}" if signed else f"{n:,.0f}"
    return "0" if signed and n == 0 else text


def render_why(data: SiteData, pair: PairChanges, c: check.Comparison, why: Explanation) -> str:
    info = data.benchmarks.get(c.name)
    pretty = info.pretty if info else c.name
    graph = graph_url(info, c.name, pair.machine, pair.branch, pair)
    total_before = sum(b for _, b, _ in why.groups)
    total_after = sum(h for _, _, h in why.groups)
    out = [
        f'<p class="lead"><a href="../{_e(graph)}">{_e(pretty)}</a> on machine {_e(pair.machine)}, '
        f"branch {_e(pair.branch)}: {_e(_fmt_value(c, c.before))} → "
        f"{_e(_fmt_value(c, c.after))} instructions per run, {_e(_fmt_ratio(c.ratio))}. "
        f'<a href="../changes.html#{pair.anchor}">All changes of this pair</a>.</p>',
        f'<div class="builds"><div>base: {_build_html(pair.base)}</div>'
        f"<div>head: {_build_html(pair.head)}</div></div>",
    ]
    if why.diff.status == "failed":
        out.append(f'<p class="note">The profiles cannot be compared: {_e(why.diff.note)}</p>')
        return _page(f"Why: {pretty}", "\n".join(out), "why.html", depth=1)
    net = total_after - total_before
    out += [
        f"<p>Profiled functions, per execution: {_fmt_instructions(total_before)} → "
        f"{_fmt_instructions(total_after)} ({_fmt_instructions(net, signed=True)}).</p>",
        '<table class="groups"><thead><tr><th>group</th><th class="num">before</th>'
        '<th class="num">after</th><th class="num">change</th><th>share of the change</th>'
        "</tr></thead><tbody>",
    ]
    scale = max((abs(h - b) for _, b, h in why.groups), default=0) or 1
    for group, before, after in why.groups:
        cls = "up" if after > before else "down" if after < before else ""
        bar = ""
        if after != before:
            share = f"{(after - before) / net * 100:.0f}% of the net change" if net else ""
            width = 100 * abs(after - before) / scale
            bar = f'<span class="bar {cls}" style="width:{width:.0f}%"></span> {_e(share)}'
        out.append(
            f'<tr><td><a href="#{_slug(group)}">{_e(group)}</a></td>'
            f'<td class="num">{_fmt_instructions(before)}</td><td class="num">{_fmt_instructions(after)}</td>'
            f'<td class="num {cls}">{_fmt_instructions(after - before, signed=True)}</td><td>{bar}</td></tr>'
        )
    out.append("</tbody></table>")
    moved: dict[str, dict[str, list[Any]]] = {group: {"up": [], "down": []} for group in GROUP_ORDER}
    for d in why.diff.increases:
        moved[function_group(d.function)]["up"].append(d)
    for d in why.diff.decreases:
        moved[function_group(d.function)]["down"].append(d)
    for group in GROUP_ORDER:
        out.append(f'<h2 id="{_slug(group)}">{_e(group)}</h2>')
        if not moved[group]["up"] and not moved[group]["down"]:
            out.append('<p class="muted">no function changed</p>')
            continue
        for title, direction in (("more instructions", "up"), ("fewer instructions", "down")):
            rows = moved[group][direction]  # largest change first (benchkit.profiles' order)
            if not rows:
                continue
            more = f" (top {TOP_FUNCTIONS} of {len(rows)})" if len(rows) > TOP_FUNCTIONS else ""
            out.append(
                f'<h3>{title}{more}</h3><table class="sortable functions"><thead><tr><th>function</th>'
                '<th class="num">before</th><th class="num">after</th><th class="num">change</th>'
                "</tr></thead><tbody>"
            )
            for d in rows[:TOP_FUNCTIONS]:
                change = _fmt_instructions(d.delta, signed=True)
                out.append(
                    f'<tr><td class="fn">{_e(d.function)}</td>'
                    f'<td class="num">{_fmt_instructions(d.base)}</td>'
                    f'<td class="num">{_fmt_instructions(d.head)}</td>'
                    f'<td class="num {direction}" data-v="{d.delta}">{change}</td></tr>'
                )
            out.append("</tbody></table>")
    return _page(f"Why: {pretty}", "\n".join(out), "why.html", depth=1)


def render_why_index(
    data: SiteData, pairs: Sequence[PairChanges], why_pages: Mapping[str, dict[str, str]]
) -> str:
    rows = []
    missing = 0
    for pair in reversed(pairs):
        for c in pair.changes:
            if c.metric != "instructions":
                continue
            info = data.benchmarks.get(c.name)
            page = why_pages.get(pair.anchor, {}).get(c.name)
            missing += page is None
            target = '<span class="muted">no profiles</span>'
            if page:
                target = f'<a href="{_e(page)}">function diff</a>'
            rows.append(
                f'<tr class="{_slug(c.status)}"><td>{_e(c.status)}</td>'
                f"<td>{_e(pair.machine)} / {_e(pair.branch)}</td>"
                f'<td><a href="changes.html#{pair.anchor}">'
                f"{_e(pair.base.short)} → {_e(pair.head.short)}</a></td>"
                f"<td>{_e(info.pretty if info else c.name)}</td>"
                f'<td class="num" data-v="{_log_ratio(c.ratio)}">{_e(_fmt_ratio(c.ratio))}</td>'
                f"<td>{target}</td></tr>"
            )
    body = [
        '<p class="lead">Every instruction-count change beyond its threshold, with the function-level '
        "Callgrind diff between the two commits, grouped into ATen/c10, the Python interpreter, the "
        "allocator, torch's bindings/autograd and the rest.</p>"
    ]
    if missing:
        body.append(
            f'<p class="note">{missing} change(s) have no stored profiles for both commits; '
            "record them with the instruction-count run (see docs/site.md).</p>"
        )
    if rows:
        body.append(
            '<table class="sortable"><thead><tr><th>status</th><th>machine / branch</th><th>commits</th>'
            '<th>benchmark</th><th class="num">ratio</th><th>where</th></tr></thead><tbody>'
            + "\n".join(rows)
            + "</tbody></table>"
        )
    else:
        body.append('<p class="empty">No instruction-count change beyond its threshold.</p>')
    return _page("Why did instruction counts change?", "\n".join(body), "why.html")


def _sparkline_symbol(
    symbol_id: str, points: Sequence[tuple[Build, float]]
) -> tuple[str, dict[str, tuple[float, float]]]:
    """An SVG symbol of median speedup per commit, and each commit's point (for the marker)."""
    width, height, pad = 160.0, 36.0, 4.0
    values = [v for _, v in points]
    low, high = min([*values, 1.0]), max([*values, 1.0])
    span = (high - low) or 1.0
    step = (width - 2 * pad) / max(len(points) - 1, 1)
    coords: dict[str, tuple[float, float]] = {}
    for i, (build, value) in enumerate(points):
        x = pad + i * step if len(points) > 1 else width / 2  # a single commit sits in the middle
        coords[build.commit] = (x, height - pad - (value - low) / span * (height - 2 * pad))
    parity = height - pad - (1.0 - low) / span * (height - 2 * pad)
    poly = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords.values())
    dots = "".join(
        f'<circle cx="{coords[b.commit][0]:.1f}" cy="{coords[b.commit][1]:.1f}" r="1.8">'
        f"<title>{_e(b.label)}: {v:.2f}×</title></circle>"
        for b, v in points
    )
    svg = (
        f'<symbol id="{symbol_id}" viewBox="0 0 {width:.0f} {height:.0f}">'
        f'<line class="parity" x1="0" x2="{width:.0f}" y1="{parity:.1f}" y2="{parity:.1f}"/>'
        f'<polyline points="{poly}"/>{dots}</symbol>'
    )
    return svg, coords


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    from asv import util as asv_util

    return str(asv_util.human_value(value, "seconds"))


def render_operators(data: SiteData) -> str:
    sections, symbols, options = [], [], []
    for machine in data.machines:
        commits = _history_commits(data, machine)
        tables = {c: operator_rows(data.results[(machine, c)], data.benchmarks) for c in commits}
        tables = {c: rows for c, rows in tables.items() if rows}
        if not tables:
            continue
        history: dict[str, list[tuple[Build, float]]] = {}
        for commit, rows in tables.items():
            for row in rows:
                if row.speedups:
                    history.setdefault(row.operator, []).append((data.builds[commit], row.speedups[1]))
        coords = {}
        for operator, points in history.items():
            symbol_id = _slug(f"spark-{machine}-{operator}")
            svg, coords[operator] = _sparkline_symbol(symbol_id, points)
            symbols.append(svg)
        for commit, rows in tables.items():
            build = data.builds[commit]
            anchor = _slug(f"ops-{machine}-{build.short}")
            options.append(f'<option value="{anchor}">{_e(machine)} · {_e(build.label)}</option>')
            body = [
                f'<section class="ops" id="{anchor}"><h2>{_e(build.label)} · machine {_e(machine)}</h2>',
                f'<div class="builds"><div>{_build_html(build)}</div></div>',
                '<table class="sortable operators"><thead><tr><th>operator</th><th class="num">inputs</th>'
                '<th class="num">speedup p20</th><th class="num">p50</th><th class="num">p80</th>'
                '<th class="num">eager (mean)</th><th class="num">compiled (mean)</th>'
                '<th class="num">compile (mean)</th><th>median speedup over history</th></tr></thead><tbody>',
            ]
            for row in rows:
                body.append(_operator_row_html(machine, row, commit, coords.get(row.operator, {})))
            body.append("</tbody></table></section>")
            sections.append("\n".join(body))
    if not sections:
        content = (
            '<p class="empty">No operator results yet: run the <code>operators</code> benchmarks '
            "(benchmarks/operators.py) with asv.</p>"
        )
    else:
        content = (
            '<p class="lead">TorchInductor against eager per operator: speedup = eager time / compiled '
            "time over the operator's logged inputs (20th, 50th and 80th percentile, as operatorbench); "
            "times are means per input. Click a column to sort.</p>"
            f'<p><label>commit <select id="op-commit">{"".join(reversed(options))}</select></label></p>'
            f'<svg class="symbols" aria-hidden="true">{"".join(symbols)}</svg>'
            + "\n".join(reversed(sections))
        )
    return _page("Operators: TorchInductor speedups", content, "operators.html")


def _history_commits(data: SiteData, machine: str) -> list[str]:
    """The machine's measured commits in history order: the first branch, then commits only elsewhere."""
    ordered: list[str] = []
    for (m, _branch), commits in data.branch_commits.items():
        if m == machine:
            ordered += [c for c in commits if c not in ordered]
    rest = [c for (m, c) in data.results if m == machine and c not in ordered]
    return ordered + sorted(rest, key=lambda c: data.builds[c].revision)


def _operator_row_html(
    machine: str, row: OperatorRow, commit: str, coords: Mapping[str, tuple[float, float]]
) -> str:
    cells = [f'<td class="op">{_e(row.operator)}</td>']
    failed = f' <span class="muted">({row.failed} failed)</span>' if row.failed else ""
    cells.append(f'<td class="num" data-v="{row.inputs}">{row.inputs}{failed}</td>')
    for q in row.speedups or (None, None, None):
        text = "-" if q is None else f"{q:.2f}×"
        cells.append(f'<td class="num" data-v="{q if q is not None else ""}">{text}</td>')
    for value in (row.eager_s, row.compiled_s, row.compile_s):
        sort_value = "" if value is None else value
        cells.append(f'<td class="num" data-v="{sort_value}">{_e(_fmt_seconds(value))}</td>')
    if coords:
        symbol_id = _slug(f"spark-{machine}-{row.operator}")
        marker = ""
        if commit in coords:
            x, y = coords[commit]
            marker = f'<circle class="here" cx="{x:.1f}" cy="{y:.1f}" r="3"/>'
        cells.append(
            f'<td><svg class="spark" width="160" height="36" viewBox="0 0 160 36" role="img" '
            f'aria-label="median speedup of {_e(row.operator)} over history">'
            f'<use href="#{symbol_id}"/>{marker}</svg></td>'
        )
    else:
        cells.append("<td></td>")
    return f"<tr>{''.join(cells)}</tr>"


# -------------------------------------------------------------- asv's pages


_EXTERNAL_TAG = re.compile(r"<(script|link)\b[^>]*?\b(?:src|href)=\"(https?://[^\"]+)\"[^>]*>", re.I)


def localize_asv_assets(html_dir: Path) -> list[str]:
    """Point asv's CDN <script>/<link> tags at local copies; returns URLs left external."""
    shutil.copytree(VENDOR_DIR, html_dir / "vendor", dirs_exist_ok=True)
    left: list[str] = []
    for page in html_dir.glob("*.html"):
        text = page.read_text()

        def local(match: re.Match[str]) -> str:
            tag, url = match.group(1).lower(), match.group(2)
            vendored = VENDORED.get(url.rsplit("/", 1)[-1])
            if vendored is None:
                if tag == "script" or "stylesheet" in match.group(0):
                    left.append(url)
                return match.group(0)
            if tag == "script":
                return f'<script src="vendor/{vendored}">'
            return f'<link rel="stylesheet" href="vendor/{vendored}">'

        new = _EXTERNAL_TAG.sub(local, text)
        if new != text:
            _write_public(page, new)
    return left


def enable_file_access(html_dir: Path) -> int:
    """Let asv's pages work from ``file://``: a script twin of every JSON file, and the transport
    (site_assets/asv_file_shim.js) that reads them; returns how many twins were written."""
    count = 0
    for path in html_dir.rglob("*.json"):
        relative = json.dumps(path.relative_to(html_dir).as_posix())
        # The JSON text is a JavaScript expression as it is; it is not parsed here.
        path.with_name(path.name + ".js").write_bytes(
            b"benchkitJson(" + relative.encode() + b"," + path.read_bytes() + b");\n"
        )
        count += 1
    index = html_dir / "index.html"
    text = index.read_text()
    shim = '<script src="benchkit/asv_file_shim.js"></script>\n'
    if shim in text:
        return count
    at = re.search(r"<script[^>]*\bsrc=\"asv\.js\"", text)
    if at is None:
        _log("warning: asv's index.html does not load asv.js where expected; its pages need a server")
        return count
    _write_public(index, text[: at.start()] + shim + text[at.start() :])
    return count


_ASV_NAV_ANCHOR = '<li id="nav-li-regressions">'


def link_from_asv(html_dir: Path) -> bool:
    """Add our pages to asv's navigation bar (after "Regressions"); False if asv's page changed shape."""
    index = html_dir / "index.html"
    text = index.read_text()
    items = "".join(f'<li class="benchkit-nav"><a href="{f}">{label}</a></li>' for f, label in PAGES)
    at = text.find(_ASV_NAV_ANCHOR)
    if at < 0:
        banner = f'<div class="benchkit-nav">benchkit: <ul>{items}</ul></div>'
        new = text.replace("<body>", f"<body>{banner}", 1)
        found = False
    else:
        end = text.index("</li>", at) + len("</li>")
        new = text[:end] + items + text[end:]
        found = True
    _write_public(index, new)
    return found


# ------------------------------------------------------------------ publish


def _start_asv_publish(conf_path: Path, html_dir: Path | None) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "asv", "publish", "--config", str(conf_path)]
    if html_dir is not None:
        command += ["--html-dir", str(html_dir)]
    return subprocess.Popen(
        command, cwd=conf_path.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _wait_asv_publish(proc: subprocess.Popen[str]) -> None:
    output, _ = proc.communicate()
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise UserError(f"`asv publish` failed with exit code {proc.returncode}:\n{tail}")


def render_pages(data: SiteData) -> tuple[dict[str, str], dict[str, int]]:
    """benchkit's pages as {path in the site: HTML}, and how many of each there are."""
    pairs = pair_changes(data)
    pages: dict[str, str] = {}
    why_pages: dict[str, dict[str, str]] = {}
    store = ProfileStore(data.conf.results_dir)
    for pair in pairs:
        for c in pair.changes:
            if c.metric != "instructions":
                continue
            why = explain(store, pair, c, data.benchmarks.get(c.name))
            if why is None:
                continue
            path = why_file(pair, c.name)
            pages[path] = render_why(data, pair, c, why)
            why_pages.setdefault(pair.anchor, {})[c.name] = path
    counts = {"pairs": len(pairs), "changes": sum(len(p.changes) for p in pairs), "why pages": len(pages)}
    pages["changes.html"] = _page("Changes", render_changes(data, pairs, why_pages), "changes.html")
    pages["why.html"] = render_why_index(data, pairs, why_pages)
    pages["operators.html"] = render_operators(data)
    return pages, counts


def write_pages(pages: Mapping[str, str], html_dir: Path) -> None:
    for path, text in pages.items():
        _write_public(html_dir / path, text)
    assets = html_dir / "benchkit"
    assets.mkdir(exist_ok=True)
    for name in ("site.css", "site.js", "asv_file_shim.js"):
        shutil.copyfile(ASSETS_DIR / name, assets / name)


def publish(
    conf_path: Path = Path("asv.conf.json"),
    html_dir: Path | None = None,
    config_path: Path | None = None,
) -> Path:
    """`asv publish` into the html folder, then benchkit's pages; returns the folder."""
    conf_path = conf_path.resolve()
    if not conf_path.is_file():
        raise UserError(f"asv config {conf_path} not found")
    started = time.perf_counter()
    conf = check.load_asv_config(conf_path)
    target = (html_dir or conf_path.parent / conf.html_dir).resolve()
    # asv publish deletes the folder; keep a README a repository tracks there.
    readme = target / "README.md"
    kept_readme = readme.read_bytes() if readme.is_file() else None
    # asv only reads the results and writes html/; our pages need the same results but not
    # asv's output, so they are computed while asv publishes and written once it is done.
    proc = _start_asv_publish(conf_path, html_dir.resolve() if html_dir else None)
    _log(f"asv publish into {target} started; reading results and rendering benchkit's pages meanwhile")
    try:
        data = load_site_data(conf_path, config_path)
        pages, counts = render_pages(data)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    rendered_s = time.perf_counter() - started
    _wait_asv_publish(proc)
    asv_s = time.perf_counter() - started
    if kept_readme is not None:
        readme.write_bytes(kept_readme)
    write_pages(pages, target)
    left = localize_asv_assets(target)
    if left:
        _log("warning: asv's pages still load from the network: " + ", ".join(left))
    if not link_from_asv(target):
        _log("warning: asv's index.html has no navigation bar where expected; added a banner instead")
    enable_file_access(target)
    total = time.perf_counter() - started
    _log(
        f"pages rendered in {rendered_s:.1f} s while asv published ({asv_s:.1f} s), written in "
        f"{total - asv_s:.1f} s: "
        + ", ".join(f"{n} {what}" for what, n in counts.items())
        + f" -> {target / 'changes.html'}"
    )
    return target


def _cmd_publish(args: argparse.Namespace) -> int:
    publish(args.asv_config, args.html_dir, args.config)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "publish",
        help="asv publish into html/ plus benchkit's changes, why and operator pages",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument("--html-dir", type=Path, help="output folder (default: html_dir of the asv config)")
    parser.add_argument(
        "--config",
        type=Path,
        help="benchkit check thresholds for the changes page "
        "(default: benchkit-check.toml/.json by asv.conf.json)",
    )
    parser.set_defaults(func=_cmd_publish)
