"""The main job's wall-time rounds (`benchkit.measure.walltime.batch`): one real process per
round and build, with this interpreter's torch as the build, on cases that work, fail, kill
their process and hang."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from benchkit.errors import UserError
from benchkit.measure import vec_isa
from benchkit.measure.walltime.batch import (
    BuildPlace,
    CaseStatus,
    interleaved_rounds,
    prepare_build,
    round_order,
    run_round,
)
from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

DEFINITIONS = """
from benchkit.define.api import GroupedStmts, TimerArgs

BENCHMARKS = {
    "batch": {
        "fine": TimerArgs("y = x + 1", setup="x = torch.ones(4)"),
        "raises": TimerArgs("raise ValueError('broken on purpose')"),
        "crashes": TimerArgs("import os; os._exit(7)"),
        "hangs": TimerArgs("import time; time.sleep(600)"),
        "also fine": TimerArgs("y = x * 2", setup="x = torch.ones(8)"),
        "cpp": GroupedStmts(cpp_stmt="auto y = torch::ones({2}) + 1;"),
    }
}
"""


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "batch_definitions.py"
    path.write_text(DEFINITIONS)
    return {**os.environ, "BENCHKIT_STANDARD": "0", "BENCHKIT_DEFINITIONS": str(path)}


def _keys(environ: dict[str, str]) -> dict[str, str]:
    """Case key by its last label word, read as the child reads them."""
    from benchkit.expand import load_cases

    cases = load_cases([environ["BENCHKIT_DEFINITIONS"]], standard=False)
    return {case.key.split(" | ")[0].split("/")[-1]: case.key for case in cases}


def _place(tree: Path | None = None, git_version: str | None = None) -> BuildPlace:
    here = Path(torch.__file__).resolve().parent.parent
    return BuildPlace(
        "f" * 40, "here", sys.executable, tree or here, git_version or torch.version.git_version
    )


def test_a_round_measures_every_case_and_survives_those_that_fail(environ: dict[str, str]) -> None:
    keys = _keys(environ)
    order = [keys[name] for name in ("fine", "raises", "crashes", "hangs", "also fine")]
    found = run_round(_place(), order, None, environ, case_timeout=15)
    assert list(found) == order or set(found) == set(order)
    for name in ("fine", "also fine"):
        got = found[keys[name]]
        assert got.status is CaseStatus.OK and len(got.samples) == SAMPLES_PER_ROUND, got
        assert all(0 < s < 1e-2 for s in got.samples), got
    assert found[keys["raises"]].status is CaseStatus.FAILED
    assert "broken on purpose" in found[keys["raises"]].error
    assert "died (exit code 7)" in found[keys["crashes"]].error
    assert "no result after 15 s" in found[keys["hangs"]].error


def test_a_process_that_imports_another_torch_is_refused(environ: dict[str, str], tmp_path: Path) -> None:
    keys = _keys(environ)
    with pytest.raises(UserError, match="not the build's tree"):
        run_round(_place(git_version="0" * 40), [keys["fine"]], None, environ)


def test_rounds_alternate_the_builds_and_each_round_has_its_own_cases(environ: dict[str, str]) -> None:
    keys = _keys(environ)
    a, b = _place(), BuildPlace("e" * 40, *list(vars(_place()).values())[1:])
    assert [p.commit for p in round_order([a, b], 0)] == [a.commit, b.commit]
    assert [p.commit for p in round_order([a, b], 1)] == [b.commit, a.commit]
    notes: list[str] = []
    wanted = [keys["fine"], keys["also fine"]]
    taken = interleaved_rounds([a, b], lambda i: wanted[: 2 - i], 2, None, environ, notes.append)
    measured = taken.rounds
    assert 0 < taken.sampled < taken.seconds and "in timed samples" in taken.describe()
    assert [sorted(r) for r in measured[a.commit]] == [sorted(wanted), [wanted[0]]]
    assert len(measured[b.commit]) == 2 and notes[0].startswith(
        "wall-time round 1/2: 2 case(s) on 2 build(s)"
    )
    for commit in (a.commit, b.commit):  # the later round times in the first round's block size
        first, second = measured[commit]
        assert first[wanted[0]].block > 0 and second[wanted[0]].block == first[wanted[0]].block


def test_a_round_given_block_sizes_times_in_them(environ: dict[str, str]) -> None:
    keys = _keys(environ)
    found = run_round(_place(), [keys["fine"], keys["also fine"]], None, environ, blocks={keys["fine"]: 7})
    given, calibrated = found[keys["fine"]], found[keys["also fine"]]
    assert given.status is CaseStatus.OK and given.block == 7 and len(given.samples) == SAMPLES_PER_ROUND
    # calibrated to a block of ROUND_BLOCK_SECONDS: far more than 7 executions of `x * 2`
    assert calibrated.status is CaseStatus.OK and calibrated.block > 7


def _decision_agrees(environ: dict[str, str]) -> bool:
    [path] = (Path(environ["BENCHKIT_CACHE_DIR"]) / "inductor-vec-isa").glob("*.json")
    found = json.loads(path.read_text())
    return bool(found["probed"]) and found["probed"] == found["listed"]


@pytest.mark.slow
def test_cpp_cases_are_compiled_before_the_rounds(environ: dict[str, str], tmp_path: Path) -> None:
    keys = _keys(environ)
    cache = {**environ, "BENCHKIT_CACHE_DIR": str(tmp_path / "cache")}
    cache.pop(vec_isa.ENV, None)
    prepared = prepare_build(_place(), [keys["cpp"]], None, cache)
    assert prepared.errors == {}
    # inductor's ISA probe settled for the build once: its rounds skip it where the probe allows
    skips = prepared.place.skip_isa_probe
    assert skips == _decision_agrees(cache)
    assert (prepared.place.environ({}).get(vec_isa.ENV) == "1") == skips
    found = run_round(prepared.place, [keys["cpp"]], None, cache)
    assert found[keys["cpp"]].status is CaseStatus.OK, found


def _where_definitions(one: Path, two: Path) -> str:
    """Two cases whose setup appends `pid [cores of each thread] time` to a file: one of one
    thread, and one of two that first runs a parallel op (which starts the second thread)."""
    note = (
        "import os, time\n"
        "threads = [sorted(os.sched_getaffinity(int(t))) for t in os.listdir('/proc/self/task')]\n"
        "with open(PATH, 'a') as f:\n"
        "    f.write(f'{os.getpid()} {threads} {time.time()}\\n')"
    )
    return (
        "from benchkit.define.api import TimerArgs\n"
        f"ONE = {note.replace('PATH', repr(str(one)))!r}\n"
        f"TWO = 'torch.ones(1 << 22).add_(1)\\n' + {note.replace('PATH', repr(str(two)))!r}\n"
        "BENCHMARKS = {'where': {\n"
        "    'one thread': TimerArgs('y = x + 1', setup='x = torch.ones(4)\\n' + ONE),\n"
        "    'two threads': TimerArgs('y = x + 1', setup='x = torch.ones(4)\\n' + TWO, num_threads=2),\n"
        "}}\n"
    )


def _notes(path: Path) -> list[tuple[int, list[list[int]], float]]:
    rows = [
        (line.split(" ", 1)[0], *line.split(" ", 1)[1].rsplit(" ", 1))
        for line in path.read_text().splitlines()
    ]
    return [(int(pid), json.loads(threads), float(at)) for pid, threads, at in rows]


@pytest.mark.parametrize("side_by_side", [True, False])
def test_rounds_of_two_builds_run_side_by_side_one_core_each(
    tmp_path: Path, side_by_side: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchkit.measure.side_by_side import usable_cores
    from benchkit.wall_rounds import several_threads

    cores = usable_cores()
    if len(cores) < 2:
        pytest.skip("side by side needs two usable cores")
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    definitions = tmp_path / "where_definitions.py"
    definitions.write_text(_where_definitions(one, two))
    monkeypatch.setenv("BENCHKIT_STANDARD", "0")
    monkeypatch.setenv("BENCHKIT_DEFINITIONS", str(definitions))
    monkeypatch.setenv("BENCHKIT_SIDE_BY_SIDE", "1" if side_by_side else "0")
    environ = dict(os.environ)
    keys = _keys(environ)
    alone = several_threads()
    assert alone == {keys["two threads"]}
    a, b = _place(), BuildPlace("e" * 40, *list(vars(_place()).values())[1:])
    taken = interleaved_rounds([a, b], lambda i: list(keys.values()), 2, None, environ, alone=alone)
    assert all(
        r.status is CaseStatus.OK for rounds in taken.rounds.values() for rnd in rounds for r in rnd.values()
    )
    assert taken.side_by_side is side_by_side
    singles, doubles = _notes(one), _notes(two)
    assert len(singles) == 4 and len(doubles) == 4  # each build's process of each round
    # the two-thread case always has every core, in each of its threads (two at least)
    assert all(len(threads) >= 2 and all(t == list(cores) for t in threads) for _, threads, _ in doubles)
    if not side_by_side:
        assert all(t == list(cores) for _, threads, _ in singles for t in threads), singles
        return
    # side by side: a core of its own, the builds of a round on different cores, started together;
    # then, in the same process, the two-thread case on every core
    assert all(len(threads) == 1 and len(threads[0]) == 1 for _, threads, _ in singles)
    by_time = sorted((at, threads[0][0], pid) for pid, threads, at in singles)
    for (at_1, core_1, _), (at_2, core_2, _) in zip(by_time[::2], by_time[1::2], strict=True):
        assert core_1 != core_2 and abs(at_1 - at_2) < 5.0
    assert {pid for pid, _, _ in singles} == {pid for pid, _, _ in doubles}


def test_a_case_that_kills_its_process_side_by_side_fails_and_the_rest_go_on(environ: dict[str, str]) -> None:
    from benchkit.measure.side_by_side import usable_cores
    from benchkit.measure.walltime.batch import side_by_side_round

    cores = usable_cores()
    if len(cores) < 2:
        pytest.skip("side by side needs two usable cores")
    keys = _keys(environ)
    a, b = _place(), BuildPlace("e" * 40, *list(vars(_place()).values())[1:])
    shared, alone = [keys["fine"], keys["crashes"]], [keys["also fine"]]
    core_of, blocks = {a.commit: cores[0], b.commit: cores[1]}, {a.commit: {}, b.commit: {}}
    found = side_by_side_round([a, b], shared, alone, core_of, None, environ, blocks)
    for commit in (a.commit, b.commit):
        assert found[commit][keys["fine"]].status is CaseStatus.OK
        assert "died (exit code 7)" in found[commit][keys["crashes"]].error
        # after the crash, in a process of its own
        assert found[commit][keys["also fine"]].status is CaseStatus.OK, found[commit]
