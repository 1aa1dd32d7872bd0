"""The operator suite's asv ``setup_cache``: time what this asv command selected, once.

asv reruns a shared ``setup_cache`` in every round (``--interleave-rounds``), but the
operator set is timed in its own fresh processes with its own rounds
(`benchkit.measure.operators.asv.measure_default_set_for_asv`), so timing it again per asv round
only costs time. The first round's result is kept for the rest of the same asv
command (keyed by that command's pid and start time, the torch build and the
selection); a new asv command times again, because timings -- unlike instruction
counts -- belong to the moment they were taken.

Only operators with at least one selected benchmark are timed (`benchkit.measure.selection`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchkit import settings
from benchkit.errors import UserError
from benchkit.measure import selection as asv_selection
from benchkit.measure.operators.kernels import GeneratedKernel, configure_inductor_cache
from benchkit.measure.operators.suite import measure_suite
from benchkit.measure.operators.timing import InputMeasurement, MeasureOptions
from benchkit.measure.operators.workload import asv_workload, input_labels
from benchkit.names import OPERATOR_METRICS, BenchmarkName, Metric
from benchkit.util import atomic_write_json, cache_dir, child_env, content_key, progress_bar, torch_build_id

_KEEP_SECONDS = 2 * 24 * 3600  # reuse files of asv commands older than this are removed


def selected_operators(
    inputs: dict[str, Sequence[str]], class_names: dict[str, str], module: str, regexes: Sequence[str] | None
) -> list[str]:
    """Operators (in ``inputs`` order) with any benchmark ``module.Class.method(label)`` selected."""
    if regexes is None:
        return list(inputs)
    chosen = []
    for operator, labels in inputs.items():
        names = [
            asv_selection.benchmark_name(
                str(BenchmarkName(module, class_names[operator], metric.method)), (label,)
            )
            for metric in OPERATOR_METRICS
            for label in labels
        ]
        if asv_selection.selected(names, regexes):
            chosen.append(operator)
    return chosen


def _prune(folder: Any) -> None:
    now = time.time()
    for path in folder.glob("*.json"):
        try:
            if now - path.stat().st_mtime > _KEEP_SECONDS:
                path.unlink()
        except OSError:
            pass


def setup_cache(
    inputs: dict[str, Sequence[str]], class_names: dict[str, str], module: str, device: str = "cpu"
) -> dict[str, Any]:
    """Time the selected operators on ``device``, or return this asv command's earlier timing
    of them. Without that device the result says so (``no_device``) and nothing is timed."""
    invocation = asv_selection.current_invocation()
    regexes = invocation.regexes if invocation else None
    operators = selected_operators(inputs, class_names, module, regexes)
    print(f"operators ({device}): {len(operators)} of {len(inputs)} operator(s) selected", flush=True)
    if not operators:
        return {"operators": {}, "selected_operators": 0, "reused": False}
    folder = cache_dir("operators", "asv-commands")
    reuse = None
    if invocation is not None:
        reuse = folder / f"{content_key(invocation.identity, torch_build_id(), device, *operators)}.json"
        try:
            data = json.loads(reuse.read_text())
        except (OSError, ValueError):
            pass
        else:
            print("operators: reusing this asv command's timing from an earlier round", flush=True)
            return {**data, "reused": True}
    data = measure_default_set_for_asv(operators if len(operators) < len(inputs) else None, device)
    data["selected_operators"] = len(operators)
    if reuse is not None:
        _prune(folder)
        atomic_write_json(reuse, data)
    return {**data, "reused": False}


ASV_PROCESSES = 3
# Six rounds repeat as well as twelve did (the per-operator spread over runs is the same) and
# save a third of a warm build's operator time: lab/reports/operator-rounds.md.
ASV_ROUNDS_PER_PROCESS = 6
# A replicate process of the main job's interleaved operator rounds (`benchkit.operator_rounds`):
# its fastest of 3 rounds spreads between processes as its fastest of 6 does (3.8 % and 3.7 % for
# the speedup ratio's median input, four processes each, this project's 2-core machine), and
# the processes, not the rounds, are the replicates the verdict counts.
REPLICATE_ROUNDS_PER_PROCESS = 3
# CUDA: operatorbench's median of repeats per process; two processes, because one
# process's kernels and buffers are placed once for its lifetime there too.
ASV_CUDA_PROCESSES = 2
ASV_CUDA_REPEATS_PER_PROCESS = 10
NO_CUDA_DEVICE = "no CUDA device"


def measure_default_set_for_asv(
    operators: Sequence[str] | None = None, device: str = "cpu"
) -> dict[str, Any]:
    """The asv ``setup_cache`` body: measure the default set, as plain picklable data.

    The default set is timed in ``ASV_PROCESSES`` fresh processes one after
    another, and each input's eager and compiled times are the medians of the
    processes' fastest rounds. Why: the speedup of a microsecond-scale op
    depends on things fixed for a process's lifetime (where code and buffers
    landed): two passes in one process agree more closely than two processes
    do, so one process per commit would make history jump for no reason. The
    first process compiles (or loads from the cache), so its compile times are
    the ones recorded.

    The timing processes share one inductor cache (`benchkit.measure.operators.kernels`):
    the per-torch-build one, so only the first run for a commit compiles and autotunes; with
    ``BENCHKIT_INDUCTOR_COLD=1`` a fresh empty one for this run (honest compile times). Either
    way every process times the kernels and launch configs the first one chose.
    ``BENCHKIT_OPERATOR_PROCESSES`` and ``BENCHKIT_OPERATOR_ROUNDS`` (per process) override
    the defaults;
    ``BENCHKIT_OPERATORS_JSON`` names a file that also receives the result
    (lab/bench_operators.py compares runs with it). ``operators`` limits the
    timing to those operators of the default set (an asv ``-b`` selection).
    """
    started = time.perf_counter()
    measure = settings.current().measure
    cold = measure.inductor_cold
    cache = configure_inductor_cache(cold=cold)  # the timing processes inherit it
    cuda = device == "cuda"
    default_processes = ASV_CUDA_PROCESSES if cuda else ASV_PROCESSES
    processes = default_processes if measure.operator_processes is None else measure.operator_processes
    default_rounds = ASV_CUDA_REPEATS_PER_PROCESS if cuda else ASV_ROUNDS_PER_PROCESS
    rounds = measure.operator_rounds or default_rounds
    compiling = min(processes, measure.compile_replicates or 1)
    runs, failures = _timing_processes(processes, rounds, device, operators, compiling)
    if runs and runs[0].get("no_device"):
        print(f"operators ({device}): {runs[0]['no_device']}: nothing timed", file=sys.stderr, flush=True)
        return {"operators": {}, "no_device": runs[0]["no_device"], "device": device}
    if not runs:
        raise RuntimeError("operators: every timing process failed: " + "; ".join(failures))
    data = _combine_processes(runs)
    data.update(
        device=device,
        inductor_cache=str(cache),
        cold=cold,
        processes=len(runs),
        rounds_per_process=rounds,
        failed_processes=failures,
        elapsed_s=time.perf_counter() - started,
    )
    if measure.operators_json is not None:
        atomic_write_json(measure.operators_json, data)
    return data


def _timing_processes(
    processes: int, rounds: int, device: str, operators: Sequence[str] | None, compiling: int = 1
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each timing process's result, one after another, and a line per failed process; stops
    after the first when it found no device. The first `compiling` processes compile in the
    first one's cache state: after a cold first, each later one in an empty cache of its own."""
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchkit-operators-") as scratch:
        for index in range(processes):
            environ = child_env()
            if 0 < index < compiling and runs and _compiled_cold(runs[0]):
                environ = {**environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / f"cold{index}")}
                environ["TRITON_CACHE_DIR"] = str(Path(scratch) / f"cold{index}" / "triton")
            print(
                f"operators ({device}): timing process {index + 1}/{processes}", file=sys.stderr, flush=True
            )
            out = Path(scratch) / f"process{index}.json"
            command = [
                "-m",
                "benchkit.measure.operators.asv",
                "--time-default-set",
                str(rounds),
                str(out),
                device,
            ]
            if operators is not None:
                command.append(",".join(operators))
            completed = subprocess.run([sys.executable, *command], check=False, env=environ)
            if completed.returncode == 0 and out.exists():
                runs.append(json.loads(out.read_text()))
            else:
                failures.append(f"timing process {index + 1} exited with status {completed.returncode}")
            if runs and runs[0].get("no_device"):
                break
    return runs, failures


def _compiled_cold(run: dict[str, Any]) -> bool:
    """Whether a timing process compiled every input it compiled cold (none found in the cache)."""
    hits = [
        result.get("compile_cache_hit", math.nan)
        for entry in run.get("operators", {}).values()
        for result in entry.get("inputs", {}).values()
    ]
    known = [hit for hit in hits if math.isfinite(hit)]
    return bool(known) and not any(known)


def _time_default_set(rounds: int, device: str, operators: Sequence[str] | None = None) -> dict[str, Any]:
    """One timing process of `measure_default_set_for_asv`: every input of the chosen operators.

    On CUDA the inputs keep their recorded dtypes (the CUDA set holds float16 and float32
    calls); on the CPU they are float32."""
    configure_inductor_cache()  # the parent's choice, from the environment
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return {"no_device": NO_CUDA_DEVICE}
        torch.set_float32_matmul_precision("high")  # as `benchkit operators` and operatorbench
    workload = asv_workload(device)
    if operators is not None:
        unknown = sorted(set(operators) - set(workload.operators))
        if unknown:
            raise UserError(f"not in the measured operator set: {', '.join(unknown)}")
        workload = dataclasses.replace(
            workload, operators=tuple(o for o in workload.operators if o in operators)
        )
    options = MeasureOptions(
        device=device,
        repeats=rounds,
        dtype="recorded" if device == "cuda" else "float32",
        record_cache_state=True,
    )
    suite = measure_suite(workload, options, progress=progress_bar(0, "input"))
    import torch

    data: dict[str, Any] = {
        "torch": {
            "torch": torch.__version__,
            "git_version": torch.version.git_version,
            "file": torch.__file__,
        },
        # the cores it ran on: one of its own when builds are timed side by side
        "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [],
        "warm_up_s": suite.warm_up_s,
        "elapsed_s": suite.elapsed_s,
        "method": options.method,
        "operators": {},
    }
    for name in workload.operators:
        if name in suite.skipped:
            data["operators"][name] = {"skip": suite.skipped[name]}
            continue
        items = workload.inputs(name)
        measurements = suite.results.get(name, [])
        assert [m.location for m in measurements] == [i.location for i in items]
        data["operators"][name] = {
            "inputs": {
                label: {
                    "eager_s": m.eager_s,
                    "compiled_s": m.compiled_s[0] if m.compiled_s else math.nan,
                    "compile_s": m.compile_s[0] if m.compile_s else math.nan,
                    # 1.0: the compile found its kernels in inductor's cache (warm), 0.0: cold
                    "compile_cache_hit": float(m.compile_cached[0]) if m.compile_cached else math.nan,
                    **_kernel_fields(m),
                    "error": m.error,
                }
                for label, m in zip(input_labels(items), measurements, strict=True)
            }
        }
    return data


def replicate_samples(result: dict[str, Any], metric: Metric) -> dict[str, Any]:
    """One timing of an input (`Metric.replicated`) as asv reads a timing result: a sample per
    timing process, each a replicate of the whole measurement, and asv's value their median.
    The gate judges the figure by these replicates (`benchkit.report.gate.noise`); the main job adds
    replicates measured interleaved with the build it is compared with (`benchkit.operator_rounds`).
    NaN (nothing timed) where no process gave a number."""
    eager_compiled = result.get("per_process") or [[result["eager_s"], result["compiled_s"]]]
    values = [_replicate_value(eager, compiled, metric) for eager, compiled in eager_compiled]
    finite = [v for v in values if math.isfinite(v) and v > 0]
    return {"samples": finite, "number": 1} if finite else math.nan  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class ReplicateFigure:
    """One timing process's figure of one input (`replicate_figure`): a number, or NaN with
    why it was not measured (`skipped`), or the error it failed with (`error`)."""

    value: float = math.nan
    skipped: str = ""
    error: str = ""


def replicate_figure(data: dict[str, Any], operator: str, label: str, metric: Metric) -> ReplicateFigure:
    """`metric` (`Metric.replicated`) of `operator`'s input `label` in one timing process's
    result `data` (``--time-default-set``), as its asv benchmark would record it."""
    entry = data.get("operators", {}).get(operator)
    if entry is None:
        return ReplicateFigure(error=f"{operator}: not timed by this process")
    if "skip" in entry:
        return ReplicateFigure(skipped=f"{operator}: {entry['skip']}")
    result = entry["inputs"].get(label)
    if result is None:
        return ReplicateFigure(skipped=f"{operator}: input not measured in this run")
    if result["error"]:
        return ReplicateFigure(error=f"{operator} [{label}]: {result['error']}")
    value = _replicate_value(result["eager_s"], result["compiled_s"], metric)
    if not (math.isfinite(value) and value > 0):
        return ReplicateFigure(error=f"{operator} [{label}]: no {metric.method} measured")
    return ReplicateFigure(value=value)


def replicate_rounds_per_process(device: str) -> int:
    """Timing rounds in one replicate process of the main job (`benchkit.operator_rounds`)."""
    return ASV_CUDA_REPEATS_PER_PROCESS if device == "cuda" else REPLICATE_ROUNDS_PER_PROCESS


def compile_samples(result: dict[str, Any]) -> Any:
    """An input's compile seconds as asv reads them: with several processes compiling in one
    cache state (``BENCHKIT_COMPILE_REPLICATES``), a sample per compile and asv's value their
    median; else the one compile's seconds."""
    replicates = [c for c in result.get("compile_replicates", ()) if math.isfinite(c) and c > 0]
    if len(replicates) > 1:
        return {"samples": replicates, "number": 1}
    return result["compile_s"]


def _replicate_value(eager_s: float, compiled_s: float, metric: Metric) -> float:
    if metric is Metric.EAGER_SECONDS:
        return eager_s
    if metric is Metric.COMPILED_SECONDS:
        return compiled_s
    if metric is Metric.COMPILED_OVER_EAGER:
        return compiled_s / eager_s if eager_s > 0 else math.nan
    raise ValueError(f"{metric.method} is not an operator timing with replicates")


def _kernel_fields(measurement: InputMeasurement) -> dict[str, Any]:
    """What inductor generated for the input (the first backend, the one asv records): the
    fingerprint as the number asv stores (0: not recorded, which is no failure: a record is
    no measurement), and its parts for a reader of the JSON."""
    kernel = measurement.kernels[0] if measurement.kernels else GeneratedKernel("")
    return {
        "kernel_hash": float(int(kernel.fingerprint, 16)) if kernel.fingerprint else 0.0,
        "kernel": kernel.fingerprint or None,
        "kernel_code": kernel.code_hash or None,
        "kernel_configs": list(kernel.configs),
    }


def _combine_processes(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per input, the median over processes of eager and compiled seconds.

    An input that failed in any process is reported failed (with the first
    error): a failure that comes and goes is worth seeing, not averaging away.
    Compile seconds and their cache state are the first process's, the one that compiled;
    so is the generated kernel, with each process's beside it (they share one cache, so they
    agree unless a cache was not used). ``compile_replicates``: the compile seconds of every
    process that compiled in the first one's cache state (`compile_samples`).
    """
    first = runs[0]
    combined: dict[str, Any] = {
        "warm_up_s": first["warm_up_s"],
        "process_elapsed_s": [run["elapsed_s"] for run in runs],
        "method": first.get("method"),
        "operators": {},
    }
    for name, entry in first["operators"].items():
        if "skip" in entry:
            combined["operators"][name] = entry
            continue
        inputs = {}
        for label, result in entry["inputs"].items():
            per_process = [run["operators"][name]["inputs"][label] for run in runs]
            error = next((r["error"] for r in per_process if r["error"]), None)
            inputs[label] = {
                "eager_s": statistics.median(r["eager_s"] for r in per_process),
                "compiled_s": statistics.median(r["compiled_s"] for r in per_process),
                "compile_s": result["compile_s"],
                "compile_replicates": [
                    r["compile_s"]
                    for r in per_process
                    if r.get("compile_cache_hit") == result.get("compile_cache_hit")
                ],
                "compile_cache_hit": result.get("compile_cache_hit", math.nan),
                **{key: value for key, value in result.items() if key.startswith("kernel")},
                "error": error,
                "per_process": [[r["eager_s"], r["compiled_s"]] for r in per_process],
                "kernel_per_process": [r.get("kernel") for r in per_process],
            }
        combined["operators"][name] = {"inputs": inputs}
    return combined


if __name__ == "__main__":
    # python -m benchkit.measure.operators.asv --time-default-set ROUNDS OUT.json DEVICE: one
    # timing process of measure_default_set_for_asv (not a user command: see `benchkit operators`).
    if (
        len(sys.argv) not in (5, 6)
        or sys.argv[1] != "--time-default-set"
        or sys.argv[4] not in ("cpu", "cuda")
    ):
        sys.exit(
            "usage: python -m benchkit.measure.operators.asv --time-default-set ROUNDS OUT.json "
            "cpu|cuda [OP,OP...]"
        )
    chosen = sys.argv[5].split(",") if len(sys.argv) == 6 and sys.argv[5] else None
    atomic_write_json(sys.argv[3], _time_default_set(int(sys.argv[2]), sys.argv[4], chosen))
