"""A pair the main job judged is judged the same way by every later reader (`pair_record`).

The history: build 1 measured by a first job beside build 0, then again by a second job beside
build 2, its rounds appended, while the machine ran 25 % slower. Read later, the first pair must
be judged by build 1's first-job rounds (unchanged), not by a mix of both jobs' rounds; the
second by the second job's; and results measured again since no longer match their record.
"""

from __future__ import annotations

import random
from pathlib import Path

from benchkit.history.results.read import load_asv_config, read_results
from benchkit.report.gate import check, pair_record
from benchkit.report.site import data as site_data
from lab.histories import MACHINE, PER_ROUND, WALL, History, commit_hash

CASES = [f"C{k:02d}" for k in range(12)]
ROUNDS = 8
SLOWER = 1.25  # the machine's level during the second job


def _samples(rng: random.Random, level: float) -> list[float]:
    """A job's rounds: 1 % between processes, a little within one."""
    rounds = [level * (1 + rng.gauss(0, 0.01)) for _ in range(ROUNDS)]
    return [r * (1 + abs(rng.gauss(0, 0.003))) for r in rounds for _ in range(PER_ROUND)]


def _history(tmp_path: Path, builds: dict[int, list[float]], seed: int = 5) -> History:
    """Build index -> the machine's level of each of its jobs' rounds (8 rounds a job)."""
    project = History(tmp_path)
    for case in CASES:
        project.bench(WALL.format(case), "seconds", repeat=PER_ROUND)
        for index, levels in builds.items():
            # a job's samples of a build are the same whatever came later
            jobs = [random.Random(f"{seed} {case} {index} {job}") for job in range(len(levels))]
            samples = [x for rng, lvl in zip(jobs, levels, strict=True) for x in _samples(rng, 1e-5 * lvl)]
            project.add(index, WALL.format(case), sorted(samples)[len(samples) // 2], samples)
    project.save()
    return project


def _record(project: History, base: int, head: int, held_rounds: int) -> None:
    conf = load_asv_config(project.config)
    loaded = read_results(conf)
    held = {commit_hash(base): {(WALL.format(c), "virtualenv-py3.11"): held_rounds for c in CASES}}
    record = pair_record.pair_record_of(
        loaded, MACHINE, commit_hash(base), commit_hash(head), held if held_rounds else {}, held_rounds > 0
    )
    pair_record.write_pair_record(Path(conf.results_dir), record)


def _statuses(project: History, base: int, head: int) -> tuple[set[str], check.Verdict]:
    verdict = check.run_check(
        commit_hash(base)[:8], commit_hash(head)[:8], asv_config=project.config, show_unchanged=True
    )
    return {c.status.value for c in verdict.comparisons}, verdict


def test_a_pair_is_judged_by_the_rounds_its_job_measured(tmp_path: Path) -> None:
    first_job = _history(tmp_path, {0: [1.0], 1: [1.0]})
    _record(first_job, 0, 1, held_rounds=0)
    # The second job appends build 1's rounds (same samples first) and measures build 2.
    later = _history(tmp_path, {0: [1.0], 1: [1.0, SLOWER], 2: [SLOWER]})
    _record(later, 1, 2, held_rounds=ROUNDS)

    statuses, verdict = _statuses(later, 0, 1)
    assert statuses == {"unchanged"}, verdict.markdown
    assert "(8+8 rounds)" in verdict.markdown and "(8+16 rounds)" not in verdict.markdown
    statuses, verdict = _statuses(later, 1, 2)
    assert statuses == {"unchanged"}, verdict.markdown
    assert "judged by the rounds measured again beside the head" in verdict.markdown

    # The site judges its pairs as `benchkit check` does.
    for pair in site_data.pair_changes(_site_data(later)):
        assert pair.changes == () and pair.uncertain == (), (pair.base.short, pair.head.short)

    # Without the record the first pair mixes both jobs' rounds of build 1: not unchanged.
    pair_record.record_path(later.results, MACHINE, commit_hash(0), commit_hash(1)).unlink()
    statuses, verdict = _statuses(later, 0, 1)
    assert "unchanged" not in statuses, verdict.markdown


def test_results_measured_again_since_no_longer_match_their_record(tmp_path: Path) -> None:
    first_job = _history(tmp_path, {0: [1.0], 1: [1.0]})
    _record(first_job, 0, 1, held_rounds=0)
    again = _history(tmp_path, {0: [1.0], 1: [1.0]}, seed=6)  # a --rerun: other samples
    verdict = _statuses(again, 0, 1)[1]
    assert "measured again since the main job judged this pair" in verdict.markdown


def test_a_record_that_cannot_be_read_is_no_record(tmp_path: Path) -> None:
    project = _history(tmp_path, {0: [1.0], 1: [1.0]})
    path = pair_record.record_path(project.results, MACHINE, commit_hash(0), commit_hash(1))
    path.parent.mkdir(parents=True)
    for text in ("{not json", '{"format": "benchkit-judged-pair", "version": 1}', "[]"):
        path.write_text(text)
        assert pair_record.read_pair_record(project.results, MACHINE, commit_hash(0), commit_hash(1)) is None


def _site_data(project: History) -> site_data.SiteData:
    conf = load_asv_config(project.config)
    loaded = read_results(conf)
    commits = tuple(commit_hash(i) for i in range(3))
    results = {(MACHINE, c): loaded.result_set(c, MACHINE) for c in commits}
    builds = {c: site_data.Build(c, i, 1_700_000_000 + i, "2.13.0", None) for i, c in enumerate(commits)}
    config = check.check_config_for(project.config)
    return site_data.SiteData(conf, (MACHINE,), builds, results, {(MACHINE, "main"): commits}, {}, config, 1)
