"""benchkit: historical performance tracking for PyTorch on asv.

The package is laid out by stage, and data flows one way through them::

    define/    grouped definitions -> concrete cases -> asv benchmark classes
    measure/   wall time, Callgrind instruction counts, TorchInductor operator speedups
    history/   builds/: torch builds as commits, asv's build step; results/: asv's results read and backfilled
    report/    the regression gate, profile diffs, the static site
    cli/       one thin module per `benchkit` command
    mainjob    `benchkit main`: every stage, from nothing to a published site

`benchkit.expand` and `benchkit.callgrind_track` are the public entries of the
definition and Callgrind stages. The definition API is importable from here;
it is loaded on first use so that a worker under valgrind imports nothing it does
not need.
"""

from __future__ import annotations

from typing import Any

from benchkit import moved

moved.install()

__all__ = [
    "DefinitionError",
    "GroupedModules",
    "GroupedSetup",
    "GroupedStmts",
    "GroupedVariants",
    "Language",
    "TimerArgs",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in __all__:
        from benchkit.define import api

        return getattr(api, name)
    raise AttributeError(f"module 'benchkit' has no attribute {name!r}")
