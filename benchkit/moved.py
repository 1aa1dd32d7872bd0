"""Import paths the docs once gave, for code written against them.

`benchkit.api` keeps working (it is `benchkit.define.api`). Every other old path
fails at import with one line naming where the code went, instead of a bare
"No module named ...".
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

# old module -> where its public names live now
MOVED = {
    "benchkit.opinputs": "benchkit.measure.operators.inputs (the log format) and "
    "benchkit.measure.operators.recorder (OperatorInputRecorder)",
    "benchkit.build_torch": "benchkit.history.builds.build_step (`python -m benchkit.cli.build_step`) and "
    "benchkit.history.builds.wheels (patch_wheel)",
    "benchkit.models": "benchkit.measure.operators.models",
    "benchkit.profiles": "benchkit.measure.callgrind.profiles",
    "benchkit.site": "benchkit.report.site",
    "benchkit.site.publish": "benchkit.report.site.publish",
    "benchkit.asv_operators": "benchkit.measure.operators.asv",
    "benchkit.operators": "benchkit.measure.operators",
    "benchkit.history_repo": "benchkit.history.builds.repo",
    "benchkit.history.wheels": "benchkit.history.builds.wheels",
    "benchkit.history.build_step": "benchkit.history.builds.build_step",
    "benchkit.history.install": "benchkit.history.builds.install",
    "benchkit.history.installed": "benchkit.history.builds.installed",
    "benchkit.history.repo": "benchkit.history.builds.repo",
    "benchkit.history.defaults": "benchkit.history.builds.defaults",
    "benchkit.history.source": "benchkit.history.builds.source",
    "benchkit.history.sources": "benchkit.history.builds.sources",
    "benchkit.history.backfill": "benchkit.history.results.backfill",
    "benchkit.history.backfill_worker": "benchkit.history.results.backfill_worker",
    "benchkit.history.fingerprint": "benchkit.history.results.fingerprint",
    "benchkit.measure.operators.naming": "benchkit.names",
}


class MovedModuleError(ModuleNotFoundError):
    pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED:
            raise MovedModuleError(f"{fullname} has moved: import from {MOVED[fullname]}", name=fullname)
        return None


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())  # last: only names no real module has
