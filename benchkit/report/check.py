"""`benchkit check BASE HEAD`: the regression gate over asv results.

`asv continuous` flags changes with one ``--factor`` for every benchmark and
exits 2 as soon as any benchmark failed, so a single flaky case hides every real
regression. This gate reads the same results through asv's own API and judges
each metric by its own noise:

* **instructions** (Callgrind counts) are nearly deterministic: a tight
  relative threshold (default 0.5%) catches small real changes.
* **wall time** (unit seconds) is noisy: a change counts only when asv's
  statistical test says the two sample sets differ *and* it exceeds the
  benchmark's minimum detectable change (MDC) estimated from its own noise
  (`benchkit.report.noise`); a configured factor (``--factor 1.10``) must be
  exceeded as well.
* **ratio** (any other tracked number, e.g. an operator's compiled/eager time
  ratio, lower is better): a relative threshold (default 10%), since each is a
  quotient of two timings without samples.

Every metric is also held to its MDC (docs/verdicts.md): a change beyond the
threshold but within noise is **can't tell**; a change within the threshold is
**unchanged** only when the MDC is below the threshold, else **can't tell**; a
benchmark whose noise cannot be estimated is **insufficient data**. Neither fails
the gate; both are counted. Wall-time changes an environment shift explains are
can't tell with that reason, unless the case's instruction count moved too.
Two verdicts are not given at all (`benchkit.report.not_judged`): the wall times of a base
or head that the history shows disturbed (**disturbed build**: measure again), and compile
times of builds whose inductor cache states differed (**cache state differed**).

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
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.results import (
    Damaged,
    Measurement,
    ResultSet,
    benchmark_units,
    default_metric,
    load_asv_config,
    load_history,
    load_result_set,
    pick_machine,
    resolve_commit,
)
from benchkit.report.check_config import (  # noqa: F401 (METRICS, METRIC_LABELS re-exported)
    DEFAULT_CONFIG_NAMES,
    METRIC_LABELS,
    METRICS,
    CheckConfig,
    load_check_config,
    parse_check_config,
)
from benchkit.report.check_format import (  # noqa: F401 (re-exported for the site)
    WHY_HINT,
    count_phrase,
    format_mdc,
    format_percent,
    format_threshold,
    format_value,
    markdown_table,
    md_escape,
)
from benchkit.report.check_render import (  # noqa: F401 (re-exported)
    FAILS_GATE,
    LOST_ON_HEAD,
    NUMERIC_STATUSES,
    UNCERTAIN,
    Verdict,
    render,
    unjudged_metrics,
)
from benchkit.report.noise import HistoryNoise, Noise, PairNoise, estimate, history_sigmas, pair_noise
from benchkit.report.not_judged import (  # noqa: F401 (NOT_JUDGED re-exported)
    NOT_JUDGED,
    disturbed_sides,
    mark_cache_states,
    mark_disturbed,
    not_judged_reasons,
)
from benchkit.stats import ALPHA, significantly_different  # noqa: F401 (ALPHA re-exported)

# A threshold of 0 in the config means "from the noise": the benchmark's minimum
# detectable change (MDC) at the stated false-positive rate is its threshold. Without a
# noise estimate the gate falls back to a fixed threshold (fail closed); a benchmark whose
# MDC exceeds the ceiling is can't tell rather than unchanged (too noisy to vouch for).
NOISE_FALLBACK_THRESHOLD = 0.10
NOISE_CEILING = 0.10


# ------------------------------------------------------------------ comparing


@dataclasses.dataclass(frozen=True)
class Comparison:
    name: str
    env: str
    metric: str
    unit: str | None
    # regression | improvement | unchanged | can't tell | insufficient data | newly failing
    # | newly skipped | missing on head | still failing | fixed | not compared | ignored
    # | disturbed build | cache state differed (`NOT_JUDGED`)
    status: str
    before: Measurement | None
    after: Measurement | None
    threshold: float
    note: str = ""
    noise: Noise | None = None  # set when both sides had numbers

    @property
    def mdc(self) -> float | None:
        return self.noise.mdc if self.noise else None

    @property
    def ratio(self) -> float | None:
        if not self.before or not self.after or self.before.value is None or self.after.value is None:
            return None
        if self.before.skipped or self.after.skipped or self.before.value == 0:
            return None
        return self.after.value / self.before.value


def compare_one(
    name: str,
    env: str,
    unit: str | None,
    before: Measurement | None,
    after: Measurement | None,
    config: CheckConfig,
    pair: PairNoise | None = None,
) -> Comparison:
    """One benchmark's verdict; `pair` brings history noise and environment shifts."""
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
    noise = None
    if before.value > 0 and after.value > 0:
        noise = estimate(metric, before, after, pair.history.get((name, env)) if pair else None)
    # Threshold 0: the benchmark's own minimum detectable change decides (its noise).
    from_noise = threshold == 0
    if from_noise:
        known = noise is not None and noise.mdc is not None
        threshold = noise.mdc if known else NOISE_FALLBACK_THRESHOLD  # type: ignore[union-attr]
        make = functools.partial(make, threshold=threshold)
    if noise is None:  # no log-ratio: the threshold alone, as before
        worse = after.value > before.value * (1 + threshold)
        better = after.value * (1 + threshold) < before.value
        status = "regression" if worse else "improvement" if better else "unchanged"
        return make(status=status, note=note)
    make = functools.partial(make, noise=noise)
    # The change judged: a rounds test's own estimate, else the ratio of asv's two values.
    log_ratio = noise.change if noise.change is not None else math.log(after.value / before.value)
    worse, better = log_ratio > math.log1p(threshold), log_ratio < -math.log1p(threshold)
    # asv's test treats every sample as independent; the rounds test already compared processes.
    significant = noise.by_rounds or metric != "wall_time" or significantly_different(before, after)
    if noise.sigma is None:
        if not (worse or better):
            return make(status="insufficient data", note=_join(f"noise unknown: {noise.basis}", note))
        if not significant:
            return make(status="can't tell", note=_join("within noise (asv statistics)", note))
        # Fail closed: beyond the threshold and asv's test, as the gate always judged.
        status = "regression" if worse else "improvement"
        note = _join(f"noise unknown: {noise.basis}", note)
        if metric == "wall_time" and pair is not None:
            return _environment_verdict(make, status, log_ratio, threshold, noise, pair, (name, env), note)
        return make(status=status, note=note)
    mdc_text = f"MDC ±{format_percent(noise.mdc)} ({noise.basis})"
    if not (worse or better):
        shifted = _shift_of(pair, (name, env), noise.by_rounds) if metric == "wall_time" else ""
        if shifted:  # "no change" measured on a moving machine says nothing about torch
            return make(status="can't tell", note=_join(f"wall time follows the {shifted}", note))
        if noise.mdc is not None and noise.mdc > (NOISE_CEILING if from_noise else threshold):
            return make(status="can't tell", note=_join(f"noise hides the threshold: {mdc_text}", note))
        real = "below the threshold but beyond noise" if noise.detects(log_ratio) else ""
        return make(status="unchanged", note=_join(real, note))
    if not noise.detects(log_ratio):
        return make(status="can't tell", note=_join(f"change within noise: {mdc_text}", note))
    if not significant:
        return make(status="can't tell", note=_join("within noise (asv statistics)", note))
    status = "regression" if worse else "improvement"
    if metric == "wall_time" and pair is not None:
        return _environment_verdict(make, status, log_ratio, threshold, noise, pair, (name, env), note)
    return make(status=status, note=note)


def _environment_verdict(
    make: functools.partial[Comparison],
    status: str,
    log_ratio: float,
    threshold: float,
    noise: Noise,
    pair: PairNoise,
    key: tuple[str, str],
    note: str,
) -> Comparison:
    """A wall-time change the environment may explain: not torch's, unless its counts moved too."""
    if pair.counts_moved.get(key):
        return make(status=status, note=_join("instruction count moved too", note))
    if pair.between is not None:
        # No "beyond the shift": a busy machine slows benchmarks by different factors
        # (×1.0 to ×2.0 measured), so one common factor does not explain each of them.
        return make(status="can't tell", note=_join(f"explained by the {pair.between.short()}", note))
    drifts = pair.drifts(noise.by_rounds)
    if drifts:
        shifts = "; ".join(s.short() for s in drifts)
        return make(status="can't tell", note=_join(f"wall time unreliable: {shifts}", note))
    return make(status=status, note=note)


def _shift_of(pair: PairNoise | None, key: tuple[str, str], by_rounds: bool = False) -> str:
    """The environment shift that makes this pair's wall time of `key` the machine's, if any.

    For a comparison `by_rounds` only a drift the two runs did not share counts: a shared one
    (asv interleaved both builds' rounds) is in the test's spread."""
    if pair is None or pair.counts_moved.get(key):
        return ""
    shifts = ([pair.between] if pair.between is not None else []) + list(pair.drifts(by_rounds))
    return "; ".join(s.short() for s in shifts)


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def metric_judge(units: Mapping[str, str | None], config: CheckConfig) -> Callable[[str], str]:
    """name -> the metric the gate judges it as (its unit, or an override's metric)."""

    @functools.cache
    def metric_of(name: str) -> str:
        return config.rule_for(name, default_metric(name, units.get(name.split("(")[0])))[0]

    return metric_of


def history_noise(
    history: Sequence[ResultSet], units: Mapping[str, str | None], config: CheckConfig
) -> Mapping[tuple[str, str], HistoryNoise]:
    """Each benchmark's noise from consecutive commits of a history (see `benchkit.report.noise`)."""
    return history_sigmas(history, metric_judge(units, config), config.thresholds["instructions"])


def compare_pair(
    base: ResultSet,
    head: ResultSet,
    units: Mapping[str, str | None],
    config: CheckConfig,
    history: Mapping[tuple[str, str], HistoryNoise] | None = None,
) -> tuple[list[Comparison], PairNoise]:
    """Every benchmark of the pair, judged with its noise and the pair's environment shifts."""
    metric_of = metric_judge(units, config)
    pair = pair_noise(base, head, history or {}, metric_of, config.thresholds["instructions"])
    keys = sorted(set(base.measurements) | set(head.measurements))
    out = []
    for name, env in keys:
        unit = units.get(name.split("(")[0])
        before, after = base.measurements.get((name, env)), head.measurements.get((name, env))
        out.append(compare_one(name, env, unit, before, after, config, pair))
    return mark_cache_states(out, base, head), pair


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
    """Compare two commits' results (only benchmarks whose asv name matches a `bench` regex,
    asv's ``-b`` rule, when given: a selected benchmark lacking a number on HEAD still fails).

    Raises `UserError` when there is nothing to read (no results, an unknown
    commit or machine, a bad config, a damaged results file unless `damaged`
    collects it); an incomplete comparison is a verdict with exit code 2 and its
    `problems`, so the table still shows what there is.
    """
    conf = load_asv_config(asv_config)
    config_path = config_path or find_check_config(asv_config.resolve().parent)
    config = load_check_config(config_path) if config_path else parse_check_config({}, "built-in defaults")
    config = config.with_wall_factor(factor)
    if not os.path.isdir(conf.results_dir):
        raise UserError(f"no asv results in {conf.results_dir}: run asv first (`asv run`, `benchkit main`)")
    machine = pick_machine(conf.results_dir, machine)
    sets, whole = [], []
    history = load_history(conf, machine, env, damaged)
    for label in (base, head):
        commit = resolve_commit(conf, label, machine)
        result_set = load_result_set(conf, commit, machine, env, damaged)
        if not result_set.measurements:
            where = f" in environment {env}" if env else ""
            raise UserError(
                f"no results for {label} (commit {commit[:8]}) on machine {machine}{where}: run it first"
            )
        whole.append(result_set)
        sets.append(selected(result_set, bench))
    if bench and not any(s.measurements for s in sets):
        shown = " ".join(f"-b {b!r}" for b in bench)
        raise UserError(
            f"nothing matched: no result of {base} or {head} on machine {machine} matches {shown}"
        )
    units = benchmark_units(conf, damaged)
    noise = history_noise(history, units, config)
    comparisons, pair = compare_pair(sets[0], sets[1], units, config, noise)
    # Whether a side is a disturbed build is the whole build's property: every benchmark counts.
    metric_of = metric_judge(units, config)
    disturbed = disturbed_sides(history, whole[0], whole[1], metric_of, config.thresholds["instructions"])
    comparisons = mark_disturbed(comparisons, disturbed)
    labels = [f"`{label}` ({s.commit[:8]})" for label, s in zip((base, head), sets, strict=True)]
    shifts = [s.describe() for s in pair.shifts]
    reasons = not_judged_reasons(comparisons, disturbed)
    return render(comparisons, labels[0], labels[1], machine, config, show_unchanged, shifts, reasons)
