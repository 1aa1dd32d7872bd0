"""The README's main-job command from a fresh clone with empty caches, on a small selection.

`scripts/fresh_main_job.sh` clones the committed HEAD of this checkout into a temp
folder, makes a virtual environment for it, points HOME, BENCHKIT_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR at empty folders and runs
`bash scripts/install.sh && benchkit main -b SELECTION` with both default torch builds
(the installed torch and the newest newer release pip finds). The selection holds
all three metrics: wall time and instruction counts of a Python and a C++ case, and
the operator timings of ReLU. Every selected benchmark of every build must have a
number in asv's result files.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest

from benchkit.names import OPERATOR_METRICS

REPO_ROOT = Path(__file__).resolve().parent.parent
SELECTION = "Pointwise_Math_add_Tensor_Scalar_(PYTHON|CPP)_EAGER_FORWARD_t1|aten_relu_default"
pytestmark = pytest.mark.slow


def torch_has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _numbers(path: Path) -> dict[str, list[object]]:
    data = json.loads(path.read_text())
    column = data["result_columns"].index("result")
    return {name: row[column] for name, row in data["results"].items()}


def test_main_job_from_a_fresh_clone_measures_every_metric_of_both_builds(tmp_path: Path) -> None:
    work = tmp_path / "fresh"
    env = {key: value for key, value in os.environ.items() if not key.startswith("BENCHKIT_")}
    env["BENCHKIT_FRESH_DIR"] = str(work)
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "fresh_main_job.sh"), "-b", SELECTION],
        env=env, capture_output=True, text=True, timeout=2400,
    )  # fmt: skip
    log = done.stdout + done.stderr
    assert "no newer torch release" not in log, "the index build could not be fetched: " + log[-3000:]
    assert log.count("default build: torch ") == 2, log[-3000:]
    results = list((work / "benchkit" / ".asv" / "results").glob("*/*-*.json"))
    assert len(results) == 2, log[-5000:]
    metrics = {"time_wall": 0, "track_instructions": 0, "operators.": 0, "operators_cuda.": 0}
    for path in results:
        for name, values in _numbers(path).items():
            assert re.search(SELECTION, name), f"{path.name}: {name} ran but was not selected"
            if name.startswith("operators_cuda.") and not torch_has_cuda():
                # The selection names ReLU on CUDA too: a machine without a GPU records skips.
                assert values and all(isinstance(v, float) and math.isnan(v) for v in values), (name, values)
                metrics["operators_cuda."] += 1
                continue
            assert values and all(isinstance(v, float) and not math.isnan(v) for v in values), (
                f"{path.name}: {name} has no number: {values}\n{log[-5000:]}"
            )
            for key in metrics:
                metrics[key] += key in name
    # Per build: 2 wall times, 2 counts, every operator metric x ReLU's inputs.
    assert metrics["time_wall"] == 4 and metrics["track_instructions"] == 4, metrics
    assert metrics["operators."] >= 2 * len(OPERATOR_METRICS), metrics
    methods = len(OPERATOR_METRICS)  # the operator suite's metrics, each once per build
    assert metrics["operators_cuda."] == (0 if torch_has_cuda() else 2 * methods), metrics
    # Exit 0, or 1 only because the gate judged the two real torch versions different.
    problems = [line[4:] for line in log.splitlines() if line.startswith("  - ")]
    assert done.returncode == (1 if problems else 0), log[-3000:]
    assert all(p.startswith("benchkit check ") for p in problems), problems
    assert (work / "benchkit" / "html" / "index.html").is_file()
