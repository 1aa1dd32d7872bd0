"""Compile times, one cold compile a side: judged under heavy tails (`COMPILE_SIGMA`), so that a
single input's move beyond the largest that two cold processes of one build showed (x1.35) is not flagged,
a compile twice as slow is, and an input that stayed within a few percent is unchanged."""

from __future__ import annotations

import math
import random
from pathlib import Path

from benchkit.report.gate import check
from benchkit.report.gate.check_status import Status
from benchkit.report.gate.noise import COMPILE_SIGMA, compile_noise
from lab.histories import History, commit_hash

INPUTS = 51  # as the default CPU set
COMPILE = "operators.aten_op{:02d}_default.track_compile_seconds"
CACHE = "operators.aten_op{:02d}_default.track_compile_cache_hit"
TAIL, SLOWER = 0, 1  # the input that moved as far as the lab's largest A/A move; a real regression


def _two_cold_builds(root: Path, common: float) -> History:
    """Two builds compiled cold; head's compile times are base's moved by A/A-like noise (robust
    sigma 0.02, as lab/reports/compile-noise.md measured), all by a common factor `common`, and
    input TAIL by x1.39 (one run of lab/bench_compile_noise.py saw it), input SLOWER by x2.5."""
    project = History(root)
    rng = random.Random(11)
    for k in range(INPUTS):
        project.bench(COMPILE.format(k), "seconds", params=[["'x'"]])
        project.bench(CACHE.format(k), "inductor cache hit (1 warm, 0 cold)", params=[["'x'"]])
        base = 0.3 + 0.6 * rng.random()
        moved = {TAIL: math.log(1.39), SLOWER: math.log(2.5)}.get(k, rng.gauss(0, 0.02))
        for index, seconds in ((0, base), (1, base * common * math.exp(moved))):
            project.add(index, COMPILE.format(k), seconds)
            project.add(index, CACHE.format(k), 0.0)
    project.save()
    return project


def _verdicts(project: History) -> dict[int, Status]:
    verdict = check.run_check(commit_hash(0), commit_hash(1), asv_config=project.config)
    found = {}
    for c in verdict.comparisons:
        for k in range(INPUTS):
            if c.name.startswith(COMPILE.format(k)):
                found[k] = c.status
    assert len(found) == INPUTS
    return found


def test_a_compile_time_is_flagged_only_beyond_a_single_compiles_tails(tmp_path: Path) -> None:
    verdicts = _verdicts(_two_cold_builds(tmp_path, common=1.0))
    assert verdicts[SLOWER] is Status.REGRESSION
    assert verdicts[TAIL] is Status.CANT_TELL  # as far as one build's own inputs moved: no flag
    others = [status for k, status in verdicts.items() if k not in (TAIL, SLOWER)]
    assert Status.REGRESSION not in others and Status.IMPROVEMENT not in others
    # Within the normal core's interval and the ±15 % margin: most of A/A-like inputs.
    assert others.count(Status.UNCHANGED) >= 40, others


def test_a_change_common_to_every_input_is_judged_input_by_input(tmp_path: Path) -> None:
    """A common x1.15 (the machine between the builds' runs, or the build) does not widen the
    pair's spread: no input is unchanged (each moved ~15 %, its interval beyond the margin),
    none but the x2.5 one is flagged."""
    verdicts = _verdicts(_two_cold_builds(tmp_path, common=1.15))
    assert verdicts[SLOWER] is Status.REGRESSION
    others = [status for k, status in verdicts.items() if k != SLOWER]
    assert set(others) == {Status.CANT_TELL}, others


def test_the_interval_is_the_normal_cores_and_flags_need_the_tails() -> None:
    noise = compile_noise(None, None)
    assert noise.sigma == COMPILE_SIGMA and noise.mdc is not None and noise.half_width is not None
    assert 0.098 < noise.half_width < 0.1  # the normal core: 3.29 sigma
    assert 0.4 < noise.mdc < 0.5  # the smallest flag: a t with 3 df at alpha 0.001, x1.47
    assert not noise.detects(math.log(1.39)) and noise.detects(math.log(1.6))
    assert compile_noise(None, 0.05).sigma == 0.05  # a noisier pair widens it, never narrows
    assert "not interleaved" in noise.basis
