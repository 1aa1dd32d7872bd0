"""Definitions from a PyTorch checkout's ``benchmarks/instruction_counts``, run unchanged.

PyTorch's definition files import the suite's own packages: ``from core.api
import GroupedStmts``, ``from core.api_impl import ...`` (the 2021 layout),
``from core.types import FlatIntermediateDefinition``, ``from core.utils import
flatten, parse_stmts, iter_parsed_lines`` and ``from definitions.setup import
Setup``; ``core.api`` in turn imports ``worker.main``. While such a file loads,
those names resolve to benchkit's implementation of the same API
(`benchkit.define.api`, `benchkit.define.expand`), and ``definitions`` to the
checkout's own folder, so its ``setup.py`` and sibling modules load as they are.

Why benchkit's API and not the checkout's ``core`` package: the checkout's code
differs between PyTorch versions (three generations so far: the 2021
``core.api_impl`` one, the one with ``torchscript=True`` / ``RuntimeMode.JIT``,
the current one without TorchScript) and drags in its worker and process
machinery; benchkit's API accepts all three spellings, and the labels it
produces are the ones PyTorch's ``flatten()`` produces, so a PyTorch engineer's
benchmark keeps its name. The modules are installed only for the duration of
the load; ``sys.modules`` is restored afterwards.
"""

from __future__ import annotations

import contextlib
import re
import sys
import tempfile
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchkit.define import api
from benchkit.define.expand import flatten
from benchkit.define.modules import run_definitions
from benchkit.errors import UserError

# The top-level names PyTorch's definition files import besides torch.
SHADOWED = ("core", "definitions", "worker")


def layout_root(path: Path) -> Path | None:
    """The ``instruction_counts`` folder `path` belongs to, or None for an ordinary file.

    `path` may be that folder itself, or a module in its ``definitions/`` folder.
    """
    path = path.resolve()
    if path.is_dir():
        return path if (path / "definitions" / "standard.py").is_file() else None
    folder = path.parent
    if folder.name == "definitions" and (
        (folder.parent / "core").is_dir() or (folder / "setup.py").is_file()
    ):
        return folder.parent
    return None


def definitions_file(path: Path) -> Path:
    """The module to load: `path`, or ``definitions/standard.py`` of a given folder."""
    return path / "definitions" / "standard.py" if path.is_dir() else path


def iter_parsed_lines(block: str) -> Iterator[tuple[str, str]]:
    """Each code row of a side-by-side ``Python | C++`` block as a (python, c++) pair."""
    lines = textwrap.dedent(block).strip("\n").splitlines()
    if len(lines) < 3 or not re.match(r"^Python\s+\|\s*C\+\+\s*$", lines[0].strip()):
        raise api.DefinitionError(
            "iter_parsed_lines: expected a 'Python | C++' header, a rule and code lines"
        )
    split = lines[0].index("|")
    for line in lines[2:]:
        if line.strip():
            yield line[:split].strip(), line[split + 1 :].strip()


def get_temp_dir() -> str:
    return tempfile.mkdtemp(prefix="benchkit-instruction-counts-")


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def _stand_ins(root: Path) -> dict[str, types.ModuleType]:
    """What PyTorch's files import, provided by benchkit (``definitions``: the real folder)."""
    grouped = {
        "GroupedBenchmark": api.GroupedBenchmark,
        "GroupedModules": api.GroupedModules,
        "GroupedSetup": api.GroupedSetup,
        "GroupedStmts": api.GroupedStmts,
        "GroupedVariants": api.GroupedVariants,
    }
    core_api = _module(
        "core.api",
        **grouped,
        AutoLabels=api.AutoLabels,
        AutogradMode=api.AutogradMode,
        Language=api.Language,
        RuntimeMode=api.RuntimeMode,
        TimerArgs=api.TimerArgs,
    )
    any_type = Any
    modules = {
        "core": _module("core", __path__=[]),
        "core.api": core_api,
        "core.api_impl": _module("core.api_impl", **grouped),
        "core.types": _module(
            "core.types",
            Label=tuple,
            Definition=dict,
            FlatIntermediateDefinition=dict,
            FlatDefinition=any_type,
        ),
        "core.utils": _module(
            "core.utils",
            flatten=flatten,
            parse_stmts=api.parse_stmts,
            iter_parsed_lines=iter_parsed_lines,
            get_temp_dir=get_temp_dir,
        ),
        "worker": _module("worker", __path__=[]),
        "worker.main": _module("worker.main", WorkerTimerArgs=api.TimerArgs),
        "definitions": _module(
            "definitions", __path__=[str(root / "definitions")], __package__="definitions"
        ),
    }
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    return modules


@contextlib.contextmanager
def _imports_resolved(root: Path) -> Iterator[None]:
    """PyTorch's package names mapped to benchkit (and the checkout's definitions), then restored."""

    def ours(name: str) -> bool:
        return any(name == top or name.startswith(f"{top}.") for top in SHADOWED)

    saved = {name: module for name, module in sys.modules.items() if ours(name)}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(_stand_ins(root))
    try:
        yield
    finally:
        for name in [n for n in sys.modules if ours(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def load(path: Path) -> dict[Any, Any]:
    """The ``BENCHMARKS`` of a PyTorch-layout definitions module (or folder), unchanged."""
    root = layout_root(path)
    if root is None:
        raise UserError(f"{path}: not a definitions module of PyTorch's instruction_counts layout")
    source = definitions_file(path if path.is_dir() else path.resolve())
    name = f"definitions.{source.stem}"
    with _imports_resolved(root):
        return run_definitions(source, name)
