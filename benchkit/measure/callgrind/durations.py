"""How long each case took in earlier batches, to schedule the longest first."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path

from benchkit.util import atomic_write_json, cache_dir, file_lock


def durations_path() -> Path:
    return cache_dir("callgrind") / "durations.json"


def save_durations(seconds: Mapping[str, float]) -> None:
    """Remember how long each case (by file name) took, to schedule the longest first next time."""

    path = durations_path()
    # Read-merge-write under a lock: two batches at once must not drop each other's updates.
    with contextlib.suppress(OSError), file_lock(path.with_suffix(".lock")):
        durations = load_durations()
        durations.update(seconds)
        atomic_write_json(path, durations)


def load_durations() -> dict[str, float]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(durations_path().read_text())
        if isinstance(data, dict):
            return {str(k): float(v) for k, v in data.items()}
    return {}
