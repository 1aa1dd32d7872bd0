"""Index-taking operators get valid indices: within the bounds the other arguments
imply, the same for the same logged input, and the eager operator runs on them."""

from __future__ import annotations

import pytest
import torch

from benchkit.measure.operators import timing as op_timing
from benchkit.measure.operators import workload as op_workload
from benchkit.measure.operators.index_inputs import RULES, with_valid_indices
from benchkit.measure.operators.log_format import parse_log_text

# Written for these tests in PyTorch's log format (shapes like a BERT-style model's).
LOG = """\
Operator: aten.embedding.default
cnt: 1, ((T([1000, 64], f32), T([4, 32], i64)), {})
cnt: 1, ((T([50, 64], f32), T([4, 32], i64, stride=(0, 1)), 0), {})
Operator: aten.embedding_dense_backward.default
cnt: 1, ((T([4, 32, 64], f32), T([4, 32], i64), 1000, -1, False), {})
Operator: aten.nll_loss_forward.default
cnt: 1, ((T([128, 1000], f32), T([128], i64), None, 1, -100), {})
cnt: 1, ((T([16, 10], f32), T([16], i64), T([10], f32), 1, -100), {})
Operator: aten.nll_loss_backward.default
cnt: 1, ((T([], f32), T([128, 1000], f32), T([128], i64), None, 1, -100, T([], f32)), {})
Operator: aten.gather.default
cnt: 1, ((T([8, 30], f32), 1, T([8, 5], i64)), {})
Operator: aten.index_select.default
cnt: 1, ((T([40, 6], f32), 0, T([12], i64)), {})
Operator: aten.scatter_add.default
cnt: 1, ((T([8, 30], f32), 1, T([8, 5], i64), T([8, 5], f32)), {})
Operator: aten.index.Tensor
cnt: 1, ((T([20, 7], f32), [T([9], i64)]), {})
"""


def _arguments(operator_name: str) -> list[tuple[tuple, dict]]:
    log = parse_log_text(LOG)
    operator = op_workload.resolve_operator(operator_name)
    options = op_timing.MeasureOptions()
    return [op_timing.operator_arguments(operator, item, options) for item in log.inputs_for(operator_name)]


@pytest.mark.parametrize(
    ("name", "index_position", "bound"),
    [
        ("aten.embedding.default", 1, lambda a: a[0].shape[0]),
        ("aten.embedding_dense_backward.default", 1, lambda a: a[2]),
        ("aten.nll_loss_forward.default", 1, lambda a: a[0].shape[1]),
        ("aten.nll_loss_backward.default", 2, lambda a: a[1].shape[1]),
        ("aten.gather.default", 2, lambda a: a[0].shape[a[1]]),
        ("aten.index_select.default", 2, lambda a: a[0].shape[a[1]]),
        ("aten.scatter_add.default", 2, lambda a: a[0].shape[a[1]]),
        ("aten.index.Tensor", None, lambda a: a[0].shape[0]),
    ],
)
def test_indices_are_in_bounds_deterministic_and_run(name: str, index_position: int | None, bound) -> None:
    operator = op_workload.resolve_operator(name)
    # With an index rule, none of these is skipped for any reason (not only "input generator NYI").
    assert op_workload.skip_reason(operator) is None
    first, second = _arguments(name), _arguments(name)
    for (args, kwargs), (again, _) in zip(first, second, strict=True):
        index = args[1][0] if index_position is None else args[index_position]
        limit = bound(args)
        assert index.dtype == torch.int64
        assert int(index.min()) >= 0 and int(index.max()) < limit, (name, limit)
        # Large enough draws use more than one value (not a constant stand-in).
        if index.numel() >= 8 and limit > 1:
            assert index.unique().numel() > 1
        same = again[1][0] if index_position is None else again[index_position]
        assert torch.equal(index, same)
        operator(*args, **kwargs)  # raises on an invalid index


def test_a_broadcast_index_keeps_its_layout() -> None:
    (_, (args, _)) = _arguments("aten.embedding.default")
    assert args[1].stride() == (0, 1) and int(args[1].max()) < 50


def test_nll_loss_backward_total_weight_matches_the_targets() -> None:
    ((args, _),) = _arguments("aten.nll_loss_backward.default")
    assert float(args[6]) == args[2].numel()
    weighted = _arguments("aten.nll_loss_forward.default")[1][0]
    assert int(weighted[1].max()) < 10


def test_operators_with_rules_are_no_longer_skipped_but_others_still_are() -> None:
    for name in ("aten.embedding.default", "aten.nll_loss_forward.default", "aten.gather.default"):
        assert op_workload.skip_reason(op_workload.resolve_operator(name)) is None, name
    # masked_fill_ with a scalar has no rule: still skipped with the reason.
    reason = op_workload.skip_reason(torch.ops.aten.masked_fill_.Scalar)
    assert reason is not None and "input generator NYI" in reason
    assert "aten.masked_fill_.Scalar" not in RULES


def test_an_empty_table_has_no_valid_index() -> None:
    weight = torch.ones(0, 4)
    indices = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="no valid index below 0"):
        with_valid_indices(torch.ops.aten.embedding.default, (weight, indices), {}, seed=1)


def test_keyword_indices_are_redrawn_too() -> None:
    weight = torch.ones(5, 3)
    indices = torch.full((40,), 99, dtype=torch.int64)
    args, kwargs = with_valid_indices(
        torch.ops.aten.embedding.default, (weight,), {"indices": indices}, seed=3
    )
    assert args == (weight,) and int(kwargs["indices"].max()) < 5
