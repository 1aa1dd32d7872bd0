"""The commits `benchkit main` has finished, per machine and run settings."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from benchkit.util import atomic_write_json, content_key


class Ledger:
    """The commits this job has finished, per machine and run settings (`.asv/benchkit-main.json`).

    asv's ``--skip-existing-commits`` skips any commit with a result file, and an
    interrupted interleaved run leaves commits with round 1 only, which it would
    then skip forever. A commit goes into the ledger only when its results hold every
    number the job expected (`benchkit.report.run_summary.complete_builds`); any other
    commit is measured again from scratch (asv's first round replaces its samples), so
    resuming gives the same rounds and samples as an uninterrupted job.
    """

    def __init__(self, conf_path: Path, settings: Sequence[str]) -> None:
        self.path = conf_path.parent / ".asv" / "benchkit-main.json"
        self.key = content_key(*settings)

    def _load(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def finished(self) -> set[str]:
        return set(self._load().get(self.key, []))

    def record(self, commits: Sequence[str]) -> None:
        self._write(set(self.finished()) | set(commits))

    def forget(self, commits: Sequence[str]) -> None:
        self._write(self.finished() - set(commits))

    def _write(self, commits: set[str]) -> None:
        data = self._load()
        data[self.key] = sorted(commits)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, data)
