"""Running a definitions file: its module-level ``BENCHMARKS``, or a `UserError` naming the file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from benchkit.errors import UserError


def run_definitions(path: Path, name: str) -> dict[Any, Any]:
    """Execute `path` as module `name` (kept in ``sys.modules``) and return its ``BENCHMARKS``.

    Any failure while loading becomes a `UserError` that names the file: an
    exception, and also ``sys.exit()``, which would otherwise end asv's benchmark
    discovery (or benchkit) without a word.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"definitions file {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    except SystemExit as e:
        raise UserError(f"{path}: the definitions called sys.exit({e.code!r}) while loading") from None
    except Exception as e:
        raise UserError(f"{path}: loading the definitions failed: {type(e).__name__}: {e}") from e
    benchmarks = getattr(module, "BENCHMARKS", None)
    if not isinstance(benchmarks, dict):
        raise UserError(f"{path}: no module-level BENCHMARKS dict")
    return benchmarks
