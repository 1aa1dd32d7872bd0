"""`benchkit check BASE HEAD`: the regression gate over asv results.

`asv continuous` flags changes with one ``--factor`` for every benchmark and
exits 2 as soon as any benchmark failed, so a single flaky case hides every real
regression. This gate reads the same results through asv's own API and judges
each metric by its own noise:

* **instructions** (Callgrind counts) are nearly deterministic: a tight
  relative threshold (default 0.5%) catches small real changes.
* **wall time** (unit seconds) is noisy: a change counts only when asv's
  statistical test says the two sample sets differ *and* the ratio exceeds a
  factor (default 1.10), as in `asv compare`.
* **ratio** (any other tracked number, e.g. an operator's compiled/eager time
  ratio, lower is better): a relative threshold (default 10%), since each is a
  quotient of two timings without samples.

A reviewed config file (``benchkit-check.toml`` or ``.json``) changes the
defaults and overrides them per benchmark by regular expression, each override
with a reason. Output is a Markdown table for a PR comment.

The gate fails closed: a benchmark with a number on BASE and none on HEAD
(missing, skipped or failed there) fails it like a regression, and a metric
that cannot be judged at all -- numbers on one side only, or on neither (no
valgrind, a failed ``setup_cache``) -- is never read as "no regression".
Exit status: 0 clean, 1 regression or a benchmark lost on HEAD, 2 could not
compare (the reasons are printed on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError

METRICS = ("instructions", "wall_time", "ratio")
# Verdicts of a benchmark that had a number on BASE and has none on HEAD; with
# "regression" they fail the gate (exit 1).
LOST_ON_HEAD = ("newly failing", "newly skipped", "missing on head")
FAILS_GATE = ("regression", *LOST_ON_HEAD)
# Verdicts where both sides had a number and were compared.
NUMERIC_STATUSES = ("regression", "improvement", "unchanged")
DEFAULT_THRESHOLDS = {"instructions": 0.005, "wall_time": 0.10, "ratio": 0.10}
DEFAULT_CONFIG_NAMES = ("benchkit-check.toml", "benchkit-check.json")
_METRIC_LABELS = {"instructions": "instructions", "wall_time": "wall time", "ratio": "ratio"}


# ------------------------------------------------------------------ the config


@dataclasses.dataclass(frozen=True)
class Override:
    pattern: re.Pattern[str]
    reason: str
    threshold: float | None = None
    metric: str | None = None
    ignore: bool = False


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    thresholds: Mapping[str, float]
    overrides: tuple[Override, ...] = ()
    source: str = "built-in defaults"

    def with_wall_factor(self, factor: float | None) -> CheckConfig:
        if factor is None:
            return self
        if factor < 1:
            raise UserError(f"--factor {factor}: must be at least 1 (1.10 means 10% slower)")
        return dataclasses.replace(
            self,
            thresholds={**self.thresholds, "wall_time": factor - 1},
            source=f"{self.source}, wall-time factor {factor:g} from --factor",
        )

    def rule_for(self, name: str, default_metric: str) -> tuple[str, float, Override | None]:
        """(metric, relative threshold, override that applied) for one benchmark."""
        for override in self.overrides:
            if override.pattern.search(name):
                metric = override.metric or default_metric
                threshold = override.threshold if override.threshold is not None else self.thresholds[metric]
                return metric, threshold, override
        return default_metric, self.thresholds[default_metric], None


def _check_threshold(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 100:
        raise UserError(f"{where}: threshold must be a number such as 0.005 (0.5%), got {value!r}")
    return float(value)


def parse_check_config(data: object, source: str) -> CheckConfig:
    """Validate a config document; every mistake names the file and the entry."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a table of settings at the top level")
    unknown = set(data) - {"thresholds", "override"}
    if unknown:
        raise UserError(
            f"{source}: unknown setting(s) {', '.join(sorted(unknown))} (known: thresholds, override)"
        )
    thresholds = dict(DEFAULT_THRESHOLDS)
    table = data.get("thresholds", {})
    if not isinstance(table, dict):
        raise UserError(f"{source}: [thresholds] must be a table of metric = number")
    for metric, value in table.items():
        if metric not in METRICS:
            raise UserError(f"{source}: [thresholds] {metric}: unknown metric (known: {', '.join(METRICS)})")
        thresholds[metric] = _check_threshold(value, f"{source}: [thresholds] {metric}")
    overrides = []
    entries = data.get("override", [])
    if not isinstance(entries, list):
        raise UserError(f"{source}: override must be a list of tables ([[override]] in TOML)")
    for index, entry in enumerate(entries, 1):
        where = f"{source}: override #{index}"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: expected a table")
        extra = set(entry) - {"match", "reason", "threshold", "metric", "ignore"}
        if extra:
            raise UserError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        match, reason = entry.get("match"), entry.get("reason")
        if not isinstance(match, str) or not match:
            raise UserError(f'{where}: needs match = "<regular expression over benchmark names>"')
        if not isinstance(reason, str) or not reason.strip():
            raise UserError(f"{where} ({match!r}): needs a reason, so reviewers know why it is exempt")
        try:
            pattern = re.compile(match)
        except re.error as e:
            raise UserError(f"{where}: invalid regular expression {match!r}: {e}") from None
        metric = entry.get("metric")
        if metric is not None and metric not in METRICS:
            raise UserError(f"{where}: unknown metric {metric!r} (known: {', '.join(METRICS)})")
        threshold = entry.get("threshold")
        ignore = entry.get("ignore", False)
        if not isinstance(ignore, bool):
            raise UserError(f"{where}: ignore must be true or false")
        overrides.append(
            Override(
                pattern=pattern,
                reason=reason.strip(),
                threshold=None if threshold is None else _check_threshold(threshold, where),
                metric=metric,
                ignore=ignore,
            )
        )
    return CheckConfig(thresholds=thresholds, overrides=tuple(overrides), source=source)


def load_check_config(path: Path) -> CheckConfig:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"check config {path}: {e.strerror}") from None
    if path.suffix == ".json":
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise UserError(f"{path}: invalid JSON: {e}") from None
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            raise UserError(f"{path}: reading TOML needs Python 3.11; use a .json config instead") from None
        try:
            data = tomllib.loads(raw.decode())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise UserError(f"{path}: invalid TOML: {e}") from None
    else:
        raise UserError(f"{path}: check config must end in .toml or .json")
    return parse_check_config(data, str(path))


# ------------------------------------------------------------ reading results


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One benchmark (one parameter combination) of one commit, as asv recorded it."""

    value: float | None  # None: the benchmark failed
    stats: Mapping[str, Any] | None
    samples: Sequence[float] | None
    version: str | None

    @property
    def failed(self) -> bool:
        return self.value is None

    @property
    def skipped(self) -> bool:
        return isinstance(self.value, float) and math.isnan(self.value)

    @property
    def has_number(self) -> bool:
        return not (self.failed or self.skipped)


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


def unrolled_results(key: str, params: list[Any], *columns: Any) -> Iterable[tuple[Any, ...]]:
    from asv.commands.compare import unroll_result

    return unroll_result(key, params, *columns)


def load_result_set(conf: Any, commit: str, machine: str, env: str | None = None) -> ResultSet:
    from asv import results as asv_results

    measurements: dict[tuple[str, str], Measurement] = {}
    for result in asv_results.iter_results_for_machine_and_hash(conf.results_dir, machine, commit):
        if env is not None and result.env_name != env:
            continue
        for key in result.get_all_result_keys():
            params = result.get_result_params(key)
            version = result.benchmark_version.get(key)
            columns = (
                result.get_result_value(key, params),
                result.get_result_stats(key, params),
                result.get_result_samples(key, params),
            )
            for name, value, stats, samples in unrolled_results(key, params, *columns):
                measurements[(name, result.env_name)] = Measurement(value, stats, samples, version)
    return ResultSet(commit, machine, measurements)


def _units(conf: Any) -> dict[str, str | None]:
    from asv import util as asv_util
    from asv.benchmarks import Benchmarks

    try:
        benchmarks = Benchmarks.load(conf)
    except asv_util.UserError:
        return {}
    return {name: info.get("unit") for name, info in benchmarks.items()}


def default_metric(name: str, unit: str | None) -> str:
    """The metric by asv's unit; by the method name when benchmarks.json lacks the benchmark.

    (Any `asv run -b REGEX` in the same results folder rewrites benchmarks.json
    with only the benchmarks it selected, so older results can lose their unit.)
    """
    method = name.split("(")[0].rsplit(".", 1)[-1]
    if unit == "instructions" or (unit is None and method.endswith("instructions")):
        return "instructions"
    if unit == "seconds" or (unit is None and method.startswith("time_")):
        return "wall_time"
    return "ratio"


# ------------------------------------------------------------------ comparing


@dataclasses.dataclass(frozen=True)
class Comparison:
    name: str
    env: str
    metric: str
    unit: str | None
    # regression | improvement | unchanged | newly failing | newly skipped | missing on head
    # | still failing | fixed | not compared | ignored
    status: str
    before: Measurement | None
    after: Measurement | None
    threshold: float
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.before or not self.after or self.before.value is None or self.after.value is None:
            return None
        if self.before.skipped or self.after.skipped or self.before.value == 0:
            return None
        return self.after.value / self.before.value


def _stats_usable(m: Measurement) -> bool:
    return bool(m.stats) and m.stats.get("repeat", 0) != 1 and "ci_99_a" in m.stats


P_THRESHOLD = 0.002  # asv's default for `asv compare` and `asv continuous`


def smallest_mann_whitney_p(n_before: int, n_after: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney U test can give for these sizes.

    It is reached when every sample of one side lies beyond every sample of the other.
    """
    return min(1.0, 2 / math.comb(n_before + n_after, n_before)) if n_before and n_after else 1.0


def _significant(before: Measurement, after: Measurement) -> bool:
    """asv's own test: Mann-Whitney U on samples when it can reach p < 0.002, else 99% CI overlap.

    asv runs the U test whenever its *one-sided* minimum p is below the threshold, but
    compares the *two-sided* p: with 6 samples against 6 (benchkit's old quick mode) the
    test cannot go below 2/924 ~ 0.0022 and would call every change noise. Such sample
    sizes go to asv's confidence-interval test instead, which can decide.
    """
    from asv import _stats

    if not (_stats_usable(before) and _stats_usable(after)):
        return True  # one sample each: only the factor can decide, as in asv compare
    a = [x for x in before.samples or () if not math.isnan(x)]
    b = [x for x in after.samples or () if not math.isnan(x)]
    if smallest_mann_whitney_p(len(a), len(b)) >= P_THRESHOLD:
        return bool(_stats.is_different(None, None, before.stats, after.stats))
    return bool(_stats.is_different(a, b, before.stats, after.stats, p_threshold=P_THRESHOLD))


def compare_one(
    name: str,
    env: str,
    unit: str | None,
    before: Measurement | None,
    after: Measurement | None,
    config: CheckConfig,
) -> Comparison:
    metric, threshold, override = config.rule_for(name, default_metric(name, unit))
    make = functools.partial(
        Comparison, name, env, metric, unit, before=before, after=after, threshold=threshold
    )
    if override is not None and override.ignore:
        return make(status="ignored", note=override.reason)
    note = override.reason if override is not None else ""
    if before is not None and before.has_number and after is None:
        return make(status="missing on head", note=_join("no result on head", note))
    if before is None or after is None:
        side = "base" if after is None else "head"
        return make(status="not compared", note=f"only measured on {side}")
    code_changed = bool(before.version and after.version and before.version != after.version)
    changed_note = "benchmark code changed between the two runs"
    # A number lost on head counts even when the benchmark's code changed: that change may be the cause.
    if after.failed:
        if before.failed:
            return make(status="still failing", note=note)
        return make(status="newly failing", note=_join(changed_note if code_changed else "", note))
    if after.skipped and before.has_number:
        return make(status="newly skipped", note=_join(changed_note if code_changed else "", note))
    if code_changed:
        return make(status="not compared", note=changed_note)
    if before.failed:
        if after.has_number:
            return make(status="fixed", note=note)
        return make(status="not compared", note="failed on base, skipped on head")
    if before.skipped or after.skipped:
        side = "both sides" if before.skipped and after.skipped else "base"
        return make(status="not compared", note=f"skipped on {side}")
    assert before.value is not None and after.value is not None
    worse = after.value > before.value * (1 + threshold)
    better = after.value * (1 + threshold) < before.value
    if (worse or better) and metric == "wall_time" and not _significant(before, after):
        return make(status="unchanged", note="within noise (asv statistics)")
    if worse:
        return make(status="regression", note=note)
    if better:
        return make(status="improvement", note=note)
    return make(status="unchanged", note=note)


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def compare(
    base: ResultSet, head: ResultSet, units: Mapping[str, str | None], config: CheckConfig
) -> list[Comparison]:
    keys = sorted(set(base.measurements) | set(head.measurements))
    out = []
    for name, env in keys:
        unit = units.get(name.split("(")[0])
        out.append(
            compare_one(
                name,
                env,
                unit,
                base.measurements.get((name, env)),
                head.measurements.get((name, env)),
                config,
            )
        )
    return out


def _side_summary(measurements: Iterable[Measurement | None]) -> str:
    counts = {"failed": 0, "skipped": 0, "without a result": 0}
    for m in measurements:
        if m is None:
            counts["without a result"] += 1
        elif not m.has_number:
            counts["failed" if m.failed else "skipped"] += 1
    return ", ".join(f"{n} {state}" for state, n in counts.items() if n) or "none"


def unjudged_metrics(comparisons: Sequence[Comparison]) -> list[str]:
    """Why the comparison is incomplete: a metric with numbers on one side only, or on neither.

    Each benchmark's verdict cannot see this: when HEAD ran without valgrind, or a
    failed ``setup_cache`` made asv record every benchmark of its file as failed,
    the metric as a whole is unmeasured, and "no regression" would be a guess.
    Ignored benchmarks do not count.
    """
    problems = []
    for metric in METRICS:
        rows = [c for c in comparisons if c.metric == metric and c.status != "ignored"]
        on_base = sum(1 for c in rows if c.before is not None and c.before.has_number)
        on_head = sum(1 for c in rows if c.after is not None and c.after.has_number)
        if not rows or (on_base and on_head):
            continue
        label = _METRIC_LABELS[metric]
        base_side, head_side = _side_summary(c.before for c in rows), _side_summary(c.after for c in rows)
        if on_base or on_head:
            has, lacks, why = ("base", "head", head_side) if on_base else ("head", "base", base_side)
            problems.append(
                f"{label}: {on_base or on_head} benchmark(s) have numbers on {has}, none on {lacks} ({why})"
            )
        else:
            problems.append(
                f"{label}: no numbers on either side for {len(rows)} benchmark(s) "
                f"(base: {base_side}; head: {head_side})"
            )
    if not problems and not any(c.status in NUMERIC_STATUSES for c in comparisons):
        problems.append("no benchmark has numbers on both sides to compare")
    return problems


# ------------------------------------------------------------------- report

# asv keeps no error text in its result files: point the user at where it is.
WHY_HINT = (
    "asv's result files keep no error text; see the asv run's log or rerun with "
    "`asv run --show-stderr -b REGEX` (a failed setup_cache fails every benchmark of its file)"
)


def count_phrase(n: int, status: str) -> str:
    """How reports count a verdict: '2 regressions', '1 newly failing', '3 missing on head'."""
    plural = n != 1 and status in ("regression", "improvement")
    return f"{n} {status}{'s' if plural else ''}"


def format_value(m: Measurement | None, unit: str | None) -> str:
    from asv import util as asv_util
    from asv_runner.statistics import get_err

    if m is None:
        return "missing"
    if m.failed:
        return "failed"
    if m.skipped:
        return "skipped"
    assert m.value is not None
    if unit == "instructions":
        return f"{m.value:,.0f}"
    err = get_err(m.value, m.stats) if m.stats else None
    return str(asv_util.human_value(m.value, unit, err=err))


def format_threshold(c: Comparison) -> str:
    if c.metric == "wall_time":
        return f"×{1 + c.threshold:.2f} + asv stats"
    return f"{c.threshold * 100:.2g}%"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: Sequence[Comparison], show_env: bool = False) -> list[str]:
    lines = [
        "| Benchmark | Metric | Before | After | Change | Threshold | Note |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        ratio = c.ratio
        change = f"{(ratio - 1) * 100:+.1f}% (×{ratio:.2f})" if ratio is not None else c.status
        cells = [
            f"`{c.name}`" + (f" [{c.env}]" if show_env else ""),
            _METRIC_LABELS[c.metric],
            format_value(c.before, c.unit),
            format_value(c.after, c.unit),
            change,
            format_threshold(c),
            c.note,
        ]
        lines.append("| " + " | ".join(_md_escape(x) for x in cells) + " |")
    return lines


@dataclasses.dataclass(frozen=True)
class Verdict:
    exit_code: int  # 0 clean, 1 regression or a number lost on head, 2 incomplete (see problems)
    markdown: str
    comparisons: tuple[Comparison, ...]
    problems: tuple[str, ...] = ()  # why the comparison is incomplete (`unjudged_metrics`)


def render(
    comparisons: Sequence[Comparison],
    base_label: str,
    head_label: str,
    machine: str,
    config: CheckConfig,
    show_unchanged: bool = False,
) -> Verdict:
    by_status: dict[str, list[Comparison]] = {}
    for c in comparisons:
        by_status.setdefault(c.status, []).append(c)

    def rows(*statuses: str) -> list[Comparison]:
        return [c for s in statuses for c in by_status.get(s, [])]

    problems = unjudged_metrics(comparisons)
    regressions = sorted(rows("regression"), key=lambda c: -(c.ratio or 0))
    lost = rows(*LOST_ON_HEAD)
    exit_code = 2 if problems else 1 if (regressions or lost) else 0
    verdict = ("✅ no regression", "❌ fails", "⚠️ could not compare everything")[exit_code]
    envs = sorted({c.env for c in comparisons})
    where = f"machine `{machine}`" + (f", environment `{envs[0]}`" if len(envs) == 1 else "")
    # The gate's own classes always show, even at 0; the others when present.
    counts = [f"**{count_phrase(len(regressions), 'regression')}**"]
    counts += [count_phrase(len(rows(s)), s) for s in LOST_ON_HEAD]
    shown = ("improvement", "fixed", "still failing", "unchanged", "not compared", "ignored")
    counts += [count_phrase(len(rows(s)), s) for s in shown if rows(s) or s == "unchanged"]
    lines = [
        f"### benchkit check: {base_label} → {head_label}",
        "",
        f"{verdict} on {where}: {', '.join(counts)}. Thresholds: {config.source}.",
    ]
    if problems:
        lines += ["", "#### Could not compare", "", *(f"- {_md_escape(p)}" for p in problems)]
        lines += ["", WHY_HINT + "."]
    sections = [
        ("Regressions", regressions),
        ("Measured on base, no number on head", lost),
        ("Still failing", rows("still failing")),
        ("Improvements", sorted(rows("improvement", "fixed"), key=lambda c: c.ratio or 0)),
        ("Not compared", rows("not compared", "ignored")),
    ]
    if show_unchanged:
        sections.append(("Unchanged", rows("unchanged")))
    for title, section in sections:
        if section:
            lines += ["", f"#### {title}", "", *_table(section, show_env=len(envs) > 1)]
    return Verdict(exit_code, "\n".join(lines) + "\n", tuple(comparisons), tuple(problems))


# ------------------------------------------------------------------ the gate


def find_check_config(conf_dir: Path) -> Path | None:
    return next((conf_dir / n for n in DEFAULT_CONFIG_NAMES if (conf_dir / n).is_file()), None)


def run_check(
    base: str,
    head: str,
    asv_config: Path = Path("asv.conf.json"),
    config_path: Path | None = None,
    machine: str | None = None,
    env: str | None = None,
    factor: float | None = None,
    show_unchanged: bool = False,
) -> Verdict:
    """Compare two commits' results.

    Raises `UserError` when there is nothing to read (no results, an unknown
    commit or machine, a bad config); an incomplete comparison is a verdict
    with exit code 2 and its `problems`, so the table still shows what there is.
    """
    conf = load_asv_config(asv_config)
    config_path = config_path or find_check_config(asv_config.resolve().parent)
    config = load_check_config(config_path) if config_path else parse_check_config({}, "built-in defaults")
    config = config.with_wall_factor(factor)
    if not os.path.isdir(conf.results_dir):
        raise UserError(f"no asv results in {conf.results_dir}: run asv first (`asv run`, `benchkit main`)")
    machines = result_machines(conf.results_dir)
    if machine is None:
        if len(machines) != 1:
            listed = ", ".join(machines) or "none"
            raise UserError(
                f"results of several machines ({listed}) in {conf.results_dir}: choose one with --machine"
            )
        machine = machines[0]
    elif machine not in machines:
        raise UserError(f"no results for machine {machine!r} (have: {', '.join(machines) or 'none'})")
    sets = []
    for label in (base, head):
        commit = resolve_commit(conf, label, machine)
        result_set = load_result_set(conf, commit, machine, env)
        if not result_set.measurements:
            where = f" in environment {env}" if env else ""
            raise UserError(
                f"no results for {label} (commit {commit[:8]}) on machine {machine}{where}: run it first"
            )
        sets.append(result_set)
    comparisons = compare(sets[0], sets[1], _units(conf), config)
    labels = [f"`{label}` ({s.commit[:8]})" for label, s in zip((base, head), sets, strict=True)]
    return render(comparisons, labels[0], labels[1], machine, config, show_unchanged)


def _cmd_check(args: argparse.Namespace) -> int:
    verdict = run_check(
        args.base,
        args.head,
        asv_config=args.asv_config,
        config_path=args.config,
        machine=args.machine,
        env=args.env,
        factor=args.factor,
        show_unchanged=args.show_unchanged,
    )
    sys.stdout.write(verdict.markdown)
    for problem in verdict.problems:
        print(f"benchkit check: could not compare: {problem}", file=sys.stderr)
    if verdict.problems:
        print(f"benchkit check: {WHY_HINT}", file=sys.stderr)
    if args.markdown:
        from benchkit.util import atomic_write_text

        atomic_write_text(args.markdown, verdict.markdown)
    return verdict.exit_code


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "check",
        help="regression gate over asv results of two commits "
        "(exit 0 ok, 1 regression or lost benchmark, 2 cannot compare)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("base", metavar="BASE", help="reference commit: branch, tag or hash (e.g. main)")
    parser.add_argument("head", metavar="HEAD", help="commit under test (e.g. a PR branch)")
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="thresholds and per-benchmark overrides (default: benchkit-check.toml/.json by asv.conf.json)",
    )
    parser.add_argument("--machine", help="asv machine name (needed when results hold several machines)")
    parser.add_argument("--env", help="compare only this asv environment")
    parser.add_argument("--factor", type=float, help="wall-time factor, e.g. 1.10 (overrides the config)")
    parser.add_argument("--markdown", type=Path, help="also write the Markdown report to this file")
    parser.add_argument("--show-unchanged", action="store_true", help="list unchanged benchmarks too")
    parser.set_defaults(func=_cmd_check)
