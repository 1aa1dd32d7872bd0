"""Grouped benchmark definitions: the user-facing API.

A *grouped* definition describes a family of related benchmarks at once: the
same computation written in Python and C++, optionally derived TorchScript and
autograd variants, and one or more thread counts. `benchkit.define.expand` flattens a
nested dict of these into concrete cases, each carried by a `TimerArgs`.

The semantics follow PyTorch's `benchmarks/instruction_counts` so definitions
written for that suite work here unchanged:

* ``signature="f(x, w) -> y"`` names the inputs (created by setup) and the
  output of a statement. It is what lets us wrap a statement into a scripted
  function (``torchscript=True``) and append ``y.backward()`` (``autograd=True``).
* ``GroupedModules`` calls a ``model`` defined by the model setup instead of a
  free-form statement.
* ``GroupedVariants`` turns a block with ``# @label`` markers into one
  benchmark per line.

This module is deliberately free of torch imports: loading definitions (and so
discovering asv benchmarks) must stay cheap. It is one module, a little over the
usual length, because it is the whole definition API that user files import from
one place (as PyTorch's ``instruction_counts/core/api.py`` is); the expansion into
cases lives in `benchkit.define.expand`.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import hashlib
import itertools
import re
import sys
import textwrap
from typing import Any

from benchkit.errors import UserError

__all__ = [
    "AutoLabels",
    "AutogradMode",
    "DefinitionError",
    "GroupedBenchmark",
    "GroupedModules",
    "GroupedSetup",
    "GroupedStmts",
    "GroupedVariants",
    "Language",
    "RuntimeMode",
    "TimerArgs",
    "TorchScriptModel",
]


class DefinitionError(UserError, ValueError):
    """A benchmark definition is invalid. The message names the definition."""


class Language(enum.Enum):
    PYTHON = "Python"
    CPP = "C++"

    @classmethod
    def coerce(cls, value: Any) -> Language:
        """Accept our enum, torch's `Language` enum, or a string like "py"/"cpp"."""
        if isinstance(value, cls):
            return value
        name = getattr(value, "name", value)
        key = str(name).strip().lower().replace("+", "p")
        if key in ("python", "py"):
            return cls.PYTHON
        if key in ("cpp", "c", "cxx"):
            return cls.CPP
        raise DefinitionError(f"unknown language {value!r}: expected 'python' or 'cpp'")


class RuntimeMode(enum.Enum):
    EAGER = "Eager"
    JIT = "TorchScript"
    EXPLICIT = ""


class AutogradMode(enum.Enum):
    FORWARD = "Forward"
    FORWARD_BACKWARD = "Forward + Backward"
    EXPLICIT = ""


@dataclasses.dataclass(frozen=True)
class AutoLabels:
    """Labels inferred while expanding a grouped definition."""

    runtime: RuntimeMode
    autograd: AutogradMode
    language: Language

    @property
    def as_dict(self) -> dict[str, str]:
        return {
            "runtime": self.runtime.value or "explicit",
            "autograd": self.autograd.value or "explicit",
            "language": self.language.value,
        }


@dataclasses.dataclass(frozen=True)
class TorchScriptModel:
    """A TorchScript artifact a case loads: Python source defining ``jit_model``.

    Scripting needs real source files and a torch import, so it never happens
    while definitions are expanded; `benchkit.measure.cpp.torchscript.ensure_artifact`
    builds the file on first use, keyed by `key` (source + torch version).
    """

    source: str
    path: str

    @property
    def key(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class TimerArgs:
    """Arguments for one `torch.utils.benchmark.Timer`: a single concrete case.

    This is the whole contract between the suite and a measuring worker: a
    worker needs nothing but a `TimerArgs` to run a case.
    """

    stmt: str
    setup: str = "pass"
    global_setup: str = ""
    num_threads: int = 1
    language: Language = Language.PYTHON
    # Set by expansion for TorchScript cases; the setup loads `torchscript.path`.
    torchscript: TorchScriptModel | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "language", Language.coerce(self.language))
        for name in ("stmt", "setup", "global_setup"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise DefinitionError(f"TimerArgs.{name} must be a str, got {type(value).__name__}")
            object.__setattr__(self, name, textwrap.dedent(value))
        if not self.stmt.strip():
            raise DefinitionError("TimerArgs.stmt is empty")
        if self.language is Language.CPP and self.setup.strip() == "pass":
            object.__setattr__(self, "setup", "")  # Timer's default setup is Python
        if isinstance(self.num_threads, bool) or not isinstance(self.num_threads, int):
            raise DefinitionError(f"TimerArgs.num_threads must be an int, got {self.num_threads!r}")
        if self.num_threads < 1:
            raise DefinitionError(f"TimerArgs.num_threads must be >= 1, got {self.num_threads}")
        if self.global_setup and self.language is Language.PYTHON:
            raise DefinitionError("TimerArgs.global_setup is only supported for C++ statements")

    def to_json(self) -> dict[str, Any]:
        return {
            "stmt": self.stmt,
            "setup": self.setup,
            "global_setup": self.global_setup,
            "num_threads": self.num_threads,
            "language": self.language.name,
            "torchscript": dataclasses.asdict(self.torchscript) if self.torchscript else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimerArgs:
        ts = data.get("torchscript")
        return cls(
            stmt=data["stmt"],
            setup=data["setup"],
            global_setup=data["global_setup"],
            num_threads=int(data["num_threads"]),
            language=Language[data["language"]],
            torchscript=TorchScriptModel(**ts) if ts else None,
        )


@dataclasses.dataclass(frozen=True)
class GroupedSetup:
    """Setup shared by the Python and C++ sides of a grouped definition."""

    py_setup: str = ""
    cpp_setup: str = ""
    global_setup: str = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, str):
                raise DefinitionError(f"GroupedSetup.{field.name} must be a str, got {type(value).__name__}")
            object.__setattr__(self, field.name, textwrap.dedent(value))


_SIGNATURE = re.compile(r"^f\((?P<args>.*)\)\s*->\s*(?P<out>.*)$")


def _caller_location(depth: int = 2) -> str:
    """`file:line` of the user code that built a definition, for error messages."""
    frame = sys._getframe(depth)
    while frame is not None and frame.f_globals.get("__name__") in (__name__, "functools"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _fail(where: str, kind: str, message: str) -> DefinitionError:
    return DefinitionError(f"{kind} defined at {where}: {message}")


def parse_signature(
    signature: str | None, where: str = "<unknown>", kind: str = "benchmark"
) -> tuple[tuple[str, ...] | None, str | None]:
    """``"f(x, w) -> y"`` → ``(("x", "w"), "y")``; ``-> None`` gives no output."""
    if signature is None:
        return None, None
    match = _SIGNATURE.match(signature.strip())
    if match is None:
        raise _fail(where, kind, f"invalid signature {signature!r}: expected 'f(a, b, ...) -> out'")
    raw_args = match.group("args").strip()
    args = tuple(a.strip() for a in raw_args.split(",")) if raw_args else ()
    for arg in args:
        if not arg.isidentifier():
            raise _fail(where, kind, f"invalid signature {signature!r}: {arg!r} is not a name")
    if len(set(args)) != len(args):
        raise _fail(where, kind, f"invalid signature {signature!r}: repeated argument")
    output = match.group("out").strip()
    if "," in output:
        raise _fail(where, kind, f"invalid signature {signature!r}: only one output is supported")
    if output == "None":
        return args, None
    if not output.isidentifier():
        raise _fail(where, kind, f"invalid signature {signature!r}: output {output!r} is not a name")
    return args, output


def _threads(num_threads: int | tuple[int, ...], where: str, kind: str) -> tuple[int, ...]:
    values = (num_threads,) if isinstance(num_threads, int) else tuple(num_threads)
    if not values or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in values):
        raise _fail(where, kind, f"num_threads must be a positive int or tuple of them, got {num_threads!r}")
    return values


def _python_defines(source: str, name: str, where: str, kind: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise _fail(where, kind, f"py_model_setup is not valid Python: {e}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
    return False


@dataclasses.dataclass(frozen=True)
class GroupedBenchmark:
    """One grouped definition; build it with GroupedStmts / GroupedModules / GroupedVariants.

    ``py_fwd_stmt``/``cpp_fwd_stmt`` are the eager forward statements actually
    timed (for modules, a generated ``y = model(x)`` call). ``py_model_setup``
    defines ``model``; for statements with ``torchscript=True`` it is derived by
    wrapping the statement in ``def model(<args>): ... return <out>``.
    """

    py_fwd_stmt: str | None
    cpp_fwd_stmt: str | None
    py_model_setup: str | None
    cpp_model_setup: str | None
    inferred_model_setup: bool
    setup: GroupedSetup
    signature_args: tuple[str, ...] | None
    signature_output: str | None
    torchscript: bool
    autograd: bool
    num_threads: tuple[int, ...]
    origin: str = dataclasses.field(default="<unknown>", compare=False)

    @property
    def kind(self) -> str:
        return "GroupedStmts" if self.inferred_model_setup else "GroupedModules"

    def __post_init__(self) -> None:
        where, kind = self.origin, self.kind
        if not isinstance(self.setup, GroupedSetup):
            raise _fail(where, kind, f"setup must be a GroupedSetup, got {type(self.setup).__name__}")
        if self.py_fwd_stmt is None and self.cpp_fwd_stmt is None:
            raise _fail(where, kind, "neither a Python nor a C++ statement is given")
        if self.autograd and self.signature_output is None:
            raise _fail(where, kind, "autograd=True needs an output in the signature (f(...) -> y)")
        if (self.torchscript or self.autograd) and self.signature_args is None:
            raise _fail(where, kind, "torchscript/autograd variants need a signature 'f(...) -> y'")
        if self.torchscript and self.py_model_setup is None:
            raise _fail(where, kind, "torchscript=True needs a Python model to script")
        if self.py_model_setup and not _python_defines(self.py_model_setup, "model", where, kind):
            raise _fail(where, kind, "py_model_setup does not define `model`")
        if self.cpp_model_setup and not re.search(r"\bmodel\b", self.cpp_model_setup):
            raise _fail(where, kind, "cpp_model_setup does not define `model`")


def model_invocation(args: tuple[str, ...], out: str | None, runtime: RuntimeMode, language: Language) -> str:
    """The statement calling the eager ``model`` or the scripted ``jit_model``."""
    joined = ", ".join(args)
    if language is Language.PYTHON:
        name = "model" if runtime is RuntimeMode.EAGER else "jit_model"
        return f"{out} = {name}({joined})" if out else f"{name}({joined})"
    prefix = f"auto {out} = " if out else ""
    if runtime is RuntimeMode.EAGER:
        # C++ modules have no __call__; `forward` skips Python's hook machinery,
        # an accepted difference between the two languages.
        return f"{prefix}model->forward({joined});"
    ivalues = ", ".join(f"torch::jit::IValue({a})" for a in args)
    return (
        f"std::vector<torch::jit::IValue> ivalue_inputs({{{ivalues}}});\n"
        f"{prefix}jit_model.forward(ivalue_inputs);"
    )


def GroupedStmts(
    py_stmt: str | None = None,
    cpp_stmt: str | None = None,
    setup: GroupedSetup = GroupedSetup(),
    signature: str | None = None,
    torchscript: bool = False,
    autograd: bool = False,
    num_threads: int | tuple[int, ...] = 1,
) -> GroupedBenchmark:
    """Benchmark free-form statements (Python, C++, or both)."""
    where, kind = _caller_location(), "GroupedStmts"
    py_stmt = textwrap.dedent(py_stmt) if py_stmt is not None else None
    cpp_stmt = textwrap.dedent(cpp_stmt) if cpp_stmt is not None else None
    args, out = parse_signature(signature, where, kind)
    model_setup = None
    if torchscript:
        if py_stmt is None:
            raise _fail(where, kind, "torchscript=True needs py_stmt to derive a model from")
        if args is None:
            raise _fail(where, kind, "torchscript=True needs a signature 'f(...) -> y'")
        body = textwrap.indent(py_stmt.strip("\n"), "    ")
        model_setup = f"def model({', '.join(args)}):\n{body}\n    return {out}\n"
    return GroupedBenchmark(
        py_fwd_stmt=py_stmt,
        cpp_fwd_stmt=cpp_stmt,
        py_model_setup=model_setup,
        cpp_model_setup=None,
        inferred_model_setup=True,
        setup=setup,
        signature_args=args,
        signature_output=out,
        torchscript=torchscript,
        autograd=autograd,
        num_threads=_threads(num_threads, where, kind),
        origin=where,
    )


def GroupedModules(
    py_model_setup: str | None = None,
    cpp_model_setup: str | None = None,
    setup: GroupedSetup = GroupedSetup(),
    signature: str | None = None,
    torchscript: bool = False,
    autograd: bool = False,
    num_threads: int | tuple[int, ...] = 1,
) -> GroupedBenchmark:
    """Benchmark calls of a `model` (e.g. an nn.Module) defined by the model setup."""
    where, kind = _caller_location(), "GroupedModules"
    args, out = parse_signature(signature, where, kind)
    if args is None:
        raise _fail(where, kind, "a signature 'f(...) -> y' is required to call the model")
    py_model_setup = textwrap.dedent(py_model_setup) if py_model_setup is not None else None
    cpp_model_setup = textwrap.dedent(cpp_model_setup) if cpp_model_setup is not None else None
    return GroupedBenchmark(
        py_fwd_stmt=model_invocation(args, out, RuntimeMode.EAGER, Language.PYTHON)
        if py_model_setup is not None
        else None,
        cpp_fwd_stmt=model_invocation(args, out, RuntimeMode.EAGER, Language.CPP)
        if cpp_model_setup is not None
        else None,
        py_model_setup=py_model_setup,
        cpp_model_setup=cpp_model_setup,
        inferred_model_setup=False,
        setup=setup,
        signature_args=args,
        signature_output=out,
        torchscript=torchscript,
        autograd=autograd,
        num_threads=_threads(num_threads, where, kind),
        origin=where,
    )


_SPECIAL_BLOCKS = ("SETUP", "GLOBAL_SETUP")


def _parse_variant_block(block: str, language: Language, where: str) -> tuple[dict[str, list[str]], str, str]:
    """Split a block into {label: statement lines}, setup and global setup."""
    comment = "#" if language is Language.PYTHON else "//"
    marker = re.compile(rf"^{re.escape(comment)}\s*@(.+)$")
    current: str | None = None
    special: dict[str, list[str]] = {name: [] for name in _SPECIAL_BLOCKS}
    cases: dict[str, list[str]] = {}
    for lineno, line in enumerate(textwrap.dedent(block).strip().splitlines(), start=1):
        match = marker.match(line.strip())
        if match:
            label = match.group(1).strip()
            normalized = label.replace(" ", "_").upper()
            if normalized in _SPECIAL_BLOCKS:
                current = normalized
            else:
                if label in cases:
                    raise _fail(
                        where,
                        "GroupedVariants",
                        f"{language.value} block line {lineno}: label @{label} is used twice",
                    )
                cases[label] = []
                current = label
            continue
        if line.startswith(comment):
            line = ""  # a plain comment keeps its slot so Python/C++ lines stay paired
        if current is None:
            if line.strip():
                raise _fail(
                    where,
                    "GroupedVariants",
                    f"{language.value} block line {lineno}: statement {line.strip()!r} comes "
                    f"before any '{comment} @label' marker",
                )
            continue
        (special[current] if current in special else cases[current]).append(line)
    return cases, "\n".join(special["SETUP"]), "\n".join(special["GLOBAL_SETUP"])


def GroupedVariants(
    py_block: str = "",
    cpp_block: str = "",
    num_threads: int | tuple[int, ...] = 1,
) -> dict[tuple[str, ...], GroupedBenchmark]:
    """One benchmark per line, grouped under ``# @label`` (``// @label``) markers.

    ``@setup`` (and, in C++, ``@global_setup``) blocks are shared by every case.
    A label with several lines yields one case per line, labelled ``Case:  i``;
    the i-th Python line is paired with the i-th C++ line of the same label.
    """
    where = _caller_location()
    py_cases, py_setup, py_global = _parse_variant_block(py_block, Language.PYTHON, where)
    cpp_cases, cpp_setup, cpp_global = _parse_variant_block(cpp_block, Language.CPP, where)
    if py_global.strip():
        raise _fail(where, "GroupedVariants", "Python blocks cannot have a @global_setup section")
    setup = GroupedSetup(py_setup=py_setup, cpp_setup=cpp_setup, global_setup=cpp_global)
    threads = _threads(num_threads, where, "GroupedVariants")

    variants: dict[tuple[str, ...], GroupedBenchmark] = {}
    for label in dict.fromkeys(itertools.chain(py_cases, cpp_cases)):
        py_lines, cpp_lines = py_cases.get(label, []), cpp_cases.get(label, [])
        pairs = [
            (py.strip(), cpp.strip())
            for py, cpp in itertools.zip_longest(py_lines, cpp_lines, fillvalue="")
            if py.strip() or cpp.strip()
        ]
        for i, (py, cpp) in enumerate(pairs):
            key = (label, f"Case: {i:>2}") if len(pairs) > 1 else (label,)
            variants[key] = GroupedBenchmark(
                py_fwd_stmt=py or None,
                cpp_fwd_stmt=cpp or None,
                py_model_setup=None,
                cpp_model_setup=None,
                inferred_model_setup=True,
                setup=setup,
                signature_args=None,
                signature_output=None,
                torchscript=False,
                autograd=False,
                num_threads=threads,
                origin=where,
            )
    return variants


_SIDE_BY_SIDE_HEADER = re.compile(r"^Python\s+\|\s*C\+\+\s*$")


def parse_stmts(block: str) -> tuple[str, str]:
    """Split a two-column ``Python | C++`` block into (python_code, cpp_code).

    The first line is a ``Python ... | C++`` header and the second a dashed rule;
    the column boundary is the position of ``|`` in the header, so each side may
    be any width. Lets related Python and C++ code be read side by side.
    """
    lines = textwrap.dedent(block).strip("\n").splitlines()
    where = _caller_location()
    if len(lines) < 3 or not _SIDE_BY_SIDE_HEADER.match(lines[0].strip()):
        raise _fail(where, "parse_stmts", "expected a 'Python | C++' header, a rule and code lines")
    split = lines[0].index("|")
    py_lines, cpp_lines = [], []
    for lineno, line in enumerate(lines[2:], start=3):
        left, bar, right = line[:split], line[split : split + 1], line[split + 1 :]
        if line.strip() and bar not in ("|", ""):
            raise _fail(where, "parse_stmts", f"line {lineno}: no '|' at column {split + 1}: {line!r}")
        py_lines.append(left.rstrip())
        cpp_lines.append(right[1:].rstrip() if right.startswith(" ") else right.rstrip())
    return "\n".join(py_lines).rstrip() + "\n", "\n".join(cpp_lines).rstrip() + "\n"
