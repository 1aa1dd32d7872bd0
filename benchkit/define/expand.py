"""Flatten grouped definitions into concrete cases, and cases into asv benchmarks.

`materialize` turns a nested definition dict (like PyTorch's ``BENCHMARKS``)
into `Case` triples ``(label, autolabels, timer_args)``: one per combination
of runtime (Eager / TorchScript) x autograd (Forward / Forward + Backward) x
language (Python / C++) x thread count that the definition enables and has a
statement for.

`asv_classes` turns cases into asv benchmark classes. It is deterministic (same
definitions -> same names and versions in every process) and does no work at
import beyond string manipulation, because asv imports benchmark modules in
every process it starts.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from benchkit import names
from benchkit.define.api import (
    AutogradMode,
    AutoLabels,
    DefinitionError,
    GroupedBenchmark,
    Language,
    RuntimeMode,
    TimerArgs,
    TorchScriptModel,
    model_invocation,
)
from benchkit.names import CASE_METRICS, CASES_MODULE, BenchmarkName
from benchkit.util import cache_dir, content_key, torch_build_id

Label = tuple[str, ...]

_MODES = tuple(
    itertools.product(
        (RuntimeMode.EAGER, RuntimeMode.JIT),
        (AutogradMode.FORWARD, AutogradMode.FORWARD_BACKWARD),
        (Language.PYTHON, Language.CPP),
    )
)

_CPP_JIT_GLOBAL_SETUP = "#include <string>\n#include <vector>\n#include <torch/script.h>\n"


KEY_SEPARATOR = " | "


def key_runs_backward(key: str) -> bool | None:
    """Whether the case of `key` (`Case.key`) runs a backward pass; None for an explicit one,
    which says nothing of autograd."""
    parts = key.rsplit(KEY_SEPARATOR, 4)  # a label may hold the separator; the modes cannot
    if len(parts) < 5 or parts[3] not in (AutogradMode.FORWARD.value, AutogradMode.FORWARD_BACKWARD.value):
        return None
    return parts[3] == AutogradMode.FORWARD_BACKWARD.value


class Case(NamedTuple):
    """One concrete benchmark: what `torch.utils.benchmark.Timer` would run."""

    label: Label
    autolabels: AutoLabels
    timer_args: TimerArgs

    @property
    def key(self) -> str:
        """Unique, human-readable identity: the full label plus the derived modes."""
        modes = self.autolabels.as_dict
        parts = ["/".join(self.label), modes["language"], modes["runtime"], modes["autograd"]]
        return KEY_SEPARATOR.join([*parts, f"{self.timer_args.num_threads} thread(s)"])

    @property
    def fingerprint(self) -> str:
        """Hash of what is measured; cache paths (machine-specific) are left out."""
        args = self.timer_args.to_json()
        if self.timer_args.torchscript is not None:
            ts = self.timer_args.torchscript
            args["setup"] = args["setup"].replace(ts.path, ts.key)
            args["torchscript"] = ts.key
        return content_key(self.key, json.dumps(args, sort_keys=True))


def _join_label(prefix: Label, key: object, where: Label) -> Label:
    if key is None:
        return prefix
    if isinstance(key, str):
        return (*prefix, key)
    if isinstance(key, tuple) and all(isinstance(k, str) for k in key):
        return prefix + key
    raise DefinitionError(
        f"definition {'/'.join(where) or '<root>'}: key {key!r} must be a str, a tuple of str or None"
    )


def flatten(definition: Mapping[Any, Any]) -> dict[Label, GroupedBenchmark | TimerArgs]:
    """Nested dict -> {full label: GroupedBenchmark | TimerArgs}; duplicates are errors."""
    result: dict[Label, GroupedBenchmark | TimerArgs] = {}

    def walk(prefix: Label, node: Mapping[Any, Any]) -> None:
        for key, value in node.items():
            label = _join_label(prefix, key, prefix)
            if isinstance(value, (GroupedBenchmark, TimerArgs)):
                if label in result:
                    raise DefinitionError(f"definition {'/'.join(label)}: label is defined twice")
                result[label] = value
            elif isinstance(value, Mapping):
                walk(label, value)
            else:
                raise DefinitionError(
                    f"definition {'/'.join(label) or '<root>'}: expected a grouped benchmark, "
                    f"TimerArgs or dict, got {type(value).__name__}"
                )

    if not isinstance(definition, Mapping):
        raise DefinitionError(f"benchmark definitions must be a dict, got {type(definition).__name__}")
    walk((), definition)
    return result


def _stmt(
    bench: GroupedBenchmark, runtime: RuntimeMode, autograd: AutogradMode, lang: Language
) -> str | None:
    if runtime is RuntimeMode.EAGER:
        stmt = bench.py_fwd_stmt if lang is Language.PYTHON else bench.cpp_fwd_stmt
    else:
        assert bench.signature_args is not None
        stmt = model_invocation(bench.signature_args, bench.signature_output, runtime, lang)
    if stmt is None or autograd is AutogradMode.FORWARD:
        return stmt
    out = bench.signature_output
    if lang is Language.PYTHON:
        return f"{stmt}\n{out}.backward()"
    # A scripted model returns an IValue in C++; the tensor must be unwrapped.
    unwrap = ".toTensor()" if runtime is RuntimeMode.JIT else ""
    return f"{stmt}\n{out}{unwrap}.backward();"


def _setup(
    bench: GroupedBenchmark, runtime: RuntimeMode, lang: Language, stmt: str, model_path: str | None
) -> str:
    if lang is Language.PYTHON:
        base, model_setup = bench.setup.py_setup, bench.py_model_setup
    else:
        base, model_setup = bench.setup.cpp_setup, bench.cpp_model_setup
    if runtime is RuntimeMode.EAGER:
        return "\n".join(part for part in (base, model_setup or "") if part)
    assert model_path is not None and '"' not in model_path
    # A few calls before timing so lazy JIT optimisation is not measured.
    if lang is Language.PYTHON:
        load = (
            f'jit_model = torch.jit.load("{model_path}")\nfor _ in range(3):\n{textwrap.indent(stmt, "    ")}'
        )
    else:
        load = (
            f'auto jit_model = torch::jit::load("{model_path}");\n'
            f"for (int warmup = 0; warmup < 3; warmup++) {{\n{textwrap.indent(stmt, '    ')}\n}}"
        )
    return "\n".join(part for part in (base, load) if part)


def _has_cpp_side(bench: GroupedBenchmark) -> bool:
    return bench.cpp_fwd_stmt is not None or bool(bench.setup.cpp_setup.strip())


# Changed whenever `ensure_artifact` writes other bytes for the same model and torch build,
# so that no cache serves an artifact written the older way.
TORCHSCRIPT_ARTIFACT_FORMAT = (
    "scripted with fixed seeds, saved in memory, without debug records, id from the records"
)


def torchscript_artifact(model_source: str) -> TorchScriptModel:
    """Where the scripted form of `model_source` lives, per torch build (built when a case
    needs it, by `benchkit.measure.cpp.torchscript.ensure_artifact`)."""
    source = f"import torch\n{model_source}\njit_model = torch.jit.script(model)\n"
    directory = cache_dir("torchscript", torch_build_id())
    name = content_key(TORCHSCRIPT_ARTIFACT_FORMAT, source)
    return TorchScriptModel(source=source, path=str(directory / f"{name}.pt"))


def _expand(label: Label, bench: GroupedBenchmark) -> list[Case]:
    artifact = None
    if bench.torchscript and bench.py_model_setup:
        artifact = torchscript_artifact(bench.py_model_setup)
    cases = []
    for (runtime, autograd, lang), threads in itertools.product(_MODES, bench.num_threads):
        if runtime is RuntimeMode.JIT and not bench.torchscript:
            continue
        if autograd is AutogradMode.FORWARD_BACKWARD and not bench.autograd:
            continue
        if runtime is RuntimeMode.JIT and lang is Language.CPP and not _has_cpp_side(bench):
            continue  # nothing in C++ would define the model's inputs
        stmt = _stmt(bench, runtime, autograd, lang)
        if stmt is None:
            continue
        is_jit = runtime is RuntimeMode.JIT
        global_setup = bench.setup.global_setup if lang is Language.CPP else ""
        if is_jit and lang is Language.CPP:
            global_setup = _CPP_JIT_GLOBAL_SETUP + global_setup
        timer_args = TimerArgs(
            stmt=stmt,
            setup=_setup(bench, runtime, lang, stmt, artifact.path if is_jit and artifact else None),
            global_setup=global_setup,
            num_threads=threads,
            language=lang,
            torchscript=artifact if is_jit else None,
        )
        cases.append(Case(label, AutoLabels(runtime, autograd, lang), timer_args))
    return cases


def materialize(definition: Mapping[Any, Any]) -> tuple[Case, ...]:
    """Expand a (nested or flat) definition dict into concrete cases.

    TorchScript artifacts are *not* built here (that needs torch and takes
    seconds); each JIT case carries the content-keyed path its setup loads,
    and `benchkit.measure.cpp.torchscript.ensure_artifact` builds it before first use.
    """
    cases: list[Case] = []
    for label, value in flatten(definition).items():
        if isinstance(value, TimerArgs):
            auto = AutoLabels(RuntimeMode.EXPLICIT, AutogradMode.EXPLICIT, value.language)
            cases.append(Case(label, auto, value))
        else:
            try:
                cases.extend(_expand(label, value))
            except DefinitionError as e:
                raise DefinitionError(f"definition {'/'.join(label)}: {e}") from None
    keys = [case.key for case in cases]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise DefinitionError(f"two definitions expand to the same case: {dup}")
    return tuple(cases)


def case_names(case: Case) -> tuple[str, ...]:
    """Every name a user sees for `case`: asv's benchmark names (what `-b` matches, the class name
    `benchkit list` prints first), the class name alone, and the readable key."""
    cls = asv_class_name(case)
    return (*(str(BenchmarkName.build(metric, cls)) for metric in CASE_METRICS), cls, case.key)


def compile_pattern(pattern: str, flag: str = "--filter") -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise DefinitionError(f"{flag} {pattern!r} is not a valid regular expression: {e}") from None


def select(cases: Iterable[Case], pattern: str | Sequence[str] | None) -> list[Case]:
    """Cases with a name (`case_names`: asv's, the class, the readable key) matching a regex
    of `pattern` (one or several, any of them; all cases when None or empty)."""
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or ())
    if not patterns:
        return list(cases)
    regexes = [compile_pattern(p) for p in patterns]
    return [case for case in cases if any(r.search(n) for r in regexes for n in case_names(case))]


def asv_bench_regexes(patterns: Sequence[str], cases: Iterable[Case]) -> list[str]:
    """asv ``--bench`` regexes selecting what `patterns` select in any naming: each pattern as
    given (asv's own names, e.g. operator benchmarks) plus the asv names of the cases it selects
    by another name (e.g. a readable key such as ``nn Modules/Linear``)."""
    cases = list(cases)
    out: list[str] = []
    for pattern in patterns:
        regex = compile_pattern(pattern, "-b")
        out.append(pattern)
        # A case whose asv names the pattern matches is asv's to select as given: only those
        # methods (e.g. `\.time_wall$` selects no instruction counts).
        classes = sorted(
            {
                asv_class_name(c)
                for c in select(cases, pattern)
                if not any(regex.search(name) for name in case_names(c)[: len(CASE_METRICS)])
            }
        )
        if classes:
            out.append(rf"^{CASES_MODULE}\.(?:{'|'.join(map(re.escape, classes))})\.")
    return out


# -- asv benchmark generation -----------------------------------------------------


def asv_class_name(case: Case) -> str:
    """A readable Python identifier for a case, stable across processes (`benchkit.names`)."""
    modes = case.autolabels
    words = [*case.label, modes.language.name, modes.runtime.name, modes.autograd.name]
    return names.asv_class_name([*words, f"t{case.timer_args.num_threads}"], case.key)


def pretty_source(case: Case) -> str:
    args = case.timer_args
    lang = "// " if args.language is Language.CPP else "# "
    sections = [f"{lang}stmt", args.stmt]
    if args.setup.strip() and args.setup.strip() != "pass":
        sections += [f"{lang}setup", args.setup]
    if args.global_setup.strip():
        sections += [f"{lang}global setup", args.global_setup]
    return "\n".join(sections)


class AsvMetric(Protocol):
    """A kind of measurement a case contributes to asv (wall time, instructions...).

    `method_name` must match asv's naming rules for its benchmark type
    (``time_*``, ``track_*``). `make_method` returns the function asv calls; its
    attributes (``unit``, ``timeout``, ``setup_cache``...) configure asv.
    """

    method_name: str

    def make_method(self, case: Case) -> Callable[..., Any] | None: ...


def asv_classes(cases: Sequence[Case], metrics: Sequence[AsvMetric]) -> dict[str, type]:
    """One asv class per case, with one method per metric that applies to it."""
    classes: dict[str, type] = {}
    for case in cases:
        name = asv_class_name(case)
        namespace: dict[str, Any] = {"__doc__": case.key, "case_key": case.key}
        for metric in metrics:
            method = metric.make_method(case)
            if method is None:
                continue
            method.__name__ = metric.method_name
            method.__qualname__ = f"{name}.{metric.method_name}"
            # asv's pages insert both as HTML (summary grid, graph tree, code tooltips).
            method.pretty_name = names.pretty_name(case.key, names.Metric(metric.method_name))  # type: ignore[attr-defined]
            method.pretty_source = html.escape(pretty_source(case))  # type: ignore[attr-defined]
            # Explicit version: history survives edits elsewhere in the suite and
            # resets only when what this case measures changes.
            base = getattr(method, "version", "")
            method.version = content_key(case.fingerprint, metric.method_name, str(base))  # type: ignore[attr-defined]
            namespace[metric.method_name] = method
        if len(namespace) > 2:
            classes[name] = type(name, (), namespace)
    return classes
