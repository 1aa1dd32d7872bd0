"""The folder the docs' shell examples run in: a benchkit checkout after a few main jobs.

`make_sandbox(root)` writes, all of it deterministic (the same commits and numbers every time):

* this repository's `asv.conf.json` and `benchkit-check.toml` (copies), and links to its
  `benchkit/`, `benchmarks/`, `lab/`, `scripts/` and `tests/` (asv imports the machine plugin
  and the suite from the config's folder);
* `.benchkit/torch-history`: a real torch history (`HistoryRepo`), BUILDS on main, one build
  on `my-pr` (HEAD names it) and one on `no-counts`;
* `.asv/results/box/`: asv results written with asv's own Results API, per build: the
  wall time (12 rounds of 3 samples, as the suite records them) and the instruction count of
  CASES, each count with its function profile beside the results, and the compiled/eager
  ratio of one operator. `my-pr` runs ReLU's forward 1 % slower in instructions (two
  functions); `no-counts` has every instruction count failed; main's Linear steps up at
  STEP_BUILD in counts and wall time alike;
* `base/counts.json.gz`, `head/counts.json.gz`: the profiles of main's tip and of my-pr, as
  `benchkit counts --profile --profile-dir base` saves them;
* `dist/`, `dist/base/`, `dist/pr/`: a small torch-shaped wheel each (tests/support/wheels.py);
* `home/`: HOME, with asv's machine file for `box`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult

from benchkit.history.builds.build_step import BuildRecord
from benchkit.history.builds.repo import HistoryRepo
from benchkit.measure.callgrind import profiles
from benchkit.measure.callgrind.results import BatchResult, CaseCount
from benchkit.names import BenchmarkName, Metric, asv_class_name, operator_class_name, pretty_name

from .wheels import make_fake_torch_wheel

REPO_ROOT = Path(__file__).resolve().parents[2]
MACHINE = "box"
MACHINE_INFO = {
    "machine": MACHINE,
    "arch": "x86_64",
    "cpu": "sandbox",
    "os": "Linux",
    "ram": "8GB",
    "num_cpu": "2",
}
ENV = "virtualenv-py3.11-numpy-tqdm"
ROUNDS, REPEAT = 12, 3  # the suite's time_wall: 12 asv rounds of 3 samples
BUILDS = 8
STEP_BUILD = 4  # main's Linear takes 3 % more instructions and time from this build on
NUMBER = 100  # executions per profiled repeat
OPERATOR = "aten.relu.default"
OPERATOR_INPUT = "'f32[64, 128]'"

# case label -> (instructions per execution, wall seconds, function counts per execution)
CASES: dict[str, tuple[float, float, dict[str, int]]] = {
    "nn Modules/ReLU": (
        16432.0,
        4.1e-6,
        {
            "Python/ceval.c:_PyEval_EvalFrameDefault": 5120,
            "aten/src/ATen/native/Activation.cpp:at::native::relu": 4312,
            "c10/core/TensorImpl.cpp:c10::TensorImpl::TensorImpl": 2600,
            "torch/csrc/utils/python_arg_parser.cpp:torch::FunctionSignature::parse": 2400,
            "Objects/rangeobject.c:rangeiter_next": 2000,
        },
    ),
    "nn Modules/Linear": (
        61240.0,
        9.8e-6,
        {
            "Python/ceval.c:_PyEval_EvalFrameDefault": 9240,
            "aten/src/ATen/native/LinearAlgebra.cpp:at::native::addmm_out": 30000,
            "c10/core/TensorImpl.cpp:c10::TensorImpl::TensorImpl": 12000,
            "torch/csrc/utils/python_arg_parser.cpp:torch::FunctionSignature::parse": 10000,
        },
    ),
    "Pointwise/Math/add/Tensor-Scalar": (
        18290.0,
        3.2e-6,
        {
            "Python/ceval.c:_PyEval_EvalFrameDefault": 6290,
            "aten/src/ATen/native/BinaryOps.cpp:at::native::structured_add_out::impl": 8000,
            "c10/core/TensorImpl.cpp:c10::TensorImpl::TensorImpl": 4000,
        },
    ),
}
# my-pr: ReLU's forward gains these instructions per execution
PR_EXTRA = {"Python/ceval.c:_PyEval_EvalFrameDefault": 154, "Objects/rangeobject.c:rangeiter_next": 12}
LINEAR_STEP = 1.03


def case_key(label: str) -> str:
    return f"{label} | Python | Eager | Forward | 1 thread(s)"


def case_class(label: str) -> str:
    return asv_class_name([*label.split("/"), "PYTHON", "EAGER", "FORWARD", "t1"], case_key(label))


def _spec(name: str, unit: str, pretty: str, params: list[list[str]] | None = None) -> dict[str, Any]:
    timed = unit == "seconds" and BenchmarkName.parse(name).asv_timing
    return {
        "name": name,
        "unit": unit,
        "type": "time" if timed else "track",
        "params": params or [],
        "param_names": ["input"] if params else [],
        "pretty_name": pretty,
        "version": "v1",
        **({"rounds": ROUNDS, "repeat": REPEAT} if timed else {}),
    }


def _benchmarks() -> dict[str, dict[str, Any]]:
    specs = {}
    for label in CASES:
        for metric in (Metric.WALL_TIME, Metric.INSTRUCTIONS):
            name = str(BenchmarkName.build(metric, case_class(label)))
            specs[name] = _spec(name, metric.unit, pretty_name(case_key(label), metric))
    name = str(BenchmarkName.build(Metric.COMPILED_OVER_EAGER, operator_class_name(OPERATOR)))
    specs[name] = _spec(
        name, Metric.COMPILED_OVER_EAGER.unit, f"{OPERATOR} [compiled/eager]", [[OPERATOR_INPUT]]
    )
    return specs


def _functions(label: str, index: int, branch: str) -> dict[str, int]:
    """Function counts of `label` over NUMBER executions in build `index` of `branch`."""
    per_execution = dict(CASES[label][2])
    if label == "nn Modules/Linear" and index >= STEP_BUILD:
        extra = round(CASES[label][0] * (LINEAR_STEP - 1))
        per_execution["aten/src/ATen/native/LinearAlgebra.cpp:at::native::addmm_out"] += extra
    if label == "nn Modules/ReLU" and branch == "my-pr":
        for function, extra in PR_EXTRA.items():
            per_execution[function] = per_execution.get(function, 0) + extra
    return {function: count * NUMBER for function, count in per_execution.items()}


def _wall(rng: random.Random, seconds: float) -> list[float]:
    """ROUNDS rounds of REPEAT samples: each round (process) off by ~0.5 %, samples by ~0.1 %."""
    samples = []
    for _ in range(ROUNDS):
        level = seconds * (1 + rng.gauss(0, 0.005))
        samples += [level * (1 + rng.gauss(0, 0.001)) for _ in range(REPEAT)]
    return samples


def _history(root: Path) -> list[tuple[str, str, int, dt.datetime]]:
    """(commit, branch, index on main or of the branch's build, date) of every build."""
    repo = HistoryRepo(root / ".benchkit" / "torch-history")
    repo.init()
    rng = random.Random(1)
    start = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    builds = [("main", i, start + dt.timedelta(days=i)) for i in range(BUILDS)]
    builds += [("my-pr", BUILDS, start + dt.timedelta(days=BUILDS))]
    builds += [("no-counts", BUILDS, start + dt.timedelta(days=BUILDS + 1))]
    out = []
    for branch, index, date in builds:
        version = f"2.14.0.dev{date:%Y%m%d}+cpu"
        record = BuildRecord(
            torch_version=version,
            git_version=f"{rng.getrandbits(160):040x}",
            build_date=date.strftime("%Y-%m-%dT%H:%M:%SZ"),
            wheel_filename=f"torch-{version}-cp311-cp311-linux_x86_64.whl",
            wheel_sha256=f"{rng.getrandbits(256):064x}",
            wheel_size=190_000_000,
        )
        commit = repo.commit_record(record, branch, f"torch-2.14.0.dev{date:%Y%m%d}")
        out.append((commit, branch, index, date))
    repo.set_head("my-pr")
    return out


def _results(root: Path, builds: list[tuple[str, str, int, dt.datetime]]) -> None:
    results = root / ".asv" / "results"
    specs = _benchmarks()
    rng = random.Random(2)
    for commit, branch, index, date in builds:
        counts = {}
        when = {"started_at": date, "duration": 1.0, "record_samples": True}
        run = Results(
            {"machine": MACHINE, "python": "3.11", "numpy": "", "tqdm": ""},
            {"numpy": "", "tqdm": ""},
            commit,
            int(date.timestamp() * 1000),
            "3.11",
            ENV,
            {},
        )
        for label, (_, seconds, _) in CASES.items():
            functions = _functions(label, index, branch)
            instructions = sum(functions.values()) / NUMBER
            counted = branch != "no-counts"
            counts[case_key(label)] = CaseCount(
                case_key(label), "ok", instructions, NUMBER, (sum(functions.values()),), functions=functions
            )
            wall = seconds * (instructions / CASES[label][0])
            samples = _wall(rng, wall)
            timed = BenchmarkResult(
                result=[sorted(samples)[len(samples) // 2]],
                samples=[samples],
                number=[1000],
                errcode=0,
                stderr="",
                profile=None,
            )
            count = BenchmarkResult(
                result=[instructions if counted else None],
                samples=[None],
                number=[None],
                errcode=0 if counted else 1,
                stderr="",
                profile=None,
            )
            for metric, result in ((Metric.WALL_TIME, timed), (Metric.INSTRUCTIONS, count)):
                run.add_result(specs[str(BenchmarkName.build(metric, case_class(label)))], result, **when)
        ratio = BenchmarkResult(
            result=[0.94 * (1 + rng.gauss(0, 0.01))],
            samples=[None],
            number=[None],
            errcode=0,
            stderr="",
            profile=None,
        )
        name = str(BenchmarkName.build(Metric.COMPILED_OVER_EAGER, operator_class_name(OPERATOR)))
        run.add_result(specs[name], ratio, **when)
        run.save(str(results))
        batch = BatchResult(counts=counts, metadata={"sandbox": True}, seconds=0.0)
        if branch != "no-counts":
            path = results / MACHINE / profiles.PROFILE_DIR / f"{commit}-{ENV}{profiles.SUFFIX}"
            profiles.save_profile(path, batch, commit=commit, env_name=ENV, machine=MACHINE)
        # as `benchkit counts --profile --profile-dir base` (main's tip) and `head` (my-pr) save them
        folder = {("main", BUILDS - 1): "base", ("my-pr", BUILDS): "head"}.get((branch, index))
        if folder:
            profiles.save_profile(root / folder / "counts.json.gz", batch)
    asv_util.write_json(str(results / MACHINE / "machine.json"), MACHINE_INFO, api_version=1)
    asv_util.write_json(str(results / "benchmarks.json"), specs, api_version=2)


def make_sandbox(root: Path, files: dict[str, str] | None = None) -> Path:
    """The sandbox in `root` (created); `files`: more files to write there, by relative path."""
    root.mkdir(parents=True)
    for name in ("asv.conf.json", "benchkit-check.toml"):
        shutil.copy(REPO_ROOT / name, root / name)
    for name in ("benchkit", "benchmarks", "lab", "scripts", "tests"):
        (root / name).symlink_to(REPO_ROOT / name)
    _results(root, _history(root))
    for folder, version, day in (
        ("dist", "2.15.0a0+git1234", 1),
        ("dist/base", "2.15.0a0+git5678", 2),
        ("dist/pr", "2.15.0a0+git9abc", 3),
    ):
        git_version = version.rpartition("git")[2] + "0" * 36
        make_fake_torch_wheel(root / folder, git_version, version, date_time=(2026, 4, day, 0, 0, 0))
    home = root / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps({MACHINE: MACHINE_INFO, "version": 1}))
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    return root


def sandbox_env(root: Path) -> dict[str, str]:
    """The environment the examples run in: this checkout's benchkit, HOME in the sandbox."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONUNBUFFERED": "1",
        "HOME": str(root / "home"),
        "MACHINE": MACHINE,
        "BENCH": "Pointwise|Reduction|nn_Modules",  # as examples/github-actions/pr.yml sets it
        "COLUMNS": "120",
    }
