"""`benchkit export`: records of PyTorch's benchmark database, one per figure with a number.

The shapes are compared with a record as PyTorch's own writers produce them (gpt-fast's
`output_json`, the v3 table of pytorch/test-infra: every ``extra_info`` a map of strings,
``benchmark_values`` a list of numbers, ``target_value`` a number), written here in this
test's words. The whole command runs on real asv results of a main job in
tests/test_fresh_main_job.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.check_project import BASE, HEAD, Project

CASE = "instruction_counts.demo_Linear_PYTHON_EAGER_FORWARD_BACKWARD_t1_0a1b2c3d"
OPERATOR = "operators.aten_relu_default"
INPUTS = ["'8x16 f32'", "'8x16 bf16'"]

# A record the way PyTorch's benchmark writers lay one out: one metric of one model.
PYTORCH_RECORD: dict[str, Any] = {
    "benchmark": {
        "name": "an LLM benchmark",
        "mode": "inference",
        "dtype": "bfloat16",
        "extra_info": {"device": "cuda", "arch": "a GPU's name"},
    },
    "model": {
        "name": "a model",
        "type": "micro-benchmark",
        "backend": "inductor",
        "origins": ["pytorch"],
        "extra_info": {"what": "any string"},
    },
    "metric": {
        "name": "tokens_per_second",
        "benchmark_values": [123.5],
        "target_value": 120.0,
        "extra_info": {"unit": "tokens/s"},
    },
    "dependencies": {
        "pytorch": {
            "repo": "pytorch/pytorch",
            "branch": "main",
            "sha": "0f" * 20,
            "version": "2.14.1",
            "extra_info": {},
        },
    },
    "runners": [
        {
            "name": "a runner",
            "type": "linux.x86_64",
            "cpu_info": "a CPU",
            "cpu_count": 16,
            "mem_info": "",
            "avail_mem_in_gb": 128,
            "gpu_info": "a GPU",
            "gpu_count": 1,
            "gpu_mem_info": "",
            "avail_gpu_mem_in_gb": 80,
            "extra_info": {"hostname": "h"},
        },
    ],
}


def shape(value: Any, key: str = "") -> Any:
    """A record's shape: its keys, and the type of each leaf (a map of strings for extra_info)."""
    if key == "extra_info":
        assert isinstance(value, dict) and all(isinstance(v, str) for v in value.values()), value
        return "map of strings"
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        assert value, key
        shapes = [shape(v, key) for v in value]
        assert all(s == shapes[0] for s in shapes), (key, value)
        return [shapes[0]]
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def _project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    project.bench(f"{CASE}.track_instructions", "instructions")
    project.bench(f"{CASE}.time_wall", "seconds", repeat=2)
    for method in ("track_instructions", "time_wall"):  # as benchkit's suite names a case for asv
        key = "demo/Linear | Python | Eager | Forward + Backward | 1 thread(s)"
        project.benchmarks[f"{CASE}.{method}"]["pretty_name"] = f"{key} [{method}]"
    for method in ("track_eager_seconds", "track_compile_seconds", "track_compile_cache_hit"):
        project.bench(f"{OPERATOR}.{method}", "seconds", params=[INPUTS])
    for commit, scale in ((BASE, 1.0), (HEAD, 1.5)):
        project.add(commit, f"{CASE}.track_instructions", [1000.0 * scale])
        samples = [0.010 * scale, 0.011 * scale] * 8  # 8 rounds of 2 samples
        project.add(commit, f"{CASE}.time_wall", [0.0105 * scale], samples=[samples])
        project.add(commit, f"{OPERATOR}.track_eager_seconds", [0.001, None], samples=[[0.001] * 6, None])
        project.add(commit, f"{OPERATOR}.track_compile_seconds", [2.0, 2.1])
        project.add(commit, f"{OPERATOR}.track_compile_cache_hit", [0.0, 0.0])
    project.save()
    return project


def export(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    config = str(project.root / "asv.conf.json")
    command = [sys.executable, "-m", "benchkit.cli", "export", "--asv-config", config]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, check=False)


def test_records_have_the_shape_of_pytorchs_and_one_per_figure(tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = export(project, "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    files = sorted((tmp_path / "out" / "box").glob("*.json"))
    assert [f.name for f in files] == [f"{BASE[:12]}.json", f"{HEAD[:12]}.json"]
    records = json.loads(files[1].read_text())
    # 1 count, 1 wall time, eager of one input (the other failed), compile of both; no cache record
    assert len(records) == 5, records
    expected = shape(PYTORCH_RECORD)
    for record in records:
        assert shape(record) == expected, record
    by_metric = {(r["metric"]["name"], r["model"]["extra_info"].get("input", "")): r for r in records}
    wall = by_metric[("wall_time_s", "")]
    assert wall["metric"]["benchmark_values"] == pytest.approx([0.015] * 8)  # each round's fastest
    assert wall["benchmark"]["mode"] == "training"  # the case runs backward
    assert wall["metric"]["extra_info"]["verdict_against"] == BASE
    assert wall["metric"]["extra_info"]["verdict"] == "regression"
    count = by_metric[("instruction_count", "")]
    assert count["metric"]["benchmark_values"] == [1500.0]
    assert count["metric"]["extra_info"]["verdict"] == "regression"
    eager = by_metric[("eager_time_s", "8x16 f32")]
    assert eager["metric"]["benchmark_values"] == [0.001] * 6 and eager["benchmark"]["dtype"] == "float32"
    compile_bf16 = by_metric[("compile_time_s", "8x16 bf16")]
    assert compile_bf16["benchmark"]["dtype"] == "bfloat16"
    assert compile_bf16["metric"]["extra_info"]["inductor_cache"] == "cold"
    assert "1 figure(s) failed" in done.stderr and "track_eager_seconds('8x16 bf16')" in done.stderr
    # The oldest build has no predecessor: its records carry no verdict, and say so on the terminal.
    assert not any("verdict" in r["metric"]["extra_info"] for r in json.loads(files[0].read_text()))
    assert "no earlier build" in done.stdout


def test_bad_input_gets_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    project = _project(tmp_path / "project")
    unknown = export(project, "cafe1234", "--out", str(tmp_path / "out"))
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "'cafe1234'" in unknown.stderr and not (tmp_path / "out").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "asv.conf.json").write_text(json.dumps({"version": 1, "repo": "x", "results_dir": "results"}))
    command = [sys.executable, "-m", "benchkit.cli", "export", "--asv-config", str(empty / "asv.conf.json")]
    none = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert none.returncode == 2 and none.stderr.count("\n") == 1, none.stderr
    assert "no asv results" in none.stderr
