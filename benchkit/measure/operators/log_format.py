"""Operator input logs: parsing the text format (without eval) into `OperatorLog`s."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.measure.operators.inputs import (
    _COUNT_PREFIX,
    _DTYPE_NAME_TO_ABBREVIATION,
    _OPERATOR_NAME,
    _OPERATOR_PREFIX,
    _RENAMED_OPERATORS,
    DTYPE_ABBREVIATIONS,
    DtypeName,
    LogFormatError,
    OperatorInput,
    SparseTensorSpec,
    TensorSpec,
    TorchName,
)

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
