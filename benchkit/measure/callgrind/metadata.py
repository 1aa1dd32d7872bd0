"""What a Callgrind batch records beside its counts: valgrind, torch and Python, and the
counting policy (`benchkit.measure.callgrind.supervisor.collect` stores it with the results)."""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from benchkit.measure.callgrind.dumps import LAYOUT_NOISE, TYPE_CACHE_MISS
from benchkit.measure.callgrind.policy import MKL_INSTRUCTIONS, REPEATS, SINGLE_EXECUTION_REPEATS, WARMUP
from benchkit.util import torch_build_id


def batch_metadata(
    version: str, info: Mapping[str, Any], aslr: Sequence[str], place: Any, jobs: int
) -> dict[str, Any]:
    """How the batch counted: valgrind, torch and Python, and the counting policy."""
    import torch

    return {
        "valgrind": version,
        "cpu_capability_under_valgrind": info.get("cpu_capability"),
        "cpu_capability_native": torch.backends.cpu.get_cpu_capability(),
        "mkl_enable_instructions": MKL_INSTRUCTIONS,
        "aslr": "disabled" if aslr else "enabled",
        "place": str(place.root),
        "torch": info.get("torch", torch.__version__),
        "torch_git": info.get("torch_git", ""),
        "torch_build_id": torch_build_id(),
        "python": info.get("python", platform.python_version()),
        "python_executable": sys.executable,
        "host": platform.node(),
        "warmup": WARMUP,
        "repeats": REPEATS,
        "repeats_single_execution": SINGLE_EXECUTION_REPEATS,
        "statistic": "minimum of repeats, per execution",
        "not_counted": {"call_tree_of": TYPE_CACHE_MISS, "functions": LAYOUT_NOISE.pattern},
        "jobs": jobs,
    }
