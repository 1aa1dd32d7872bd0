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

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit.errors import UserError
from benchkit.util import atomic_write_text, content_key

if TYPE_CHECKING:
    import torch

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
# Parsing
# ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<name>-?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)
  | (?P<punct>[()\[\]{},:=])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    column: int


class _SyntaxError(Exception):
    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise _SyntaxError(f"unexpected character {text[position]!r}", position)
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(_Token(kind, match.group(), position))
        position = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


_BARE_NAMES: dict[str, Any] = {
    "True": True,
    "False": False,
    "None": None,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
}


class _Parser:
    """Recursive descent over the Python-literal subset the logs use, plus T()/ST()."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.index = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        if self.current.text != text or self.current.kind not in ("punct",):
            raise _SyntaxError(
                f"expected {text!r}, found {self.current.text or 'end of line'!r}", self.current.column
            )
        self.advance()

    def at(self, text: str) -> bool:
        return self.current.kind == "punct" and self.current.text == text

    def parse_all(self) -> Any:
        value = self.value()
        if self.current.kind != "end":
            raise _SyntaxError(f"unexpected {self.current.text!r} after the value", self.current.column)
        return value

    def value(self) -> Any:
        token = self.current
        if token.kind == "number":
            self.advance()
            text = token.text
            return float(text) if any(c in text for c in ".eE") else int(text)
        if token.kind == "string":
            self.advance()
            return _unquote(token.text)
        if token.kind == "name":
            return self.name()
        if self.at("("):
            return self.sequence("(", ")", tuple_syntax=True)
        if self.at("["):
            return self.sequence("[", "]", tuple_syntax=False)
        if self.at("{"):
            return self.mapping()
        raise _SyntaxError(f"expected a value, found {token.text or 'end of line'!r}", token.column)

    def name(self) -> Any:
        token = self.advance()
        name = token.text
        if self.at("("):
            if name == "T":
                return self.tensor(token)
            if name == "ST":
                return self.sparse_tensor(token)
            raise _SyntaxError(
                f"unknown call {name}(...) (only T(...) and ST(...) are allowed)", token.column
            )
        if name in _BARE_NAMES:
            return _BARE_NAMES[name]
        if name in DTYPE_ABBREVIATIONS:
            return DtypeName(name)
        for prefix in ("torch.", "th."):
            if name.startswith(prefix) and "." not in name[len(prefix) :]:
                attribute = name[len(prefix) :]
                if attribute in _DTYPE_NAME_TO_ABBREVIATION:
                    return DtypeName(_DTYPE_NAME_TO_ABBREVIATION[attribute])
                return TorchName(attribute)
        raise _SyntaxError(f"unknown name {name!r}", token.column)

    def call_arguments(self) -> tuple[list[tuple[Any, int]], dict[str, tuple[Any, int]]]:
        self.expect("(")
        positional: list[tuple[Any, int]] = []
        keywords: dict[str, tuple[Any, int]] = {}
        while not self.at(")"):
            column = self.current.column
            following = self.tokens[self.index + 1]
            if self.current.kind == "name" and following.kind == "punct" and following.text == "=":
                key = self.advance().text
                self.advance()
                keywords[key] = (self.value(), column)
            else:
                if keywords:
                    raise _SyntaxError("positional argument after keyword argument", column)
                positional.append((self.value(), column))
            if not self.at(")"):
                self.expect(",")
        self.expect(")")
        return positional, keywords

    def tensor(self, token: _Token) -> TensorSpec:
        positional, keywords = self.call_arguments()
        if len(positional) != 2:
            raise _SyntaxError("T(...) takes a shape and a dtype", token.column)
        unknown = set(keywords) - {"stride"}
        if unknown:
            raise _SyntaxError(f"T(...) got unknown keyword {sorted(unknown)[0]!r}", token.column)
        shape = _int_tuple(*positional[0], what="tensor shape")
        dtype = _dtype_abbreviation(*positional[1])
        stride = None
        if "stride" in keywords:
            stride = _int_tuple(*keywords["stride"], what="tensor stride")
            if len(stride) != len(shape):
                raise _SyntaxError(
                    f"stride has {len(stride)} entries but the shape has {len(shape)}",
                    keywords["stride"][1],
                )
        return TensorSpec(shape, dtype, stride)

    def sparse_tensor(self, token: _Token) -> SparseTensorSpec:
        positional, keywords = self.call_arguments()
        if keywords or not 4 <= len(positional) <= 5:
            raise _SyntaxError("ST(...) takes shape, dtype, layout, is_coalesced[, nnz]", token.column)
        shape = _int_tuple(*positional[0], what="sparse tensor shape")
        dtype = _dtype_abbreviation(*positional[1])
        layout, layout_column = positional[2]
        if not isinstance(layout, TorchName):
            raise _SyntaxError("sparse tensor layout must be torch.<layout>", layout_column)
        coalesced = bool(positional[3][0])
        nnz = positional[4][0] if len(positional) == 5 else None
        if nnz is not None and not isinstance(nnz, int):
            raise _SyntaxError("sparse tensor nnz must be an integer", positional[4][1])
        return SparseTensorSpec(shape, dtype, layout.name, coalesced, nnz)

    def sequence(self, opening: str, closing: str, *, tuple_syntax: bool) -> Any:
        self.expect(opening)
        items: list[Any] = []
        saw_comma = False
        while not self.at(closing):
            items.append(self.value())
            if self.at(","):
                self.advance()
                saw_comma = True
            elif not self.at(closing):
                raise _SyntaxError(
                    f"expected ',' or {closing!r}, found {self.current.text or 'end of line'!r}",
                    self.current.column,
                )
        self.expect(closing)
        if not tuple_syntax:
            return items
        if len(items) == 1 and not saw_comma:
            return items[0]  # parentheses only group
        return tuple(items)

    def mapping(self) -> dict[str, Any]:
        self.expect("{")
        result: dict[str, Any] = {}
        while not self.at("}"):
            token = self.advance()
            if token.kind == "string":
                key = _unquote(token.text)
            elif token.kind == "name" and "." not in token.text:
                key = token.text
            else:
                raise _SyntaxError(f"expected a keyword name, found {token.text!r}", token.column)
            self.expect(":")
            result[key] = self.value()
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return result


def _unquote(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def _int_tuple(value: Any, column: int, *, what: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise _SyntaxError(f"{what} must be a list of non-negative integers", column)
    return tuple(value)


def _dtype_abbreviation(value: Any, column: int) -> str:
    if not isinstance(value, DtypeName):
        raise _SyntaxError(f"expected a dtype like f32, found {value!r}", column)
    return value.abbreviation


def parse_call(text: str, *, column_offset: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Parse ``((args...), {kwargs})``; raises ValueError with the (1-based) column on bad input.

    ``column_offset`` is where ``text`` starts in its line, so columns count from the line start.
    """
    try:
        value = _Parser(text).parse_all()
    except _SyntaxError as e:
        raise ValueError(f"column {column_offset + e.column + 1}: {e}") from None
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ValueError("expected a pair ((args...), {kwargs})")
    args, kwargs = value
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        args = (args,)
    if not isinstance(kwargs, dict):
        raise ValueError("the second element must be a {kwargs} dict")
    return args, kwargs


@dataclass
class OperatorLog:
    """Inputs per operator, in file order; identical calls are merged (counts add up)."""

    inputs: dict[str, list[OperatorInput]] = field(default_factory=dict)

    @property
    def operators(self) -> list[str]:
        return list(self.inputs)

    def inputs_for(self, operator: str) -> list[OperatorInput]:
        return self.inputs.get(operator, [])

    def __len__(self) -> int:
        return sum(len(v) for v in self.inputs.values())

    def add(self, item: OperatorInput) -> None:
        bucket = self.inputs.setdefault(item.operator, [])
        for position, existing in enumerate(bucket):
            if existing.text == item.text:
                bucket[position] = OperatorInput(
                    existing.operator,
                    existing.args,
                    existing.kwargs,
                    existing.count + item.count,
                    existing.text,
                    existing.location,
                )
                return
        bucket.append(item)

    def merge(self, other: OperatorLog) -> None:
        for items in other.inputs.values():
            for item in items:
                self.add(item)


def parse_log_text(text: str, source: str = "<text>") -> OperatorLog:
    """Parse a whole log; the first bad line raises LogFormatError naming ``source:line``."""
    log = OperatorLog()
    operator: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"{source}:{number}"
        if not line:
            continue
        if line.startswith(_OPERATOR_PREFIX.strip()):
            name = line[len(_OPERATOR_PREFIX.strip()) :].strip()
            if not _OPERATOR_NAME.fullmatch(name):
                raise LogFormatError(
                    f"{where}: bad operator name {name!r} "
                    "(expected namespace.name.overload, e.g. aten.add.Tensor)"
                )
            operator = _RENAMED_OPERATORS.get(name, name)
            log.inputs.setdefault(operator, [])
            continue
        if not line.startswith(_COUNT_PREFIX):
            raise LogFormatError(
                f"{where}: expected 'Operator: <name>' or 'cnt: <n>, (...)', found {line[:40]!r}"
            )
        if operator is None:
            raise LogFormatError(f"{where}: input line before any 'Operator:' line")
        count_text, comma, call_text = line[len(_COUNT_PREFIX) :].partition(",")
        if not comma or not count_text.strip().isdigit():
            raise LogFormatError(f"{where}: expected 'cnt: <n>, ' with a whole number, found {line[:40]!r}")
        call_text = call_text.strip()
        try:
            args, kwargs = parse_call(call_text, column_offset=raw.find(call_text))
        except ValueError as e:
            raise LogFormatError(f"{where}: {e}") from None
        log.add(OperatorInput(operator, args, kwargs, int(count_text), call_text, where))
    return log


def load_log(path: str | Path) -> OperatorLog:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"operator-input log {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read operator-input log {path}: {e}") from None
    return parse_log_text(text, str(path))


def load_logs(paths: Iterable[str | Path]) -> OperatorLog:
    union = OperatorLog()
    for path in paths:
        union.merge(load_log(path))
    return union


# ---------------------------------------------------------------------------
# Materializing inputs
# ---------------------------------------------------------------------------


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

    Data is random but deterministic (seeded from the call text and drawn on the
    CPU, so every device and process sees the same values). Logged strides are
    reproduced exactly, including overlapping ones such as broadcast stride-0
    dimensions. ``dtype`` replaces every floating dtype (tensors and dtype
    arguments) — logs are often recorded in half precision; ``device`` replaces
    the recorded device. Raises UnsupportedInputError for sparse tensors.
    """
    import torch

    generator = torch.Generator().manual_seed(input_seed(item))
    target = torch.device(device)

    def convert(value: Any) -> Any:
        if isinstance(value, TensorSpec):
            tensor = _random_tensor(value, generator, dtype, target)
            if channels_last and tensor.dim() == 4:
                tensor = tensor.contiguous(memory_format=torch.channels_last)
            return tensor
        if isinstance(value, SparseTensorSpec):
            raise UnsupportedInputError(f"{item.location}: sparse tensor inputs are not supported")
        if isinstance(value, DtypeName):
            return _resolve_dtype(value.abbreviation, dtype)
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


def _resolve_dtype(abbreviation: str, override: torch.dtype | None) -> torch.dtype:
    import torch

    if override is not None and abbreviation in FLOATING_ABBREVIATIONS:
        return override
    return getattr(torch, DTYPE_ABBREVIATIONS[abbreviation])


def _resolve_torch_name(name: str, location: str) -> Any:
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, (torch.layout, torch.memory_format, torch.dtype)):
        raise UnsupportedInputError(f"{location}: torch.{name} is not a layout, memory format or dtype")
    return value


def _random_tensor(
    spec: TensorSpec, generator: torch.Generator, override: torch.dtype | None, device: torch.device
) -> torch.Tensor:
    import torch

    dtype = _resolve_dtype(spec.dtype, override)
    stride = spec.stride or _contiguous_stride(spec.shape)
    if any(size == 0 for size in spec.shape):
        storage_size = 0
    else:
        storage_size = 1 + sum((size - 1) * step for size, step in zip(spec.shape, stride, strict=True))
    if dtype.is_floating_point or dtype.is_complex:
        # Normal data: finite, sign-mixed, no exact ties; generated in f32/c64 so
        # half-precision tensors get the same values on every device.
        base = torch.float32 if dtype.is_floating_point else torch.complex64
        flat = torch.randn(storage_size, generator=generator, dtype=base).to(dtype)
    elif dtype == torch.bool:
        flat = torch.randint(0, 2, (storage_size,), generator=generator).bool()
    else:
        # Small non-negative integers stay valid as indices and class labels for
        # any dimension of at least 8.
        flat = torch.randint(0, 8, (storage_size,), generator=generator, dtype=dtype)
    return flat.to(device).as_strided(spec.shape, stride)


def _contiguous_stride(shape: Sequence[int]) -> tuple[int, ...]:
    stride: list[int] = []
    step = 1
    for size in reversed(shape):
        stride.append(step)
        step *= max(size, 1)
    return tuple(reversed(stride))


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


def is_non_compute_operator(operator: Any) -> bool:
    """True for constructors, ``*_like`` and pure views: nothing for a compiler to speed up.

    Mutating ops are kept (in-place updates do compute); ops returning several
    tensors are kept because they cannot be a single aliasing view.
    """
    schema = operator._schema

    def holds_tensor(type_: Any) -> bool:
        return "Tensor" in str(type_)

    if not any(holds_tensor(argument.type) for argument in schema.arguments):
        return True
    if "_like" in operator.name():
        return True
    if schema.is_mutable:
        return False
    tensor_outputs = [r for r in schema.returns if str(r.type) == "Tensor"]
    if len(tensor_outputs) != 1 or tensor_outputs[0].alias_info is None:
        return False
    written = tensor_outputs[0].alias_info.after_set
    return any(
        argument.alias_info is not None and argument.alias_info.before_set & written
        for argument in schema.arguments
        if str(argument.type) == "Tensor"
    )


def _contains_tensor(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_tensor(v) for v in value.values())
    return False


def _build_recorder_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class OperatorInputRecorder(TorchDispatchMode):
        """``TorchDispatchMode`` that logs every aten call with tensor inputs and outputs.

        Use as a context manager around any model run (forward and backward)::

            with OperatorInputRecorder() as recorder:
                model(x).sum().backward()
            recorder.write("my_model.txt")  # then: benchkit operators --inp-file my_model.txt

        ``write`` drops constructors, ``*_like`` ops and pure views unless
        ``skip_non_compute=False``. Calls whose arguments cannot be written in
        the format (e.g. a Generator) are counted in ``unserializable``.
        """

        def __init__(self) -> None:
            super().__init__()
            self.calls: dict[str, Counter[str]] = {}
            self.operators: dict[str, Any] = {}
            self.unserializable: Counter[str] = Counter()

        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            kwargs = kwargs or {}
            output = func(*args, **kwargs)
            if _contains_tensor((args, kwargs)) and _contains_tensor(output):
                name = str(func)
                try:
                    text = format_call(args, kwargs)
                except _Unserializable as e:
                    self.unserializable[f"{name}: {e}"] += 1
                else:
                    self.calls.setdefault(name, Counter())[text] += 1
                    self.operators[name] = func
            return output

        def to_text(self, *, skip_non_compute: bool = True) -> str:
            lines: list[str] = []
            for name in sorted(self.calls):
                if skip_non_compute and is_non_compute_operator(self.operators[name]):
                    continue
                lines.append(f"{_OPERATOR_PREFIX}{name}")
                lines.extend(f"{_COUNT_PREFIX}{n}, {text}" for text, n in self.calls[name].items())
            return "".join(line + "\n" for line in lines)

        def write(self, path: str | Path, *, skip_non_compute: bool = True) -> None:
            atomic_write_text(path, self.to_text(skip_non_compute=skip_non_compute))

    return OperatorInputRecorder


_recorder_class: type | None = None


def __getattr__(name: str) -> Any:
    # The recorder subclasses a torch class; build it on first use so that
    # parsing logs never imports torch.
    global _recorder_class
    if name == "OperatorInputRecorder":
        if _recorder_class is None:
            _recorder_class = _build_recorder_class()
        return _recorder_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record(run: Callable[[], Any]) -> Any:
    """Run ``run()`` under a fresh OperatorInputRecorder and return the recorder."""
    recorder_class = __getattr__("OperatorInputRecorder")
    with recorder_class() as recorder:
        run()
    return recorder
