"""lab/wall_looks.py: the main job's looks replayed on a pair measured with the cap's rounds."""

from __future__ import annotations

import math
import random

from benchkit.history.results.read import Measurement, ResultSet
from benchkit.report.gate.rounds_window import rounds_of
from benchkit.rounds_policy import RoundsPlan
from lab import wall_looks

WALL = "instruction_counts.{}.time_wall"


def _rounds(logs: list[float]) -> Measurement:
    samples = [1e-4 * math.exp(v) for v in logs for _ in range(3)]  # 3 equal samples a round
    return Measurement(sorted(samples)[len(samples) // 2], None, samples, "v", 3)


def _pair(shifts: dict[str, float], rounds: int = 24) -> tuple[ResultSet, ResultSet]:
    rng = random.Random(3)
    base, head = {}, {}
    for case, shift in shifts.items():
        key = (WALL.format(case), "env")
        logs = [rng.gauss(0, 0.01) for _ in range(rounds)]
        base[key] = _rounds(logs)
        # no change: the same rounds (settled); else the base's rounds moved and reshuffled
        head[key] = _rounds(logs if not shift else [v + shift for v in rng.sample(logs, rounds)])
    return ResultSet("a" * 40, "m", base), ResultSet("b" * 40, "m", head)


def test_the_replay_gives_the_open_ones_more_rounds_and_the_settled_their_first_look() -> None:
    # Ten settled cases besides: the fixed design's budget then gives the open one its cap.
    quiet = {f"Quiet{k}": 0.0 for k in range(10)}
    base, head = _pair({"Same": 0.0, "Close": 0.012, "Doubled": math.log(2.0), **quiet})
    plan = RoundsPlan.default()
    assert wall_looks.replayable(base, head, plan)
    replayed_base, replayed_head = wall_looks.replay(base, head, 0.005)
    held = {key[0]: rounds_of(m) for key, m in replayed_head.measurements.items()}
    assert {k: v for k, v in held.items() if "Quiet" not in k} == {
        WALL.format("Same"): 8,
        WALL.format("Close"): 24,
        WALL.format("Doubled"): 8,
    }
    assert {key[0]: rounds_of(m) for key, m in replayed_base.measurements.items()} == held
    # The rounds kept are the first ones measured, as the job's first look saw them.
    same = (WALL.format("Same"), "env")
    assert replayed_head.measurements[same].samples == list(head.measurements[same].samples[:24])
    # An early stop the budget floor does not allow: the doubling gets more rounds too.
    strict = wall_looks.replay(base, head, 0.005, floor=1e-300)[1]
    assert rounds_of(strict.measurements[(WALL.format("Doubled"), "env")]) == 24


def test_a_pair_with_the_first_looks_rounds_only_is_not_replayable() -> None:
    base, head = _pair({"Same": 0.0}, rounds=8)
    assert not wall_looks.replayable(base, head, RoundsPlan.default())
