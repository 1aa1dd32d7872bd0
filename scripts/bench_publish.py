"""How much `benchkit publish` adds to `asv publish` on a long, wide history.

Writes a synthetic history (default 100 commits x 300 benchmarks: instruction
counts, wall times with samples, and parameterized operator tracks) into a
temporary asv project -- a real benchkit torch-history repository and results
written with asv's own Results API -- then times plain ``asv publish`` and
``benchkit publish`` on it, alternating, and prints the medians and the ratio.
Target: benchkit's pages add at most 50% to asv's own publish time.

    python scripts/bench_publish.py [--commits 100] [--benchmarks 300] [--repeat 3] [--keep DIR]

The generator is also used by tests/test_site.py (with a few commits).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from asv import util as asv_util  # noqa: E402
from asv.results import Results  # noqa: E402
from asv.runner import BenchmarkResult  # noqa: E402

from benchkit.callgrind_track import BatchResult, CaseCount  # noqa: E402
from benchkit.history.build_step import BuildRecord  # noqa: E402
from benchkit.history.repo import HistoryRepo  # noqa: E402
from benchkit.measure.callgrind import profiles  # noqa: E402
from benchkit.util import content_key  # noqa: E402

MACHINE = "synthetic"
ENV = "virtualenv-py3.11-numpy"
OPERATOR_METHODS = {
    "track_compiled_over_eager": "compiled/eager time (lower is better)",
    "track_eager_seconds": "seconds",
    "track_compiled_seconds": "seconds",
    "track_compile_seconds": "seconds",
}
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
        "type": "time" if unit == "seconds" and "time_" in name else "track",
        "params": params,
        "param_names": ["input"] if params else [],
        "pretty_name": pretty,
        "version": "v1",
    }


def synthetic_benchmarks(count: int) -> dict[str, dict[str, Any]]:
    """`count` benchmark keys: ~15% operator tracks, the rest half instruction counts, half wall time."""
    benchmarks: dict[str, dict[str, Any]] = {}
    n_ops = max(1, min(len(OPERATORS), count * 15 // 100 // len(OPERATOR_METHODS)))
    for op in OPERATORS[:n_ops]:
        cls = op.replace(".", "_")
        for method, unit in OPERATOR_METHODS.items():
            name = f"operators.{cls}.{method}"
            benchmarks[name] = _benchmark(name, unit, f"{op} [{method}]", [list(INPUTS)])
    remaining = count - len(benchmarks)
    for i in range(remaining):
        pretty = f"Synthetic/op{i // 2:03d} | Python | Eager | Forward | 1 thread(s)"
        # Named as benchkit.define.expand.asv_class_name names a case: readable slug + hash of the case key.
        case = f"Synthetic_op{i // 2:03d}_PYTHON_EAGER_FORWARD_t1_{content_key(pretty, length=8)}"
        if i % 2 == 0:
            name = f"instruction_counts.{case}.track_instructions"
            benchmarks[name] = _benchmark(name, "instructions", f"{pretty} [track_instructions]")
        else:
            name = f"instruction_counts.{case}.time_wall"
            benchmarks[name] = _benchmark(name, "seconds", f"{pretty} [time_wall]")
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
) -> Path:
    """A complete asv project in `root`; returns its asv.conf.json.

    With `with_profiles`, each commit also gets the function-level profile file
    `benchkit.measure.callgrind.profiles` stores beside asv's results (what the why pages read).
    """
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    history = HistoryRepo(root / "history")
    history.init()
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
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

    specs = synthetic_benchmarks(benchmarks)
    series: dict[tuple[str, int], list[float]] = {}
    for name, spec in specs.items():
        combos = len(spec["params"][0]) if spec["params"] else 1
        for j in range(combos):
            if spec["unit"] == "instructions":
                start_value = rng.uniform(5e4, 5e6)
            elif "compiled_over_eager" in name:
                start_value = rng.uniform(0.3, 1.2)
            else:
                start_value = rng.uniform(2e-6, 2e-3)
            series[(name, j)] = _walk(rng, start_value, commits, step_chance)

    results_dir = root / "results"
    case_profiles: dict[str, list[dict[str, int]]] = {}
    for name, spec in specs.items():
        if with_profiles and spec["unit"] == "instructions":
            case_key = spec["pretty_name"].removesuffix(" [track_instructions]")
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
    }
    conf_path = root / "asv.conf.json"
    conf_path.write_text(json.dumps(conf, indent=1))
    return conf_path


@dataclasses.dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # user + system of the command and everything it waited for (asv's worker pool)


def _timed(command: list[str], cwd: Path) -> Timing:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(elapsed, cpu)


def _summary(label: str, runs: list[Timing]) -> str:
    wall = statistics.median(t.wall_s for t in runs)
    cpu = statistics.median(t.cpu_s for t in runs)
    listed = ", ".join(f"{t.wall_s:.2f}" for t in runs)
    return f"{label:<17}median wall {wall:6.2f} s (runs: {listed}), median CPU {cpu:6.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--benchmarks", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternating")
    parser.add_argument("--keep", type=Path, help="build the project here and keep it (default: a temp dir)")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="benchkit-publish-bench-"))
    try:
        started = time.perf_counter()
        print(
            f"writing {args.commits} commits x {args.benchmarks} benchmarks into {root} ...", file=sys.stderr
        )
        conf = make_project(root, args.commits, args.benchmarks)
        print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        asv_cmd = [sys.executable, "-m", "asv", "publish", "--config", str(conf)]
        bk_cmd = [sys.executable, "-m", "benchkit.cli", "publish", "--asv-config", str(conf)]
        asv_runs: list[Timing] = []
        bk_runs: list[Timing] = []
        for i in range(args.repeat):
            asv_runs.append(_timed(asv_cmd, root))
            bk_runs.append(_timed(bk_cmd, REPO_ROOT))
            print(f"  run {i + 1}: asv publish {asv_runs[-1].wall_s:.2f} s, "
                  f"benchkit publish {bk_runs[-1].wall_s:.2f} s", file=sys.stderr)  # fmt: skip
        asv_s = statistics.median(t.wall_s for t in asv_runs)
        bk_s = statistics.median(t.wall_s for t in bk_runs)
        asv_cpu = statistics.median(t.cpu_s for t in asv_runs)
        bk_cpu = statistics.median(t.cpu_s for t in bk_runs)
        pages = sorted(p.name for p in (root / "html").glob("*.html"))
        why = len(list((root / "html" / "why").glob("*.html")))
        added = (bk_s - asv_s) / asv_s
        print(f"history: {args.commits} commits x {args.benchmarks} benchmarks (machine {MACHINE})")
        print(f"pages: {', '.join(pages)}; why pages: {why}")
        print(_summary("asv publish", asv_runs))
        print(_summary("benchkit publish", bk_runs))
        cpu_added = (bk_cpu - asv_cpu) / asv_cpu
        print(f"CPU:  benchkit/asv = {bk_cpu / asv_cpu:.2f}: our pages cost {cpu_added * 100:.0f}% of asv's "
              "CPU time (they run beside asv, so wall time grows less)")  # fmt: skip
        print(f"wall: benchkit/asv = {bk_s / asv_s:.2f}: our pages add {added * 100:.0f}% (target <= 50%)")
        return 0 if added <= 0.5 else 1
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
