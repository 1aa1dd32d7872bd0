"""lab/bench_replicate_rules.py: other tests of operator replicates, on the real-noise corpus."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from benchkit.stats import pooled_variance, replicate_test, variance_prior
from lab import bench_replicate_rules as rules

CORPUS = sorted((Path(__file__).resolve().parent / "data" / "noise-corpus").glob("*.json.gz"))


def _figures(seed: int, count: int = 20, replicates: int = 6) -> rules.Figures:
    rng = random.Random(seed)
    return [
        ([rng.gauss(0, 0.02) for _ in range(replicates)], [rng.gauss(0, 0.02) for _ in range(replicates)])
        for _ in range(count)
    ]


def test_the_gate_rule_is_the_gates_own_test() -> None:
    figures = _figures(1)
    prior = variance_prior([pooled_variance(a, b) for a, b in figures])
    expected = [replicate_test(a, b, prior).p_value() for a, b in figures]  # type: ignore[union-attr]
    assert rules.gate_rule(figures) == expected


def test_removing_the_weather_keeps_a_build_wide_change() -> None:
    """Each replicate's common move is removed around its mean: a change every figure shares
    stays in every figure, and of a moment that moved every figure alike only its share of the
    mean stays (it is part of the build-wide change), spread evenly over the replicates."""
    figures = _figures(2)
    shift = math.log(1.05)
    slower = [(a, [v + shift for v in b]) for a, b in figures]
    before, after = rules._weather_removed(figures), rules._weather_removed(slower)
    for row, moved in zip(before, after, strict=True):
        assert [y - x for x, y in zip(row, moved, strict=True)] == [pytest.approx(shift, abs=1e-12)] * len(
            row
        )
    # Replicate 0 of head hit a slow moment: every figure's first difference +20 %.
    stormy = [(a, [b[0] + math.log(1.2), *b[1:]]) for a, b in figures]
    share = math.log(1.2) / 6
    assert rules._weather_removed(stormy) == [
        [pytest.approx(v + share, abs=1e-12) for v in row] for row in before
    ]


def test_a_report_of_one_real_pair() -> None:
    report = rules.evaluate(CORPUS[-1:], 0.05)
    gate_row = next(line for line in report.splitlines() if line.startswith("| gate "))
    assert "| 0/1 " in gate_row, gate_row  # a twin pair: the gate's own test flags nothing
    assert "replicates per side" in report
    # Every operator figure was injected: 51 inputs per metric in the whole suite.
    assert "/51 (" in gate_row, gate_row


def test_with_20_replicates_trimming_finds_more_on_real_noise_and_flags_nothing() -> None:
    """A real twin pair with 20 replicates a build (noise-corpus/replicates-20): the gate's
    trimmed test finds more injected ×1.05 changes than the plain t-test in every metric."""
    pair = sorted((CORPUS[0].parent / "replicates-20").glob("*.json.gz"))[-1]
    report = rules.evaluate([pair], 0.05)

    def found(prefix: str) -> list[int]:
        row = next(line for line in report.splitlines() if line.startswith(prefix))
        assert "| 0/1 " in row, row
        return [int(cell.split("/")[0]) for cell in row.split("|")[4:7]]

    trimmed, plain = found("| gate "), found("| plain ")
    assert all(t > p for t, p in zip(trimmed, plain, strict=True)), (trimmed, plain)
