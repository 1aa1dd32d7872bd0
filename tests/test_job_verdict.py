"""What `benchkit main` judges: the builds it measured against their predecessors (and a baseline),
and the history's steps at them; on histories written with asv's own Results API."""

from __future__ import annotations

from pathlib import Path

from benchkit.history.results.read import load_asv_config, read_results
from benchkit.report.gate.pair_record import pair_record_of, write_pair_record
from benchkit.report.job_verdict import JobVerdict, JudgedPair, judge_run, judged_pairs
from lab.histories import COUNTS, MACHINE, History, commit_hash

C = [f"c{i}" for i in range(5)]


def test_each_measured_build_is_judged_against_its_predecessor_and_the_baseline() -> None:
    assert judged_pairs(C, ["c4"]) == [JudgedPair("c3", "c4", "its predecessor")]
    assert judged_pairs(C, ["c3", "c4"]) == [
        JudgedPair("c2", "c3", "its predecessor"),
        JudgedPair("c3", "c4", "its predecessor"),
    ]
    assert judged_pairs(C, ["c4"], baseline="c1") == [
        JudgedPair("c3", "c4", "its predecessor"),
        JudgedPair("c1", "c4", "the baseline"),
    ]
    assert judged_pairs(C, ["c4"], baseline="c3") == [JudgedPair("c3", "c4", "its predecessor")]
    # nothing new measured: the newest build is judged again (a rerun gives the same verdict)
    assert judged_pairs(C, []) == [JudgedPair("c3", "c4", "its predecessor")]
    # the first build of a history has no predecessor
    assert judged_pairs(C[:2], C[:2]) == [JudgedPair("c0", "c1", "its predecessor")]


def _history(tmp_path: Path, counts: list[int]) -> tuple[History, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    project = History(tmp_path)
    name = COUNTS.format("Linear")
    project.bench(name, "instructions")
    commits = [project.add(i, name, count) for i, count in enumerate(counts)]
    project.save()
    return project, commits


def _judge(
    project: History, commits: list[str], measured: list[str], baseline: str | None = None
) -> JobVerdict:
    loaded = read_results(load_asv_config(project.config))
    labels = {c: c[:8] for c in commits}
    pairs = judged_pairs(commits, measured, baseline)
    return judge_run(loaded, project.config, MACHINE, pairs, labels)


def test_a_regression_of_an_earlier_build_does_not_fail_tonights_run(tmp_path: Path) -> None:
    project, commits = _history(tmp_path, [1000, 1100, 1100, 1100, 1100])
    verdict = _judge(project, commits, commits[-1:])
    assert verdict.exit_code == 0, verdict.markdown
    assert f"{commit_hash(4)[:8]} against its predecessor {commit_hash(3)[:8]}" in verdict.markdown
    # against the first build, named as the baseline, the old regression shows
    against_first = _judge(project, commits, commits[-1:], baseline=commits[0])
    assert against_first.exit_code == 1
    assert any(
        p.startswith(f"benchkit check {commit_hash(0)[:8]} {commit_hash(4)[:8]}")
        for p in against_first.problems
    )


def test_tonights_regression_fails_the_run(tmp_path: Path) -> None:
    project, commits = _history(tmp_path, [1000, 1000, 1000, 1000, 1200])
    verdict = _judge(project, commits, commits[-1:])
    assert verdict.exit_code == 1
    assert verdict.problems[0] == (
        f"benchkit check {commit_hash(3)[:8]} {commit_hash(4)[:8]} exited 1 (see above)"
    )
    # The terminal's summary: the pair, its headline, its largest change; not the whole table.
    first, headline, change, *_ = verdict.summary.splitlines()
    assert first == f"{commit_hash(4)[:8]} against its predecessor {commit_hash(3)[:8]}:"
    assert headline.startswith("  ❌ fails on machine") and "**1 regression**" in headline
    assert change.startswith("  regression  +20.0% (×1.20)") and "| Benchmark |" not in verdict.summary


def test_a_history_step_at_a_measured_build_fails_the_run(tmp_path: Path) -> None:
    project, commits = _history(tmp_path, [1000] * 5 + [1100] * 5)
    at_step = _judge(project, commits, [commits[5]])
    assert at_step.exit_code == 1
    assert any(p.startswith("benchkit regressions: ") and "+10.0%" in p for p in at_step.problems), (
        at_step.problems
    )
    assert "The history's steps at" in at_step.markdown
    later = _judge(project, commits, [commits[9]])
    assert later.exit_code == 0 and "The history's steps" not in later.markdown
    # a new level of the newest build alone is the pair's verdict: judged once, by the gate
    newest = _judge(*_history(tmp_path / "b", [1000] * 9 + [1100]), [commit_hash(9)])
    assert newest.exit_code == 1 and not any(p.startswith("benchkit regressions") for p in newest.problems)


def test_compile_times_of_a_predecessor_compiled_by_an_earlier_job_are_not_compared(tmp_path: Path) -> None:
    """A twin's compile (warm: its build's inductor cache) against its predecessor's, compiled
    cold by an earlier job: nothing shared the two compiles' weather, so the compile time is not
    compared, said once; the same pair compiled by this job is judged (cache states apart)."""
    project = History(tmp_path)
    compile_name, cache_name = (
        "operators.aten_relu_default.track_compile_seconds",
        ("operators.aten_relu_default.track_compile_cache_hit"),
    )
    project.bench(compile_name, "seconds")
    project.bench(cache_name, "inductor cache hit (1 warm, 0 cold)")
    project.bench(COUNTS.format("Linear"), "instructions")  # a figure both builds have
    for index, seconds, warm in ((0, 0.5, 0.0), (1, 0.05, 1.0)):
        project.add(index, compile_name, seconds)
        project.add(index, cache_name, warm)
        project.add(index, COUNTS.format("Linear"), 1000)
    project.save()
    loaded = read_results(load_asv_config(project.config))
    commits = [commit_hash(0), commit_hash(1)]
    pairs = judged_pairs(commits, commits[1:])
    labels = {c: c[:8] for c in commits}
    results = Path(loaded.conf.results_dir)
    # The job writes how it measured the pair: here the base by an earlier job.
    write_pair_record(results, pair_record_of(loaded, MACHINE, *commits, {}, base_from_earlier_job=True))
    apart = judge_run(loaded, project.config, MACHINE, pairs, labels)
    assert apart.exit_code == 0, apart.markdown
    line = f"compile time: {commits[0][:8]} was compiled by an earlier job"
    assert apart.markdown.count(line) == 1 and "its 1 compile time(s) are not compared" in apart.markdown
    write_pair_record(results, pair_record_of(loaded, MACHINE, *commits, {}, base_from_earlier_job=False))
    together = judge_run(loaded, project.config, MACHINE, pairs, labels)
    assert together.exit_code == 2 and "cache state differed" in together.markdown
