"""What shaped a run's numbers, recorded beside asv's results and read back by the report stage.

`benchkit main` writes one `RunRecord` per measured commit and environment::

    <results_dir>/<machine>/benchkit-settings/<commit[:8]>-<environment>.settings

beside asv's own result file for that run, ``<results_dir>/<machine>/<commit[:8]>-<environment>.json``.
The content is JSON; the suffix is not ``.json`` because asv reads every ``*.json`` below its
results folder as a result file. Paths that differ between places (cache, wheelhouses) are not
recorded; definitions and operator logs are, by file name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.settings import SelectionSource, Settings
from benchkit.util import atomic_write_json

RECORD_DIR = "benchkit-settings"
RECORD_FORMAT = "benchkit-run-settings"
RECORD_VERSION = 1
RECORD_SUFFIX = ".settings"


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The settings that shaped one commit's numbers in one asv environment."""

    machine: str
    wall_rounds: int
    samples_per_round: int
    selection: tuple[str, ...] | None  # the ``-b`` regexes; None: the whole suite
    inductor_cold: bool = False
    operator_processes: int | None = None
    operator_rounds: int | None = None
    operator_logs: tuple[str, ...] = ()  # file names: the folders differ between places
    definitions: tuple[str, ...] = ()  # file names, likewise
    standard: bool = True
    recount: bool = False
    wall_rounds_max: int | None = None  # open wall times got more rounds, up to this

    @classmethod
    def of(
        cls,
        config: Settings,
        machine: str,
        wall_rounds: int,
        samples_per_round: int,
        wall_rounds_max: int | None = None,
    ) -> RunRecord:
        measure, define = config.measure, config.define
        selection = config.asv.selection
        return cls(
            machine=machine,
            wall_rounds=wall_rounds,
            samples_per_round=samples_per_round,
            selection=selection.regexes if selection.source is SelectionSource.GIVEN else None,
            inductor_cold=measure.inductor_cold,
            operator_processes=measure.operator_processes,
            operator_rounds=measure.operator_rounds,
            operator_logs=tuple(p.name for p in measure.operator_logs),
            definitions=tuple(p.name for p in define.definitions),
            standard=define.standard,
            recount=measure.recount,
            wall_rounds_max=wall_rounds_max if wall_rounds_max and wall_rounds_max > wall_rounds else None,
        )

    def describe(self) -> str:
        """One line for a reader: what differs from a default run."""
        parts = [f"{self.wall_rounds} rounds x {self.samples_per_round} samples"]
        if self.wall_rounds_max:
            parts[0] += f", up to {self.wall_rounds_max} rounds where a verdict was open"
        if self.selection is not None:
            parts.append("-b " + " ".join(self.selection))
        if self.inductor_cold:
            parts.append("inductor cold")
        if self.operator_processes or self.operator_rounds:
            parts.append(
                f"operators {self.operator_processes or 'default'}x{self.operator_rounds or 'default'}"
            )
        if self.operator_logs:
            parts.append("operator logs " + ", ".join(self.operator_logs))
        if self.definitions:
            parts.append("definitions " + ", ".join(self.definitions))
        if not self.standard:
            parts.append("no standard suite")
        return "; ".join(parts)


def record_path(results_dir: Path, machine: str, commit: str, env_name: str) -> Path:
    return Path(results_dir) / machine / RECORD_DIR / f"{commit[:8]}-{env_name}{RECORD_SUFFIX}"


def write_record(path: Path, record: RunRecord, commit: str, env_name: str) -> None:
    data = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "commit": commit, "env_name": env_name}
    atomic_write_json(path, {**data, **dataclasses.asdict(record)})


def read_record(path: Path) -> RunRecord | None:
    """The record at ``path``; None when there is none or it is not one (older runs wrote none)."""
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(data, dict)
        or data.get("format") != RECORD_FORMAT
        or data.get("version") != RECORD_VERSION
    ):
        return None
    fields = {f.name for f in dataclasses.fields(RunRecord)}
    try:
        values = {k: v for k, v in data.items() if k in fields}
        for name in ("selection", "operator_logs", "definitions"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        return RunRecord(**values)
    except TypeError:
        return None


def records_of(results_dir: Path, machine: str, commit: str) -> dict[str, RunRecord]:
    """Environment name -> the record of ``commit``'s run there."""
    folder = Path(results_dir) / machine / RECORD_DIR
    found = {}
    for path in sorted(folder.glob(f"{commit[:8]}-*{RECORD_SUFFIX}")):
        record = read_record(path)
        if record is not None:
            found[path.name[len(commit[:8]) + 1 : -len(RECORD_SUFFIX)]] = record
    return found


# What the gate holds equal between two builds for their numbers to be compared as measured alike.
_SHAPING = ("wall_rounds", "samples_per_round", "inductor_cold", "operator_processes", "operator_rounds")


def settings_differences(
    base: Mapping[str, RunRecord],
    head: Mapping[str, RunRecord],
    labels: Sequence[str],
) -> list[str]:
    """What the recorded settings of two builds' runs (per environment) differ in, for a reader."""
    found = []
    for env in sorted(set(base) & set(head)):
        for name in _SHAPING:
            before, after = getattr(base[env], name), getattr(head[env], name)
            if before != after:
                what = name.replace("_", " ")
                found.append(f"{what}: {before} on {labels[0]}, {after} on {labels[1]} ({env})")
    return found
