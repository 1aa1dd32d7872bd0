"""benchkit operators: operator resolution, skip logic, statistics, CSV, a real inductor compile, asv."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from benchkit.cli import main
from benchkit.cli import operators as operators_cli
from benchkit.errors import UserError
from benchkit.measure.operators import asv as op_asv
from benchkit.measure.operators import kernels as op_kernels
from benchkit.measure.operators import summary as op_summary
from benchkit.measure.operators import timing as op_timing
from benchkit.measure.operators import workload as op_workload
from benchkit.measure.operators.log_format import parse_log_text
from benchkit.measure.operators.suite import measure_operators
from benchkit.util import torch_build_id

REPO = Path(__file__).resolve().parent.parent
PYTORCH_LOGS = Path(__file__).resolve().parent / "data" / "operator_inp_logs"  # PyTorch's folder layout

TINY_LOG = """\
Operator: aten.relu.default
cnt: 3, ((T([16, 64], f32),), {})
Operator: aten.nll_loss_forward.default
cnt: 1, ((T([8, 10], f32), T([8], i64), None, 1, -100), {})
Operator: aten.masked_fill_.Scalar
cnt: 1, ((T([8, 10], f32), T([8, 10], b8), -1.0), {})
"""

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CPU-only machine)")


@pytest.fixture(autouse=True)
def _restore_torch_threads() -> Iterator[None]:
    """benchkit operators sets the thread count for the process; other tests must not inherit it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def inductor_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The session's benchkit cache (tests/conftest.py), never the user's: kernels land there."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    return Path(os.environ["BENCHKIT_CACHE_DIR"])


# --- what to measure ------------------------------------------------------------


def test_default_set_size() -> None:
    workload = op_workload.load_suite("default")
    inputs = [item for op in workload.operators for item in workload.inputs(op)]
    assert len(workload.operators) >= 15
    assert len(inputs) >= 30
    for op in workload.operators:
        labels = op_workload.input_labels(workload.inputs(op))
        assert len(set(labels)) == len(labels)
        assert op_workload.skip_reason(op_workload.resolve_operator(op)) is None, op


def test_resolve_operator_by_attribute_lookup() -> None:
    assert op_workload.resolve_operator("aten.add.Tensor") is torch.ops.aten.add.Tensor
    for bad in ("aten.add", "__import__('os').system", "aten.add.Tensor; rm", "a.b.c.d"):
        with pytest.raises(UserError, match=r"expected namespace\.name\.overload"):
            op_workload.resolve_operator(bad)
    with pytest.raises(UserError, match="does not exist in this torch build"):
        op_workload.resolve_operator("aten.no_such_op.default")
    with pytest.raises(UserError, match="does not exist"):
        op_workload.resolve_operator("aten.add.NoSuchOverload")


def test_select_operators() -> None:
    workload = op_workload.load_suite("models")
    assert op_workload.select_operators(workload, []) == list(workload.operators)
    assert op_workload.select_operators(workload, ["all"]) == list(workload.operators)
    assert op_workload.select_operators(workload, ["aten.mm.default"]) == ["aten.mm.default"]
    # A packet name selects every logged overload of it (aten.add_ is another packet).
    assert op_workload.select_operators(workload, ["aten.add"]) == ["aten.add.Tensor"]
    log = parse_log_text(
        "Operator: aten.add.Tensor\ncnt: 1, ((T([2], f32), T([2], f32)), {})\n"
        "Operator: aten.add.Scalar\ncnt: 1, ((T([2], f32), 2), {})\n"
    )
    both = op_workload.Workload("x", log, ("aten.add.Scalar", "aten.add.Tensor"))
    assert op_workload.select_operators(both, ["aten.add"]) == ["aten.add.Tensor", "aten.add.Scalar"]
    with pytest.raises(UserError, match=r"--op aten.cos.default: no inputs logged for it in models"):
        op_workload.select_operators(workload, ["aten.cos.default"])
    with pytest.raises(UserError, match="does not exist"):
        op_workload.select_operators(workload, ["aten.cso.default"])


def test_skip_reasons() -> None:
    aten = torch.ops.aten
    assert "input generator NYI" in op_workload.skip_reason(aten.masked_fill_.Scalar)
    # Index-taking operators with a rule (benchkit.measure.operators.index_inputs) are measured.
    assert op_workload.skip_reason(aten.nll_loss_forward.default) is None
    assert op_workload.skip_reason(aten.embedding.default) is None
    assert "non-compute" in op_workload.skip_reason(aten._unsafe_view.default)
    assert "no inductor lowering or decomposition" in op_workload.skip_reason(aten._add_relu.Tensor)
    assert "convolution" in op_workload.skip_reason(aten.convolution.default)
    assert "falls back" in op_workload.skip_reason(aten._scaled_dot_product_flash_attention_for_cpu.default)
    assert op_workload.skip_reason(aten.add.Tensor) is None
    assert op_workload.skip_reason(aten.native_layer_norm.default) is None  # a decomposition counts


def test_suites_and_their_errors(tmp_path: Path) -> None:
    assert op_workload.load_suite("mlp").log.inputs_for("aten.gelu.default")
    directory = op_workload.load_suite(str(PYTORCH_LOGS))  # logs in nested folders
    assert directory.name == "operator_inp_logs" and "aten.tril.default" in directory.operators
    assert {"aten.relu_.default", "aten.gather.default"} <= set(
        directory.operators
    )  # timm_, torchbench_train
    with pytest.raises(UserError, match="operator_inp_logs/timm_train"):
        op_workload.load_suite("timm")
    with pytest.raises(UserError, match="not a bundled suite"):
        op_workload.load_suite("nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no \*\.txt"):
        op_workload.load_suite(str(tmp_path / "empty"))


def test_ranked_inputs_prefer_frequent_then_large() -> None:
    log = parse_log_text(
        "Operator: aten.relu.default\n"
        "cnt: 1, ((T([2, 2], f32),), {})\n"
        "cnt: 1, ((T([64, 64], f32),), {})\n"
        "cnt: 5, ((T([3], f32),), {})\n"
    )
    ranked = op_workload.rank_inputs(log.inputs_for("aten.relu.default"))
    assert [item.label for item in ranked] == ["3 f32", "64x64 f32", "2x2 f32"]


def test_inductor_config_presets_and_key_values() -> None:
    assert operators_cli.parse_backend("autotune").config_patches["max_autotune"] is True
    backend = operators_cli.parse_backend("max_autotune=false,max_autotune_gemm=1")
    assert backend.config_patches == {"max_autotune": False, "max_autotune_gemm": True}
    with pytest.raises(UserError, match="no config option 'not_an_option'"):
        operators_cli.parse_backend("not_an_option=1")
    with pytest.raises(UserError, match="expected true/false"):
        operators_cli.parse_backend("max_autotune=maybe")
    with pytest.raises(UserError, match="not a preset"):
        operators_cli.parse_backend("fast")


# --- statistics and CSV -----------------------------------------------------------


def _measurement(eager: float, *compiled: float) -> op_timing.InputMeasurement:
    return op_timing.InputMeasurement("aten.x.default", "in", "f:1", eager, compiled, (1.0,) * len(compiled))


def test_quantiles_and_csv_like_operatorbench() -> None:
    backends = (op_timing.Backend("inductor"),)
    results = [_measurement(e, 1.0) for e in (1.0, 2.0, 3.0, 4.0, 5.0)]
    results.append(op_timing.InputMeasurement("aten.x.default", "bad", "f:2", error="boom"))
    summary = op_summary.summarize("aten.x.default", results, backends, elapsed_s=2.5)
    assert summary is not None
    assert summary.speedup_quantiles == ((pytest.approx(1.8), pytest.approx(3.0), pytest.approx(4.2)),)
    assert summary.mean_seconds == (3.0, 1.0) and summary.measured == 5 and summary.failed == 1
    text = op_summary.render_csv(
        [summary], op_summary.summary_backend_names(backends), device="cuda", statistic="median of repeats"
    )
    rows = list(csv.reader(text.splitlines()))
    # operatorbench's columns first, in its order; benchkit's after them.
    assert rows[0] == ["Operator", "inductor 20th", "inductor 50th", "inductor 80th", "elapsed", "eager abs",
                       "inductor abs", "inputs", "failed", "device", "statistic", "kernels"]  # fmt: skip
    assert rows[1][:4] == ["aten.x.default", "1.800000", "3.000000", "4.200000"]
    assert rows[1][-5:] == ["5", "1", "cuda", "median of repeats", ""]  # no kernel recorded
    assert op_summary.summarize("aten.x.default", results[-1:], backends, 1.0) is None


def test_two_backends_add_a_ratio_column() -> None:
    backends = (op_timing.Backend("inductor"), op_timing.Backend("autotune"))
    summary = op_summary.summarize("aten.x.default", [_measurement(4.0, 2.0, 1.0)], backends, 1.0)
    assert summary is not None
    assert summary.backend_names == ("inductor", "autotune", "inductor/autotune")
    assert [q[1] for q in summary.speedup_quantiles] == [2.0, 4.0, 0.5]
    assert op_summary.csv_header(summary.backend_names)[7:10] == [
        "inductor/autotune 20th",
        "inductor/autotune 50th",
        "inductor/autotune 80th",
    ]


def test_accuracy_check_reports_mismatches() -> None:
    item = parse_log_text(TINY_LOG).inputs_for("aten.relu.default")[0]
    options = op_timing.MeasureOptions()

    def eager(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.relu(x),)

    assert op_timing._check_accuracy(torch.ops.aten.relu.default, item, options, eager, eager) == "ok"
    wrong = op_timing._check_accuracy(torch.ops.aten.relu.default, item, options, eager, lambda x: (x + 1,))
    assert wrong.startswith("mismatch (max abs diff")


def test_half_to_float_follows_the_dtype_remap() -> None:
    log = op_workload.load_suite(str(PYTORCH_LOGS)).log
    (item,) = log.inputs_for("aten._softmax.default")
    softmax = torch.ops.aten._softmax.default
    args, _ = op_timing.operator_arguments(softmax, item, op_timing.MeasureOptions(dtype="float32"))
    assert args[0].dtype == torch.float32 and args[2] is False  # float input: plain float softmax
    args, _ = op_timing.operator_arguments(softmax, item, op_timing.MeasureOptions(dtype="recorded"))
    assert args[0].dtype == torch.float16 and args[2] is True


# --- real measurement ----------------------------------------------------------------


def test_real_inductor_compile_and_timing_on_cpu(inductor_cache: Path) -> None:
    """One real compile_fx of aten.relu on CPU, accuracy-checked, then timed against eager."""
    log = parse_log_text(TINY_LOG, "tiny.txt")
    item = log.inputs_for("aten.relu.default")[0]
    op_kernels.configure_inductor_cache()
    torch.set_num_threads(1)
    checked = op_timing.measure_inputs(
        [(torch.ops.aten.relu.default, item)], op_timing.MeasureOptions(accuracy_checking=True)
    )
    (result,) = checked
    assert result.error is None and result.accuracy == "ok"
    assert result.compile_s[0] > 0
    (timed,) = op_timing.measure_inputs(
        [(torch.ops.aten.relu.default, item)], op_timing.MeasureOptions(repeats=3, sample_window_s=0.005)
    )
    assert timed.ok and timed.accuracy is None
    assert 0 < timed.eager_s < 0.01 and 0 < timed.compiled_s[0] < 0.01
    assert math.isfinite(timed.speedups[0])
    # What inductor generated, recorded: the second compile of the same graph in this process
    # (numbered otherwise in the code's comments) has the same hash; C++ kernels autotune nothing.
    (kernel,) = timed.kernels
    assert result.kernels == timed.kernels and len(kernel.code_hash) == 12
    assert kernel.configs == () and kernel.fingerprint == kernel.code_hash


def test_a_warm_compile_is_served_by_inductors_graph_cache_with_static_shapes(inductor_cache: Path) -> None:
    """A compile of a graph inductor compiled before (a later timing process of the build) is
    loaded from its graph cache, not lowered again, and runs the very code a cold one generated:
    shapes as the example tensors give them, no symbolic sizes."""
    from torch._dynamo.utils import counters
    from torch._inductor.utils import gen_gm_and_inputs

    op_kernels.configure_inductor_cache()
    x = torch.randn(3, 7, 13)  # a shape no other test compiles: the first compile is cold
    hashes, sources = [], []
    counters.clear()
    for _ in range(2):
        gm, gm_args = gen_gm_and_inputs(torch.ops.aten.sigmoid.default, (x,), {})
        with op_kernels.collecting_output_code() as output:
            compiled = op_kernels.compile_cached(gm, gm_args)
        (result,) = compiled(*gm_args)
        assert torch.allclose(result, torch.sigmoid(x))
        hashes.append(output.code_hash)
        sources.append("".join(output.sources))
    assert counters["inductor"]["fxgraph_cache_miss"] == 1
    assert counters["inductor"]["fxgraph_cache_hit"] == 1
    assert hashes[0] == hashes[1] and len(hashes[0]) == 12
    assert "ks0" not in sources[0] and "(3, 7, 13)" in sources[0]


def test_kernels_and_their_autotuning_live_in_benchkits_cache_per_torch_build_unless_cold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The setting that makes the kernel choice the same in every process timing a build: the
    warm cache is benchkit's folder for this torch build (inductor keeps its autotune choices
    and, unless told otherwise, Triton's binaries inside it); cold, a fresh folder holds both,
    whatever Triton cache the environment names."""
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(name, "")  # restored after the test, whatever happens to it below
        monkeypatch.delenv(name)
    warm = op_kernels.configure_inductor_cache()
    assert warm == Path(os.environ["BENCHKIT_CACHE_DIR"]) / "inductor" / torch_build_id()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(warm) and "TRITON_CACHE_DIR" not in os.environ
    assert op_kernels.configure_inductor_cache() == warm  # every process of the build: the same
    # A folder the user chose holds one folder per build (kernels keyed by their source would
    # otherwise be found by the next build); the processes it starts keep that folder.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/chosen/inductor")
    mine = op_kernels.configure_inductor_cache()
    assert mine == Path("/chosen/inductor") / torch_build_id()
    assert op_kernels.configure_inductor_cache() == mine
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/else")
    cold = op_kernels.configure_inductor_cache(cold=True)
    assert cold != warm and cold.is_dir() and not any(cold.iterdir())
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cold)
    assert os.environ["TRITON_CACHE_DIR"] == str(cold / "triton")


def test_compiling_ahead_measures_what_compiling_in_turn_does(inductor_cache: Path) -> None:
    """The pipeline of `benchkit operators` on CUDA (next operator compiled on a background
    thread while this one is timed), forced on the CPU: same operators, same inputs, same
    failures and skips as compiling each operator in turn; the interpreter's switch interval
    is restored afterwards."""
    log = parse_log_text(
        "Operator: aten.relu.default\ncnt: 1, ((T([64, 64], f32),), {})\n"
        "Operator: aten.mm.default\ncnt: 1, ((T([2, 3], f32), T([4, 5], f32)), {})\n"  # cannot compile
        "Operator: aten.masked_fill_.Scalar\ncnt: 1, ((T([4], f32), T([4], b8), 0), {})\n"  # skipped
        "Operator: aten.add.Tensor\ncnt: 1, ((T([64, 64], f32), T([64, 64], f32)), {})\n"
        "cnt: 1, ((T([8, 8], f32), 2), {})\n",
        "plan.txt",
    )
    plan = [(name, log.inputs_for(name)) for name in log.operators]
    switch_interval = sys.getswitchinterval()

    def run(ahead: bool) -> list[Any]:
        options = op_timing.MeasureOptions(repeats=2, sample_window_s=0.002, compile_ahead=ahead)
        return list(measure_operators(plan, options))

    ahead, in_turn = run(True), run(False)
    assert sys.getswitchinterval() == switch_interval
    assert [o.compiled_ahead for o in ahead] == [False, True, False, True]
    assert not any(o.compiled_ahead for o in in_turn)
    for first, second in zip(ahead, in_turn, strict=True):
        assert (first.name, first.skip_reason) == (second.name, second.skip_reason)
        assert [(r.label, r.ok, r.error) for r in first.results] == [
            (r.label, r.ok, r.error) for r in second.results
        ]
    relu, mm, masked_fill, add = ahead
    assert relu.results[0].ok and relu.results[0].compile_s[0] > 0
    assert mm.results[0].error and mm.results[0].error.startswith("RuntimeError")
    assert masked_fill.skip_reason and not masked_fill.results
    assert [r.ok for r in add.results] == [True, True] and add.results[0].compile_s[0] > 0
    # Each input's kernel record is its own compile's, on the background thread as on this one.
    hashes = [[r.kernels[0].code_hash for r in o.results if r.ok] for o in ahead]
    assert hashes == [[r.kernels[0].code_hash for r in o.results if r.ok] for o in in_turn]
    assert len({relu.results[0].kernels[0].code_hash, *hashes[3]}) == 3


def test_compiling_ahead_is_on_only_where_no_figure_feels_it() -> None:
    cuda = op_timing.MeasureOptions(device="cuda")
    assert cuda.overlaps_compile
    assert not op_timing.MeasureOptions().overlaps_compile  # the CPU times on the CPU
    assert not op_timing.MeasureOptions(device="cuda", cudagraphs=False).overlaps_compile  # launches timed
    assert not op_timing.MeasureOptions(device="cuda", profile=True).overlaps_compile
    assert not op_timing.MeasureOptions(device="cuda", accuracy_checking=True).overlaps_compile
    assert not op_timing.MeasureOptions(device="cuda", compile_ahead=False).overlaps_compile
    assert not op_timing.MeasureOptions(device="cuda", record_cache_state=True).overlaps_compile


def test_failing_input_is_recorded_and_the_run_goes_on(inductor_cache: Path) -> None:
    log = parse_log_text(
        "Operator: aten.mm.default\ncnt: 1, ((T([2, 3], f32), T([4, 5], f32)), {})\n"  # shapes do not match
        "Operator: aten.add.Tensor\ncnt: 1, ((ST([4], f32, torch.sparse_coo, True, 2), 1), {})\n",
        "bad.txt",
    )
    pairs = [
        (torch.ops.aten.mm.default, log.inputs_for("aten.mm.default")[0]),
        (torch.ops.aten.add.Tensor, log.inputs_for("aten.add.Tensor")[0]),
    ]
    mm, sparse = op_timing.measure_inputs(pairs, op_timing.MeasureOptions(repeats=1))
    assert mm.error and mm.location == "bad.txt:2"
    assert sparse.error.startswith("unsupported input: bad.txt:4: sparse")


def test_cli_writes_operatorbench_csv(
    tmp_path: Path, inductor_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "my_model.txt"
    log.write_text(TINY_LOG)
    code = main(["operators", "--inp-file", str(log), "--repeats", "2", "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    csv_path = tmp_path / "operatorbench_my_model_float32.csv"
    assert f"Wrote {csv_path}" in out
    assert "Timing: CPU, 1 thread(s), fastest round of 2; speedup = eager / compiled time" in out
    assert "Skipping aten.masked_fill_.Scalar: input generator NYI" in out
    rows = list(csv.DictReader(csv_path.read_text().splitlines()))
    assert [row["Operator"] for row in rows] == ["aten.nll_loss_forward.default", "aten.relu.default"]
    assert all(float(row["inductor 50th"]) > 0 and float(row["eager abs"]) > 0 for row in rows)
    columns = {(row["device"], row["statistic"], row["inputs"]) for row in rows}
    assert columns == {("cpu", "fastest round", "1")}
    assert len({row["kernels"] for row in rows}) == 2 and all(len(row["kernels"]) == 12 for row in rows)


def test_cli_errors_are_one_line(
    tmp_path: Path, inductor_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("Operator: aten.relu.default\ncnt: 1, ((T([3], f32), open('x')), {})\n")
    assert main(["operators", "--inp-file", str(bad), "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"benchkit operators: error: {bad}:2: column 24: unknown call open(...) " + (
        "(only T(...) and ST(...) are allowed)"
    )
    assert main(["operators", "--op", "aten.nope.default", "--output-dir", str(tmp_path)]) == 2
    assert "aten.nope.default" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operators", "--device", "cuda", "--output-dir", str(tmp_path)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


@needs_cuda
def test_cuda_timing(inductor_cache: Path) -> None:
    item = parse_log_text(TINY_LOG).inputs_for("aten.relu.default")[0]
    (result,) = op_timing.measure_inputs(
        [(torch.ops.aten.relu.default, item)], op_timing.MeasureOptions(device="cuda", repeats=2)
    )
    assert result.ok and result.eager_s > 0 and result.compiled_s[0] > 0


# --- slow: whole files and asv ----------------------------------------------------------


@pytest.mark.slow
def test_pytorch_written_logs_benchmark(tmp_path: Path, inductor_cache: Path) -> None:
    """Logs in PyTorch's format and folder layout (our own fixtures) parse and benchmark end to end,
    index-taking operators included."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchkit.cli",
            "operators",
            "--suite",
            str(PYTORCH_LOGS),
            "--repeats",
            "3",
            "--accuracy-checking",
            "--output-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, BENCHKIT_CACHE_DIR=str(inductor_cache)),
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "operatorbench_operator_inp_logs_float32.csv").open()))
    measured = {row["Operator"] for row in rows}
    expected = {"aten._softmax.default", "aten.gelu.default", "aten.native_layer_norm.default",
                "aten.relu_.default", "aten.threshold_backward.default", "aten.sum.dim_IntList",
                # index-taking operators: measured with valid indices, not skipped
                "aten.embedding.default", "aten.embedding_dense_backward.default", "aten.gather.default",
                "aten.nll_loss_forward.default", "aten.nll_loss_backward.default"}  # fmt: skip
    assert expected <= measured
    assert "Skipping aten.convolution.default" in completed.stdout
    assert "Skipping aten.masked_fill_.Scalar" in completed.stdout
    assert "Skipping aten.new_empty.default: non-compute" in completed.stdout
    assert "Accuracy check failed" not in completed.stdout


def _asv_run(selection: str, inductor_cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`asv run --python=same --quick -b SELECTION` in this checkout, with 2 timing rounds."""
    return subprocess.run(
        ["asv", "run", "--python=same", "--quick", "--show-stderr", "-b", selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        # COLUMNS: asv shortens benchmark names to the terminal width.
        env=dict(
            os.environ,
            COLUMNS="200",
            BENCHKIT_CACHE_DIR=str(inductor_cache),
            BENCHKIT_OPERATOR_ROUNDS="2",
            **env,
        ),
    )


@pytest.mark.slow
def test_asv_runs_the_operator_benchmarks(inductor_cache: Path, tmp_path: Path) -> None:
    """Two timing processes, both compiling cold (the second in an empty cache of its own, not
    the first one's kernels): each input's compile time has two samples."""
    timing = tmp_path / "timing.json"
    completed = _asv_run(
        "operators.aten_relu_default",
        inductor_cache,
        BENCHKIT_OPERATOR_PROCESSES="2",
        BENCHKIT_COMPILE_REPLICATES="2",
        BENCHKIT_INDUCTOR_COLD="1",
        BENCHKIT_OPERATORS_JSON=str(timing),
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    inputs = json.loads(timing.read_text())["operators"]["aten.relu.default"]["inputs"]
    for result in inputs.values():
        assert result["compile_cache_hit"] == 0.0 and len(result["compile_replicates"]) == 2
        assert op_asv.compile_samples(result)["samples"] == result["compile_replicates"]
    out = completed.stdout
    for method in ("track_compiled_over_eager", "track_eager_seconds", "track_compiled_seconds",
                   "track_compile_seconds", "track_compile_cache_hit", "track_kernel_hash"):  # fmt: skip
        assert method in out
    assert out.count(" ok") >= 6 and "failed" not in out
    assert "8x64x512 f32" in out


def test_processes_combine_by_median_and_keep_failures() -> None:
    def run(eager: float, compiled: float, error: str | None = None, compile_s: float = 1.0) -> dict:
        hit = float(compile_s < 1.0)  # as the processes below: the first compiled, the others loaded
        result = {"eager_s": eager, "compiled_s": compiled, "compile_s": compile_s, "compile_cache_hit": hit}
        inputs = {"a": {**result, "error": error}}
        measured = {"op": {"inputs": inputs}, "skipped": {"skip": "why"}}
        return {"warm_up_s": 0.5, "elapsed_s": 9.0, "operators": measured}

    combined = op_asv._combine_processes(
        [run(2.0, 1.0, compile_s=3.0), run(9.0, 1.2, compile_s=0.1), run(2.2, 0.8, compile_s=0.1)]
    )
    entry = combined["operators"]["op"]["inputs"]["a"]
    # Medians: one odd process does not move the result.
    assert (entry["eager_s"], entry["compiled_s"]) == (2.2, 1.0)
    assert entry["compile_s"] == 3.0  # the first process is the one that compiled
    # Replicates of a compile time: only processes that compiled in the first one's cache state.
    assert entry["compile_replicates"] == [3.0] and op_asv.compile_samples(entry) == 3.0
    two_cold = op_asv._combine_processes([run(2.0, 1.0, compile_s=3.0), run(2.0, 1.0, compile_s=3.3)])
    both = two_cold["operators"]["op"]["inputs"]["a"]
    assert op_asv.compile_samples(both) == {"samples": [3.0, 3.3], "number": 1}
    assert entry["error"] is None and len(entry["per_process"]) == 3
    assert combined["operators"]["skipped"] == {"skip": "why"}
    failed = op_asv._combine_processes([run(2.0, 1.0), run(2.0, 1.0, error="boom")])
    assert failed["operators"]["op"]["inputs"]["a"]["error"] == "boom"


def test_asv_measures_the_logs_named_by_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BENCHKIT_OPERATOR_LOGS", raising=False)
    assert op_workload.asv_workload().operators == op_workload.DEFAULT_OPERATORS
    extra = tmp_path / "mine.txt"
    extra.write_text(TINY_LOG)
    monkeypatch.setenv("BENCHKIT_OPERATOR_LOGS", os.pathsep.join([str(PYTORCH_LOGS), str(extra)]))
    workload = op_workload.asv_workload()
    # Every operator of every log below the folder (nested), plus the file's.
    assert {
        "aten.embedding.default",
        "aten.relu_.default",
        "aten.gather.default",
        "aten.relu.default",
    } <= set(workload.operators)
    assert all(
        len(workload.inputs(op)) <= op_workload.DEFAULT_INPUTS_PER_OPERATOR for op in workload.operators
    )
    monkeypatch.setenv("BENCHKIT_OPERATOR_LOGS", str(tmp_path / "missing"))
    with pytest.raises(
        UserError, match=r"BENCHKIT_OPERATOR_LOGS: .*missing is neither a log file nor a folder"
    ):
        op_workload.asv_workload()


@pytest.mark.slow
def test_asv_tracks_a_users_operator_logs(inductor_cache: Path) -> None:
    """BENCHKIT_OPERATOR_LOGS over logs in PyTorch's nested layout: the embedding lookup (an
    index-taking operator) is measured through asv, with stable benchmark names."""
    completed = _asv_run(
        "operators.aten_embedding_default",
        inductor_cache,
        BENCHKIT_OPERATOR_LOGS=str(PYTORCH_LOGS),
        BENCHKIT_OPERATOR_PROCESSES="1",
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    out = completed.stdout
    # asv does not print setup_cache's output; the saved timing of this command says what was timed.
    commands = inductor_cache / "operators" / "asv-commands"
    saved = [json.loads(path.read_text()) for path in commands.glob("*.json")]
    timed = [data for data in saved if "aten.embedding.default" in data["operators"]]
    assert [(data["selected_operators"], list(data["operators"])) for data in timed] == [
        (1, ["aten.embedding.default"])
    ]
    assert "operators.aten_embedding_default.track_compiled_over_eager" in out
    assert out.count(" ok") >= 4 and "failed" not in out
