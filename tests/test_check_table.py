"""The gate's decision table (docs/verdicts.md), row by row through the gate itself.

The rows are read from the document, so the table and the test cannot drift: a row whose
words this module does not know to build fails, as does a status the table never shows.
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.report.gate import check, kernel_marks, not_judged
from benchkit.report.gate.check_config import parse_check_config
from benchkit.report.gate.check_status import Status, exit_effect
from benchkit.report.gate.check_types import Comparison
from benchkit.report.gate.excursions import DisturbedBuild
from benchkit.report.gate.noise import HistoryNoise
from benchkit.report.gate.shifts import EnvShift, PairNoise

DOC = Path(__file__).resolve().parent.parent / "docs" / "verdicts.md"
BEGIN = "<!-- decision table:"
END = "<!-- end of the decision table -->"
ENV = "virtualenv-py3.11"
BASE, HEAD = "a" * 40, "b" * 40
COMPILE = "operators.aten_add_Tensor.track_compile_seconds('x')"
CACHE = "operators.aten_add_Tensor.track_compile_cache_hit('x')"
KERNEL = "operators.aten_add_Tensor.track_kernel_hash('x')"
# metric cell -> (benchmark name, asv unit, a typical value)
BENCHMARKS = {
    "instructions": ("cases.Linear.track_instructions", "instructions", 1e6),
    "wall time": ("cases.Linear.time_wall", "seconds", 1e-5),
    "ratio": ("operators.aten_add_Tensor.track_compiled_over_eager('x')", "compiled/eager time", 0.5),
    "compile time": (COMPILE, "seconds", 2.0),
    "cache record": (CACHE, "inductor cache hit (1 warm, 0 cold)", 0.0),
    "kernel record": (KERNEL, "generated kernel hash (a record)", float(0x3FA2C1D09B4E)),
}
# noise level -> history sigma per metric (None: no history). The prior of Callgrind counts
# (sigma 1e-4, MDC 0.03 %) is always known; MDC = exp(3.29 sigma) - 1.
SIGMAS = {
    "MDC below the threshold": {"instructions": None, "wall time": 0.01, "ratio": 0.01, "compile time": 0.01},
    "MDC above the threshold": {"instructions": 0.01, "wall time": 0.05, "ratio": 0.05},  # 3.3 %, 18 %
    "unknown": {"wall time": None, "ratio": None},
    "MDC about 9 %": {"wall time": 0.0135, "ratio": 0.0135},  # within the 10 % the first look needs
}
# change -> head / base per metric ("" : any metric)
FACTORS = {
    "slower beyond the threshold and the MDC": {"": 1.5},
    "faster beyond the threshold and the MDC": {"": 1 / 1.5},
    "slower beyond the threshold": {"": 1.5},
    "within the threshold": {"": 1.001},
    "within the threshold, its interval beyond the ±15 % margin": {"": 1.07},  # 7 % + MDC 9 %
    "within the threshold, beyond the MDC": {"instructions": 1.003},  # 0.5 % > 0.3 % > 0.03 %
    "beyond the threshold, within the MDC": {"instructions": 1.02},
    "-": {"": 1.0},
}
SHIFT = EnvShift("between base and head", 1.5, 14, 0, 1e-4)
DRIFT = EnvShift(f"within head {HEAD[:8]} (later rounds against earlier ones)", 1.4, 9, 0, 1e-5)
UNSHARED = EnvShift("within head's run, not shared by base's (head's drift over base's)", 1.4, 9, 0, 1e-5)
ROUND_OFFSETS = (-1.5, -1.0, -0.7, -0.4, -0.2, 0.0, 0.1, 0.3, 0.5, 0.8, 1.1, 1.6)  # z of 12 processes


def table_rows() -> list[dict[str, str]]:
    text = DOC.read_text()
    block = text[text.index(BEGIN) : text.index(END)].splitlines()[1:]
    header, _rule, *lines = block
    keys = [cell.strip() for cell in header.strip("|").split("|")]
    return [dict(zip(keys, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines]


def cases() -> list[Any]:
    """One case per row and metric (`any`: each of instructions, wall time and ratio)."""
    out = []
    for number, row in enumerate(table_rows(), 1):
        metrics = (
            ["instructions", "wall time", "ratio"] if row["metric"] == "any" else row["metric"].split(", ")
        )
        for metric in metrics:
            out.append(pytest.param(metric, row, id=f"{number}-{metric}-{row['status']}"))
    return out


def _rounds(center: float) -> list[float]:
    """12 rounds of 3 samples: processes 1 % apart, samples within one 0.2 % apart."""
    return [
        center * math.exp(0.01 * z + 0.002 * s) for z in ROUND_OFFSETS for s in (-1, 0, 1)
    ]  # fmt: skip


def _side(state: str, value: float, noise: str, version: str = "v1") -> Measurement | None:
    if state == "no result":
        return None
    if state == "failed":
        return Measurement(None, None, None, version)
    if state == "skipped":
        return Measurement(math.nan, None, None, version)
    assert state == "number", state
    if noise.startswith("12+12 rounds"):
        samples = _rounds(value)
        return Measurement(sorted(samples)[len(samples) // 2], None, samples, version, 3)
    if noise.startswith("20+20 replicates"):  # an operator timing: one sample per timing process
        offsets = ROUND_OFFSETS + tuple(-z for z in ROUND_OFFSETS[:8])
        samples = [value * math.exp(0.01 * z) for z in offsets]
        return Measurement(statistics.median(samples), None, samples, version, 1)
    return Measurement(value, None, None, version)


def _pair(metric: str, key: tuple[str, str], noise: str) -> PairNoise:
    level = noise.split(";")[0]
    sigma = SIGMAS.get(level, {}).get(metric)
    history = {key: HistoryNoise(sigma, 10, "history")} if sigma is not None else {}
    between = SHIFT if "environment shift between base and head" in noise else None
    moved = {key: True} if "instruction count moved" in noise else {}
    rounds = (DRIFT,) if "a drift within one build's rounds" in noise else ()
    unshared = UNSHARED if "a drift only head's run had" in noise else None
    return PairNoise(history, between, rounds, moved, unshared, interleaved="measured interleaved" in noise)


def judge(metric: str, row: dict[str, str]) -> Comparison:
    """The row's records, through the gate: `compare_one`, then the cache states, the kernel
    records and a disturbed side, as `benchkit.report.gate.check.run_check` takes them."""
    name, unit, value = BENCHMARKS[metric]
    key = (name, ENV)
    states, _, condition = row["availability (base → head)"].partition(", ")
    base_state, head_state = states.split(" → ") if states != "ignored by an override" else ("number",) * 2
    noise, change = row["noise"], row["change"]
    factors = FACTORS.get(change, {})
    factor = factors.get(metric, factors.get(""))
    if noise == "none: a value ≤ 0":
        before_value, after_value = 0.0, 0.0 if factor is not None and factor < 1.01 else 1.0
    elif change == "cold → warm":
        before_value, after_value = 0.0, 1.0
    elif change == "another kernel":
        before_value, after_value = value, float(0x77AB01C2D3E4)
    else:
        assert factor is not None, f"no {change!r} for {metric}"
        before_value, after_value = value, value * factor
    head_version = "v2" if condition == "code changed" else "v1"
    before = _side(base_state, before_value, noise)
    after = _side(head_state, after_value, noise, head_version)
    overrides = [{"match": re.escape(name), "ignore": True, "reason": "reviewed"}]
    config = parse_check_config({"override": overrides} if states == "ignored by an override" else {}, "t")
    pair = _pair(metric, key, noise)
    [judged] = [check.compare_one(name, ENV, unit, before, after, config, pair)]
    # The cache record of a compile time: cold on base, warm on head when the states differ.
    warm = 1.0 if condition == "cache states differ" else 0.0
    cache = {(CACHE, ENV): Measurement(0.0, None, None, "v1")} if metric == "compile time" else {}
    base_set = ResultSet(BASE, "box", {**cache, **({key: before} if before else {})})
    head_cache = {k: Measurement(warm, None, None, "v1") for k in cache}
    head_set = ResultSet(HEAD, "box", {**head_cache, **({key: after} if after else {})})
    [judged] = not_judged.mark_cache_states([judged], base_set, head_set)
    [judged] = kernel_marks.mark_kernels([judged], base_set, head_set)
    disturbed = {"head": DisturbedBuild(HEAD, 12, 1.6, 3, 3)} if condition == "a disturbed side" else {}
    [judged] = not_judged.mark_disturbed([judged], disturbed)
    return judged


@pytest.mark.parametrize(("metric", "row"), cases())
def test_decision_table(metric: str, row: dict[str, str]) -> None:
    judged = judge(metric, row)
    assert judged.status == row["status"], (judged.status.value, judged.note, judged.noise)
    assert exit_effect(judged.status) == row["gate"]


def test_the_table_shows_every_status() -> None:
    shown = {row["status"] for row in table_rows()}
    assert shown == {s.value for s in Status}
