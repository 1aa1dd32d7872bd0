"""Operator-input logs: PyTorch's text format for "which aten ops ran, on what".

A log lists operators and, under each, the distinct argument lists it was
called with::

    Operator: aten.add.Tensor
    cnt: 36, ((T([16, 128, 768], f16), T([16, 128, 768], f16)), {})
    cnt: 1, ((T([1, 1024, 768], f16, stride=(786432, 1, 768)), 1), {'alpha': 2})

``T(shape, dtype[, stride=...])`` stands for a tensor (only its metadata is
kept), ``ST(...)`` for a sparse tensor; dtypes are written by abbreviation
(``f16``), layouts and memory formats as ``torch.<name>``, devices as strings.

This module reads such logs with a small recursive-descent parser (never
``eval``: the files are data, and PyTorch's own loader evaluates them as
Python), turns a logged call back into real arguments with deterministic
random data, and records new logs from any model run with a
``TorchDispatchMode``. Parsing does not import torch, so listing the inputs of
a log is cheap (asv imports benchmark modules in every process it starts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchkit.errors import UserError

if TYPE_CHECKING:
    pass

# Abbreviation -> torch dtype attribute, exactly the set PyTorch's logs use.
DTYPE_ABBREVIATIONS: dict[str, str] = {
    "bf16": "bfloat16",
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "c32": "complex32",
    "c64": "complex64",
    "c128": "complex128",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "b8": "bool",
    "u8": "uint8",
}
_DTYPE_NAME_TO_ABBREVIATION = {name: abbr for abbr, name in DTYPE_ABBREVIATIONS.items()}
FLOATING_ABBREVIATIONS = frozenset({"bf16", "f64", "f32", "f16"})

# Operator overloads were renamed after many logs were recorded; PyTorch's
# loader applies the same rename.
_RENAMED_OPERATORS = {"aten.sum.SymInt": "aten.sum.dim_IntList"}

_OPERATOR_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*){1,2}")
_OPERATOR_PREFIX = "Operator: "
_COUNT_PREFIX = "cnt: "


class LogFormatError(UserError):
    """A line of an operator-input log that does not follow the format."""


class UnsupportedInputError(Exception):
    """A logged input that is well formed but cannot be turned into real arguments."""


@dataclass(frozen=True)
class TensorSpec:
    """A logged dense tensor: shape, dtype abbreviation and (if not contiguous) strides."""

    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SparseTensorSpec:
    """A logged sparse tensor; parsed so logs containing one load, but not materialized."""

    shape: tuple[int, ...]
    dtype: str
    layout: str
    coalesced: bool
    nnz: int | None = None


@dataclass(frozen=True)
class DtypeName:
    """A dtype used as an argument value (``dtype=f16``), by abbreviation."""

    abbreviation: str


@dataclass(frozen=True)
class TorchName:
    """``torch.<name>``: a layout or memory format (resolved by attribute lookup)."""

    name: str


@dataclass(frozen=True)
class OperatorInput:
    """One distinct call of one operator, as logged."""

    operator: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    count: int
    text: str  # the serialized call, exactly as in the log (dedup key and seed source)
    location: str  # "file:line" of the first occurrence

    @property
    def tensors(self) -> list[TensorSpec | SparseTensorSpec]:
        found: list[TensorSpec | SparseTensorSpec] = []
        _walk(self.args, found)
        _walk(dict(self.kwargs), found)
        return found

    @property
    def label(self) -> str:
        """A short human-readable description: tensor shapes/dtypes and other arguments."""
        parts = [_short(value) for value in self.args]
        parts += [f"{key}={_short(value)}" for key, value in self.kwargs.items()]
        return ", ".join(parts)


_LABEL_TENSOR = re.compile(r"(?:^|[\s,(\[=])(?:\d+(?:x\d+)*|scalar) ([a-z]+\d*)\b")


def label_dtype(label: str) -> str | None:
    """The torch dtype name of the first tensor an `OperatorInput.label` describes (``float32``);
    None when it shows no tensor."""
    found = _LABEL_TENSOR.search(label)
    return DTYPE_ABBREVIATIONS.get(found[1]) if found else None


def _walk(value: Any, found: list[TensorSpec | SparseTensorSpec]) -> None:
    if isinstance(value, (TensorSpec, SparseTensorSpec)):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, found)


def _short(value: Any) -> str:
    if isinstance(value, TensorSpec):
        dims = "x".join(map(str, value.shape)) or "scalar"
        strided = "(strided)" if value.stride is not None else ""
        return f"{dims} {value.dtype}{strided}"
    if isinstance(value, SparseTensorSpec):
        return f"sparse {'x'.join(map(str, value.shape))} {value.dtype}"
    if isinstance(value, DtypeName):
        return value.abbreviation
    if isinstance(value, TorchName):
        return value.name
    if isinstance(value, list):
        return "[" + ",".join(_short(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ",".join(_short(v) for v in value) + ")"
    return repr(value) if isinstance(value, str) else str(value)


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------


class _Unserializable(Exception):
    pass


def format_value(value: Any) -> str:
    """Serialize one argument the way PyTorch's logs do (T(...), f32, torch.strided, ...)."""
    import torch

    if isinstance(value, torch.Tensor):
        dims = "[" + ", ".join(str(int(s)) for s in value.shape) + "]"
        abbreviation = _DTYPE_NAME_TO_ABBREVIATION.get(str(value.dtype).removeprefix("torch."))
        if abbreviation is None:
            raise _Unserializable(f"dtype {value.dtype}")
        if value.is_sparse:
            return f"ST({dims}, {abbreviation}, torch.sparse_coo, {value.is_coalesced()}, {value._nnz()})"
        if value.layout != torch.strided:
            raise _Unserializable(f"layout {value.layout}")
        if value.is_contiguous():
            return f"T({dims}, {abbreviation})"
        return f"T({dims}, {abbreviation}, stride={format_value(tuple(value.stride()))})"
    if isinstance(value, torch.dtype):
        abbreviation = _DTYPE_NAME_TO_ABBREVIATION.get(str(value).removeprefix("torch."))
        if abbreviation is None:
            raise _Unserializable(f"dtype {value}")
        return abbreviation
    if isinstance(value, torch.device):
        return repr(value.type)
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value)  # "torch.strided", "torch.channels_last"
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # "1e-05", "inf", "-inf", "nan"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{format_value(str(k))}: {format_value(v)}" for k, v in value.items()) + "}"
    raise _Unserializable(type(value).__name__)


def format_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    return f"({format_value(tuple(args))}, {format_value(dict(kwargs))})"


def __getattr__(name: str) -> Any:
    if name == "OperatorInputRecorder":  # an import path the docs once gave
        raise ImportError(
            "OperatorInputRecorder lives in benchkit.measure.operators.recorder: "
            "from benchkit.measure.operators.recorder import OperatorInputRecorder"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
