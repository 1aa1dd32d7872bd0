"""What a batch returns: per-case counts (or why there are none) and the batch's metadata."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any


class ValgrindUnavailable(RuntimeError):
    """Instruction counts cannot be collected here (no valgrind, no compiler, unsupported build)."""


@dataclasses.dataclass(frozen=True)
class CaseCount:
    """The instruction count of one case, or why there is none.

    ``instructions`` is per execution of the statement: the smallest repeat's
    total divided by ``number``. ``functions`` are that repeat's standardized
    exclusive counts (totals over ``number`` executions).
    """

    key: str
    status: str  # "ok" | "failed" | "skipped"
    instructions: float | None = None
    number: int = 0
    repeat_totals: tuple[int, ...] = ()
    probe: int | None = None
    functions: Mapping[str, int] = dataclasses.field(default_factory=dict, repr=False)
    error: str = ""
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-able, without the function-level profile."""
        return {
            "instructions": self.instructions,
            "status": self.status,
            "number": self.number,
            "repeats": [t / self.number for t in self.repeat_totals] if self.number else [],
            "error": self.error or None,
        }


@dataclasses.dataclass(frozen=True)
class BatchResult:
    counts: dict[str, CaseCount]  # case key -> count, in the order of the input cases
    metadata: dict[str, Any]
    seconds: float


def valgrind_version() -> str:
    """valgrind's version string; `ValgrindUnavailable` with what to do when missing."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise ValgrindUnavailable(
            "valgrind is not installed (needed for instruction counts; e.g. `apt-get install valgrind`); "
            "wall-time benchmarks do not need it"
        )
    try:
        out = subprocess.run([valgrind, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValgrindUnavailable(f"{valgrind} --version failed: {e}") from e
    return out.stdout.strip()
