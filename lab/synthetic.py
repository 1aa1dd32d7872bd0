"""A synthetic asv project for the site: a real benchkit torch-history repository and asv
results (instruction counts with stored function profiles, wall times with samples,
parameterized operator tracks) written with asv's own Results API.

`lab.bench_publish` times `benchkit publish` on a large one; the site tests publish
small ones. Nothing in benchkit's commands uses it.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult

from benchkit.callgrind_track import BatchResult, CaseCount
from benchkit.history.builds.build_step import ASV_PUBLISH_SETTINGS, BuildRecord
from benchkit.history.builds.repo import HistoryRepo
from benchkit.measure.callgrind import profiles
from benchkit.names import BenchmarkName, CaseKeys, Metric, asv_class_name, operator_class_name, pretty_name

MACHINE = "synthetic"
ENV = "virtualenv-py3.11-numpy"
OPERATOR_METRICS = (
    Metric.COMPILED_OVER_EAGER,
    Metric.EAGER_SECONDS,
    Metric.COMPILED_SECONDS,
    Metric.COMPILE_SECONDS,
)
OPERATORS = ("aten.add.Tensor", "aten.mm.default", "aten.relu.default", "aten.sum.dim_IntList",
             "aten.native_layer_norm.default", "aten.gelu.default", "aten.mean.dim", "aten.clone.default",
             "aten.addmm.default", "aten.div.Scalar")  # fmt: skip
INPUTS = ("'f32[8, 16]'", "'f32[64, 128]'", "'f32[4, 3, 32, 32]'")
# Function names as Callgrind reports them, from every part of a torch call.
FUNCTIONS = (
    "???:_PyEval_EvalFrameDefault [/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0]",
    "Objects/dictobject.c:_PyDict_GetItem_KnownHash",
    "Objects/object.c:PyObject_GetAttr",
    "Objects/typeobject.c:_PyType_Lookup",
    "Objects/call.c:_PyObject_MakeTpCall",
    "aten/src/ATen/core/dispatch/Dispatcher.h:c10::Dispatcher::call",
    "aten/src/ATen/TensorIterator.cpp:at::TensorIteratorBase::build(at::TensorIteratorConfig&)",
    "aten/src/ATen/native/BinaryOps.cpp:at::native::structured_add_out::impl",
    "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp:at::native::(anonymous namespace)::add_kernel",
    "c10/core/TensorImpl.cpp:c10::TensorImpl::TensorImpl",
    "c10/util/intrusive_ptr.h:c10::intrusive_ptr<c10::TensorImpl>::reset_()",
    "aten/src/ATen/EmptyTensor.cpp:at::detail::empty_generic",
    "./malloc/malloc.c:_int_malloc [/usr/lib/x86_64-linux-gnu/libc.so.6]",
    "./malloc/malloc.c:free [/usr/lib/x86_64-linux-gnu/libc.so.6]",
    "c10/core/impl/alloc_cpu.cpp:c10::alloc_cpu(unsigned long)",
    "c10/core/CPUAllocator.cpp:c10::DefaultCPUAllocator::allocate(unsigned long)",
    "???:operator new(unsigned long) [/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30]",
    "torch/csrc/autograd/python_variable.cpp:THPVariable_add",
    "torch/csrc/utils/python_arg_parser.cpp:torch::FunctionSignature::parse",
    "torch/csrc/autograd/generated/VariableType_0.cpp:torch::autograd::VariableType::add_Tensor",
    "???:pybind11::detail::type_caster_generic::load_impl",
    "./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:__memcpy_avx_unaligned_erms",
    "./nptl/pthread_mutex_lock.c:pthread_mutex_lock [/usr/lib/x86_64-linux-gnu/libc.so.6]",
    "???:__tls_get_addr [/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2]",
)
PROFILE_NUMBER = 100  # executions per profiled repeat


def _benchmark(name: str, unit: str, pretty: str, params: list[list[str]] | None = None) -> dict[str, Any]:
    params = params or []
    return {
        "name": name,
        "unit": unit,
        "type": "time" if unit == "seconds" and BenchmarkName.parse(name).asv_timing else "track",
        "params": params,
        "param_names": ["input"] if params else [],
        "pretty_name": pretty,
        "version": "v1",
    }


def _n_operators(count: int) -> int:
    return max(1, min(len(OPERATORS), count * 15 // 100 // len(OPERATOR_METRICS)))


def _case_labels(count: int, labels: Sequence[str]) -> list[str]:
    """The labels of the cases among `count` benchmarks (two each): `labels` first, then made up."""
    cases = (count - _n_operators(count) * len(OPERATOR_METRICS) + 1) // 2
    return [labels[i] if i < len(labels) else f"Synthetic/op{i:03d}" for i in range(cases)]


def _case_key(label: str) -> str:
    return f"{label} | Python | Eager | Forward | 1 thread(s)"


def synthetic_benchmarks(count: int, labels: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """`count` benchmark keys: ~15% operator tracks, the rest half instruction counts, half wall
    time, of cases labelled `labels` first (then ``Synthetic/op000``...)."""
    benchmarks: dict[str, dict[str, Any]] = {}
    for op in OPERATORS[: _n_operators(count)]:
        for metric in OPERATOR_METRICS:
            name = str(BenchmarkName.build(metric, operator_class_name(op)))
            benchmarks[name] = _benchmark(name, metric.unit, f"{op} [{metric.method}]", [list(INPUTS)])
    remaining = count - len(benchmarks)
    case_labels = _case_labels(count, labels)
    for i in range(remaining):
        label = case_labels[i // 2]
        key = _case_key(label)
        # Named as benchkit names a case (`benchkit.define.expand.asv_class_name`).
        case = asv_class_name([*label.split("/"), "PYTHON", "EAGER", "FORWARD", "t1"], key)
        metric = Metric.INSTRUCTIONS if i % 2 == 0 else Metric.WALL_TIME
        name = str(BenchmarkName.build(metric, case))
        benchmarks[name] = _benchmark(name, metric.unit, pretty_name(key, metric))
    return benchmarks


def _walk(rng: random.Random, start: float, steps: int, step_chance: float) -> list[float]:
    """A level with rare steps (real changes) of ±3-30%."""
    values, level = [], start
    for _ in range(steps):
        if rng.random() < step_chance:
            level *= 1 + rng.choice((-1, 1)) * rng.uniform(0.03, 0.3)
        values.append(level)
    return values


def _profile_counts(rng: random.Random, totals: list[float]) -> list[dict[str, int]]:
    """Per commit, function counts (over PROFILE_NUMBER executions) summing to each total;
    each change of the total lands on one or two functions, as a real change would."""
    chosen = rng.sample(FUNCTIONS, 12)
    weights = [rng.random() ** 2 + 0.01 for _ in chosen]
    scale = totals[0] * PROFILE_NUMBER / sum(weights)
    counts = {fn: w * scale for fn, w in zip(chosen, weights, strict=True)}
    out = []
    for previous, total in zip([totals[0], *totals], totals, strict=False):
        delta = (total - previous) * PROFILE_NUMBER
        if delta:
            first, second = rng.sample(FUNCTIONS, 2)
            for fn, share in ((first, 0.75), (second, 0.25)):
                counts[fn] = counts.get(fn, 0.0) + delta * share
            low = min(counts, key=counts.__getitem__)
            if counts[low] < 0:  # keep counts positive: move the excess to the largest function
                counts[max(counts, key=counts.__getitem__)] += counts[low]
                counts[low] = 0.0
        out.append({fn: round(c) for fn, c in counts.items() if round(c) > 0})
    return out


def make_project(
    root: Path,
    commits: int,
    benchmarks: int,
    seed: int = 0,
    step_chance: float = 0.03,
    with_profiles: bool = True,
    labels: Sequence[str] = (),
) -> Path:
    """A complete asv project in `root`; returns its asv.conf.json.

    With `with_profiles`, each commit also gets the function-level profile file
    `benchkit.measure.callgrind.profiles` stores beside asv's results (what the why pages read).
    `labels`: the definition labels of the first cases (see `synthetic_benchmarks`).
    """
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    history = HistoryRepo(root / "history")
    history.init()
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    hashes: list[tuple[str, int]] = []
    for i in range(commits):
        date = start + dt.timedelta(days=i)
        record = BuildRecord(
            torch_version=f"2.14.0.dev{date:%Y%m%d}+cpu",
            git_version=f"{rng.getrandbits(160):040x}",
            build_date=date.strftime("%Y-%m-%dT%H:%M:%SZ"),
            wheel_filename=f"torch-2.14.0.dev{date:%Y%m%d}+cpu-cp311-cp311-linux_x86_64.whl",
            wheel_sha256=f"{rng.getrandbits(256):064x}",
            wheel_size=200_000_000,
        )
        tag = f"torch-2.14.0.dev{date:%Y%m%d}" if i % 10 == 0 else None
        commit = history.commit_record(record, "main", tag)
        hashes.append((commit, int(date.timestamp() * 1000)))

    specs = synthetic_benchmarks(benchmarks, labels)
    case_keys = CaseKeys(_case_key(label) for label in _case_labels(benchmarks, labels))
    series: dict[tuple[str, int], list[float]] = {}
    for name, spec in specs.items():
        combos = len(spec["params"][0]) if spec["params"] else 1
        for j in range(combos):
            if spec["unit"] == "instructions":
                start_value = rng.uniform(5e4, 5e6)
            elif BenchmarkName.parse(name).metric is Metric.COMPILED_OVER_EAGER:
                start_value = rng.uniform(0.3, 1.2)
            else:
                start_value = rng.uniform(2e-6, 2e-3)
            series[(name, j)] = _walk(rng, start_value, commits, step_chance)

    results_dir = root / "results"
    case_profiles: dict[str, list[dict[str, int]]] = {}
    for name, spec in specs.items():
        if with_profiles and spec["unit"] == "instructions":
            case_key = case_keys.of_benchmark(name)
            assert case_key is not None
            functions = _profile_counts(rng, series[(name, 0)])
            case_profiles[case_key] = functions
            # asv's value is what the profile adds up to, per execution.
            series[(name, 0)] = [sum(f.values()) / PROFILE_NUMBER for f in functions]
    for i, (commit, _) in enumerate(hashes):
        if case_profiles:
            batch = BatchResult(
                counts={
                    key: CaseCount(
                        key,
                        "ok",
                        instructions=sum(per_commit[i].values()) / PROFILE_NUMBER,
                        number=PROFILE_NUMBER,
                        repeat_totals=(sum(per_commit[i].values()),),
                        functions=per_commit[i],
                    )
                    for key, per_commit in case_profiles.items()
                },
                metadata={"synthetic": True},
                seconds=0.0,
            )
            path = results_dir / MACHINE / profiles.PROFILE_DIR / f"{commit}-{ENV}{profiles.SUFFIX}"
            profiles.save_profile(path, batch, commit=commit, env_name=ENV, machine=MACHINE)
    for i, (commit, date_ms) in enumerate(hashes):
        # asv files results under the machine's description too; its values hold spaces, and
        # so do the graph folders asv makes of them.
        params = {"machine": MACHINE, "python": "3.11", "cpu": "Synthetic CPU @ 2.00GHz"}
        run = Results(params, {"numpy": ""}, commit, date_ms, "3.11", ENV, {})
        for name, spec in specs.items():
            combos = len(spec["params"][0]) if spec["params"] else 1
            values = [series[(name, j)][i] for j in range(combos)]
            if spec["type"] == "time":
                samples = [[v * (1 + rng.gauss(0, 0.01)) for _ in range(10)] for v in values]
                number = [100] * combos
            elif spec["unit"] == "instructions":
                samples, number = [None] * combos, [None] * combos
            else:
                samples, number = [None] * combos, [None] * combos
            result = BenchmarkResult(
                result=values, samples=samples, number=number, errcode=0, stderr="", profile=None
            )
            run.add_result(spec, result, record_samples=True)
        run.save(str(results_dir))
    asv_util.write_json(
        str(results_dir / MACHINE / "machine.json"),
        {
            "machine": MACHINE,
            "arch": "x86_64",
            "cpu": "synthetic",
            "os": "Linux",
            "ram": "24GB",
            "num_cpu": "2",
        },
        api_version=1,
    )
    asv_util.write_json(str(results_dir / "benchmarks.json"), specs, api_version=2)
    conf = {
        "version": 1,
        "project": "torch",
        "project_url": "https://pytorch.org/",
        "repo": "history",
        "branches": ["main"],
        "environment_type": "virtualenv",
        "results_dir": "results",
        "html_dir": "html",
        **ASV_PUBLISH_SETTINGS,  # as benchkit's own configs publish
    }
    conf_path = root / "asv.conf.json"
    conf_path.write_text(json.dumps(conf, indent=1))
    return conf_path


def add_build(conf_path: Path) -> str:
    """One more build on the project's branch, a day after its newest (a nightly's case): a new
    commit whose results and stored profile are the newest build's again. Returns its commit."""
    root = conf_path.parent
    folder = root / "results" / MACHINE
    newest = max(
        (json.loads(p.read_text()) for p in folder.glob("*.json") if p.name != "machine.json"),
        key=lambda data: data["date"],
    )
    date = dt.datetime.fromtimestamp(newest["date"] / 1000, dt.UTC) + dt.timedelta(days=1)
    record = BuildRecord(
        torch_version=f"2.14.0.dev{date:%Y%m%d}+cpu",
        git_version=f"{random.Random(newest['date']).getrandbits(160):040x}",
        build_date=date.strftime("%Y-%m-%dT%H:%M:%SZ"),
        wheel_filename=f"torch-2.14.0.dev{date:%Y%m%d}+cpu-cp311-cp311-linux_x86_64.whl",
        wheel_sha256="0" * 64,
        wheel_size=200_000_000,
    )
    commit = HistoryRepo(root / "history").commit_record(record, "main", None)
    old_commit = newest["commit_hash"]
    newest.update(commit_hash=commit, date=int(date.timestamp() * 1000))
    (folder / f"{commit[:8]}-{ENV}.json").write_text(json.dumps(newest))
    stored = folder / profiles.PROFILE_DIR
    profile = stored / f"{old_commit}-{ENV}{profiles.SUFFIX}"
    if profile.is_file():
        document = json.loads(gzip.decompress(profile.read_bytes()))
        document["commit"] = commit
        data = gzip.compress(json.dumps(document, separators=(",", ":")).encode(), mtime=0)
        (stored / f"{commit}-{ENV}{profiles.SUFFIX}").write_bytes(data)
    return commit


def add_empty_benchmarks(conf_path: Path, never_run: int, failing: int) -> tuple[list[str], list[str]]:
    """Benchmarks of the suite without numbers, as after ``asv run -b X`` (benchmarks.json lists
    the whole suite) or a case that fails at every build: `never_run` with no result at any
    build, `failing` recorded as failed at every build. Returns both lists of names."""
    results_dir = conf_path.parent / "results"
    listing = results_dir / "benchmarks.json"
    specs = json.loads(listing.read_text())
    made: dict[str, list[str]] = {"never": [], "failing": []}
    for kind, count in (("never", never_run), ("failing", failing)):
        for i in range(count):
            label = f"Empty/{kind}{i:03d}"
            key = _case_key(label)
            case = asv_class_name([*label.split("/"), "PYTHON", "EAGER", "FORWARD", "t1"], key)
            name = str(BenchmarkName.build(Metric.INSTRUCTIONS, case))
            specs[name] = _benchmark(name, Metric.INSTRUCTIONS.unit, pretty_name(key, Metric.INSTRUCTIONS))
            made[kind].append(name)
    specs.pop("version", None)
    asv_util.write_json(str(listing), specs, api_version=2)
    failed = BenchmarkResult(result=[None], samples=[None], number=[None], errcode=1, stderr="", profile=None)
    for path in sorted((results_dir / MACHINE).glob("*.json")):
        if path.name == "machine.json":
            continue
        run = Results.load(str(path))
        for name in made["failing"]:
            run.add_result(specs[name], failed, record_samples=True)
        run.save(str(results_dir))
    return made["never"], made["failing"]
