"""`benchkit backfill` on a real Dask LocalCluster: counts of a small torch history land in asv's
results under one logical machine, equal to single-machine `benchkit counts`; a worker killed
mid-build and a worker with another counting fingerprint do not change that.

The history is the local 2.13.0 wheel and two patched twins (``patch_wheel``): one whose
``nn.Linear`` computes twice (a real regression), one whose ReLU does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.asv_project import LINEAR, RELU, AsvProject, make_project
from support.scratch import module_dir
from support.wheels import LOCAL_WHEEL, repeated_forward_patch, slow_linear_wheel

from benchkit.define.expand import asv_class_name
from benchkit.define.loader import load_cases
from benchkit.history.builds.repo import HistoryRepo
from benchkit.history.builds.wheels import patch_wheel_module
from benchkit.history.results import backfill
from benchkit.history.results.fingerprint import counting_fingerprint, differences, machine_name
from benchkit.history.results.read import load_asv_config, load_result_set
from benchkit.util import cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
RELU_PATCH = repeated_forward_patch("ReLU")


def slow_relu_wheel(folder: Path) -> Path:
    return patch_wheel_module(
        LOCAL_WHEEL,
        folder / LOCAL_WHEEL.name,
        "torch/nn/modules/activation.py",
        lambda text: text + RELU_PATCH,
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, worker_asv_envs: Path) -> Iterator[AsvProject]:
    with module_dir(tmp_path_factory, "backfill") as base:
        yield _history(base, worker_asv_envs)


def _history(base: Path, envs: Path) -> AsvProject:
    project = make_project(base / "project", envs)
    wheels = [LOCAL_WHEEL, slow_linear_wheel(base / "linear"), slow_relu_wheel(base / "relu")]
    assert project.benchkit("history", "init", "--repo", str(project.history), str(wheels[0])).returncode == 0
    for wheel in wheels[1:]:
        added = project.benchkit("history", "add", str(wheel), "--asv-config", str(project.config))
        assert added.returncode == 0, added.stderr
    return project


def _commits(project: AsvProject) -> list[str]:
    return HistoryRepo(project.history).commits("main")


def _counts(project: AsvProject, commit: str) -> dict[str, float | None]:
    conf = load_asv_config(project.config)
    machine = machine_name(counting_fingerprint())
    measured = load_result_set(conf, commit, machine).measurements
    return {_case_of(name): m.value for (name, _env), m in measured.items()}


def _case_of(benchmark: str) -> str:
    """``instruction_counts.<label slug>_<key hash>.track_instructions`` -> the label slug."""
    return benchmark.split(".")[1].rsplit("_", 1)[0]


def _slugs_by_key(project: AsvProject) -> dict[str, str]:
    cases = load_cases([project.env["BENCHKIT_DEFINITIONS"]], standard=False)
    return {case.key: asv_class_name(case).rsplit("_", 1)[0] for case in cases}


def test_fingerprints_name_one_logical_machine() -> None:
    here = counting_fingerprint()
    assert machine_name(here) == machine_name(dict(here)) and machine_name(here).startswith(
        "benchkit-counts-"
    )
    other = {**here, "valgrind": "valgrind-3.18.1"}
    assert machine_name(other) != machine_name(here)
    assert differences(here, other) == [
        f"valgrind: 'valgrind-3.18.1', logical machine has {here['valgrind']!r}"
    ]


def test_outcomes_land_in_asv_results_and_failures_stay_incomplete(
    history: AsvProject, tmp_path: Path
) -> None:
    """Writing through asv's Results API: a counted build reads back through asv; a failed
    build is recorded as failed benchmarks with its reason, and is not complete."""
    conf = load_asv_config(history.config)
    conf.results_dir = str(tmp_path / "results")
    fingerprint = counting_fingerprint()
    benchmarks = {
        key: {"name": f"instruction_counts.{key}.track_instructions", "version": "v1", "params": []}
        for key in (LINEAR, RELU)
    }
    target = backfill.Target(tmp_path / "results", machine_name(fingerprint), "py", fingerprint, benchmarks)
    backfill.write_machine(target)
    ok, failed = _commits(history)[:2]
    counts = {key: {"status": "ok", "instructions": 1000.0 + i} for i, key in enumerate((LINEAR, RELU))}
    assert backfill.save_outcome(target, ok, 0, {"status": "ok", "counts": counts}) == (2, 0)
    assert backfill.save_outcome(
        target, failed, 0, {"status": "failed", "reason": "no wheel", "counts": {}}
    ) == (0, 2)
    assert target.is_complete(ok) and not target.is_complete(failed)
    measured = load_result_set(conf, ok, target.machine).measurements
    assert sorted(m.value for m in measured.values()) == [1000.0, 1001.0]
    assert all(m.failed for m in load_result_set(conf, failed, target.machine).measurements.values())
    status = json.loads(
        (tmp_path / "results" / target.machine / "benchkit-backfill" / f"{failed}.status").read_text()
    )
    assert status["reason"] == "no wheel"


@pytest.mark.slow
def test_backfill_on_a_local_cluster_equals_single_machine_counts(history: AsvProject) -> None:
    done = history.benchkit("backfill", "--asv-config", str(history.config), "--workers", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 build(s) counted" in done.stderr and "0 failed" in done.stderr
    base, slow_linear, slow_relu = _commits(history)
    counts = {commit: _counts(history, commit) for commit in (base, slow_linear, slow_relu)}
    # The regressions are where they were injected (exact metric, 2x the module's Python work).
    assert counts[slow_linear][LINEAR] > 1.3 * counts[base][LINEAR]
    assert counts[slow_relu][RELU] > 1.3 * counts[base][RELU]
    # Single-machine `benchkit counts` with the slowed build's torch gives the same numbers, to
    # within 0.01 % (a case's layout noise in one place; a place leaking in moved them by
    # tenths of a percent and more, see lab/reports/place-independent-counts.md). One
    # build is enough: its Linear count differs from the others', so equal counts are its own.
    for commit in (slow_linear,):
        record = HistoryRepo(history.history).record(commit)
        python = cache_dir("backfill", "envs", record.wheel_sha256[:24]) / "bin" / "python"
        out = Path(history.root) / f"single-{commit[:8]}.json"
        single = subprocess.run(
            [str(python), "-m", "benchkit.cli", "counts", "--json", str(out)],
            env=history.env, cwd=history.root, capture_output=True, text=True,
        )  # fmt: skip
        assert single.returncode == 0, single.stderr[-2000:]
        slugs = _slugs_by_key(history)
        alone = {slugs[key]: entry["instructions"] for key, entry in json.loads(out.read_text()).items()}
        assert alone and alone.keys() <= counts[commit].keys()
        assert alone == {slug: pytest.approx(counts[commit][slug], rel=1e-4) for slug in alone}
    # Re-running skips every complete build, with the definitions given by flag alone: they
    # reach asv's discovery (benchmarks.json removed, so asv must discover again).
    (history.root / "results" / "benchmarks.json").unlink()
    definitions = history.env.pop("BENCHKIT_DEFINITIONS")
    try:
        again = history.benchkit(
            "backfill", "--asv-config", str(history.config), "--definitions", definitions
        )
    finally:
        history.env["BENCHKIT_DEFINITIONS"] = definitions
    assert again.returncode == 0 and "3 already complete" in again.stderr, again.stderr[-2000:]
    assert "discovering asv's benchmarks" in again.stderr
    # The gate and the site read the results.
    machine = machine_name(counting_fingerprint())
    check = history.benchkit(
        "check", "--asv-config", str(history.config), "--machine", machine, base, slow_linear
    )
    assert check.returncode == 1 and LINEAR.split("_")[1] in check.stdout, check.stdout
    published = history.benchkit("publish", "--asv-config", str(history.config))
    assert published.returncode == 0, published.stderr[-2000:]
    index = json.loads((history.root / "html" / "index.json").read_text())
    assert machine in index["params"]["machine"]
    graphs = (history.root / "html" / "graphs").rglob(
        f"instruction_counts.{LINEAR}_*.track_instructions.json"
    )
    assert any(f"machine-{machine}" in str(path) for path in graphs)


def _fake_valgrind(folder: Path) -> Path:
    """A valgrind that reports another version (and otherwise is the real one)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "valgrind"
    real = subprocess.run(["which", "valgrind"], capture_output=True, text=True).stdout.strip()
    script.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && {{ echo valgrind-3.18.1; exit 0; }}\nexec {real} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


@pytest.mark.slow
def test_killed_worker_and_refused_worker(history: AsvProject, tmp_path: Path) -> None:
    """Two workers of the logical machine and one whose valgrind differs (a `dask worker`
    process): the odd one is refused and runs nothing; one good worker is killed (-9) while
    it counts; every build still gets its counts, equal to those of the fault-free backfill
    of the test before (so this one runs after it)."""
    from distributed import Client, LocalCluster

    conf = load_asv_config(history.config)
    conf.results_dir = str(tmp_path / "results")
    commits = _commits(history)[:2]
    env_before = dict(os.environ)
    os.environ.update(history.env)  # the workers inherit the project's definitions and HOME
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    odd = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nthreads", "1",
         "--no-dashboard"],
        env={**os.environ, "PATH": f"{_fake_valgrind(tmp_path / 'odd-bin')}{os.pathsep}{os.environ['PATH']}"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    killed: list[int] = []
    try:
        client = Client(cluster)
        client.wait_for_workers(3, timeout=120)
        project_conf = load_asv_config(history.config)  # its benchmarks.json is the earlier test's
        cases = {c.key: asv_class_name(c) for c in load_cases([history.env["BENCHKIT_DEFINITIONS"]], False)}
        target = backfill.make_target(project_conf, history.root, cases, counting_fingerprint())
        target = dataclasses.replace(target, results_dir=Path(conf.results_dir))

        def kill_one_counting_worker() -> None:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and not killed:
                busy = [addr for addr, tasks in client.processing().items() if tasks]
                if busy:
                    time.sleep(8)  # well inside its build: environment made, valgrind running
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                time.sleep(0.5)

        killer = threading.Thread(target=kill_one_counting_worker, daemon=True)
        killer.start()
        summary = backfill.run_backfill(
            client, HistoryRepo(history.history), commits, target, settings={"BENCHKIT_RECOUNT": "1"}
        )
        killer.join(timeout=5)
        client.close()
    finally:
        odd.terminate()
        odd.wait(timeout=60)
        cluster.close()
        os.environ.clear()
        os.environ.update(env_before)
    assert killed, "no worker was killed"
    assert summary.ok and sorted(summary.done) == sorted(commits), summary.failed
    [(_addr, reason)] = summary.refused_workers.items()
    assert "valgrind: 'valgrind-3.18.1'" in reason
    for commit in commits:
        status = json.loads(
            (Path(conf.results_dir) / target.machine / "benchkit-backfill" / f"{commit}.status").read_text()
        )
        assert status["status"] == "ok"
        measured = load_result_set(conf, commit, target.machine).measurements
        here = {_case_of(name): m.value for (name, _env), m in measured.items()}
        before = {key: value for key, value in _counts(history, commit).items() if key in here}
        # A recount in other processes: equal but for the residual layout noise of a
        # small case (seen once: ReLU's 18,243 vs 18,307 instructions, 0.35%), well
        # inside the gate's 0.5% (docs/instruction_counts.md, "Residual layout noise").
        assert here.keys() == before.keys() and all(
            abs(here[key] / before[key] - 1) < 0.005 for key in here
        ), f"commit {commit[:12]}: {here} after the kill, {before} before"
