"""The CUDA side of the operator benchmarks, checked on a machine without a GPU: the dtype
rule, how inputs are made per device, the statistic per device, the CUDA default set and
its bundled logs, the device in benchmark names and on the site, and the skip record
that a machine without CUDA leaves in asv's results (through real asv)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchkit import names
from benchkit.measure.operators import asv as op_asv
from benchkit.measure.operators import timing as op_timing
from benchkit.measure.operators import workload as op_workload
from benchkit.measure.operators.gpu_models import GPU_MODELS, RECORDED_DTYPES, gpu_log_path, record_gpu_model
from benchkit.measure.operators.log_format import parse_log_text
from benchkit.measure.operators.materialize import materialize

REPO = Path(__file__).resolve().parent.parent
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")

# A half-precision training log's layer-norm backward: f16 activations, f32 mean and rstd.
MIXED_LOG = """\
Operator: aten.native_layer_norm_backward.default
cnt: 6, ((T([4, 8, 16], f16), T([4, 8, 16], f16), [16], T([4, 8, 1], f32), T([4, 8, 1], f32), T([16], f16), T([16], f16), [True, True, True]), {})
Operator: aten._to_copy.default
cnt: 1, ((T([4, 16], f32),), {'dtype': f16})
Operator: aten.relu.default
cnt: 1, ((T([4, 16], f32),), {})
"""  # noqa: E501


def _dtypes(item_args: tuple) -> list[torch.dtype]:
    return [a.dtype for a in item_args if isinstance(a, torch.Tensor)]


def test_float16_keeps_the_float32_parts_of_a_half_precision_call() -> None:
    """operatorbench's rule: a float16 run of a half-precision log keeps its float32 tensors."""
    log = parse_log_text(MIXED_LOG, "mixed.txt")
    (backward,) = log.inputs_for("aten.native_layer_norm_backward.default")
    f16, f32 = torch.float16, torch.float32
    args, _ = materialize(backward, dtype=f16)
    assert _dtypes(args) == [f16, f16, f32, f32, f16, f16]
    # (the CUDA kernel requires them: with half mean/rstd it raises "expected scalar type Float")
    args, _ = materialize(backward, dtype=torch.bfloat16)
    assert _dtypes(args) == [torch.bfloat16, torch.bfloat16, f32, f32, torch.bfloat16, torch.bfloat16]
    # Another dtype replaces every floating dtype; None keeps the log's.
    assert _dtypes(materialize(backward, dtype=torch.float64)[0]) == [torch.float64] * 6
    assert _dtypes(materialize(backward, dtype=None)[0]) == [f16, f16, f32, f32, f16, f16]
    # A call logged wholly in float32 becomes float16; a logged cast to half stays that cast.
    (relu,) = log.inputs_for("aten.relu.default")
    assert _dtypes(materialize(relu, dtype=f16)[0]) == [f16]
    (to_copy,) = log.inputs_for("aten._to_copy.default")
    args, kwargs = materialize(to_copy, dtype=f16)
    assert _dtypes(args) == [f32] and kwargs == {"dtype": f16}
    args, kwargs = materialize(to_copy, dtype=f32)
    assert _dtypes(args) == [f32] and kwargs == {"dtype": f32}


def test_cpu_inputs_are_made_every_round_and_keep_their_values() -> None:
    """The CPU design: no inputs held by a prepared input (each round makes its own), the same
    values from one process to the next, and the fastest round as the statistic."""
    log = parse_log_text(MIXED_LOG, "mixed.txt")
    (relu,) = log.inputs_for("aten.relu.default")
    options = op_timing.MeasureOptions(repeats=2, sample_window_s=0.002)
    prepared = op_timing._prepare(0, torch.ops.aten.relu.default, relu, options)
    assert prepared.device_inputs is None
    first = op_timing._fresh_graph_inputs(torch.ops.aten.relu.default, relu, options)
    second = op_timing._fresh_graph_inputs(torch.ops.aten.relu.default, relu, options)
    assert first[0].data_ptr() != second[0].data_ptr() and torch.equal(first[0], second[0])
    code = "from benchkit.measure.operators.log_format import parse_log_text as p;" + (
        "from benchkit.measure.operators.materialize import materialize as m;"
        f"print(m(p({MIXED_LOG!r}).inputs_for('aten.relu.default')[0])[0][0].sum().item())"
    )
    other_process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(other_process.stdout) == pytest.approx(first[0].sum().item(), rel=1e-6)


def test_statistic_and_method_per_device() -> None:
    cpu = op_timing.MeasureOptions(repeats=30)
    cuda = op_timing.MeasureOptions(device="cuda", repeats=30)
    assert cpu.statistic is op_timing.Statistic.FASTEST_ROUND
    assert cuda.statistic is op_timing.Statistic.MEDIAN_OF_REPEATS
    assert cpu.statistic.combine([3.0, 1.0, 2.0, 9.0]) == 1.0
    assert cuda.statistic.combine([3.0, 1.0, 2.0, 9.0]) == 2.5
    assert cuda.method == "CUDA in CUDA graphs, inductor's benchmark_gpu per repeat, median of repeats of 30"
    launches = op_timing.MeasureOptions(device="cuda", repeats=3, cudagraphs=False)
    assert "without CUDA graphs (launches included)" in launches.method
    assert cpu.method == "CPU, 1 thread(s), fastest round of 30"


def test_cuda_default_set_is_gpu_sized_in_both_dtypes() -> None:
    workload = op_workload.load_suite("cuda-default")
    assert workload.operators == op_workload.CUDA_DEFAULT_OPERATORS
    assert op_workload.asv_workload("cuda").operators == op_workload.CUDA_DEFAULT_OPERATORS
    assert op_workload.asv_workload("cpu").operators == op_workload.DEFAULT_OPERATORS
    for operator in workload.operators:
        items = workload.inputs(operator)
        first_dtypes = [item.tensors[0].dtype for item in items]
        assert first_dtypes == ["f16", "f32"], operator  # the most-called input in each dtype
        elements = max(math.prod(t.shape) for t in items[0].tensors if hasattr(t, "shape"))
        assert elements >= 1_000_000, operator  # GPU-sized: the CPU set's inputs are far smaller
    (log_softmax, _) = workload.inputs("aten._log_softmax.default")
    assert log_softmax.label == "4096x30522 f16, 1, False"


def test_bundled_gpu_logs_are_what_the_models_record() -> None:
    """The CUDA set's logs are regenerated from `gpu_models` on the meta device, exactly."""
    for name, spec in GPU_MODELS.items():
        for dtype in RECORDED_DTYPES:
            recorded = record_gpu_model(spec, dtype).to_text()
            assert recorded == gpu_log_path(name, dtype).read_text(), (
                f"{name} {dtype}: run record_operator_logs"
            )
    # meta gives the GPU kernels' dtypes: layer norm keeps float32 statistics for half inputs.
    bert = gpu_log_path("bert", "float16").read_text()
    assert "T([32, 128, 1], f32), T([32, 128, 1], f32)" in bert


def test_device_is_part_of_the_benchmark_name() -> None:
    cpu = names.BenchmarkName.parse("operators.aten_mm_default.track_compiled_over_eager")
    cuda = names.BenchmarkName.parse("operators_cuda.aten_mm_default.track_eager_seconds(('4096x768 f16',))")
    assert (cpu.device, cpu.class_name, cpu.metric) == (
        "cpu",
        "aten_mm_default",
        names.Metric.COMPILED_OVER_EAGER,
    )
    assert (cuda.device, cuda.class_name, cuda.metric) == (
        "cuda",
        "aten_mm_default",
        names.Metric.EAGER_SECONDS,
    )
    assert names.BenchmarkName.parse("instruction_counts.x.track_instructions").device is None
    assert names.BenchmarkName.parse("operators.aten_mm_default.setup").metric is None
    assert names.operator_class_name("aten.mm.default") == "aten_mm_default"


def test_site_operator_rows_keep_devices_apart() -> None:
    from benchkit.history.results.read import Measurement, ResultSet
    from benchkit.report.site.data import BenchmarkInfo, operator_rows

    def measured(value: float) -> Measurement:
        return Measurement(value, None, None, "v")

    measurements = {}
    for module, ratio in (("operators", 0.5), ("operators_cuda", 0.25)):
        for method, value in (
            ("track_compiled_over_eager", ratio),
            ("track_eager_seconds", 2e-3),
            ("track_compiled_seconds", 2e-3 * ratio),
            ("track_compile_seconds", 0.1),
        ):
            measurements[(f"{module}.aten_mm_default.{method}(('in',))", "env")] = measured(value)
    # A CUDA benchmark that a machine without a GPU recorded as skipped shows no row.
    measurements[("operators_cuda.aten_relu_default.track_compiled_over_eager(('in',))", "env")] = measured(
        math.nan
    )
    infos = {
        name: BenchmarkInfo(name.split("(")[0], ("in",), ("input",), name, None) for name, _ in measurements
    }
    rows = operator_rows(ResultSet("c", "m", measurements), infos)
    assert [(r.operator, r.device, r.speedups[1] if r.speedups else None) for r in rows] == [
        ("aten.mm.default", "cpu", 2.0),
        ("aten.mm.default", "cuda", 4.0),
    ]


@no_cuda
def test_cuda_timing_without_a_device_says_so_after_one_process(tmp_path: Path) -> None:
    started = time.perf_counter()
    data = op_asv.measure_default_set_for_asv(["aten.relu.default"], "cuda")
    assert data == {"operators": {}, "no_device": "no CUDA device", "device": "cuda"}
    assert time.perf_counter() - started < 60  # one process that imports torch, nothing timed


@no_cuda
@pytest.mark.slow
def test_asv_records_cuda_benchmarks_as_skipped_without_a_gpu(tmp_path: Path) -> None:
    """Through real asv on this CPU machine: every selected CUDA benchmark is a skip (NaN in the
    results file, the reason on asv's output), none a failure; CPU and CUDA names differ."""
    # A git repository of one commit stands for the measured build (--set-commit-hash).
    repo = tmp_path / "history"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "build"], check=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    results = tmp_path / "results"
    conf = json.loads("\n".join(line for line in (REPO / "asv.conf.json").read_text().splitlines()
                                if not line.lstrip().startswith("//")))  # fmt: skip
    conf.update(repo=str(repo), results_dir=str(results), html_dir=str(tmp_path / "html"),
                env_dir=str(tmp_path / "env"), benchmark_dir=str(REPO / "benchmarks"))  # fmt: skip
    conf_path = tmp_path / "asv.conf.json"
    conf_path.write_text(json.dumps(conf))
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "200"}
    subprocess.run(["asv", "machine", "--yes", "--config", str(conf_path)], env=env, check=True,
                   capture_output=True, cwd=REPO)  # fmt: skip
    completed = subprocess.run(
        [
            "asv",
            "run",
            "--python=same",
            "--quick",
            "--show-stderr",
            "--set-commit-hash",
            commit,
            "--config",
            str(conf_path),
            "-b",
            "^operators_cuda\\.aten_relu_default\\.",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    files = [p for p in results.rglob("*.json") if p.name not in ("machine.json", "benchmarks.json")]
    assert len(files) == 1
    recorded = json.loads(files[0].read_text())["results"]
    recorded_names = sorted(recorded)
    expected = sorted(
        f"operators_cuda.aten_relu_default.{metric.method}" for metric in names.OPERATOR_METRICS
    )
    assert recorded_names == expected
    for name in recorded_names:
        values = recorded[name][0]
        assert values and all(v is not None and math.isnan(v) for v in values), (name, values)
    out = completed.stdout + completed.stderr
    # asv's output names the reason twice per benchmark, one benchmark per metric.
    assert out.count("skipped: no CUDA device") == 2 * len(names.OPERATOR_METRICS) and "failed" not in out


def test_run_summary_counts_cuda_apart_and_a_gpu_less_skip_is_no_problem() -> None:
    from benchkit.history.results.read import Measurement
    from benchkit.report.run_summary import metric_of, summarize_build

    cpu = "operators.aten_relu_default.track_compiled_over_eager(('8x64x512 f32',))"
    cuda = "operators_cuda.aten_relu_default.track_compiled_over_eager(('64x64x56x56 f16',))"
    assert (metric_of(cpu), metric_of(cuda)) == ("operator timings", "operator timings (cuda)")
    skipped, number = Measurement(math.nan, None, None, "v"), Measurement(0.5, None, None, "v")
    without_gpu = summarize_build("c", "build", [cpu, cuda], {cpu: number, cuda: skipped})
    assert without_gpu.counts["operator timings (cuda)"]["skipped"] == 1
    assert without_gpu.problems() == []
    # Skips elsewhere still fail closed; a CUDA benchmark that failed is a problem too.
    cpu_skipped = summarize_build("c", "build", [cpu, cuda], {cpu: skipped, cuda: skipped})
    assert cpu_skipped.problems() == ["build: no operator timings numbers (1 skipped)"]
    failed = summarize_build(
        "c", "build", [cpu, cuda], {cpu: number, cuda: Measurement(None, None, None, "v")}
    )
    assert failed.problems() == ["build: no operator timings (cuda) numbers (1 failed)"]


def test_gpu_check_compares_benchkit_csv_and_reference_json(tmp_path: Path) -> None:
    """The side-by-side of lab/gpu_check.sh, on files in the two formats; and the script parses."""
    csv_path = tmp_path / "bk.csv"
    csv_path.write_text(
        "Operator,inductor 20th,inductor 50th,inductor 80th,elapsed,eager abs,inductor abs,inputs,failed,"
        "device,statistic\n"
        "aten.mm.default,1.0,1.45,1.7,2.0,0.001,0.0007,2,0,cuda,median of repeats\n"
        "aten.gelu.default,0.9,0.90,1.0,1.0,0.001,0.001,1,1,cuda,median of repeats\n"
        "aten.embedding.default,1.1,1.2,1.3,1.0,0.001,0.001,2,0,cuda,median of repeats\n"
    )
    reference = {
        "operators": {
            "aten.mm.default": {"quantiles": [1.0, 1.40, 1.8], "speedups": [1.2, 1.6]},
            "aten.gelu.default": {"quantiles": [0.9, 1.0, 1.0], "speedups": [0.95, 1.0]},
        }
    }
    ref_path = tmp_path / "ref.json"
    ref_path.write_text(json.dumps(reference))
    common = ["--benchkit-seconds", "30", "--reference-seconds", "31", "--title", "t"]

    def compare(left: Path) -> str:
        command = [
            sys.executable,
            "-m",
            "lab.gpu_compare",
            "--benchkit-csv",
            str(left),
            "--reference-json",
            str(ref_path),
        ]
        return subprocess.run(
            [*command, *common], capture_output=True, text=True, check=True, cwd=REPO
        ).stdout

    out = compare(csv_path)
    assert "| aten.mm.default | 1.450 | 1.400 | +3.6% | 2 (0) | 2 |" in out
    assert "within 5% of the reference: 1/2 (50%)" in out
    assert "failed or missing in benchkit: aten.gelu.default" in out
    assert "benchkit only (the reference skips them): aten.embedding.default" in out
    assert "benchkit 30 s, reference 31 s" in out
    assert "within 5% of the reference: 2/2 (100%)" in compare(ref_path)  # A/A: a run against itself
    subprocess.run(["bash", "-n", str(REPO / "lab" / "gpu_check.sh")], check=True)


def test_gpu_check_compares_two_benchkit_runs_and_their_kernels(tmp_path: Path) -> None:
    """The A/A of lab/gpu_check.sh: two benchkit CSVs of one log, per operator the median
    speedups and whether the two runs timed the same generated kernels."""
    header = (
        "Operator,inductor 20th,inductor 50th,inductor 80th,elapsed,eager abs,inductor abs,inputs,failed,"
        "device,statistic,kernels\n"
    )
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text(
        header + "aten.mm.default,1,1.450,2,2,0.001,0.0007,2,0,cuda,median of repeats,3fa2c1d09b4e\n"
        "aten.copy_.default,1,0.820,1,1,0.001,0.001,2,0,cuda,median of repeats,0a0b0c0d0e0f\n"
        "aten.gelu.default,1,0.950,1,1,0.001,0.001,2,0,cuda,median of repeats,\n"
    )
    second.write_text(
        header + "aten.mm.default,1,1.460,2,2,0.001,0.0007,2,0,cuda,median of repeats,3fa2c1d09b4e\n"
        "aten.copy_.default,1,1.000,1,1,0.001,0.001,2,0,cuda,median of repeats,77ab01c2d3e4\n"
        "aten.gelu.default,1,0.951,1,1,0.001,0.001,2,0,cuda,median of repeats,\n"
    )
    command = [sys.executable, "-m", "lab.gpu_compare", "--title", "A/A"]
    run = [*command, "--benchkit-csv", str(first), "--second-csv", str(second)]
    out = subprocess.run(run, capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert "| aten.mm.default | 1.450 | 1.460 | +0.7% | yes |" in out
    assert "| aten.copy_.default | 0.820 | 1.000 | +22.0% | no (0a0b0c0d0e0f → 77ab01c2d3e4) |" in out
    assert "| aten.gelu.default | 0.950 | 0.951 | +0.1% | not recorded |" in out
    assert "median speedup within 5% across the runs: 2/3 (67%)" in out
    assert "the same generated kernels in both runs: 1/2 operators that recorded them" in out
    both = subprocess.run([*run, "--reference-json", str(first)], capture_output=True, text=True)
    assert both.returncode == 2 and "give one of --reference-json and --second-csv" in both.stderr
