"""TorchInductor operator speedups: each aten op on logged inputs, eager vs compiled.

The method follows PyTorch's ``operatorbench.py``: for every logged input of
an operator, build a one-node FX graph (``gen_gm_and_inputs``), compile it
with ``compile_fx`` (once per inductor config), time eager and compiled
*interleaved* so changing machine load hits both alike, and report the
20th/50th/80th percentile of eager/compiled speedups across inputs.

Differences, all deliberate: logs are parsed without ``eval``
(`benchkit.opinputs`), operator names are resolved by attribute lookup, the
CPU path is first class and built for repeatability on shared machines (one
thread, call-by-call alternation, rounds spread over all inputs, fastest round
kept; see `measure_inputs`), compile time is measured per input, the inductor
cache lives in benchkit's cache (per torch build) so repeated runs are warm,
and ops that inductor only hands back to aten ("fallbacks") are skipped with
that reason because their ratio measures nothing but wrapper overhead.

This module imports torch lazily: asv and ``benchkit --help`` import it."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import csv
import dataclasses
import functools
import gc
import io
import itertools
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.models import BUNDLED_LOG_DIR, MODELS
from benchkit.opinputs import (
    OperatorInput,
    OperatorLog,
    UnsupportedInputError,
    load_log,
    load_logs,
    materialize,
)
from benchkit.util import atomic_write_json, atomic_write_text, cache_dir, child_env, torch_build_id

QUANTILES = (0.2, 0.5, 0.8)
# Timing rounds per input; the fastest round per model is kept. 30 rounds of
# 20 ms keep the default set's median speedups within a few percent from run
# to run on a busy 2-core machine (scripts/bench_operators.py measures this).
DEFAULT_ROUNDS = 30

# The operator set measured per commit (asv) and by `--suite default`: ops from
# the bundled model logs that inductor generates code for (no fallbacks, no
# convolutions), covering pointwise, reductions, normalizations, pooling and
# matmuls, forward and backward.
DEFAULT_OPERATORS: tuple[str, ...] = (
    "aten._log_softmax.default",
    "aten._log_softmax_backward_data.default",
    "aten.add.Tensor",
    "aten.addmm.default",
    "aten.clone.default",
    "aten.div.Scalar",
    "aten.gelu.default",
    "aten.gelu_backward.default",
    "aten.max_pool2d_with_indices.default",
    "aten.max_pool2d_with_indices_backward.default",
    "aten.mean.dim",
    "aten.mm.default",
    "aten.native_batch_norm.default",
    "aten.native_batch_norm_backward.default",
    "aten.native_layer_norm.default",
    "aten.native_layer_norm_backward.default",
    "aten.relu.default",
    "aten.select_backward.default",
    "aten.sum.dim_IntList",
    "aten.threshold_backward.default",
)
# Per operator, the default set keeps the inputs the models call most often,
# then the largest (most work): the calls whose speed matters.
DEFAULT_INPUTS_PER_OPERATOR = 3

# Named presets for --inductor-config, as in operatorbench; KEY=VALUE also works.
INDUCTOR_CONFIG_PRESETS: dict[str, dict[str, Any]] = {
    "halide": {"cpu_backend": "halide", "cuda_backend": "halide"},
    "autotune": {
        "max_autotune_pointwise": True,
        "max_autotune": True,
        "max_autotune_gemm": True,
        "coordinate_descent_tuning": True,
    },
}

# Ops whose random inputs are not valid (index tensors, targets): operatorbench's list.
_INPUT_GENERATOR_NYI = (
    "aten.gather.default",
    "nll_loss",
    "aten.index",
    "aten.scatter_",
    "masked_fill_.Scalar",
    "embedding",
)
_SUITE_NAMES = ("default", "models", *MODELS)
_PYTORCH_SUITES = ("timm", "huggingface", "torchbench")


# ---------------------------------------------------------------------------
# What to measure
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Inputs to benchmark, per operator, and the name used for the CSV file."""

    name: str
    log: OperatorLog
    operators: tuple[str, ...]  # the operators `--op all` means, in run order
    inputs_per_operator: int | None = None  # cap applied by the default suite

    def inputs(
        self, operator: str, *, start_idx: int = 0, max_samples: int | None = None
    ) -> list[OperatorInput]:
        items = self.log.inputs_for(operator)
        if self.inputs_per_operator is not None:
            items = rank_inputs(items)[: self.inputs_per_operator]
        end = None if max_samples is None else start_idx + max_samples
        return items[start_idx:end]


def rank_inputs(items: Sequence[OperatorInput]) -> list[OperatorInput]:
    """Most-called first, then most elements; stable, so ties keep log order."""

    def elements(item: OperatorInput) -> int:
        return sum(math.prod(t.shape) for t in item.tensors)

    return sorted(items, key=lambda item: (-item.count, -elements(item)))


def input_labels(items: Sequence[OperatorInput]) -> list[str]:
    """Readable, unique labels (asv parameter values): the input's label, numbered if repeated."""
    labels: list[str] = []
    for item in items:
        label = item.label
        count = sum(1 for existing in labels if existing == label or existing.startswith(f"{label} #"))
        labels.append(label if count == 0 else f"{label} #{count + 1}")
    return labels


def bundled_logs() -> list[Path]:
    return sorted(BUNDLED_LOG_DIR.glob("*.txt"))


def load_suite(suite: str) -> Workload:
    """A bundled suite name, or a directory of logs (e.g. PyTorch's operator_inp_logs/timm_train)."""
    if suite in ("default", "models"):
        log = load_logs(bundled_logs())
        if suite == "models":
            return Workload(suite, log, tuple(sorted(log.operators)))
        missing = [op for op in DEFAULT_OPERATORS if not log.inputs_for(op)]
        if missing:
            raise UserError(
                f"default operator set: no bundled inputs for {', '.join(missing)} "
                f"(regenerate the logs with `python -m benchkit.models`)"
            )
        return Workload(suite, log, DEFAULT_OPERATORS, DEFAULT_INPUTS_PER_OPERATOR)
    if suite in MODELS:
        log = load_log(BUNDLED_LOG_DIR / f"{suite}.txt")
        return Workload(suite, log, tuple(sorted(log.operators)))
    path = Path(suite)
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise UserError(f"--suite {suite}: directory has no *.txt operator-input logs")
        log = load_logs(files)
        return Workload(path.name, log, tuple(sorted(log.operators)))
    hint = ""
    if suite in _PYTORCH_SUITES:
        hint = (
            f"; PyTorch's {suite} logs are not bundled: pass their directory, e.g. --suite "
            "pytorch/benchmarks/dynamo/microbenchmarks/operator_inp_logs/timm_train"
        )
    raise UserError(
        f"--suite {suite!r}: not a bundled suite ({', '.join(_SUITE_NAMES)}) nor a directory of logs{hint}"
    )


def load_input_file(path: str | Path) -> Workload:
    log = load_log(path)
    return Workload(Path(path).stem, log, tuple(sorted(log.operators)))


def resolve_operator(name: str) -> Any:
    """``aten.add.Tensor`` -> ``torch.ops.aten.add.Tensor`` by attribute lookup (never eval)."""
    import torch

    parts = name.split(".")
    if len(parts) != 3 or not all(part.isidentifier() for part in parts):
        raise UserError(f"operator {name!r}: expected namespace.name.overload, e.g. aten.add.Tensor")
    namespace, packet_name, overload_name = parts
    try:
        packet = getattr(getattr(torch.ops, namespace), packet_name)
        overload = getattr(packet, overload_name)
    except (AttributeError, RuntimeError):
        raise UserError(f"operator {name!r} does not exist in this torch build") from None
    if not isinstance(overload, torch._ops.OpOverload):
        raise UserError(f"operator {name!r} is not an operator overload")
    return overload


def select_operators(workload: Workload, requested: Sequence[str]) -> list[str]:
    """Expand --op values: 'all', full overload names, or a packet name (every logged overload)."""
    if not requested or "all" in requested:
        return list(workload.operators)
    chosen: list[str] = []
    logged = workload.log.operators
    for name in requested:
        if name in logged:
            matches = [name]
        else:
            matches = [op for op in logged if op.rsplit(".", 1)[0] == name]
        if not matches:
            if name.count(".") == 2:
                resolve_operator(name)  # a typo gets the "does not exist" message
            shown = ", ".join(sorted(logged)[:12]) + (", ..." if len(logged) > 12 else "")
            raise UserError(f"--op {name}: no inputs logged for it in {workload.name} (logged: {shown})")
        chosen.extend(op for op in matches if op not in chosen)
    return chosen


def skip_reason(operator: Any) -> str | None:
    """Why an operator is not worth (or not possible) to benchmark, or None.

    Mirrors operatorbench: inputs the random generator cannot make valid,
    non-compute ops, ops inductor has no lowering or decomposition for, and
    convolutions; plus ops inductor lowers only to a fallback (aten) kernel.
    """
    import torch
    from torch._inductor.decomposition import decompositions
    from torch._inductor.lowering import lowerings

    name = str(operator)
    for pattern in _INPUT_GENERATOR_NYI:
        if pattern in name:
            return "input generator NYI: random data is not a valid input (indices/targets)"
    if operator == torch.ops.aten._unsafe_view.default:
        return "non-compute operator (a view)"
    if "empty" in operator.overloadpacket.__name__:
        return "non-compute operator (allocates uninitialized memory)"
    implementations = [operator, operator.overloadpacket]
    if all(op not in decompositions and op not in lowerings for op in implementations):
        return "no inductor lowering or decomposition"
    if "convolution" in name:
        return "convolution: inductor calls the aten kernel (skipped as in operatorbench)"
    fallbacks = getattr(torch._inductor.lowering, "fallbacks", ())
    if operator in fallbacks:
        return "inductor only falls back to the aten kernel"
    return None


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    """One compiled variant: inductor with some config patches."""

    name: str
    config_patches: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MeasureOptions:
    device: str = "cpu"
    dtype: str = "float32"  # or "recorded": keep the logged dtypes
    repeats: int = DEFAULT_ROUNDS
    accuracy_checking: bool = False
    channels_last: bool = False
    backends: tuple[Backend, ...] = (Backend("inductor"),)
    sample_window_s: float = 0.02
    profile: bool = False
    threads: int = 1

    def torch_dtype(self) -> Any:
        import torch

        return None if self.dtype == "recorded" else getattr(torch, self.dtype)


@dataclass(frozen=True)
class InputMeasurement:
    """Eager and compiled seconds per call (fastest round) for one logged input."""

    operator: str
    label: str
    location: str
    eager_s: float = math.nan
    compiled_s: tuple[float, ...] = ()
    compile_s: tuple[float, ...] = ()
    accuracy: str | None = None  # "ok" / "mismatch: ..." when checked
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def speedups(self) -> tuple[float, ...]:
        return tuple(self.eager_s / c for c in self.compiled_s)


@dataclass(frozen=True)
class OperatorSummary:
    operator: str
    backend_names: tuple[str, ...]
    speedup_quantiles: tuple[tuple[float, float, float], ...]  # per backend (and a/b ratio)
    elapsed_s: float
    mean_seconds: tuple[float, ...]  # eager, then each backend
    measured: int
    failed: int


def configure_inductor_cache(*, cold: bool = False) -> Path:
    """Point inductor's on-disk cache at benchkit's cache (or a fresh empty dir when cold).

    Warm: ``<benchkit cache>/inductor/<torch build>``, so a second run of the
    same torch build finds every kernel already compiled (compile once per
    commit), while different builds never share kernels. A user-set
    ``TORCHINDUCTOR_CACHE_DIR`` wins. Must run before the first compile in the
    process: inductor reads the variable once.
    """
    if cold:
        path = Path(tempfile.mkdtemp(prefix="benchkit-inductor-cold-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
        return path
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir("inductor", torch_build_id()))
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def _tensor_leaves(args: Any, kwargs: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]


def _median_seconds_cpu(fns: Sequence[Callable[[], Any]], window_s: float) -> list[float]:
    """Median per-call time of each function, calls alternating between them.

    On a shared machine the speed available to a process drifts over
    milliseconds (neighbours, a busy hyperthread sibling); alternating single
    calls gives eager and compiled the same conditions, which operatorbench's
    per-repeat interleaving only does at a coarse grain. The order flips each
    round so neither always runs right after the other. Medians over many
    calls shrug off preemptions; the window adapts the call count to the cost.
    """
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one call would be charged to that op
    try:
        start = time.perf_counter()
        while True:
            for index in order:
                before = time.perf_counter()
                fns[index]()
                samples[index].append(time.perf_counter() - before)
            order.reverse()
            if time.perf_counter() - start >= window_s and len(samples[0]) >= 3:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return [statistics.median(s) for s in samples]


def _seconds_cuda(fn: Callable[[], Any]) -> float:
    """GPU time per call via inductor's benchmarker (it flushes L2 so launches are comparable)."""
    import torch

    fn()
    try:
        from torch._inductor.runtime.benchmarking import benchmarker
    except ImportError:  # older builds: plain CUDA events
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(10):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 10 / 1e3
    return benchmarker.benchmark_gpu(fn) / 1e3


def _record_function(name: str, enabled: bool) -> contextlib.AbstractContextManager[Any]:
    import torch

    return torch.profiler.record_function(name) if enabled else contextlib.nullcontext()


def _check_accuracy(
    operator: Any, item: OperatorInput, options: MeasureOptions, gm: Any, compiled: Any
) -> str:
    """Run eager and compiled on separate fresh copies (in-place ops mutate their inputs)."""
    from torch._dynamo.testing import same

    expected = gm(*_fresh_graph_inputs(operator, item, options))
    actual = compiled(*_fresh_graph_inputs(operator, item, options))
    if same(expected, actual, cos_similarity=True, equal_nan=True, log_error=lambda *a, **k: None):
        return "ok"
    differences = [
        float((e.double() - a.double()).abs().max())
        for e, a in zip(_tensor_leaves(expected, {}), _tensor_leaves(actual, {}), strict=False)
        if e.numel() and e.is_floating_point()
    ]
    detail = f" (max abs diff {max(differences):.3g})" if differences else ""
    return f"mismatch{detail}"


def operator_arguments(
    operator: Any, item: OperatorInput, options: MeasureOptions
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`materialize` plus the one op-specific fix a dtype change needs.

    ``half_to_float=True`` (softmax on half inputs, float result) is only valid
    for half inputs; once --dtype made them float32, the equivalent call is
    ``half_to_float=False`` (same float result).
    """
    import torch

    dtype = options.torch_dtype()
    args, kwargs = materialize(item, device=options.device, dtype=dtype, channels_last=options.channels_last)
    if dtype is not None and dtype not in (torch.float16, torch.bfloat16):
        names = [argument.name for argument in operator._schema.arguments]
        if "half_to_float" in names:
            position = names.index("half_to_float")
            if position < len(args) and args[position] is True:
                args = (*args[:position], False, *args[position + 1 :])
            if kwargs.get("half_to_float") is True:
                kwargs["half_to_float"] = False
    return args, kwargs


def _fresh_graph_inputs(operator: Any, item: OperatorInput, options: MeasureOptions) -> list[Any]:
    return _tensor_leaves(*operator_arguments(operator, item, options))


@dataclass
class _Prepared:
    """A compiled input waiting to be timed; timing rounds append one sample per model."""

    index: int
    operator: Any
    item: OperatorInput
    models: list[Callable[..., Any]]  # eager graph module first, then one per backend
    compile_s: tuple[float, ...]
    accuracy: str | None
    rounds: list[list[float]] = field(default_factory=list)


def _error_result(operator: Any, item: OperatorInput, error: BaseException) -> InputMeasurement:
    if isinstance(error, UnsupportedInputError):
        text = f"unsupported input: {error}"
    else:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        text = f"{type(error).__name__}: {first_line}"[:300]
    return InputMeasurement(str(operator), item.label, item.location, error=text)


def _prepare(index: int, operator: Any, item: OperatorInput, options: MeasureOptions) -> _Prepared:
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import gen_gm_and_inputs

    gm, gm_args = gen_gm_and_inputs(operator, *operator_arguments(operator, item, options))
    models: list[Callable[..., Any]] = [gm]
    compile_seconds: list[float] = []
    for backend in options.backends:
        started = time.perf_counter()
        models.append(compile_fx(gm, gm_args, config_patches=dict(backend.config_patches)))
        compile_seconds.append(time.perf_counter() - started)
    accuracy = None
    if options.accuracy_checking:
        accuracy = "; ".join(_check_accuracy(operator, item, options, gm, model) for model in models[1:])
    return _Prepared(index, operator, item, models, tuple(compile_seconds), accuracy)


def _time_round(prepared: _Prepared, options: MeasureOptions) -> list[float]:
    """One sample per model, on freshly made inputs (same values, new memory).

    Where a tensor lands in memory shifts a small op's time by several percent
    (alignment, page faults on fresh pages); new inputs each round let the
    fastest-round statistic see many placements instead of one per process.
    """
    graph_inputs = _fresh_graph_inputs(prepared.operator, prepared.item, options)
    calls = [functools.partial(model, *graph_inputs) for model in prepared.models]
    if options.device == "cuda":
        # As operatorbench: each round times every model back to back.
        seconds = []
        for index, call in enumerate(calls):
            with _record_function(f"model_{index}", options.profile):
                seconds.append(_seconds_cuda(call))
        return seconds
    return _median_seconds_cpu(calls, options.sample_window_s)


_ALLOCATOR_PINNED = False


def _keep_allocations_off_fresh_pages() -> None:
    """Stop glibc from mmap-ing (and trimming) blocks up to 32 MB, once per process.

    By default glibc serves a large block with fresh pages from the kernel and
    moves that threshold as the process runs, so whether an op's output costs
    dozens of page faults drifts from call to call and from process to process.
    That cost lands on eager and compiled alike and drowns the kernels'
    difference; with reuse of freed memory every call sees warm pages.
    """
    global _ALLOCATOR_PINNED
    if _ALLOCATOR_PINNED or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # from <malloc.h>
        libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)
        libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        return  # not glibc: its allocator keeps its own policy
    _ALLOCATOR_PINNED = True


@contextlib.contextmanager
def _compile_errors_not_logged() -> Iterator[None]:
    """Torch logs a traceback for an op it cannot trace before raising; we report the error ourselves."""
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def measure_inputs(
    pairs: Sequence[tuple[Any, OperatorInput]],
    options: MeasureOptions,
    *,
    progress: Progress | None = None,
) -> list[InputMeasurement]:
    """Compile every (operator, input) pair, then time them all in interleaved rounds.

    Compilation happens first and outside all timing. Each round then takes
    one sample of every input, so the rounds of one input are spread over the
    whole measurement instead of bunched together: a burst of load from
    elsewhere on the machine lands in one round of many inputs rather than in
    every round of one input. Per model the fastest round is kept (noise only
    ever adds time), so results depend on the machine's quiet moments, not on
    how busy it was on average. Failures become error results; the rest go on.
    """
    _keep_allocations_off_fresh_pages()
    results: list[InputMeasurement | None] = [None] * len(pairs)
    prepared: list[_Prepared] = []
    for index, (operator, item) in enumerate(pairs):
        if progress:
            progress.update(f"compiling {operator} input {item.label[:60]}")
        try:
            with _record_function(f"iter_{index}", options.profile), _compile_errors_not_logged():
                prepared.append(_prepare(index, operator, item, options))
        except Exception as e:  # a failing input is recorded and the run goes on
            results[index] = _error_result(operator, item, e)
            if progress:
                progress.advance()
    # As operatorbench: an accuracy run is not a timing run.
    rounds = 1 if options.accuracy_checking else options.repeats
    for round_index in range(rounds):
        if progress and prepared:
            progress.update(f"timing round {round_index + 1}/{rounds} of {len(prepared)} input(s)")
        for entry in list(prepared):
            try:
                with _record_function(f"rep_{round_index}", options.profile):
                    entry.rounds.append(_time_round(entry, options))
            except Exception as e:
                results[entry.index] = _error_result(entry.operator, entry.item, e)
                prepared.remove(entry)
                if progress:
                    progress.advance()
    for entry in prepared:
        best = [min(samples) for samples in zip(*entry.rounds, strict=True)]
        results[entry.index] = InputMeasurement(
            str(entry.operator),
            entry.item.label,
            entry.item.location,
            eager_s=best[0],
            compiled_s=tuple(best[1:]),
            compile_s=entry.compile_s,
            accuracy=entry.accuracy,
        )
        if progress:
            progress.advance()
    return [r for r in results if r is not None]


def quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    import numpy as np

    low, mid, high = np.quantile(np.asarray(values, dtype=float), QUANTILES).tolist()
    return low, mid, high


def summarize(
    operator: str, results: Sequence[InputMeasurement], backends: Sequence[Backend], elapsed_s: float
) -> OperatorSummary | None:
    measured = [r for r in results if r.ok]
    if not measured:
        return None
    names = [b.name for b in backends]
    speedups = [quantiles([r.eager_s / r.compiled_s[i] for r in measured]) for i in range(len(backends))]
    if len(backends) == 2:
        # As operatorbench: with two backends, also how the first compares to the second.
        names.append(f"{names[0]}/{names[1]}")
        speedups.append(quantiles([r.compiled_s[1] / r.compiled_s[0] for r in measured]))
    means = [statistics.fmean(r.eager_s for r in measured)]
    means += [statistics.fmean(r.compiled_s[i] for r in measured) for i in range(len(backends))]
    return OperatorSummary(
        operator,
        tuple(names),
        tuple(speedups),
        elapsed_s,
        tuple(means),
        len(measured),
        len(results) - len(measured),
    )


def csv_header(backend_names: Sequence[str]) -> list[str]:
    percentiles = [f"{q * 100:.0f}th" for q in QUANTILES]
    return [
        "operator",
        *[f"{name} {p}" for name, p in itertools.product(backend_names, percentiles)],
        "elapsed",
        *[f"{name} abs" for name in ("eager", *backend_names)],
    ]


def render_csv(summaries: Sequence[OperatorSummary], backend_names: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_header(backend_names))
    for summary in summaries:
        row = [summary.operator]
        for low, mid, high in summary.speedup_quantiles:
            row += [f"{low:.6f}", f"{mid:.6f}", f"{high:.6f}"]
        row.append(f"{summary.elapsed_s:.1f}")
        row += [f"{seconds:.8f}" for seconds in summary.mean_seconds]
        writer.writerow(row)
    return buffer.getvalue()


def summary_backend_names(backends: Sequence[Backend]) -> list[str]:
    names = [b.name for b in backends]
    return [*names, f"{names[0]}/{names[1]}"] if len(names) == 2 else names


class Progress:
    """One status line on stderr (rewritten in place on a terminal, plain lines otherwise)."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()

    def update(self, text: str) -> None:
        elapsed = time.perf_counter() - self.started
        line = f"[{self.done}/{self.total} inputs, {elapsed:.0f}s] {text}"
        if self.interactive:
            self.stream.write("\r\033[K" + line[:150])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def advance(self) -> None:
        self.done += 1

    def clear(self) -> None:
        """Erase the status line so ordinary output is not interleaved with it."""
        if self.interactive:
            self.stream.write("\r\033[K")
            self.stream.flush()


def measure_operator(
    name: str,
    items: Sequence[OperatorInput],
    options: MeasureOptions,
    *,
    progress: Progress | None = None,
) -> tuple[str | None, list[InputMeasurement], float]:
    """(skip reason, per-input measurements, elapsed seconds) for one operator."""
    import torch

    started = time.perf_counter()
    # Before compiling: CPU kernels are generated for the current thread count.
    torch.set_num_threads(options.threads)
    operator = resolve_operator(name)
    reason = skip_reason(operator)
    if reason is not None:
        if progress:
            progress.done += len(items)
        return reason, [], 0.0
    results = measure_inputs([(operator, item) for item in items], options, progress=progress)
    return None, results, time.perf_counter() - started


def warm_up_compiler(options: MeasureOptions) -> float:
    """Compile one tiny graph so per-input compile times exclude once-per-process setup.

    The first compile in a process also loads inductor's modules and probes
    the C++ toolchain; charging that to whichever operator comes first would
    make its compile time meaningless. Returns the seconds it took.
    """
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import gen_gm_and_inputs

    started = time.perf_counter()
    example = torch.ones(8, device=options.device)
    gm, gm_args = gen_gm_and_inputs(torch.ops.aten.mul.Tensor, (example, example), {})
    compile_fx(gm, gm_args)(*gm_args)
    return time.perf_counter() - started


@dataclass(frozen=True)
class SuiteResult:
    """Everything one measurement of a suite produced, per operator."""

    skipped: dict[str, str]  # operator -> reason
    results: dict[str, list[InputMeasurement]]
    warm_up_s: float
    elapsed_s: float


def measure_suite(
    workload: Workload, options: MeasureOptions, *, progress: Progress | None = None
) -> SuiteResult:
    """Measure every operator of ``workload`` with rounds spread across *all* its inputs.

    This is what asv records per commit: compile everything, then time all
    inputs of all operators in interleaved rounds (see `measure_inputs`).
    """
    import torch

    started = time.perf_counter()
    torch.set_num_threads(options.threads)
    warm_up_s = warm_up_compiler(options)
    skipped: dict[str, str] = {}
    pairs: list[tuple[Any, OperatorInput]] = []
    for name in workload.operators:
        operator = resolve_operator(name)
        reason = skip_reason(operator)
        if reason is None:
            pairs.extend((operator, item) for item in workload.inputs(name))
        else:
            skipped[name] = reason
    if progress:
        progress.total = len(pairs)
    results: dict[str, list[InputMeasurement]] = {}
    for measurement in measure_inputs(pairs, options, progress=progress):
        results.setdefault(measurement.operator, []).append(measurement)
    return SuiteResult(skipped, results, warm_up_s, time.perf_counter() - started)


# asv history: the default set is timed in this many fresh processes, each
# taking this many rounds. See `measure_default_set_for_asv`.
ASV_PROCESSES = 3
ASV_ROUNDS_PER_PROCESS = 12


def measure_default_set_for_asv(operators: Sequence[str] | None = None) -> dict[str, Any]:
    """The asv ``setup_cache`` body: measure the default set, as plain picklable data.

    The default set is timed in ``ASV_PROCESSES`` fresh processes one after
    another, and each input's eager and compiled times are the medians of the
    processes' fastest rounds. Why: the speedup of a microsecond-scale op
    depends on things fixed for a process's lifetime (where code and buffers
    landed); within one process two passes agreed to ~1%, while separate
    processes differed by 2-4% on some inputs, so one process per commit made
    history jump for no reason. The first process compiles (or loads from the
    cache), so its compile times are the ones recorded.

    ``BENCHKIT_INDUCTOR_COLD=1`` compiles into a fresh empty inductor cache
    (honest compile times); otherwise the per-torch-build cache is used, so
    only the first run for a commit compiles. ``BENCHKIT_OPERATOR_PROCESSES``
    and ``BENCHKIT_OPERATOR_ROUNDS`` (per process) override the defaults;
    ``BENCHKIT_OPERATORS_JSON`` names a file that also receives the result
    (scripts/bench_operators.py compares runs with it). ``operators`` limits the
    timing to those operators of the default set (an asv ``-b`` selection).
    """
    started = time.perf_counter()
    cold = os.environ.get("BENCHKIT_INDUCTOR_COLD", "") not in ("", "0")
    cache = configure_inductor_cache(cold=cold)  # the timing processes inherit it
    processes = int(os.environ.get("BENCHKIT_OPERATOR_PROCESSES") or ASV_PROCESSES)
    rounds = int(os.environ.get("BENCHKIT_OPERATOR_ROUNDS") or ASV_ROUNDS_PER_PROCESS)
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchkit-operators-") as scratch:
        for index in range(processes):
            print(f"operators: timing process {index + 1}/{processes}", file=sys.stderr, flush=True)
            out = Path(scratch) / f"process{index}.json"
            command = ["-m", "benchkit.operators", "--time-default-set", str(rounds), str(out)]
            if operators is not None:
                command.append(",".join(operators))
            completed = subprocess.run([sys.executable, *command], check=False, env=child_env())
            if completed.returncode == 0 and out.exists():
                runs.append(json.loads(out.read_text()))
            else:
                failures.append(f"timing process {index + 1} exited with status {completed.returncode}")
    if not runs:
        raise RuntimeError("operators: every timing process failed: " + "; ".join(failures))
    data = _combine_processes(runs)
    data.update(
        inductor_cache=str(cache),
        cold=cold,
        processes=len(runs),
        rounds_per_process=rounds,
        failed_processes=failures,
        elapsed_s=time.perf_counter() - started,
    )
    if os.environ.get("BENCHKIT_OPERATORS_JSON"):
        atomic_write_json(os.environ["BENCHKIT_OPERATORS_JSON"], data)
    return data


def _time_default_set(rounds: int, operators: Sequence[str] | None = None) -> dict[str, Any]:
    """One timing process of `measure_default_set_for_asv`: every input of the chosen operators."""
    configure_inductor_cache()  # the parent's choice, from the environment
    workload = load_suite("default")
    if operators is not None:
        unknown = sorted(set(operators) - set(workload.operators))
        if unknown:
            raise UserError(f"not in the default operator set: {', '.join(unknown)}")
        workload = dataclasses.replace(
            workload, operators=tuple(o for o in workload.operators if o in operators)
        )
    suite = measure_suite(workload, MeasureOptions(repeats=rounds), progress=Progress(0))
    data: dict[str, Any] = {"warm_up_s": suite.warm_up_s, "elapsed_s": suite.elapsed_s, "operators": {}}
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
                    "error": m.error,
                }
                for label, m in zip(input_labels(items), measurements, strict=True)
            }
        }
    return data


def _combine_processes(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per input, the median over processes of eager and compiled seconds.

    An input that failed in any process is reported failed (with the first
    error): a failure that comes and goes is worth seeing, not averaging away.
    Compile seconds are the first process's, the one that compiled.
    """
    first = runs[0]
    combined: dict[str, Any] = {
        "warm_up_s": first["warm_up_s"],
        "process_elapsed_s": [run["elapsed_s"] for run in runs],
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
                "error": error,
                "per_process": [[r["eager_s"], r["compiled_s"]] for r in per_process],
            }
        combined["operators"][name] = {"inputs": inputs}
    return combined


def _profiler(
    operator: str, options: MeasureOptions, directory: Path
) -> contextlib.AbstractContextManager[Any]:
    if not options.profile:
        return contextlib.nullcontext()
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if options.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(
        activities=activities,
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            str(directory / f"operator_{operator}"), use_gzip=True
        ),
    )


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def parse_backend(spec: str) -> Backend:
    """A preset name (halide, autotune) or KEY=VALUE[,KEY=VALUE...] of inductor config."""
    if spec in INDUCTOR_CONFIG_PRESETS:
        return Backend(spec, INDUCTOR_CONFIG_PRESETS[spec])
    if "=" not in spec:
        raise UserError(
            f"--inductor-config {spec!r}: not a preset ({', '.join(INDUCTOR_CONFIG_PRESETS)}) nor KEY=VALUE"
        )
    import torch._inductor.config as inductor_config

    patches: dict[str, Any] = {}
    for pair in spec.split(","):
        key, _, raw = pair.partition("=")
        key = key.strip()
        try:
            current = getattr(inductor_config, key)
        except AttributeError:
            raise UserError(f"--inductor-config {spec!r}: inductor has no config option {key!r}") from None
        patches[key] = _coerce_config_value(raw.strip(), current, key)
    return Backend(spec, patches)


def _coerce_config_value(raw: str, current: Any, key: str) -> Any:
    if isinstance(current, bool):
        try:
            return _parse_bool(raw)
        except argparse.ArgumentTypeError:
            raise UserError(f"--inductor-config {key}: expected true/false, got {raw!r}") from None
    for kind in (int, float):
        if isinstance(current, kind):
            try:
                return kind(raw)
            except ValueError:
                raise UserError(f"--inductor-config {key}: expected {kind.__name__}, got {raw!r}") from None
    return raw


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "operators",
        help="TorchInductor speedup per aten operator on logged inputs (operatorbench)",
        description="Compile each aten operator alone with TorchInductor and compare it with eager "
        "on every logged input; writes operatorbench's CSV. See docs/operators.md.",
    )
    parser.add_argument(
        "--suite",
        default="default",
        help=f"inputs to load: {', '.join(_SUITE_NAMES)}, or a directory of *.txt logs (default: default)",
    )
    parser.add_argument(
        "--op",
        action="append",
        default=[],
        metavar="OPERATOR",
        help="operator overload to benchmark, e.g. aten.add.Tensor (repeatable; 'all' = "
        "every logged operator, the default; a name without overload: all its overloads)",
    )
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "float16", "bfloat16", "float64", "recorded"),
        help="floating dtype for all inputs ('recorded' keeps the log's) (default: float32)",
    )
    parser.add_argument("--max-samples", type=int, default=15, help="max inputs per operator (default: 15)")
    parser.add_argument(
        "--accuracy-checking",
        nargs="?",
        const=True,
        default=False,
        type=_parse_bool,
        metavar="BOOL",
        help="compare compiled with eager outputs (then timing runs once)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_ROUNDS,
        help="timing rounds per input, eager and compiled interleaved; the fastest round is kept "
        f"(default: {DEFAULT_ROUNDS})",
    )
    parser.add_argument(
        "--inductor-config",
        action="append",
        default=[],
        metavar="PRESET|KEY=VALUE",
        help="extra compiled variant to compare: "
        + ", ".join(INDUCTOR_CONFIG_PRESETS)
        + ", or inductor config KEY=VALUE[,KEY=VALUE] (repeatable)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="device to run on (default: cuda if available, else cpu)",
    )
    parser.add_argument("--inp-file", default=None, help="an operator-input log to use instead of --suite")
    parser.add_argument("--start-idx", type=int, default=0, help="skip this many inputs per operator")
    parser.add_argument("--channels-last", action="store_true", help="make 4-d inputs channels-last")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="record a torch.profiler trace per operator under --profile-dir",
    )
    parser.add_argument("--profile-dir", type=Path, default=Path("log"), help="(default: ./log)")
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("."),
        help="where operatorbench_<suite>_<dtype>.csv goes (default: .)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads for eager and compiled kernels (default: 1; on a shared machine "
        "parallel regions wait on descheduled threads and timings jump by milliseconds)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="compile into a fresh, empty inductor cache (honest compile times)",
    )
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    if args.repeats < 1 or args.max_samples < 1 or args.threads < 1 or args.start_idx < 0:
        raise UserError("--repeats, --max-samples and --threads must be >= 1 and --start-idx >= 0")
    configure_inductor_cache(cold=args.cold)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: this torch build or machine has no CUDA GPU")
    workload = load_input_file(args.inp_file) if args.inp_file else load_suite(args.suite)
    operators = select_operators(workload, args.op)
    backends = (Backend("inductor"), *(parse_backend(spec) for spec in args.inductor_config))
    options = MeasureOptions(
        device=device,
        dtype=args.dtype,
        repeats=args.repeats,
        accuracy_checking=args.accuracy_checking,
        channels_last=args.channels_last,
        backends=backends,
        profile=args.profile,
        threads=args.threads,
    )
    torch.set_float32_matmul_precision("high")

    csv_path = args.output_dir / f"operatorbench_{workload.name}_{args.dtype}.csv"
    names = summary_backend_names(backends)
    plan = [
        (op, workload.inputs(op, start_idx=args.start_idx, max_samples=args.max_samples)) for op in operators
    ]
    progress = Progress(sum(len(items) for _, items in plan))
    torch.set_num_threads(options.threads)
    progress.update("warming up the compiler")
    warm_up_s = warm_up_compiler(options)
    progress.clear()
    print(f"Compiler warm-up (once per process, not charged to any operator): {warm_up_s:.1f}s")
    summaries: list[OperatorSummary] = []
    failures = 0
    atomic_write_text(csv_path, render_csv(summaries, names))  # always written, even if all skip
    for name, items in plan:
        with _profiler(name, options, args.profile_dir):
            reason, results, elapsed = measure_operator(name, items, options, progress=progress)
        progress.clear()
        _report_operator(name, reason, results, elapsed, backends, summaries)
        failures += sum(not r.ok for r in results)
        atomic_write_text(csv_path, render_csv(summaries, names))
    progress.clear()
    print(f"Wrote {csv_path}")
    return 1 if failures else 0


def _report_operator(
    operator: str,
    reason: str | None,
    results: list[InputMeasurement],
    elapsed: float,
    backends: Sequence[Backend],
    summaries: list[OperatorSummary],
) -> None:
    if reason is not None:
        print(f"Skipping {operator}: {reason}")
        return
    for result in results:
        if result.error:
            print(f"error {operator} [{result.label}] ({result.location}): {result.error}", file=sys.stderr)
        elif result.accuracy and result.accuracy != "ok":
            print(f"Accuracy check failed: {operator} [{result.label}]: {result.accuracy}")
    summary = summarize(operator, results, backends, elapsed)
    if summary is None:
        print(f"{operator}: no input could be measured")
        return
    summaries.append(summary)
    parts = [
        f"{name}={mid:.4f}x ({low:.4f}-{high:.4f})"
        for name, (low, mid, high) in zip(summary.backend_names, summary.speedup_quantiles, strict=True)
    ]
    compile_total = sum(sum(r.compile_s) for r in results if r.ok)
    print(
        f"{operator}: {' '.join(parts)} over {summary.measured} input(s), "
        f"compile {compile_total:.1f}s, took {elapsed:.0f}s"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    # python -m benchkit.operators --time-default-set ROUNDS OUT.json: one timing
    # process of measure_default_set_for_asv (not a user command: see `benchkit operators`).
    if len(sys.argv) not in (4, 5) or sys.argv[1] != "--time-default-set":
        sys.exit("usage: python -m benchkit.operators --time-default-set ROUNDS OUT.json [OP,OP...]")
    chosen = sys.argv[4].split(",") if len(sys.argv) == 5 and sys.argv[4] else None
    atomic_write_json(sys.argv[3], _time_default_set(int(sys.argv[2]), chosen))
