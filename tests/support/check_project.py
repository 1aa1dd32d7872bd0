"""An asv project folder with results for two commits (BASE, HEAD), written through asv's own
Results API: what `benchkit check` reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult

from benchkit.report.gate import check
from benchkit.report.gate.check_types import Verdict

BASE, HEAD = "aaaa1111" + "0" * 32, "bbbb2222" + "0" * 32
ENV = "virtualenv-py3.11"


class Project:
    """An asv project folder with results for two commits, written through asv's API."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.results = root / "results"
        self.benchmarks: dict[str, dict[str, Any]] = {}
        self.runs: dict[tuple[str, str], Results] = {}
        conf = {"version": 1, "project": "torch", "repo": "no-history-here", "results_dir": "results"}
        (root / "asv.conf.json").write_text(json.dumps(conf))

    def bench(
        self, name: str, unit: str, params: list[list[str]] | None = None, repeat: int | None = None
    ) -> None:
        """`repeat`: samples per asv round, as benchmarks.json records it (the gate cuts rounds by it)."""
        kind = "time" if unit == "seconds" else "track"
        self.benchmarks[name] = {
            "name": name, "unit": unit, "type": kind, "params": params or [],
            "param_names": [f"p{i}" for i in range(len(params or []))], "version": "v1",
            **({"repeat": repeat} if repeat else {}),
        }  # fmt: skip

    def add(
        self,
        commit: str,
        name: str,
        values: list[float | None],
        samples: list[list[float] | None] | None = None,
        machine: str = "box",
        version: str = "v1",
    ) -> None:
        key = (commit, machine)
        if key not in self.runs:
            params = {"machine": machine, "python": "3.11"}
            self.runs[key] = Results(params, {}, commit, 1_700_000_000_000, "3.11", ENV, {})
        timed = samples is not None
        result = BenchmarkResult(
            result=values,
            samples=samples if timed else [None] * len(values),
            number=[1] * len(values) if timed else [None] * len(values),
            errcode=0 if all(v is not None for v in values) else 1,
            stderr="",
            profile=None,
        )
        benchmark = {**self.benchmarks[name], "version": version}
        self.runs[key].add_result(benchmark, result, record_samples=True)

    def save(self) -> None:
        for (_, machine), result in self.runs.items():
            result.save(str(self.results))
            asv_util.write_json(
                str(self.results / machine / "machine.json"), {"machine": machine}, api_version=1
            )
        asv_util.write_json(str(self.results / "benchmarks.json"), self.benchmarks, api_version=2)

    def check(self, *args: str, **kwargs: Any) -> Verdict:
        self.save()
        return check.run_check(
            *(args or (BASE[:8], HEAD[:8])), asv_config=self.root / "asv.conf.json", **kwargs
        )
