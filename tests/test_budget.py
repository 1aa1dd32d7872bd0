"""The comparison's error budget (Benjamini-Hochberg over every tested figure) and operator
timings judged by their replicates: simulated iid noise, a second check beside the real twin
pairs of the main job."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.report.gate import budget, check
from benchkit.report.gate.check_status import Status

ENV = "virtualenv-py3.11"
METHODS = ("track_eager_seconds", "track_compiled_seconds", "track_compiled_over_eager")
UNITS = {
    f"operators.op{k:03d}.{m}": ("seconds" if "seconds" in m else "ratio")
    for k in range(100)
    for m in METHODS
}
CONFIG = check.parse_check_config({}, "built-in defaults")


def _figures(rng: random.Random, spread: float, replicates: int, slower: dict[str, float]) -> ResultSet:
    """100 operator inputs x 3 timings, each `replicates` samples of lognormal noise `spread`;
    the figures in `slower` multiplied by their factor."""
    measurements = {}
    for key in UNITS:
        name = f"{key}('8x16 f32')"
        samples = [slower.get(name, 1.0) * math.exp(rng.gauss(0, spread)) for _ in range(replicates)]
        measurements[(name, ENV)] = Measurement(statistics.median(samples), None, samples, "v1", per_round=1)
    return ResultSet("0" * 40, "box", measurements)


def _flags(comparisons: list) -> list:
    return [c for c in comparisons if c.status in budget.FLAGS]


def test_benjamini_hochberg_cutoff() -> None:
    assert budget.bh_cutoff([0.001, 0.2, 0.9], q=0.01) == pytest.approx(0.01 / 3)
    assert budget.bh_cutoff([0.001, 0.006, 0.9], q=0.01) == pytest.approx(2 * 0.01 / 3)
    assert budget.bh_cutoff([0.5, 0.6], q=0.01) == pytest.approx(0.005)  # none rejected: q / m
    assert budget.bh_cutoff([], q=0.01) == 0.01


def test_an_operator_timing_is_judged_by_its_replicates() -> None:
    rng = random.Random(5)
    name = f"operators.op000.{METHODS[0]}('8x16 f32')"
    base, head = _figures(rng, 0.02, 6, {}), _figures(rng, 0.02, 6, {name: 1.15})
    comparisons, _ = check.compare_pair(base, head, UNITS, CONFIG)
    found = next(c for c in comparisons if c.name == name)
    assert found.status == Status.REGRESSION
    assert found.noise is not None and found.noise.basis.startswith("replicates: 6+6 timing processes")
    assert found.noise.df is not None and found.noise.change == pytest.approx(math.log(1.15), abs=0.03)
    assert "Benjamini-Hochberg over 300 tested figures" in budget.family_budget(comparisons).describe()


def test_identical_builds_fail_the_gate_anywhere_at_most_about_once_in_a_hundred() -> None:
    """300 figures of two identical builds, 100 times: each figure's own test (α 0.001) would
    flag something in about a quarter of the pairs; the budget in about 1 %."""
    rng = random.Random(11)
    trials, with_budget, per_figure = 100, 0, 0
    for _ in range(trials):
        comparisons, _ = check.compare_pair(
            _figures(rng, 0.02, 6, {}), _figures(rng, 0.02, 6, {}), UNITS, CONFIG
        )
        with_budget += bool(_flags(comparisons))
        per_figure += any(c.noise is not None and c.noise.detects(c.noise.change or 0) for c in comparisons)
    assert per_figure >= 10  # without the budget this pair would often fail: the test can fail
    assert with_budget <= 4  # 1 % of 100 is 1; 5 or more has a chance of 0.3 % at a 1 % rate


def test_the_budget_keeps_a_clear_change_among_hundreds_of_unchanged_figures() -> None:
    rng = random.Random(12)
    found = 0
    for trial in range(30):
        name = f"operators.op{trial:03d}.{METHODS[trial % 3]}('8x16 f32')"
        base, head = _figures(rng, 0.02, 6, {}), _figures(rng, 0.02, 6, {name: 1.15})
        comparisons, _ = check.compare_pair(base, head, UNITS, CONFIG)
        flagged = _flags(comparisons)
        assert all(c.name == name for c in flagged)
        found += any(c.name == name for c in flagged)
    assert found >= 29  # x1.15 at 2 % noise: 6 replicates a side see it at p << 0.01 / 300


def test_a_flag_within_its_own_test_but_beyond_the_budget_is_cant_tell() -> None:
    """A change that clears the figure's α = 0.001 but not the budget's p ≤ q/m is can't tell,
    and the note gives both numbers."""
    rng = random.Random(13)
    for _ in range(200):
        comparisons, _ = check.compare_pair(
            _figures(rng, 0.02, 6, {}), _figures(rng, 0.02, 6, {}), UNITS, CONFIG
        )
        demoted = [c for c in comparisons if "error budget" in c.note]
        if demoted:
            break
    else:
        pytest.fail("no figure of 200 identical pairs passed its own test: the simulation is too quiet")
    assert all(c.status == Status.CANT_TELL for c in demoted)
    assert "over 300 figures" in demoted[0].note


def test_the_json_row_holds_the_judged_change_its_interval_alpha_and_p() -> None:
    from benchkit.report.gate.check_json import verdict_json

    rng = random.Random(14)
    name = f"operators.op001.{METHODS[2]}('8x16 f32')"
    comparisons, _ = check.compare_pair(
        _figures(rng, 0.02, 6, {}), _figures(rng, 0.02, 6, {name: 1.2}), UNITS, CONFIG
    )
    verdict = check.render(comparisons, "base", "head", "box", CONFIG)
    [row] = [r for r in verdict_json(verdict, "base", "head")["comparisons"] if r["name"] == name]
    low, high = row["interval"]
    assert row["verdict"] == "regression" and low < row["change"] < high and low > 1.0
    assert row["change"] == pytest.approx(1.2, rel=0.05) and row["alpha"] == 0.001 and row["p"] < 1e-5
    assert "identical builds fail anywhere at most 1 time in 100" in verdict.markdown


def test_compile_times_left_unjudged_do_not_loosen_the_budget() -> None:
    """The head compiled warm, the base cold: its 100 compile times fell ~20-fold (tiny p), but
    they are not judged (cache state differed), so they are no discoveries either: the other
    figures keep the cutoff they would have without them."""
    rng = random.Random(15)
    base, head = _figures(rng, 0.02, 6, {}), _figures(rng, 0.02, 6, {})
    units = dict(UNITS)
    for k in range(100):
        compile_s = f"operators.op{k:03d}.track_compile_seconds"
        record = f"operators.op{k:03d}.track_compile_cache_hit"
        units |= {compile_s: "seconds", record: "inductor cache hit (1 warm, 0 cold)"}
        for side, seconds, hit in ((base, 2.0, 0.0), (head, 0.1, 1.0)):
            side.measurements[(f"{compile_s}('8x16 f32')", ENV)] = Measurement(seconds, None, None, "v1")
            side.measurements[(f"{record}('8x16 f32')", ENV)] = Measurement(hit, None, None, "v1")
    with_compiles, _ = check.compare_pair(base, head, units, CONFIG)
    assert sum(c.status == Status.CACHE_DIFFERED for c in with_compiles) == 100
    without, _ = check.compare_pair(_only(base, UNITS), _only(head, UNITS), UNITS, CONFIG)
    assert budget.family_budget(with_compiles) == budget.family_budget(without)
    assert "over 300 tested figures" in budget.family_budget(with_compiles).describe()


def _only(results: ResultSet, units: dict[str, str]) -> ResultSet:
    kept = {key: m for key, m in results.measurements.items() if key[0].split("(")[0] in units}
    return ResultSet(results.commit, results.machine, kept)
