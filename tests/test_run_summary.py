"""The main job's table: per torch build and metric, measured / failed / skipped / missing."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from asv import config as asv_config
from support.asv_project import MACHINE, make_project
from support.check_project import BASE, HEAD, Project
from support.wheels import LOCAL_WHEEL

from benchkit.history.results.read import load_asv_config, read_results
from benchkit.report import run_summary
from benchkit.report.gate import check


def test_every_state_is_counted_per_build_and_metric(tmp_path: Path) -> None:
    project = Project(tmp_path)
    names = {
        "instruction_counts.A.time_wall": "seconds",
        "instruction_counts.A.track_instructions": "instructions",
        "instruction_counts.B.track_instructions": "instructions",
        "operators.relu.track_compiled_over_eager": "ratio",
    }
    for name, unit in names.items():
        project.bench(name, unit, params=[["'x'", "'y'"]] if name.startswith("operators") else None)
    project.add(BASE, "instruction_counts.A.time_wall", [1e-6], [[1e-6, 1.1e-6]])
    project.add(BASE, "instruction_counts.A.track_instructions", [100.0])
    project.add(BASE, "instruction_counts.B.track_instructions", [math.nan])
    project.add(BASE, "operators.relu.track_compiled_over_eager", [0.5, 0.7])
    project.add(HEAD, "instruction_counts.A.time_wall", [1e-6], [[1e-6, 1.1e-6]])
    project.add(HEAD, "operators.relu.track_compiled_over_eager", [None, None])  # setup_cache failed
    project.save()

    loaded = read_results(load_asv_config(project.root / "asv.conf.json"))
    summary = run_summary.summarize(loaded, "box", [(BASE, "old"), (HEAD, "new")])
    old, new = summary.builds
    assert old.counts["instruction counts"] == {"measured": 1, "failed": 0, "skipped": 1, "missing": 0}
    assert old.counts["operator timings"] == {"measured": 2, "failed": 0, "skipped": 0, "missing": 0}
    assert new.counts["instruction counts"] == {"measured": 0, "failed": 0, "skipped": 0, "missing": 2}
    assert new.counts["operator timings"] == {"measured": 0, "failed": 2, "skipped": 0, "missing": 0}
    assert old.problems() == []  # a skip alone is not a problem while the metric has numbers
    assert summary.problems == [
        "new: no instruction counts numbers (2 missing)",
        "new: no operator timings numbers (2 failed)",
    ]
    lines = summary.table.splitlines()
    assert lines[0].split() == ["torch", "build", "metric", "measured", "failed", "skipped", "missing"]
    new_operators = next(line.split() for line in lines if line.startswith("new") and "operator" in line)
    assert new_operators[-4:] == ["0", "2", "0", "0"]
    # A selection (-b) expects only what it selects.
    selected = run_summary.summarize(loaded, "box", [(HEAD, "new")], ["time_wall"])
    assert selected.problems == []


def test_the_main_jobs_steps_take_the_asv_config_it_read_once(tmp_path: Path, monkeypatch) -> None:
    """`benchkit main` reads asv's config once and hands it down: which builds are complete
    (before and after asv runs), the results, the summary and the gate read no config again."""
    project = Project(tmp_path)
    project.bench("instruction_counts.A.track_instructions", "instructions")
    project.bench("instruction_counts.A.time_wall", "seconds")
    for commit, count in ((BASE, 100.0), (HEAD, 200.0)):
        project.add(commit, "instruction_counts.A.track_instructions", [count])
        project.add(commit, "instruction_counts.A.time_wall", [1e-6], [[1e-6, 1.1e-6]])
    project.save()
    reads: list[str] = []
    load = asv_config.Config.load.__func__  # type: ignore[attr-defined]

    def counted(cls: type, path: str | None = None) -> object:
        reads.append(str(path))
        return load(cls, path)

    monkeypatch.setattr(asv_config.Config, "load", classmethod(counted))
    conf_path = project.root / "asv.conf.json"
    conf = load_asv_config(conf_path)  # the job's one read
    expected = run_summary.Expected("box", (), 2)
    assert run_summary.complete_builds(conf, expected, [BASE, HEAD]) == [BASE, HEAD]
    assert run_summary.complete_builds(conf, run_summary.Expected("box", (), 3), [HEAD]) == []
    loaded = read_results(conf)
    assert run_summary.summarize(loaded, "box", [(BASE, "old"), (HEAD, "new")]).problems == []
    verdict = check.judge_results(BASE[:8], HEAD[:8], loaded, check.check_config_for(conf_path), "box")
    assert verdict.exit_code == 1  # the instruction count doubled
    assert reads == [str(conf_path)]


@pytest.mark.slow
def test_a_failed_setup_cache_makes_the_main_job_fail(tmp_path: Path, worker_asv_envs: Path) -> None:
    """Every operator timing process fails: the job still publishes, prints the table, exits 1."""
    job = make_project(tmp_path / "job", worker_asv_envs)
    job.env["BENCHKIT_OPERATOR_PROCESSES"] = "0"  # no timing process: the operators' setup_cache raises
    command = [
        sys.executable, "-m", "benchkit.cli", "main", "--asv-config", str(job.config), "--machine", MACHINE,
        "--build", str(LOCAL_WHEEL),
        "-b", r"^operators\.aten_relu_default.track_compiled_over_eager|e2e_ReLU.*time_wall",
        "--rounds", "2",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=job.root, env=job.env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "no operator timings numbers" in done.stderr
    assert "finished with 1 problem(s)" in done.stderr
    assert (job.root / "html" / "index.html").is_file()
    summary = done.stderr[done.stderr.index("[5/5]") :]  # the progress lines name wall time too
    table = summary[summary.index("torch build") :]
    wall = next(line for line in table.splitlines() if "wall time" in line).split()
    assert wall[-4:] == ["1", "0", "0", "0"]
