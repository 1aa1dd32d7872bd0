"""A temporary asv project over a temporary torch history and this repository's real suite,
given two small cases (``nn.Linear`` and ``nn.ReLU`` forward) through the suite's own switches
(``BENCHKIT_STANDARD=0``, ``BENCHKIT_DEFINITIONS``); see tests/test_asv_e2e.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchkit.history.builds.build_step import history_project_config
from benchkit.stats import MIN_ROUNDS

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES = r"^instruction_counts\.e2e_"
LINEAR = "e2e_Linear_PYTHON_EXPLICIT_EXPLICIT_t1"
RELU = "e2e_ReLU_PYTHON_EXPLICIT_EXPLICIT_t1"
DEFINITIONS = """
from benchkit.define.api import TimerArgs

BENCHMARKS = {
    "e2e": {
        "Linear": TimerArgs("y = model(x)", setup="model = torch.nn.Linear(4, 2)\\nx = torch.ones(8, 4)"),
        "ReLU": TimerArgs("y = model(x)", setup="model = torch.nn.ReLU()\\nx = torch.ones(8, 4)"),
    }
}
"""
MACHINE = "e2e"
# Few samples, one round: enough for asv's statistics at a fraction of the default time.
FAST = ["-a", "rounds=1", "-a", "repeat=(5,10,2.0)"]
ROUNDS = MIN_ROUNDS  # `benchkit main --rounds`: the fewest the gate compares process by process


@dataclass(frozen=True)
class AsvProject:
    root: Path
    history: Path
    env: dict[str, str]

    @property
    def config(self) -> Path:
        return self.root / "asv.conf.json"

    def run(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            args, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
            )
        return result

    def asv(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "asv", *args, check=check)

    def benchkit(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "benchkit.cli", *args, check=check)

    def result_files(self) -> dict[str, Path]:
        return {p.name.split("-")[0]: p for p in (self.root / "results" / MACHINE).glob("*-*.json")}


def make_project(root: Path, env_dir: Path) -> AsvProject:
    root.mkdir(parents=True)
    config = history_project_config(str(REPO_ROOT), str(env_dir))
    (root / "asv.conf.json").write_text(json.dumps(config, indent=1))
    home = root / "home"  # asv keeps machine descriptions in ~/.asv-machine.json
    home.mkdir()
    definitions = root / "e2e_definitions.py"
    definitions.write_text(DEFINITIONS)
    env = {
        **os.environ,
        "HOME": str(home),
        "PYTHONPATH": str(REPO_ROOT),
        "BENCHKIT_STANDARD": "0",
        "BENCHKIT_DEFINITIONS": str(definitions),
    }
    project = AsvProject(root, root / "history", env)
    project.asv("machine", "--machine", MACHINE, "--yes")
    return project
