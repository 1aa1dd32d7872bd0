"""Turning a logged input into real arguments: tensors of the logged shapes, dtypes and
strides, filled deterministically per input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchkit.measure.operators.inputs import (
    DTYPE_ABBREVIATIONS,
    FLOATING_ABBREVIATIONS,
    DtypeName,
    OperatorInput,
    SparseTensorSpec,
    TensorSpec,
    TorchName,
    UnsupportedInputError,
)
from benchkit.util import content_key

# ---------------------------------------------------------------------------
# Materializing inputs
# ---------------------------------------------------------------------------
if TYPE_CHECKING:
    import torch


def input_seed(item: OperatorInput) -> int:
    """Seed derived from the operator and the call text: same input -> same data, everywhere."""
    return int(content_key(item.operator, item.text), 16) % (2**63)


def materialize(
    item: OperatorInput,
    *,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    channels_last: bool = False,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Real (args, kwargs) for a logged call.

    Data is random but deterministic: seeded from the call text and drawn on
    ``device`` itself, so one device sees the same values in every process, and
    a GPU input of gigabytes is drawn where it lives instead of on the host and
    copied. Logged strides are reproduced exactly, including overlapping ones
    such as broadcast stride-0 dimensions. ``dtype`` changes floating dtypes
    (tensors and dtype arguments) by `floating_dtype_rule`; ``device`` replaces
    the recorded device. Raises UnsupportedInputError for sparse tensors.
    """
    import torch

    target = torch.device(device)
    generator = torch.Generator(device=target).manual_seed(input_seed(item))
    floating = floating_dtype_rule(item, dtype)

    def convert(value: Any) -> Any:
        if isinstance(value, TensorSpec):
            tensor = _random_tensor(value, generator, floating, target)
            if channels_last and tensor.dim() == 4:
                tensor = tensor.contiguous(memory_format=torch.channels_last)
            return tensor
        if isinstance(value, SparseTensorSpec):
            raise UnsupportedInputError(f"{item.location}: sparse tensor inputs are not supported")
        if isinstance(value, DtypeName):
            return _resolve_dtype(value.abbreviation, floating)
        if isinstance(value, TorchName):
            return _resolve_torch_name(value.name, item.location)
        if isinstance(value, str) and value in ("cpu", "cuda"):
            return target.type
        if isinstance(value, list):
            return [convert(v) for v in value]
        if isinstance(value, tuple):
            return tuple(convert(v) for v in value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    args = tuple(convert(v) for v in item.args)
    kwargs = {k: convert(v) for k, v in item.kwargs.items()}
    return args, kwargs


HALF_PRECISION_ABBREVIATIONS = frozenset({"f16", "bf16"})


def floating_dtype_rule(item: OperatorInput, target: torch.dtype | None) -> dict[str, torch.dtype]:
    """Which dtype each logged floating dtype becomes when ``--dtype`` asks for ``target``.

    ``None`` keeps the log's dtypes. A half-precision target (float16,
    bfloat16) applied to a call logged in half precision changes only its
    half-precision tensors: mixed-precision calls keep their float32 parts
    (``native_layer_norm_backward``'s mean and rstd, softmax's float result),
    which the kernels require -- operatorbench's rule, which casts float16 logs
    only when asked for another dtype. Any other target, or a call logged
    wholly in float32/float64, has every floating dtype replaced.
    """
    import torch

    if target is None:
        return {}
    logged = {spec.dtype for spec in item.tensors if isinstance(spec, TensorSpec)}
    logged |= {value.abbreviation for value in _dtype_arguments(item)}
    if target in (torch.float16, torch.bfloat16) and logged & HALF_PRECISION_ABBREVIATIONS:
        return dict.fromkeys(HALF_PRECISION_ABBREVIATIONS, target)
    return dict.fromkeys(FLOATING_ABBREVIATIONS, target)


def _dtype_arguments(item: OperatorInput) -> list[DtypeName]:
    found: list[DtypeName] = []

    def walk(value: Any) -> None:
        if isinstance(value, DtypeName):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(item.args)
    walk(item.kwargs)
    return found


def _resolve_dtype(abbreviation: str, rule: dict[str, torch.dtype]) -> torch.dtype:
    import torch

    if abbreviation in rule:
        return rule[abbreviation]
    return getattr(torch, DTYPE_ABBREVIATIONS[abbreviation])


def _resolve_torch_name(name: str, location: str) -> Any:
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, (torch.layout, torch.memory_format, torch.dtype)):
        raise UnsupportedInputError(f"{location}: torch.{name} is not a layout, memory format or dtype")
    return value


def _random_tensor(
    spec: TensorSpec, generator: torch.Generator, rule: dict[str, torch.dtype], device: torch.device
) -> torch.Tensor:
    import torch

    dtype = _resolve_dtype(spec.dtype, rule)
    stride = spec.stride or _contiguous_stride(spec.shape)
    if any(size == 0 for size in spec.shape):
        storage_size = 0
    else:
        storage_size = 1 + sum((size - 1) * step for size, step in zip(spec.shape, stride, strict=True))
    if dtype.is_floating_point or dtype.is_complex:
        # Normal data: finite, sign-mixed, no exact ties; generated in f32/c64 so
        # half-precision tensors get the values of the float32 draw.
        base = torch.float32 if dtype.is_floating_point else torch.complex64
        flat = torch.randn(storage_size, generator=generator, dtype=base, device=device).to(dtype)
    elif dtype == torch.bool:
        flat = torch.randint(0, 2, (storage_size,), generator=generator, device=device).bool()
    else:
        # Small non-negative integers stay valid as indices and class labels for
        # any dimension of at least 8.
        flat = torch.randint(0, 8, (storage_size,), generator=generator, dtype=dtype, device=device)
    return flat.as_strided(spec.shape, stride)


def _contiguous_stride(shape: Sequence[int]) -> tuple[int, ...]:
    stride: list[int] = []
    step = 1
    for size in reversed(shape):
        stride.append(step)
        step *= max(size, 1)
    return tuple(reversed(stride))
