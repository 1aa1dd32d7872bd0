"""Valid index and target arguments for operators that take them.

Random data is a valid input for most operators, but not for an index: an
embedding lookup with a row past the table, or a class target past the number
of classes, fails (or reads out of bounds) instead of measuring anything.
PyTorch's operatorbench skips these operators; here each one has a rule saying
which argument holds indices and what bound the *other* arguments imply (rows of
the weight, number of classes, size of the indexed dimension). Indices are drawn
uniformly below that bound from a generator seeded per input, so the same
logged input gets the same indices in every process and on every device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# What an operator's arguments look like to a rule: positional arguments, with
# keyword arguments placed by the schema (see `_positional`).
Arguments = list[Any]
Rule = Callable[[Arguments, Callable[[Any, int], Any]], None]


def _size(tensor: Any, dim: int) -> int:
    return int(tensor.shape[dim]) if tensor.dim() else 1


def _embedding(args: Arguments, draw: Callable[[Any, int], Any]) -> None:
    # embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
    args[1] = draw(args[1], _size(args[0], 0))


def _embedding_backward(args: Arguments, draw: Callable[[Any, int], Any]) -> None:
    # embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    args[1] = draw(args[1], int(args[2]))


def _classes(logits: Any) -> int:
    """Number of classes of an nll_loss input: dim 1 of (N, C, ...), dim 0 of (C,)."""
    return _size(logits, 1 if logits.dim() >= 2 else 0)


def _nll_loss_forward(args: Arguments, draw: Callable[[Any, int], Any]) -> None:
    # nll_loss_forward(self, target, weight, reduction, ignore_index) (and nll_loss2d_forward)
    args[1] = draw(args[1], _classes(args[0]))


def _nll_loss_backward(args: Arguments, draw: Callable[[Any, int], Any]) -> None:
    # nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)
    args[2] = draw(args[2], _classes(args[1]))
    # total_weight is what the forward computed: the sum of the targets' class
    # weights (the number of targets without weights). A random one could be 0.
    if len(args) > 6 and hasattr(args[6], "fill_"):
        weight, target = args[3], args[2]
        total = weight[target.long()].sum().item() if weight is not None else target.numel()
        args[6] = args[6].clone().fill_(total or 1)


def _dim_indexed(index_position: int) -> Rule:
    """Operators ``op(self, dim, index, ...)``: indices below ``self.size(dim)``."""

    def rule(args: Arguments, draw: Callable[[Any, int], Any]) -> None:
        args[index_position] = draw(args[index_position], _size(args[0], int(args[1])))

    return rule


def _index_list(position: int) -> Rule:
    """``index(self, indices)``/``index_put(self, indices, values, ...)``: the k-th
    integer index tensor indexes dim k of self (None and boolean masks stay)."""

    def rule(args: Arguments, draw: Callable[[Any, int], Any]) -> None:
        indices = list(args[position])
        for dim, index in enumerate(indices):
            if index is not None and not index.dtype.is_floating_point and index.dtype.itemsize > 1:
                indices[dim] = draw(index, _size(args[0], dim))
        args[position] = indices

    return rule


RULES: dict[str, Rule] = {
    "aten.embedding.default": _embedding,
    "aten.embedding_dense_backward.default": _embedding_backward,
    "aten.nll_loss_forward.default": _nll_loss_forward,
    "aten.nll_loss2d_forward.default": _nll_loss_forward,
    "aten.nll_loss_backward.default": _nll_loss_backward,
    "aten.nll_loss2d_backward.default": _nll_loss_backward,
    "aten.gather.default": _dim_indexed(2),
    "aten.index_select.default": _dim_indexed(2),
    "aten.scatter.src": _dim_indexed(2),
    "aten.scatter.value": _dim_indexed(2),
    "aten.scatter_.src": _dim_indexed(2),
    "aten.scatter_.value": _dim_indexed(2),
    "aten.scatter_add.default": _dim_indexed(2),
    "aten.scatter_add_.default": _dim_indexed(2),
    "aten.scatter_reduce.two": _dim_indexed(2),
    "aten.index.Tensor": _index_list(1),
    "aten.index_put.default": _index_list(1),
    "aten.index_put_.default": _index_list(1),
}


def has_rule(operator: Any) -> bool:
    return str(operator) in RULES


def _positional(operator: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Arguments, list[str]]:
    """All arguments in schema order, and the names of those that came as keywords."""
    names = [a.name for a in operator._schema.arguments]
    values = list(args)
    moved = []
    for name in names[len(values) :]:
        if name not in kwargs:
            break
        values.append(kwargs[name])
        moved.append(name)
    return values, moved


def with_valid_indices(
    operator: Any, args: tuple[Any, ...], kwargs: dict[str, Any], seed: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with the operator's index arguments redrawn within bounds.

    Operators without a rule come back unchanged. Raises ValueError when a bound
    is not positive (an empty table or class dimension: no valid index exists).
    """
    rule = RULES.get(str(operator))
    if rule is None:
        return args, kwargs
    import torch

    generator = torch.Generator().manual_seed(seed)

    def draw(like: Any, bound: int) -> Any:
        if bound <= 0:
            raise ValueError(
                f"{operator}: no valid index below {bound} for an argument of shape {tuple(like.shape)}"
            )
        # Fill the whole storage and keep the logged layout (e.g. a stride-0 broadcast
        # of one row of token ids): every element any view can see is in bounds.
        storage = max(like.untyped_storage().nbytes() // like.element_size(), 1)
        values = torch.randint(0, bound, (storage,), generator=generator, dtype=torch.int64)
        values = values.to(device=like.device, dtype=like.dtype)
        return values.as_strided(tuple(like.shape), like.stride(), like.storage_offset())

    values, moved = _positional(operator, args, kwargs)
    rule(values, draw)
    positional = tuple(values[: len(values) - len(moved)])
    return positional, {**kwargs, **dict(zip(moved, values[len(positional) :], strict=True))}
