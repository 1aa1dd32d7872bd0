"""The operator-input log format: parsing without eval, materializing, recording."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.errors import UserError
from benchkit.measure.operators.inputs import (
    DTYPE_ABBREVIATIONS,
    DtypeName,
    LogFormatError,
    SparseTensorSpec,
    TensorSpec,
    TorchName,
    UnsupportedInputError,
    format_call,
)
from benchkit.measure.operators.log_format import load_log, load_logs, parse_call, parse_log_text
from benchkit.measure.operators.materialize import materialize
from benchkit.measure.operators.recorder import record

REPO = Path(__file__).resolve().parent.parent
PYTORCH_LOGS = Path(__file__).resolve().parent / "data" / "operator_inp_logs"  # PyTorch's layout
BERT_LOG = PYTORCH_LOGS / "hf_train" / "TinyBertForMaskedLM_training.txt"


# --- parsing ----------------------------------------------------------------


def test_pytorch_log_parses_with_strides_kwargs_and_scalars() -> None:
    log = load_log(BERT_LOG)
    assert len(log.operators) == 15
    assert len(log) == 17
    # PyTorch's loader renames the old overload name; so do we.
    assert "aten.sum.dim_IntList" in log.operators and "aten.sum.SymInt" not in log.operators

    (softmax,) = log.inputs_for("aten._softmax.default")
    assert softmax.count == 4
    assert softmax.args == (TensorSpec((2, 4, 64, 64), "f16", (16384, 64, 256, 1)), -1, True)
    assert softmax.kwargs == {}
    assert softmax.location == f"{BERT_LOG}:2"

    to_copy = log.inputs_for("aten._to_copy.default")
    assert to_copy[1].kwargs == {"dtype": DtypeName("i32"), "layout": TorchName("strided"), "device": "cuda"}

    (masked,) = log.inputs_for("aten.masked_fill_.Scalar")
    assert masked.args[2] == -math.inf
    (broadcast,) = log.inputs_for("aten.eq.Scalar")
    assert broadcast.args[0].stride == (4160, 65, 0, 1)
    (slice_backward,) = log.inputs_for("aten.slice_backward.default")
    assert slice_backward.args[1:] == ([2, 4, 64, 129], 3, 64, 9223372036854775807, 1)
    (new_empty,) = log.inputs_for("aten.new_empty.default")
    assert new_empty.kwargs["pin_memory"] is False
    (layer_norm,) = log.inputs_for("aten.native_layer_norm.default")
    assert layer_norm.args[1] == [128] and layer_norm.args[4] == pytest.approx(1e-12)
    (scalar_add,) = load_log(PYTORCH_LOGS / "timm_train" / "tinyconvnet_training.txt").inputs_for(
        "aten.add_.Tensor"
    )
    assert scalar_add.args == (TensorSpec((), "i64"), 1)


def test_python_literal_subset() -> None:
    args, kwargs = parse_call(
        "((T([4], f32), 2.5, -3, True, None, 'mean', \"x'y\", [1, [2]], (3,), (4), ()), "
        "{'alpha': 1e-05, dim: -1, 'memory_format': torch.channels_last, 'dtype': torch.float16})"
    )
    assert args == (TensorSpec((4,), "f32"), 2.5, -3, True, None, "mean", "x'y", [1, [2]], (3,), 4, ())
    assert kwargs == {
        "alpha": 1e-05,
        "dim": -1,
        "memory_format": TorchName("channels_last"),
        "dtype": DtypeName("f16"),
    }
    assert isinstance(args[2], int) and isinstance(args[1], float)


def test_sparse_tensors_parse_but_do_not_materialize() -> None:
    log = parse_log_text(
        "Operator: aten.add.Tensor\ncnt: 2, ((ST([8, 8], f32, torch.sparse_coo, True, 5),), {})\n"
    )
    (item,) = log.inputs_for("aten.add.Tensor")
    assert item.args == (SparseTensorSpec((8, 8), "f32", "sparse_coo", True, 5),)
    with pytest.raises(UnsupportedInputError, match="sparse"):
        materialize(item)


def test_identical_calls_merge_and_counts_add_up() -> None:
    text = "Operator: aten.relu.default\ncnt: 2, ((T([3], f32),), {})\n\ncnt: 5, ((T([3], f32),), {})\n"
    (item,) = parse_log_text(text).inputs_for("aten.relu.default")
    assert item.count == 7 and item.location == "<text>:2"
    merged = load_logs([BERT_LOG, BERT_LOG])
    assert merged.inputs_for("aten._softmax.default")[0].count == 8


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("cnt: 1, ((T([2, 3], f99),), {})", "unknown name 'f99'"),
        ("cnt: 1, ((T([2, 3], f32), eval('1')), {})", "unknown call eval(...)"),
        ("cnt: 1, ((__import__('os'),), {})", "unknown call __import__(...)"),
        ("cnt: 1, ((T([2], f32).__class__,), {})", "unexpected character"),
        ("cnt: 1, ((os.system,), {})", "unknown name 'os.system'"),
        ("cnt: 1, ((T([2, 3], f32, stride=(1,)),), {})", "stride has 1 entries but the shape has 2"),
        ("cnt: 1, ((T([2, -3], f32),), {})", "tensor shape must be a list of non-negative integers"),
        ("cnt: 1, ((T([2, 3], f32, strides=(3, 1)),), {})", "unknown keyword 'strides'"),
        ("cnt: 1, ((T([2, 3], f32),), {}", "column 31: expected ',' or ')', found 'end of line'"),
        ("cnt: 1, ((T([2, 3], f32),), {'a': 1)", "expected ',', found ')'"),
        ("cnt: 1, ((T([2, 3], f32),), {}) trailing", "after the value"),
        ("cnt: 1, ((T([2, 3], f32),),)", "expected a pair"),
        ("cnt: 1, (T([2], f32), [1])", "must be a {kwargs} dict"),
        ("cnt: x, ((T([2], f32),), {})", "whole number"),
        ("cnt: 1 ((T([2], f32),), {})", "whole number"),
        ("some text", "expected 'Operator: <name>' or 'cnt: <n>, (...)'"),
    ],
)
def test_malformed_lines_name_file_line_and_reason(line: str, message: str) -> None:
    text = f"Operator: aten.relu.default\ncnt: 1, ((T([3], f32),), {{}})\n{line}\n"
    with pytest.raises(LogFormatError) as error:
        parse_log_text(text, "my.txt")
    assert str(error.value).startswith("my.txt:3: ")
    assert message in str(error.value)


def test_structural_errors() -> None:
    with pytest.raises(LogFormatError, match=r"^a\.txt:1: input line before any 'Operator:' line"):
        parse_log_text("cnt: 1, ((T([3], f32),), {})\n", "a.txt")
    with pytest.raises(LogFormatError, match=r"^a\.txt:2: bad operator name 'aten\.add\(\)'"):
        parse_log_text("\nOperator: aten.add()\n", "a.txt")
    with pytest.raises(UserError, match="does not exist"):
        load_log(REPO / "no-such-log.txt")


def test_parsing_never_imports_torch() -> None:
    # asv imports the benchmark module (which parses the bundled logs) in every process.
    code = (
        "import sys; import benchmarks.operators as b; "
        "from benchkit.measure.operators.log_format import load_log; "
        f"load_log({str(BERT_LOG)!r}); assert 'torch' not in sys.modules, 'torch imported'; "
        "print(len([n for n in vars(b) if n.startswith('aten_')]))"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert int(completed.stdout) >= 15


# --- materializing ------------------------------------------------------------


def test_materialize_reproduces_shapes_strides_and_remaps_dtype_and_device() -> None:
    import torch

    log = load_log(BERT_LOG)
    for items in log.inputs.values():
        for item in items:
            args, kwargs = materialize(item, dtype=torch.float32, device="cpu")
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            specs = [a for a in item.args if isinstance(a, TensorSpec)]
            assert len(tensors) == len(specs)
            for tensor, spec in zip(tensors, specs, strict=True):
                assert tuple(tensor.shape) == spec.shape
                if spec.stride is not None:
                    assert tensor.stride() == spec.stride
                floating = spec.dtype in ("f16", "f32")
                assert (tensor.dtype == torch.float32) if floating else (tensor.dtype != torch.float32)
                assert tensor.device.type == "cpu"

    to_copy = log.inputs_for("aten._to_copy.default")
    _, kwargs = materialize(to_copy[1], dtype=torch.float32)
    # Integer dtypes are kept, the recorded CUDA device becomes the requested one.
    assert kwargs == {"dtype": torch.int32, "layout": torch.strided, "device": "cpu"}
    _, kwargs = materialize(to_copy[0], dtype=torch.float32)
    assert kwargs == {"dtype": torch.float32}
    (recorded,), _ = materialize(log.inputs_for("aten.gelu.default")[0], dtype=None)
    assert recorded.dtype == torch.float16


def test_materialize_is_deterministic_and_differs_between_inputs() -> None:
    import torch

    log = load_log(BERT_LOG)
    first = log.inputs_for("aten.add.Tensor")[0]
    a, _ = materialize(first)
    b, _ = materialize(first)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], a[1])  # two arguments of one call get different data
    (gelu,) = log.inputs_for("aten.gelu.default")
    (c,), _ = materialize(gelu)
    assert not torch.equal(c.flatten()[:100], a[0].flatten()[:100])
    (broadcast,) = log.inputs_for("aten.eq.Scalar")
    (expanded, _), _ = materialize(broadcast)
    assert torch.equal(expanded[:, :, 0], expanded[:, :, 3])  # stride 0 really shares memory


def test_channels_last() -> None:
    import torch

    item = parse_log_text("Operator: aten.relu.default\ncnt: 1, ((T([2, 3, 4, 5], f32),), {})\n").inputs_for(
        "aten.relu.default"
    )[0]
    (tensor,), _ = materialize(item, channels_last=True)
    assert tensor.is_contiguous(memory_format=torch.channels_last)


# --- recording ----------------------------------------------------------------


def test_format_matches_pytorch_spelling() -> None:
    import torch

    x = torch.zeros(4, 8).t()
    assert format_call((x, 1e-05, -math.inf, None, [1, 2]), {"dtype": torch.float16}) == (
        "((T([8, 4], f32, stride=(1, 8)), 1e-05, -inf, None, [1, 2]), {'dtype': f16})"
    )
    assert format_call((torch.zeros((), dtype=torch.int64),), {"device": torch.device("cpu")}) == (
        "((T([], i64),), {'device': 'cpu'})"
    )


def test_recorder_round_trip(tmp_path: Path) -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)
    )
    x = torch.randn(2, 3, 8, 8)

    def step() -> None:
        model(x).logsumexp(dim=1).sum().backward()

    recorder = record(step)
    path = tmp_path / "model.txt"
    recorder.write(path)

    text = path.read_text()
    assert text.startswith("Operator: aten.")
    assert "aten.convolution_backward.default" in text and "aten.native_batch_norm.default" in text
    assert "aten.t.default" not in text and "aten.view.default" not in text  # views are dropped
    assert "aten.t.default" in recorder.to_text(skip_non_compute=False)

    log = load_log(path)
    assert set(log.operators) == {
        line[len("Operator: ") :] for line in text.splitlines() if "Operator" in line
    }
    for items in log.inputs.values():
        for item in items:
            # record -> load -> materialize -> serialize again gives the very same call.
            args, kwargs = materialize(item, dtype=None)
            assert format_call(args, kwargs) == item.text
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            specs = [a for a in item.args if isinstance(a, TensorSpec)]
            for tensor, spec in zip(tensors, specs, strict=True):
                assert tuple(tensor.shape) == spec.shape
                assert tensor.dtype == getattr(torch, DTYPE_ABBREVIATIONS[spec.dtype])


def test_bundled_logs_parse() -> None:
    from benchkit.measure.operators.models import BUNDLED_LOG_DIR, MODELS

    for name in MODELS:
        log = load_log(BUNDLED_LOG_DIR / f"{name}.txt")
        assert len(log) > 10
        for items in log.inputs.values():
            for item in items:
                assert all(t.dtype in ("f32", "i64", "b8") for t in item.tensors)
