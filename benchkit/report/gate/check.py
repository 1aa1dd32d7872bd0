"""`benchkit check BASE HEAD`: the regression gate over asv results.

`asv continuous` flags changes with one ``--factor`` for every benchmark and
exits 2 as soon as any benchmark failed, so a single flaky case hides every real
regression. This gate reads the same results through asv's own API and judges
each metric by its own noise:

* **instructions** (Callgrind counts) are nearly deterministic: a tight
  relative threshold (default 0.5%) catches small real changes.
* **wall time** (unit seconds) is noisy: its threshold is by default the
  benchmark's own minimum detectable change (MDC). With at least
  `benchkit.stats.MIN_ROUNDS` asv rounds a side (the suite runs 12), each round is
  one process and Welch's test between the two builds' fast levels (the rounds
  a shared machine's bursts did not slow) gives the change and its MDC; with
  fewer rounds the MDC comes from the history's spread (`benchkit.report.gate.noise`),
  and without one the wall time is insufficient data. A configured factor
  (``--factor 1.10``) replaces the MDC as the threshold, which the MDC must then
  be below.
* **ratio** (any other tracked number, e.g. an operator's compiled/eager time
  ratio, lower is better): one number per build without samples, so by default, as a
  wall time without rounds, its own MDC from the history's spread (for an operator
  figure, the pairs of builds that ran the same generated kernel:
  `benchkit.report.gate.kernels`); without a history, insufficient data within 10% and a
  failure beyond it. A configured threshold (``ratio = 0.10``) replaces the MDC.

Every metric is also held to its MDC (docs/verdicts.md): a change beyond the
threshold but within noise is **can't tell**; a change within the threshold is
**unchanged** only when the MDC is below the threshold, else **can't tell**; a
benchmark whose noise cannot be estimated is **insufficient data** when it moved within
the threshold (beyond it the gate fails closed). Neither fails the gate; both are counted.
Wall-time changes an environment shift explains are can't tell with that reason, unless
the case's instruction count moved too.
Two verdicts are not given at all (`benchkit.report.gate.not_judged`): the wall times of a base
or head that the history shows disturbed (**disturbed build**: measure again), and compile
times of builds whose inductor cache states differed (**cache state differed**).
docs/verdicts.md tabulates every verdict (metric, availability, noise, change -> status),
and `benchkit.report.gate.check_decide` takes those steps.

A reviewed config file (``benchkit-check.toml`` or ``.json``) changes the
defaults and overrides them per benchmark by regular expression, each override
with a reason. Output is a Markdown table for a PR comment.

The gate fails closed: a benchmark with a number on BASE and none on HEAD
(missing, skipped or failed there) fails it like a regression, and a metric
that cannot be judged at all -- numbers on one side only, or on neither (no
valgrind, a failed ``setup_cache``) -- is never read as "no regression".
Exit status: 0 clean, 1 regression or a benchmark lost on HEAD, 2 could not
compare or not judged (the reasons are printed on stderr).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.history.results.read import (
    Damaged,
    LoadedResults,
    Measurement,
    ResultSet,
    load_asv_config,
    pick_machine,
    read_results,
    resolve_commit,
)
from benchkit.names import BenchmarkName, MetricKind, benchmark_key
from benchkit.report.gate import pair_record
from benchkit.report.gate.budget import apply_budget
from benchkit.report.gate.check_config import (  # noqa: F401 (METRICS, METRIC_LABELS re-exported)
    DEFAULT_CONFIG_NAMES,
    METRIC_LABELS,
    METRICS,
    CheckConfig,
    load_check_config,
    parse_check_config,
)
from benchkit.report.gate.check_decide import (  # noqa: F401 (the constants re-exported)
    NOISE_FALLBACK_THRESHOLD,
    availability,
    decide,
    join,
    noise_of,
    threshold_of,
)
from benchkit.report.gate.check_format import (  # noqa: F401 (re-exported for the site)
    WHY_HINT,
    count_phrase,
    format_mdc,
    format_percent,
    format_threshold,
    format_value,
    markdown_table,
    md_escape,
)
from benchkit.report.gate.check_render import render, unjudged_metrics  # noqa: F401 (re-exported)
from benchkit.report.gate.check_status import (  # noqa: F401 (the groups re-exported)
    FAILS_GATE,
    LOST_ON_HEAD,
    NOT_JUDGED,
    NUMERIC_STATUSES,
    UNCERTAIN,
    Status,
)
from benchkit.report.gate.check_types import Comparison, Verdict
from benchkit.report.gate.excursions import DisturbedBuild
from benchkit.report.gate.kernel_marks import mark_kernels
from benchkit.report.gate.noise import HistoryNoise, history_sigmas
from benchkit.report.gate.not_judged import (
    disturbed_sides,
    mark_cache_states,
    mark_compiled_apart,
    mark_disturbed,
    not_judged_reasons,
)
from benchkit.report.gate.process_shift import without_process_shifts
from benchkit.report.gate.shifts import PairNoise, pair_noise
from benchkit.settings_record import records_of, settings_differences
from benchkit.stats import ALPHA  # noqa: F401 (re-exported)

# ------------------------------------------------------------------ comparing


def compare_one(
    name: str,
    env: str,
    unit: str | None,
    before: Measurement | None,
    after: Measurement | None,
    config: CheckConfig,
    pair: PairNoise | None = None,
) -> Comparison:
    """One benchmark's verdict: availability, then noise, then the decision
    (`benchkit.report.gate.check_decide`); `pair` brings history noise and environment shifts."""
    metric, configured, override = config.rule_for(name, BenchmarkName.parse(name).judged_as(unit))
    make = functools.partial(Comparison, name, env, metric, unit, before=before, after=after)
    unavailable = availability(before, after, override)
    if unavailable is not None:
        return make(status=unavailable[0], note=unavailable[1], threshold=configured)
    assert before is not None and after is not None
    noise = noise_of(metric, (name, env), before, after, pair)
    threshold, resolution = threshold_of(configured, noise)
    status, why = decide(metric, (name, env), before, after, threshold, resolution, noise, pair)
    reason = override.reason if override is not None else ""
    return make(status=status, note=join(why, reason), threshold=threshold, noise=noise)


def metric_judge(units: Mapping[str, str | None], config: CheckConfig) -> Callable[[str], MetricKind]:
    """name -> the metric the gate judges it as (its unit, or an override's metric)."""

    @functools.cache
    def metric_of(name: str) -> MetricKind:
        parsed = BenchmarkName.parse(name)
        return config.rule_for(name, parsed.judged_as(units.get(parsed.benchmark)))[0]

    return metric_of


def history_noise(
    history: Sequence[ResultSet], units: Mapping[str, str | None], config: CheckConfig
) -> Mapping[tuple[str, str], HistoryNoise]:
    """Each benchmark's noise from consecutive commits of a history (see `benchkit.report.gate.noise`)."""
    return history_sigmas(history, metric_judge(units, config), config.thresholds["instructions"])


def compare_pair(
    base: ResultSet,
    head: ResultSet,
    units: Mapping[str, str | None],
    config: CheckConfig,
    history: Mapping[tuple[str, str], HistoryNoise] | None = None,
    interleaved: bool = False,
    unjudged: Callable[[list[Comparison]], list[Comparison]] | None = None,
) -> tuple[list[Comparison], PairNoise]:
    """Every benchmark of the pair, judged with its noise and the pair's environment shifts
    (`interleaved`: both builds' wall times came from one interleaved run, `PairNoise`), each
    flag held to the pair's error budget (`benchkit.report.gate.budget`). What the pair leaves
    unjudged is marked before the budget, so that it does not count there: compile times of
    different cache states, and what `unjudged` marks (`benchkit.report.gate.not_judged`)."""
    base, head = without_process_shifts(base), without_process_shifts(head)
    metric_of = metric_judge(units, config)
    count_threshold = config.thresholds["instructions"]
    pair = pair_noise(base, head, history or {}, metric_of, count_threshold, interleaved)
    keys = sorted(set(base.measurements) | set(head.measurements))
    out = []
    for name, env in keys:
        unit = units.get(benchmark_key(name))
        before, after = base.measurements.get((name, env)), head.measurements.get((name, env))
        out.append(compare_one(name, env, unit, before, after, config, pair))
    out = mark_cache_states(out, base, head)
    if unjudged is not None:
        out = unjudged(out)
    return mark_kernels(apply_budget(out), base, head), pair


def compare(
    base: ResultSet,
    head: ResultSet,
    units: Mapping[str, str | None],
    config: CheckConfig,
    history: Mapping[tuple[str, str], HistoryNoise] | None = None,
) -> list[Comparison]:
    return compare_pair(base, head, units, config, history)[0]


# ------------------------------------------------------------------ the gate


def selected(result_set: ResultSet, bench: Sequence[str]) -> ResultSet:
    """`result_set` with only the benchmarks (names with parameters) an asv ``-b`` regex matches."""
    if not bench:
        return result_set
    try:
        regexes = [re.compile(b) for b in bench]
    except re.error as e:
        raise UserError(f"-b {e.pattern!r} is not a valid regular expression: {e}") from None
    kept = {k: m for k, m in result_set.measurements.items() if any(r.search(k[0]) for r in regexes)}
    return dataclasses.replace(result_set, measurements=kept)


def find_check_config(conf_dir: Path) -> Path | None:
    return next((conf_dir / n for n in DEFAULT_CONFIG_NAMES if (conf_dir / n).is_file()), None)


def check_config_for(asv_config: Path, config_path: Path | None = None) -> CheckConfig:
    """The gate's config: `config_path`, else ``benchkit-check.toml``/``.json`` beside the asv
    config, else the built-in defaults."""
    config_path = config_path or find_check_config(asv_config.resolve().parent)
    return load_check_config(config_path) if config_path else parse_check_config({}, "built-in defaults")


def _machine_with_results(conf: Any, machine: str | None) -> str:
    if not os.path.isdir(conf.results_dir):
        raise UserError(f"no asv results in {conf.results_dir}: run asv first (`asv run`, `benchkit main`)")
    return pick_machine(conf.results_dir, machine)


def run_check(
    base: str,
    head: str,
    asv_config: Path = Path("asv.conf.json"),
    config_path: Path | None = None,
    machine: str | None = None,
    env: str | None = None,
    factor: float | None = None,
    show_unchanged: bool = False,
    bench: Sequence[str] = (),
    damaged: Damaged = None,
) -> Verdict:
    """`benchkit check`: compare two commits' results (only benchmarks whose asv name matches a
    `bench` regex, asv's ``-b`` rule, when given: a selected benchmark lacking a number on HEAD
    still fails). Reads asv's config and the machine's results once, then `judge_results`.

    Raises `UserError` when there is nothing to read (no results, an unknown
    commit or machine, a bad config, a damaged results file unless `damaged`
    collects it); an incomplete comparison is a verdict with exit code 2 and its
    `problems`, so the table still shows what there is.
    """
    conf = load_asv_config(asv_config)
    config = check_config_for(asv_config, config_path).with_wall_factor(factor)
    machine = _machine_with_results(conf, machine)
    loaded = read_results(conf, damaged, (machine,))
    return judge_results(base, head, loaded, config, machine, env, show_unchanged, bench)


def judge_results(
    base: str,
    head: str,
    loaded: LoadedResults,
    config: CheckConfig,
    machine: str | None = None,
    env: str | None = None,
    show_unchanged: bool = False,
    bench: Sequence[str] = (),
) -> Verdict:
    """`run_check` over results already read, as the main job has them (asv's config is
    `loaded.conf`): raises and returns as `run_check` does. A pair the main job judged is judged
    as it was (`judge_pair`, its `pair_record`)."""
    conf = loaded.conf
    machine = _machine_with_results(conf, machine)
    whole = []
    for label in (base, head):
        commit = resolve_commit(conf, label, machine)
        result_set = loaded.result_set(commit, machine, env)
        if not result_set.measurements:
            where = f" in environment {env}" if env else ""
            raise UserError(
                f"no results for {label} (commit {commit[:8]}) on machine {machine}{where}: run it first"
            )
        whole.append(result_set)
    if bench and not any(selected(s, bench).measurements for s in whole):
        shown = " ".join(f"-b {b!r}" for b in bench)
        raise UserError(
            f"nothing matched: no result of {base} or {head} on machine {machine} matches {shown}"
        )
    units = loaded.units
    history = loaded.history(machine, env)
    full = [loaded.full_commit(machine, s.commit) or s.commit for s in whole]
    record = pair_record.read_pair_record(Path(conf.results_dir), machine, *full)
    judged = judge_pair(
        whole[0], whole[1], history, units, config, history_noise(history, units, config), bench, record, base
    )
    labels = [f"`{label}` ({s.commit[:8]})" for label, s in zip((base, head), whole, strict=True)]
    shifts = [s.describe() for s in judged.noise.shifts]
    build_wide = [judged.noise.build_wide.describe_build_wide()] if judged.noise.build_wide else []
    reasons = not_judged_reasons(judged.comparisons, judged.disturbed)
    # What the two runs were told (recorded beside asv's results): rounds, inductor cache state...
    records = [records_of(Path(conf.results_dir), machine, s.commit) for s in whole]
    differed = settings_differences(records[0], records[1], (base, head)) + list(judged.notes)
    return render(
        judged.comparisons, labels[0], labels[1], machine, config, show_unchanged, shifts, reasons, differed,
        build_wide,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class PairJudgement:
    comparisons: list[Comparison]
    noise: PairNoise
    disturbed: dict[str, DisturbedBuild]  # side -> why the history shows that build disturbed
    notes: tuple[str, ...]  # how the pair was judged, where it is not the plain way


def judge_pair(
    base: ResultSet,
    head: ResultSet,
    history: Sequence[ResultSet],
    units: Mapping[str, str | None],
    config: CheckConfig,
    noise: Mapping[tuple[str, str], HistoryNoise],
    bench: Sequence[str] = (),
    record: pair_record.PairRecord | None = None,
    base_label: str = "",
    disturbed: dict[str, DisturbedBuild] | None = None,
) -> PairJudgement:
    """The pair's verdicts, as every reader gives them (`benchkit check`, the main job, the site,
    `benchkit export`): `base` and `head` a build's whole results, `history` the machine's; a
    pair the main job judged by its `record`: the rounds it measured interleaved, the compile
    times compared only where it compiled both builds. `disturbed`: the sides the history shows
    disturbed (`not_judged.disturbed_sides`), when the caller knows them already."""
    notes: list[str] = []
    interleaved, apart = False, ""
    if record is not None:
        cut = pair_record.windowed(record, base, head)
        if cut is None:
            notes.append(
                "measured again since the main job judged this pair: judged by all their rounds, "
                "as builds measured apart"
            )
        else:
            base, head = cut
            interleaved = record.interleaved
            if record.base_from_earlier_job:
                label = base_label or base.commit[:8]
                notes.append(
                    f"{label} was measured by an earlier job; its wall times and operator timings are "
                    "judged by the rounds measured again beside the head"
                )
                apart = f"{label} was compiled by an earlier job (a compile time is measured once per build)"
    metric_of = metric_judge(units, config)
    if disturbed is None:
        # Whether a side is a disturbed build is the whole build's property: every benchmark counts.
        disturbed = disturbed_sides(history, base, head, metric_of, config.thresholds["instructions"])

    def unjudged(comparisons: list[Comparison]) -> list[Comparison]:
        if apart:
            comparisons, line = mark_compiled_apart(comparisons, apart)
            notes.append(line)
        return mark_disturbed(comparisons, disturbed)

    comparisons, pair = compare_pair(
        selected(base, bench), selected(head, bench), units, config, noise, interleaved, unjudged
    )
    return PairJudgement(comparisons, pair, disturbed, tuple(n for n in notes if n))
