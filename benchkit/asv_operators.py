"""The operator suite's asv ``setup_cache``: time what this asv command selected, once.

asv reruns a shared ``setup_cache`` in every round (``--interleave-rounds``), but the
operator set is timed in its own fresh processes with its own rounds
(`benchkit.operators.measure_default_set_for_asv`), so timing it again per asv round
only costs time. The first round's result is kept for the rest of the same asv
command (keyed by that command's pid and start time, the torch build and the
selection); a new asv command times again, because timings -- unlike instruction
counts -- belong to the moment they were taken.

Only operators with at least one selected benchmark are timed (`benchkit.asv_selection`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from benchkit import asv_selection
from benchkit.util import atomic_write_json, cache_dir, content_key, torch_build_id

METHODS = (
    "track_compiled_over_eager",
    "track_eager_seconds",
    "track_compiled_seconds",
    "track_compile_seconds",
)
_KEEP_SECONDS = 2 * 24 * 3600  # reuse files of asv commands older than this are removed


def selected_operators(
    inputs: dict[str, Sequence[str]], class_names: dict[str, str], module: str, regexes: Sequence[str] | None
) -> list[str]:
    """Operators (in ``inputs`` order) with any benchmark ``module.Class.method(label)`` selected."""
    if regexes is None:
        return list(inputs)
    chosen = []
    for operator, labels in inputs.items():
        names = [
            asv_selection.benchmark_name(f"{module}.{class_names[operator]}.{method}", (label,))
            for method in METHODS
            for label in labels
        ]
        if asv_selection.selected(names, regexes):
            chosen.append(operator)
    return chosen


def _prune(folder: Any) -> None:
    now = time.time()
    for path in folder.glob("*.json"):
        try:
            if now - path.stat().st_mtime > _KEEP_SECONDS:
                path.unlink()
        except OSError:
            pass


def setup_cache(inputs: dict[str, Sequence[str]], class_names: dict[str, str], module: str) -> dict[str, Any]:
    """Time the selected operators, or return this asv command's earlier timing of them."""
    from benchkit.operators import measure_default_set_for_asv

    invocation = asv_selection.current_invocation()
    regexes = invocation.regexes if invocation else None
    operators = selected_operators(inputs, class_names, module, regexes)
    print(f"operators: {len(operators)} of {len(inputs)} operator(s) selected", flush=True)
    if not operators:
        return {"operators": {}, "selected_operators": 0, "reused": False}
    folder = cache_dir("operators", "asv-commands")
    reuse = None
    if invocation is not None:
        reuse = folder / f"{content_key(invocation.identity, torch_build_id(), *operators)}.json"
        try:
            data = json.loads(reuse.read_text())
        except (OSError, ValueError):
            pass
        else:
            print("operators: reusing this asv command's timing from an earlier round", flush=True)
            return {**data, "reused": True}
    data = measure_default_set_for_asv(operators if len(operators) < len(inputs) else None)
    data["selected_operators"] = len(operators)
    if reuse is not None:
        _prune(folder)
        atomic_write_json(reuse, data)
    return {**data, "reused": False}
