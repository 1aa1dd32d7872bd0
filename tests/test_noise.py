"""Noise per benchmark, its minimum detectable change, and environment shifts (issue 17)."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest

from benchkit import stats
from benchkit.history.results.read import Measurement, ResultSet
from benchkit.report.gate import check, noise, pair_record
from lab.histories import ENV, MACHINE, History, commit_hash

WALL, COUNTS = "instruction_counts.{}.time_wall", "instruction_counts.{}.track_instructions"


def _samples(center: float, spread: float, n: int, rng: random.Random) -> list[float]:
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def test_stats_constants_and_sign_test() -> None:
    assert stats.z_two_sided(0.001) == pytest.approx(3.2905, abs=1e-3)
    assert stats.minimum_detectable_change(0.01) == pytest.approx(math.expm1(0.032905), rel=1e-3)
    assert stats.sign_test_p(11, 0) == pytest.approx(2 / 2048) and stats.sign_test_p(11, 0) <= 0.001
    assert stats.sign_test_p(10, 0) > 0.001  # 10 cases cannot show a common shift at p <= 0.001
    assert stats.sign_test_p(5, 5) == 1.0


def test_mdc_from_a_synthetic_history_of_known_noise() -> None:
    """Each run draws log(time) ~ N(0, 0.05): A/A log-ratios have sigma 0.05 * sqrt(2)."""
    rng = random.Random(1)
    run_sigma, commits = 0.05, 400
    history = []
    for i in range(commits):
        step = 2.0 if i >= 200 else 1.0  # a real step at commit 200: counts and wall time move
        wall = step * math.exp(rng.gauss(0, run_sigma))
        measurements = {
            (WALL.format("A"), ENV): Measurement(wall, None, None, "v1"),
            (COUNTS.format("A"), ENV): Measurement(1e6 * step, None, None, "v1"),
        }
        history.append(ResultSet(f"{i:040x}", "box", measurements))
    metric_of = {WALL.format("A"): "wall_time", COUNTS.format("A"): "instructions"}.__getitem__
    sigmas = noise.history_sigmas(history, metric_of, 0.005)
    found = sigmas[(WALL.format("A"), ENV)]
    sigma, pairs, source = found.sigma, found.pairs, found.source
    assert source == "history"
    assert pairs == commits - 2  # the pair across the step is not an A/A pair: its counts moved
    assert sigma == pytest.approx(run_sigma * math.sqrt(2), rel=0.15)
    assert sigmas[(COUNTS.format("A"), ENV)].sigma == 0.0  # counts: every pair but the step is equal
    estimate = noise.Noise(sigma, "history")
    assert estimate.mdc == pytest.approx(math.expm1(3.2905 * run_sigma * math.sqrt(2)), rel=0.2)
    # What the MDC promises: A/A pairs pass at about alpha, a change of twice the MDC is seen.
    fresh = [rng.gauss(0, run_sigma) - rng.gauss(0, run_sigma) for _ in range(20_000)]
    false_positives = sum(estimate.detects(d) for d in fresh) / len(fresh)
    assert false_positives < 0.005
    assert estimate.mdc is not None
    shift = math.log1p(2 * estimate.mdc)
    assert sum(estimate.detects(d + shift) for d in fresh) / len(fresh) > 0.95


def test_noise_decides_between_regression_and_cant_tell(tmp_path: Path) -> None:
    """The same ×1.3 on two benchmarks: quiet history -> regression, noisy history -> can't tell."""
    rng = random.Random(7)
    project = History(tmp_path)
    for case, sigma in (("Quiet", 0.01), ("Noisy", 0.15)):
        project.bench(WALL.format(case), "seconds")
        for i in range(10):
            project.add(i, WALL.format(case), 1e-5 * math.exp(rng.gauss(0, sigma)))
        project.add(10, WALL.format(case), 1e-5)
        project.add(11, WALL.format(case), 1.3e-5)
    project.bench(WALL.format("Short"), "seconds")  # only on base and head, 3 samples each
    for i, center in ((10, 1e-5), (11, 1.02e-5)):
        samples = _samples(center, 0.01, 3, rng)
        project.add(i, WALL.format("Short"), _median(samples), samples)
    project.save()
    verdict = check.run_check(commit_hash(10)[:8], commit_hash(11)[:8], asv_config=project.config)
    by_name = {c.name: c for c in verdict.comparisons}
    quiet, noisy, short = (by_name[WALL.format(c)] for c in ("Quiet", "Noisy", "Short"))
    assert quiet.status == "regression" and quiet.mdc is not None and quiet.mdc < 0.1
    assert noisy.status == "can't tell" and noisy.mdc is not None and noisy.mdc > 0.3
    assert "MDC ±" in noisy.note and "history: 11 pairs" in noisy.note
    # No history of its own (one pair): the machine's, pooled over every wall time's 23 pairs.
    assert short.noise is not None and short.noise.basis.startswith("machine's wall-time history: 23 pairs")
    assert verdict.exit_code == 1
    md = verdict.markdown
    assert "| Threshold | MDC | Note |" in md
    assert "**1 regression**," in md and "1 unchanged, 1 can't tell, 0 insufficient data" in md
    noisy_row = next(line for line in md.splitlines() if "`" + WALL.format("Noisy") in line)
    assert f"| ±{check.format_percent(noisy.mdc)} |" in noisy_row
    assert "#### Can't tell" in md


ROUNDS, PER_ROUND = 8, 3  # asv rounds a build (at least MIN_ROUNDS: the rounds test) and samples in each


def _shift_project(
    tmp_path: Path,
    head_wall: float,
    head_late: float = 1.0,
    rounds: int = ROUNDS,
    steady: int = 0,
) -> History:
    """15 cases, base commit 0 and head commit 1; case00's instruction count rises 5% on head;
    head's later half of the rounds runs `head_late` times its earlier half; the last `steady`
    cases keep their wall time whatever the others do."""
    rng = random.Random(3)
    project = History(tmp_path)
    for k in range(15):
        case = f"C{k:02d}"
        project.bench(WALL.format(case), "seconds", repeat=PER_ROUND)
        project.bench(COUNTS.format(case), "instructions")
        for i in (0, 1):
            moved = i == 1 and k == 0
            project.add(i, COUNTS.format(case), 1e6 * (1.05 if moved else 1.0))
            center = 1e-5 * (head_wall if i == 1 and k < 15 - steady else 1.0)
            late = head_late if i == 1 else 1.0
            factors = [1.0 if r < rounds // 2 else late for r in range(rounds)]
            samples = [x for f in factors for x in _samples(center * f, 0.01, PER_ROUND, rng)]
            project.add(i, WALL.format(case), _median(samples), samples)
    project.save()
    return project


def test_a_common_wall_time_shift_is_the_environment_not_torch(tmp_path: Path) -> None:
    project = _shift_project(tmp_path, head_wall=1.5)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    by_name = {c.name: c for c in verdict.comparisons}
    moved_wall, moved_counts = by_name[WALL.format("C00")], by_name[COUNTS.format("C00")]
    assert (moved_counts.status, moved_wall.status) == ("regression", "regression")
    assert "instruction count moved too" in moved_wall.note
    others = [by_name[WALL.format(f"C{k:02d}")] for k in range(1, 15)]
    assert {c.status for c in others} == {"can't tell"}
    assert all("explained by the environment shift of ×1.50 between base and head" in c.note for c in others)
    assert verdict.exit_code == 1  # only the case whose counts moved fails
    [shift] = verdict.shifts
    assert shift.startswith("environment shift of ×1.50 between base and head: 14 of 14 wall times")
    assert "#### Environment" in verdict.markdown
    regressions = verdict.markdown.split("#### Regressions")[1].split("####")[0]
    assert WALL.format("C00") in regressions and WALL.format("C01") not in regressions


def test_a_common_shift_of_builds_measured_interleaved_is_the_builds_and_is_judged(tmp_path: Path) -> None:
    """The same results as above, but the caller measured both builds interleaved (the main
    job): the machine cannot have moved between them, so the shift is reported once as the
    build's, with its interval, and every wall time is judged by its own test."""
    project = _shift_project(tmp_path, head_wall=1.5)
    conf = check.load_asv_config(project.config)
    loaded = check.read_results(conf)
    record = pair_record.pair_record_of(loaded, MACHINE, commit_hash(0), commit_hash(1), {}, False)
    pair_record.write_pair_record(Path(conf.results_dir), record)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    others = [c for c in verdict.comparisons if c.name in {WALL.format(f"C{k:02d}") for k in range(1, 15)}]
    assert {c.status for c in others} == {"regression"}
    assert not any("explained by" in c.note for c in others)
    assert verdict.shifts == () and "#### Environment" not in verdict.markdown
    build_wide = verdict.markdown.split("#### Build-wide change")[1].split("####")[0]
    assert "build-wide change of ×1.499 (99.9 % interval ×1.495 to ×1.503)" in build_wide
    assert "(p < 1e-300)" in build_wide
    assert "14 of 14 wall times whose instruction count did not move were slower" in build_wide


def test_a_steady_wall_time_under_an_environment_shift_is_not_unchanged(tmp_path: Path) -> None:
    """13 of 15 cases ×1.5 slower, C14 the same as before: on a machine that moved, "no change"
    is as much the machine's as a change is."""
    project = _shift_project(tmp_path, head_wall=1.5, steady=1)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    steady = next(c for c in verdict.comparisons if c.name == WALL.format("C14"))
    assert verdict.shifts and steady.ratio is not None and abs(steady.ratio - 1) < 0.05
    assert steady.status == "can't tell" and "wall time follows the environment shift" in steady.note


def test_an_environment_shift_also_clears_benchmarks_of_unknown_noise(tmp_path: Path) -> None:
    """2 rounds a build: too few for a noise estimate; the shift still explains the wall times."""
    project = _shift_project(tmp_path, head_wall=1.5, rounds=2)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    by_name = {c.name: c for c in verdict.comparisons}
    moved = by_name[WALL.format("C00")]
    assert moved.status == "regression" and moved.mdc is None
    assert "noise unknown" in moved.note and "instruction count moved too" in moved.note
    others = [by_name[WALL.format(f"C{k:02d}")] for k in range(1, 15)]
    assert {c.status for c in others} == {"can't tell"}
    assert all("explained by the environment shift of ×1.5" in c.note for c in others)


def test_without_a_common_shift_the_same_slowdown_is_a_regression(tmp_path: Path) -> None:
    """The control: one case slower, the rest unchanged -> no environment shift, a regression."""
    project = _shift_project(tmp_path, head_wall=1.0)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    assert verdict.shifts == ()
    statuses = {c.name: c.status for c in verdict.comparisons}
    assert statuses[WALL.format("C05")] == "unchanged" and statuses[COUNTS.format("C00")] == "regression"


def _disturbed_project(tmp_path: Path, head_spread: float) -> History:
    """13 cases, identical counts; head's samples `head_spread` times as spread as base's, and
    each case's head level moved by its own factor (×0.8 to ×2), as on a busy machine."""
    rng = random.Random(5)
    project = History(tmp_path)
    for k in range(13):
        case = f"D{k:02d}"
        project.bench(WALL.format(case), "seconds", repeat=PER_ROUND)
        project.bench(COUNTS.format(case), "instructions")
        level = (0.8, 1.0, 1.3, 1.6, 2.0)[k % 5] if head_spread > 1 else 1.0
        for i, (center, spread) in enumerate(((1e-5, 0.01), (1e-5 * level, 0.01 * head_spread))):
            project.add(i, COUNTS.format(case), 1e6)
            samples = _samples(center, spread, ROUNDS * PER_ROUND, rng)
            project.add(i, WALL.format(case), _median(samples), samples)
    project.save()
    return project


def test_a_disturbed_machine_is_reported_and_not_blamed_on_torch(tmp_path: Path) -> None:
    """Levels scattered both ways (no common shift), samples ×6 more spread: the machine."""
    project = _disturbed_project(tmp_path, head_spread=6.0)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    shifts = verdict.shifts
    assert any(s.startswith("disturbed machine on head: wall-time samples ×") for s in shifts), shifts
    walls = [c for c in verdict.comparisons if c.metric == "wall_time"]
    assert {c.status for c in walls} == {"can't tell"} and verdict.exit_code == 0


def test_an_undisturbed_pair_is_not_called_disturbed(tmp_path: Path) -> None:
    project = _disturbed_project(tmp_path, head_spread=1.0)
    verdict = check.run_check(commit_hash(0)[:8], commit_hash(1)[:8], asv_config=project.config)
    assert not any(s.startswith("disturbed") for s in verdict.shifts)


def test_rounds_that_disagree_mark_the_build_as_environment_shifted(tmp_path: Path) -> None:
    """Head's later rounds ran 40 % slower than its earlier ones for every case: its wall
    time is unreliable."""
    project = _shift_project(tmp_path, head_wall=1.0, head_late=1.4)
    base, head = commit_hash(0)[:8], commit_hash(1)[:8]
    verdict = check.run_check(base, head, asv_config=project.config)
    where = f"within head {head} (later rounds against earlier ones)"
    assert any(s.startswith(f"environment shift of ×1.40 {where}") for s in verdict.shifts), verdict.shifts
    walls = [c for c in verdict.comparisons if c.metric == "wall_time"]
    assert "regression" not in {c.status for c in walls} and "can't tell" in {c.status for c in walls}
    assert not any(c.status == "unchanged" and c.ratio and c.ratio > 1.1 for c in walls)
    # Not even "unchanged": every wall time of a case whose count held is the machine's here.
    held = [c for c in walls if "C00" not in c.name]
    assert {c.status for c in held} == {"can't tell"}
    # The base build's rounds agree: no shift is reported for it.
    assert not any(f"within base {base}" in s for s in verdict.shifts)


def test_changes_page_shows_mdc_cant_tell_and_the_environment_shift(tmp_path: Path) -> None:
    """The site judges a pair as the gate does and shows what noise hid, escaped."""
    from benchkit.history.results.read import load_asv_config, load_result_set
    from benchkit.report.gate import check_config
    from benchkit.report.site import data as site_data
    from benchkit.report.site import pages

    project = _shift_project(tmp_path, head_wall=1.5)
    conf = load_asv_config(project.config)
    base, head = (load_result_set(conf, commit_hash(i), "box") for i in (0, 1))
    config = check_config.parse_check_config({}, "<defaults & co>")
    units = {name: b["unit"] for name, b in project.benchmarks.items()}
    comparisons, found = check.compare_pair(base, head, units, config)
    builds = {
        r.commit: site_data.Build(r.commit, i, 1_700_000_000, "2.13.0", None)
        for i, r in enumerate((base, head))
    }
    data = site_data.SiteData(conf, ("box",), builds, {("box", r.commit): r for r in (base, head)},
                              {("box", "main"): (base.commit, head.commit)}, {}, config, 1)  # fmt: skip
    [pair] = site_data.pair_changes(data)
    assert found.between is not None and pair.shifts == (found.between.describe(),)
    assert dict(pair.uncertain) == {"can't tell": 14}
    listed = {c.name: c.status for c in pair.changes}
    assert listed == {c.name: c.status for c in comparisons if c.status in ("regression", "can't tell")}
    page = pages.render_changes(data, [pair], {})["changes.html"]
    assert "environment shift of ×1.50 between base and head: 14 of 14 wall times moved slower" in page
    assert page.count('<tr class="can-t-tell"><td>can&#39;t tell</td>') == 14
    assert '<th class="num">MDC</th>' in page and '<td class="num">±' in page
    assert "2 regressions, 14 can&#39;t tell" in page
    assert "&lt;defaults &amp; co&gt;" in page and "<defaults" not in page


def test_replicates_from_trimmed_from_a_side_resist_one_slow_process() -> None:
    """One replicate process in twenty ran an input twice as slow: a plain t-test's variance
    swells and hides a 5 % change; the trimmed test (Yuen's, from `TRIMMED_FROM` a side) finds
    it. Below `TRIMMED_FROM` the test is the plain one: its mean and pooled variance."""
    rng = random.Random(7)
    before = [rng.gauss(0.0, 0.01) for _ in range(20)]
    after = [rng.gauss(math.log(1.05), 0.01) for _ in range(20)]
    after[3] += math.log(2.0)
    test = stats.replicate_test(before, after)
    assert test is not None and (test.n_before, test.fast_before) == (20, 12)  # 4 cut each end
    assert test.change == pytest.approx(math.log(1.05), abs=0.01)
    assert test.p_value() < 1e-6
    plain_se = math.sqrt(statistics.variance(after) / 20 + statistics.variance(before) / 20)
    assert abs(statistics.fmean(after) - statistics.fmean(before)) / plain_se < 2.5
    few = stats.replicate_test(before[:6], after[:6])
    assert few is not None and few.fast_before == 6
    assert few.change == pytest.approx(statistics.fmean(after[:6]) - statistics.fmean(before[:6]))
    variance, df = stats.pooled_variance(before[:6], after[:6])
    assert df == 10
    assert variance == pytest.approx((statistics.variance(before[:6]) + statistics.variance(after[:6])) / 2)


def test_the_table_names_an_operator_figure_by_what_it_measures(tmp_path: Path) -> None:
    """An eager time is judged like a wall time (seconds), but its row says eager seconds."""
    project = History(tmp_path)
    eager = "operators.aten_relu_default.track_eager_seconds('8x8 f32')"
    for name in (eager, WALL.format("A")):
        project.bench(name, "seconds")
        project.add(10, name, 1e-5)
        project.add(11, name, 1e-5)
    project.save()
    verdict = check.run_check(commit_hash(10)[:8], commit_hash(11)[:8], asv_config=project.config)
    lines = [line for line in verdict.markdown.splitlines() if line.startswith("| `")]
    rows = {line.split("`")[1]: line.split(" | ")[1] for line in lines}
    assert rows == {eager: "eager seconds", WALL.format("A"): "wall time"}, verdict.markdown
