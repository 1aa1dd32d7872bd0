"""Compile times, one cold compile a side: judged under heavy tails (`COMPILE_SIGMA`), so that a
single input's move beyond the largest that two cold processes of one build showed (x1.35) is not flagged,
a compile twice as slow is, and an input that stayed within a few percent is unchanged. With two
compiles a build (`benchkit main`), their spread is the noise, not the pair's real changes."""

from __future__ import annotations

import math
import random
from pathlib import Path

from benchkit.report.gate import check
from benchkit.report.gate.check_status import Status
from benchkit.report.gate.noise import COMPILE_SIGMA, CompileSpread, compile_noise
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


REPO_CONFIG = Path(__file__).resolve().parent.parent / "benchkit-check.toml"  # compile: ±50 %


def _verdicts(project: History, config: Path | None = None) -> dict[int, Status]:
    verdict = check.run_check(commit_hash(0), commit_hash(1), asv_config=project.config, config_path=config)
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
    wider = compile_noise(None, CompileSpread(0.05, "its builds' replicates"))
    assert wider.sigma == 0.05 and "replicates σ 0.05" in wider.basis  # widens it, never narrows
    assert "not interleaved" in noise.basis


def _builds_that_changed_every_kernel(
    root: Path, replicates: bool, drifts: tuple[float, float] = (1.0, 1.0)
) -> tuple[History, dict[int, float]]:
    """Two cold builds whose every input's compile moved for real (a log-normal spread of 0.15,
    as between two torch releases that changed every kernel); with `replicates`, each build
    compiled twice, A/A-like (robust sigma 0.02 between its two compiles), its second compile
    slower by its build's drift (the machine's weather between the two processes)."""
    root.mkdir()
    project = History(root)
    rng = random.Random(5)
    moves = {}
    for k in range(INPUTS):
        project.bench(COMPILE.format(k), "seconds", params=[["'x'"]])
        project.bench(CACHE.format(k), "inductor cache hit (1 warm, 0 cold)", params=[["'x'"]])
        base = 0.3 + 0.6 * rng.random()
        moves[k] = rng.gauss(0, 0.15)
        for index, level in ((0, base), (1, base * math.exp(moves[k]))):
            compiles = [level * math.exp(rng.gauss(0, 0.014)) for _ in range(2 if replicates else 1)]
            compiles[1:] = [c * drifts[index] for c in compiles[1:]]
            samples = compiles if replicates else None
            project.add(index, COMPILE.format(k), sorted(compiles)[len(compiles) // 2], samples)
            project.add(index, CACHE.format(k), 0.0)
    project.save()
    return project, moves


def test_replicates_measure_the_noise_where_every_kernel_changed(tmp_path: Path) -> None:
    """Judged by this project's config (a compile time changes at ±50 %). One compile a side:
    the pair's spread over its inputs is its real changes (0.15), its MDC beyond ±50 %, so no
    input is decided. Two a side: their spread is the noise, and the inputs get verdicts, none
    flagged short of the tails' x1.47."""
    alone, _ = _builds_that_changed_every_kernel(tmp_path / "one", replicates=False)
    assert set(_verdicts(alone, REPO_CONFIG).values()) == {Status.CANT_TELL}
    # Each build's second process in other weather (x1.10 on base, x0.93 on head): a shift of
    # all its compiles, not a spread between inputs.
    paired, moves = _builds_that_changed_every_kernel(tmp_path / "two", replicates=True, drifts=(1.1, 0.93))
    verdicts = _verdicts(paired, REPO_CONFIG)
    # Only a real move whose interval reaches past the ±50 % (beyond x1.2) is left open.
    assert sum(status is Status.UNCHANGED for status in verdicts.values()) >= len(verdicts) - 4, verdicts
    for k, status in verdicts.items():
        if abs(moves[k]) < math.log(1.2):
            assert status is Status.UNCHANGED, (k, moves[k], status)
        assert status not in (Status.REGRESSION, Status.IMPROVEMENT), (k, moves[k], status)
