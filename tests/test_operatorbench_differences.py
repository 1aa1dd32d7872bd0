"""Where `benchkit operators` differs from PyTorch's operatorbench on purpose, one test per
difference that docs/operators.md ("Where benchkit differs from operatorbench, and why") lists."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchkit.cli import main
from benchkit.measure.operators.log_format import parse_log_text
from benchkit.measure.operators.materialize import materialize
from benchkit.measure.operators.workload import load_input_file, resolve_operator, skip_reason

REPO = Path(__file__).resolve().parent.parent


def test_renamed_sum_inputs_are_merged_with_the_current_overloads() -> None:
    """A log with both names of the summing overload: operatorbench renames the old section to
    the new name and the later section replaces the earlier one; benchkit keeps every input
    (and adds up the counts of a call logged under both names)."""
    log = parse_log_text(
        "Operator: aten.sum.SymInt\n"
        "cnt: 4, ((T([8, 16], f32), [1]), {})\n"
        "cnt: 1, ((T([8, 16], f32), [0], True), {})\n"
        "Operator: aten.sum.dim_IntList\n"
        "cnt: 2, ((T([8, 16], f32), [0], True), {})\n"
        "cnt: 3, ((T([4, 4, 4], f32), [2]), {})\n",
        "sums.txt",
    )
    assert log.operators == ["aten.sum.dim_IntList"]
    counts = {item.text: item.count for item in log.inputs_for("aten.sum.dim_IntList")}
    assert counts == {
        "((T([8, 16], f32), [1]), {})": 4,
        "((T([8, 16], f32), [0], True), {})": 3,
        "((T([4, 4, 4], f32), [2]), {})": 3,
    }


def test_a_stride_zero_input_is_filled_where_operatorbench_cannot_write_it() -> None:
    """An expanded input (two dimensions of stride 0, as BERT's ``div.Scalar`` logs one):
    operatorbench allocates it with ``empty_strided`` and copies random data in, which torch
    refuses for overlapping memory, so it times uninitialised memory; benchkit draws the
    storage itself and views it with the logged strides."""
    log = parse_log_text(
        "Operator: aten.div.Scalar\ncnt: 1, ((T([4, 8, 3, 3], f32, stride=(8, 1, 0, 0)), 9), {})\n",
        "expanded.txt",
    )
    (item,) = log.inputs_for("aten.div.Scalar")
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.empty_strided((4, 8, 3, 3), (8, 1, 0, 0)).copy_(torch.randn(4, 8, 3, 3))
    (expanded, divisor), _ = materialize(item)
    assert expanded.stride() == (8, 1, 0, 0) and expanded.untyped_storage().nbytes() == 32 * 4
    assert torch.isfinite(expanded).all() and expanded.std() > 0.5  # normal data, not leftovers
    assert torch.equal(expanded, materialize(item)[0][0])  # the same values in every process
    assert torch.equal(expanded[:, :, 0, 0], expanded[:, :, 2, 1]) and divisor == 9


def _reference_skip() -> object:
    """The skip rule of lab/operatorbench_reference.py: operatorbench's, written out."""
    from lab.operatorbench_reference import skipped

    return skipped


def test_the_skip_list_is_operatorbenchs_except_where_documented(tmp_path: Path) -> None:
    """Per operator of a log: skipped by both for the same kind of reason, measured by benchkit
    only where it makes valid indices, skipped by benchkit only where there is nothing to
    compute or inductor falls back."""
    log = tmp_path / "ops.txt"
    log.write_text(
        "Operator: aten.masked_fill_.Scalar\ncnt: 1, ((T([4], f32), T([4], b8), 0), {})\n"
        "Operator: aten._unsafe_view.default\ncnt: 1, ((T([4, 4], f32), [16]), {})\n"
        "Operator: aten._add_relu.Tensor\ncnt: 1, ((T([4], f32), T([4], f32)), {})\n"
        "Operator: aten.convolution.default\n"
        "cnt: 1, ((T([1, 3, 8, 8], f32), T([4, 3, 3, 3], f32), None, [1, 1], [0, 0], [1, 1], False, "
        "[0, 0], 1), {})\n"
        "Operator: aten.gather.default\ncnt: 1, ((T([4, 8], f32), 1, T([4, 2], i64)), {})\n"
        "Operator: aten.nll_loss_forward.default\n"
        "cnt: 1, ((T([8, 10], f32), T([8], i64), None, 1, -100), {})\n"
        "Operator: aten._scaled_dot_product_flash_attention_for_cpu.default\n"
        "cnt: 1, ((T([1, 2, 8, 4], f32), T([1, 2, 8, 4], f32), T([1, 2, 8, 4], f32)), {})\n"
        "Operator: aten.new_empty.default\ncnt: 1, ((T([4], f32), [4]), {})\n"
        "Operator: aten.add.Tensor\ncnt: 1, ((T([4], f32), T([4], f32)), {})\n"
    )
    reference = _reference_skip()
    workload = load_input_file(log)
    decided = {}
    for name in workload.operators:
        operator = resolve_operator(name)
        decided[name] = (skip_reason(operator), reference(operator))  # type: ignore[operator]
    ours = {name: (mine or "measured").split(":")[0] for name, (mine, _) in decided.items()}
    fallback = "aten._scaled_dot_product_flash_attention_for_cpu.default"
    theirs = {name: their or "measured" for name, (_, their) in decided.items()}
    assert ours == {
        "aten.masked_fill_.Scalar": "input generator NYI",
        "aten._unsafe_view.default": "non-compute operator (a view)",
        "aten._add_relu.Tensor": "no inductor lowering or decomposition",
        "aten.convolution.default": "convolution",
        "aten.gather.default": "measured",  # valid indices (index_inputs)
        "aten.nll_loss_forward.default": "measured",
        fallback: "inductor only falls back to the aten kernel",
        "aten.new_empty.default": "non-compute operator (allocates uninitialized memory)",
        "aten.add.Tensor": "measured",
    }
    assert theirs == {
        "aten.masked_fill_.Scalar": "input generator NYI",
        "aten._unsafe_view.default": "non compute",
        "aten._add_relu.Tensor": "no inductor impl",
        "aten.convolution.default": "convolution",
        "aten.gather.default": "input generator NYI",
        "aten.nll_loss_forward.default": "input generator NYI",
        fallback: "measured",
        "aten.new_empty.default": "measured",
        "aten.add.Tensor": "measured",
    }


def test_a_failed_input_fails_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """operatorbench prints an error for an input it cannot measure and exits 0; benchkit
    names the input and exits 1 (a bad log or option: 2). A sparse input fails before any
    compile, so only the compiler's warm-up compiles here."""
    log = tmp_path / "sparse.txt"
    log.write_text("Operator: aten.add.Tensor\ncnt: 1, ((ST([4], f32, torch.sparse_coo, True, 2), 1), {})\n")
    code = main(["operators", "--inp-file", str(log), "--repeats", "1", "--output-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "error aten.add.Tensor [" in captured.err and f"({log}:2): unsupported input" in captured.err
    assert "aten.add.Tensor: no input could be measured" in captured.out
