"""The asv names of the operator suite: which module is which device, class <-> operator.

``operators.aten_mm_default.track_compiled_over_eager`` is the CPU history of
``aten.mm.default``; ``operators_cuda.aten_mm_default...`` its CUDA history. Readers of
results ask this module instead of splitting names themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

# asv module name -> the device its benchmarks measure on
OPERATOR_MODULES: dict[str, str] = {"operators": "cpu", "operators_cuda": "cuda"}
METHODS = (
    "track_compiled_over_eager",
    "track_eager_seconds",
    "track_compiled_seconds",
    "track_compile_seconds",
    "track_compile_cache_hit",
)


def class_name(operator: str) -> str:
    """``aten.mm.default`` -> ``aten_mm_default`` (asv names are module.Class.method: no dots)."""
    return operator.replace(".", "_")


@dataclass(frozen=True)
class OperatorBenchmark:
    module: str
    device: str
    class_name: str
    method: str


def parse(key: str) -> OperatorBenchmark | None:
    """An operator benchmark's parts from its asv name without parameters, or None."""
    parts = key.split("(", 1)[0].split(".")
    if len(parts) != 3 or parts[0] not in OPERATOR_MODULES or parts[2] not in METHODS:
        return None
    return OperatorBenchmark(parts[0], OPERATOR_MODULES[parts[0]], parts[1], parts[2])
