"""Benchmark definition modules: the standard suite plus the user's own.

A definition module is a Python file with a module-level ``BENCHMARKS`` dict
(the same shape as PyTorch's ``benchmarks/instruction_counts`` definitions).
Users add theirs without editing the suite, with ``--definitions PATH`` on the
CLI or, for asv, the ``BENCHKIT_DEFINITIONS`` environment variable (paths
separated by ``os.pathsep``). ``BENCHKIT_STANDARD=0`` leaves the standard suite out.
A PyTorch checkout's ``benchmarks/instruction_counts`` folder, or a module in its
``definitions/``, loads unchanged (`benchkit.define.pytorch_layout`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchkit import settings
from benchkit.define import pytorch_layout
from benchkit.define.modules import run_definitions
from benchkit.errors import UserError


def _load_user_module(path: Path) -> dict[Any, Any]:
    if pytorch_layout.layout_root(path) is not None:  # a PyTorch checkout's instruction_counts
        benchmarks = pytorch_layout.load(path)
        _check_labels(path, benchmarks)
        return benchmarks
    if path.is_dir():
        raise UserError(
            f"definitions {path} is a folder: give a definitions .py file, or the instruction_counts "
            "folder of a PyTorch checkout (it holds definitions/standard.py)"
        )
    if not path.is_file():
        raise UserError(f"definitions file {path} does not exist")
    benchmarks = run_definitions(path, f"benchkit_user_definitions_{abs(hash(str(path.resolve())))}")
    _check_labels(path, benchmarks)
    return benchmarks


def _check_labels(path: Path, benchmarks: dict[Any, Any]) -> None:
    """Labels become asv class names, benchmark names and lines of tables: reject what breaks them."""
    from benchkit.define.api import DefinitionError
    from benchkit.define.expand import flatten

    try:
        labels = flatten(benchmarks)
    except DefinitionError as e:
        raise UserError(f"{path}: {e}") from None
    for label in labels:
        shown = "/".join(label)
        for part in label:
            if any(ord(c) < 32 or ord(c) == 127 for c in part):
                raise UserError(f"{path}: label {shown!r} holds a control character (tab, newline...)")
        first = re.sub(r"[^0-9a-zA-Z]+", "_", label[0]).strip("_") if label else ""
        if not first or first[0].isdigit():
            raise UserError(
                f"{path}: label {shown!r} would give an asv class name starting with "
                f"{first[:1] or 'nothing'!r}; start the top-level group with a letter"
            )


def definition_paths(explicit: Sequence[str] | None = None) -> list[Path]:
    """Explicit paths if given, else those named by BENCHKIT_DEFINITIONS."""
    if explicit:
        return [Path(p) for p in explicit]
    return list(settings.current().define.definitions)


def load_definitions(paths: Sequence[str] | None = None, standard: bool | None = None) -> dict[Any, Any]:
    """One definition dict: the standard suite and each user module side by side.

    User modules sit at the root next to the standard groups; a label that
    exists in both is reported by `expand.flatten` as defined twice.
    """
    if standard is None:
        standard = settings.current().define.standard
    merged: dict[Any, Any] = {}
    sources: list[tuple[str, dict[Any, Any]]] = []
    if standard:
        from benchkit.define.suites.standard import BENCHMARKS

        sources.append(("the standard suite", BENCHMARKS))
    sources += [(str(p), _load_user_module(p)) for p in definition_paths(paths)]
    for origin, benchmarks in sources:
        for key, value in benchmarks.items():
            if key in merged:
                raise UserError(f"{origin}: top-level group {key!r} is already defined elsewhere")
            merged[key] = value
    return merged


def load_cases(paths: Sequence[str] | None = None, standard: bool | None = None) -> tuple[Any, ...]:
    from benchkit.define.expand import materialize

    return materialize(load_definitions(paths, standard))
