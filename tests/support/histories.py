"""Writes a history of asv results with asv's own Results API, one commit per build,
each with its own commit date (so benchkit orders them as asv would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult

ENV = "virtualenv-py3.11"
MACHINE = "box"


def commit_hash(index: int) -> str:
    return f"{index:08x}" + "c" * 32


class History:
    """An asv project folder whose results are a history of `commit_hash(i)` commits."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.results = root / "results"
        self.benchmarks: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, Results] = {}
        conf = {"version": 1, "project": "torch", "repo": "no-history-here", "results_dir": "results"}
        (root / "asv.conf.json").write_text(json.dumps(conf))

    @property
    def config(self) -> Path:
        return self.root / "asv.conf.json"

    def bench(self, name: str, unit: str) -> None:
        kind = "time" if unit == "seconds" else "track"
        self.benchmarks[name] = {
            "name": name, "unit": unit, "type": kind, "params": [], "param_names": [], "version": "v1",
        }  # fmt: skip

    def add(self, index: int, name: str, value: float, samples: list[float] | None = None) -> str:
        commit = commit_hash(index)
        if commit not in self.runs:
            params = {"machine": MACHINE, "python": "3.11"}
            date = 1_700_000_000_000 + index * 60_000
            self.runs[commit] = Results(params, {}, commit, date, "3.11", ENV, {})
        result = BenchmarkResult(
            result=[value],
            samples=[samples],
            number=[1 if samples is not None else None],
            errcode=0,
            stderr="",
            profile=None,
        )
        self.runs[commit].add_result(self.benchmarks[name], result, record_samples=True)
        return commit

    def save(self) -> None:
        for result in self.runs.values():
            result.save(str(self.results))
        asv_util.write_json(str(self.results / MACHINE / "machine.json"), {"machine": MACHINE}, api_version=1)
        asv_util.write_json(str(self.results / "benchmarks.json"), self.benchmarks, api_version=2)
