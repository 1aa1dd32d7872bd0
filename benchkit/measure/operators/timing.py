"""Timing one operator's inputs, eager against compiled: interleaved rounds on fresh inputs
on the CPU; on CUDA operatorbench's method (CUDA graphs, inductor's GPU benchmarker, median)."""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchkit.measure.operators.clocks import (
    keep_allocations_off_fresh_pages,
    median_seconds_cpu,
    seconds_cuda,
)
from benchkit.measure.operators.index_inputs import with_valid_indices
from benchkit.measure.operators.inputs import OperatorInput, UnsupportedInputError
from benchkit.measure.operators.kernels import (
    GeneratedKernel,
    OutputCode,
    collecting_output_code,
    compile_cached,
    generated_kernel,
    inductor_cache_files,
)
from benchkit.measure.operators.materialize import input_seed, materialize

# Timing rounds per input; the fastest round per model is kept (the median on CUDA).
# lab/bench_operators.py measures how far the default set's median speedups
# move from run to run with this many rounds of `MeasureOptions.sample_window_s`.
DEFAULT_ROUNDS = 30


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


@dataclass(frozen=True)
class Backend:
    """One compiled variant: inductor with some config patches."""

    name: str
    config_patches: Mapping[str, Any] = field(default_factory=dict)


class Statistic(enum.Enum):
    """How an input's per-round times become its figure, per device."""

    FASTEST_ROUND = "fastest round"  # CPU: noise only ever adds time
    MEDIAN_OF_REPEATS = "median of repeats"  # CUDA: operatorbench's statistic

    def combine(self, samples: Sequence[float]) -> float:
        return min(samples) if self is Statistic.FASTEST_ROUND else statistics.median(samples)


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
    # CUDA: eager and compiled each replayed from a CUDA graph (operatorbench's method:
    # kernel time alone); False times the launches too.
    cudagraphs: bool = True
    # Compile the next operator on a background thread while this one is timed. None: where
    # no figure can feel it (CUDA graph replays timed on the GPU; not the CPU's own timing,
    # launch-inclusive figures, profiles or accuracy runs).
    compile_ahead: bool | None = None
    # Whether each compile found its kernels in inductor's cache (the asv record): costs a
    # walk of the cache folder per compile, and is only exact with one compile at a time.
    record_cache_state: bool = False

    @property
    def overlaps_compile(self) -> bool:
        if self.compile_ahead is not None:
            return self.compile_ahead
        return (
            self.device == "cuda"
            and self.cudagraphs
            and not self.profile
            and not self.accuracy_checking
            and not self.record_cache_state  # the main thread's autotuning writes to the cache too
        )

    @property
    def statistic(self) -> Statistic:
        return Statistic.MEDIAN_OF_REPEATS if self.device == "cuda" else Statistic.FASTEST_ROUND

    @property
    def method(self) -> str:
        """The timing method in words, for output beside the figures."""
        if self.device != "cuda":
            return f"CPU, {self.threads} thread(s), {self.statistic.value} of {self.repeats}"
        graphs = "in CUDA graphs" if self.cudagraphs else "without CUDA graphs (launches included)"
        return f"CUDA {graphs}, inductor's benchmark_gpu per repeat, {self.statistic.value} of {self.repeats}"

    def torch_dtype(self) -> Any:
        import torch

        return None if self.dtype == "recorded" else getattr(torch, self.dtype)


@dataclass(frozen=True)
class InputMeasurement:
    """Eager and compiled seconds per call (`MeasureOptions.statistic` over rounds) for one input."""

    operator: str
    label: str
    location: str
    eager_s: float = math.nan
    compiled_s: tuple[float, ...] = ()
    compile_s: tuple[float, ...] = ()
    # Per backend: the compile found every kernel in inductor's cache (wrote nothing to it).
    compile_cached: tuple[bool, ...] = ()
    # Per backend: what inductor generated (its code hash and autotuned configs).
    kernels: tuple[GeneratedKernel, ...] = ()
    accuracy: str | None = None  # "ok" / "mismatch: ..." when checked
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def speedups(self) -> tuple[float, ...]:
        return tuple(self.eager_s / c for c in self.compiled_s)


def _tensor_leaves(args: Any, kwargs: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]


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
    """`materialize`, index arguments redrawn within bounds (`index_inputs`), plus the one
    op-specific fix a dtype change needs.

    ``half_to_float=True`` (softmax on half inputs, float result) is only valid
    for half inputs; once --dtype made them float32, the equivalent call is
    ``half_to_float=False`` (same float result).
    """
    import torch

    dtype = options.torch_dtype()
    args, kwargs = materialize(item, device=options.device, dtype=dtype, channels_last=options.channels_last)
    args, kwargs = with_valid_indices(operator, args, kwargs, input_seed(item) + 1)
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
class _Graph:
    """One input as a graph module of its operator, with its inputs made on the device."""

    index: int
    operator: Any
    item: OperatorInput
    gm: Any
    gm_args: list[Any]


@dataclass
class CompiledInput:
    """An input's graph with its compiled variants, not yet captured or timed."""

    graph: _Graph
    compiled: list[Callable[..., Any]]  # one per backend
    compile_s: tuple[float, ...]
    compile_cached: tuple[bool, ...] = ()
    outputs: tuple[OutputCode, ...] = ()  # per backend: the code it generated or loaded


@dataclass
class _Prepared:
    """A compiled input waiting to be timed; timing rounds append one sample per model."""

    index: int
    operator: Any
    item: OperatorInput
    models: list[Callable[..., Any]]  # eager graph module first, then one per backend
    compile_s: tuple[float, ...]
    accuracy: str | None
    compile_cached: tuple[bool, ...] = ()
    outputs: tuple[OutputCode, ...] = ()
    # CUDA: the inputs, made on the device once per input and process (the models'
    # CUDA graphs are bound to them); None on the CPU, where every round makes new ones.
    device_inputs: list[Any] | None = None
    rounds: list[list[float]] = field(default_factory=list)


def _error_result(operator: Any, item: OperatorInput, error: BaseException) -> InputMeasurement:
    if isinstance(error, UnsupportedInputError):
        text = f"unsupported input: {error}"
    else:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        text = f"{type(error).__name__}: {first_line}"[:300]
    return InputMeasurement(str(operator), item.label, item.location, error=text)


def _make_graph(index: int, operator: Any, item: OperatorInput, options: MeasureOptions) -> _Graph:
    from torch._inductor.utils import gen_gm_and_inputs

    gm, gm_args = gen_gm_and_inputs(operator, *operator_arguments(operator, item, options))
    return _Graph(index, operator, item, gm, list(gm_args))


def _compile(graph: _Graph, options: MeasureOptions) -> CompiledInput:
    """compile_fx per backend. Launches no kernels of its own, so on CUDA it may run in a
    background thread while another operator is timed (`measure_operators`)."""
    compiled: list[Callable[..., Any]] = []
    compile_seconds: list[float] = []
    cached: list[bool] = []
    outputs: list[OutputCode] = []
    for backend in options.backends:
        files = inductor_cache_files() if options.record_cache_state else 0
        started = time.perf_counter()
        with collecting_output_code() as output:
            compiled.append(compile_cached(graph.gm, graph.gm_args, dict(backend.config_patches)))
        compile_seconds.append(time.perf_counter() - started)
        outputs.append(output)
        if options.record_cache_state:
            cached.append(inductor_cache_files() == files)
    return CompiledInput(graph, compiled, tuple(compile_seconds), tuple(cached), tuple(outputs))


def _finish(entry: CompiledInput, options: MeasureOptions) -> _Prepared:
    """The accuracy check and, on CUDA, the CUDA graph capture: on the timing thread."""
    graph = entry.graph
    models: list[Callable[..., Any]] = [graph.gm, *entry.compiled]
    accuracy = None
    if options.accuracy_checking:
        accuracy = "; ".join(
            _check_accuracy(graph.operator, graph.item, options, graph.gm, model) for model in entry.compiled
        )
    cuda = options.device == "cuda"
    if cuda and options.cudagraphs:
        from torch._dynamo.backends.cudagraphs import cudagraphs_inner

        # Replays read and write the very tensors captured: no copies (operatorbench captures
        # its nvfuser variant so).
        models = [cudagraphs_inner(m, graph.gm_args, copy_outputs=False, copy_inputs=False) for m in models]
    return _Prepared(
        graph.index,
        graph.operator,
        graph.item,
        models,
        entry.compile_s,
        accuracy,
        entry.compile_cached,
        entry.outputs,
        graph.gm_args if cuda else None,
    )


def _prepare(index: int, operator: Any, item: OperatorInput, options: MeasureOptions) -> _Prepared:
    return _finish(_compile(_make_graph(index, operator, item, options), options), options)


def _time_round(prepared: _Prepared, options: MeasureOptions) -> list[float]:
    """One sample per model.

    CPU: on freshly made inputs (same values, new memory). Where a tensor lands
    in memory shifts a small op's time by several percent (alignment, page
    faults on fresh pages); new inputs each round let the fastest-round
    statistic see many placements instead of one per process. CUDA: on the
    inputs made once (`_prepare`); making gigabytes anew every round would cost
    far more than the timing itself, and the GPU benchmarker flushes the L2
    cache before each call anyway.
    """
    if prepared.device_inputs is not None:
        # As operatorbench: each round times every model back to back.
        seconds = []
        for index, model in enumerate(prepared.models):
            with _record_function(f"model_{index}", options.profile):
                seconds.append(seconds_cuda(functools.partial(model, *prepared.device_inputs)))
        return seconds
    graph_inputs = _fresh_graph_inputs(prepared.operator, prepared.item, options)
    calls = [functools.partial(model, *graph_inputs) for model in prepared.models]
    return median_seconds_cpu(calls, options.sample_window_s)


@contextlib.contextmanager
def _compile_errors_not_logged() -> Iterator[None]:
    """Torch logs a traceback for an op it cannot trace before raising; we report the error ourselves."""
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


# An input on its way: a stage's record, or the error result that ended it.
Staged = Any  # _Graph | CompiledInput | InputMeasurement


def make_graphs(pairs: Sequence[tuple[Any, OperatorInput]], options: MeasureOptions) -> list[Staged]:
    """Each pair as its operator's graph module with inputs made on the device (timing thread:
    on CUDA this launches the kernels that draw the inputs)."""
    staged: list[Staged] = []
    for index, (operator, item) in enumerate(pairs):
        try:
            staged.append(_make_graph(index, operator, item, options))
        except Exception as e:  # a failing input is recorded and the run goes on
            staged.append(_error_result(operator, item, e))
    return staged


def compile_graphs(staged: Sequence[Staged], options: MeasureOptions) -> list[Staged]:
    """compile_fx for every graph; safe on a background thread (see `_compile`)."""
    compiled: list[Staged] = []
    for entry in staged:
        if not isinstance(entry, _Graph):
            compiled.append(entry)
            continue
        try:
            with _record_function(f"iter_{entry.index}", options.profile), _compile_errors_not_logged():
                compiled.append(_compile(entry, options))
        except Exception as e:
            compiled.append(_error_result(entry.operator, entry.item, e))
    return compiled


def time_compiled(
    staged: Sequence[Staged],
    options: MeasureOptions,
    *,
    progress: Any = None,
    before_timing: Callable[[], None] | None = None,
) -> list[InputMeasurement]:
    """Capture (CUDA) and accuracy-check the compiled inputs, then time them all in interleaved rounds.

    Each round takes one sample of every input, so the rounds of one input are
    spread over the whole measurement instead of bunched together: a burst of
    load from elsewhere on the machine lands in one round of many inputs rather
    than in every round of one input. Per model the rounds are combined by the
    device's `Statistic`: on the CPU the fastest round (noise only ever adds
    time, so results depend on the machine's quiet moments, not on how busy it
    was on average), on CUDA operatorbench's median. Failures become error
    results; the rest go on. ``before_timing`` runs after the captures, before the first round.
    """
    keep_allocations_off_fresh_pages()
    results: list[InputMeasurement | None] = [None] * len(staged)
    prepared: list[_Prepared] = []
    for position, entry in enumerate(staged):
        if isinstance(entry, CompiledInput):
            try:
                with _compile_errors_not_logged():
                    prepared.append(_finish(entry, options))
                continue
            except Exception as e:
                entry = _error_result(entry.graph.operator, entry.graph.item, e)
        results[position] = entry
        if progress is not None:
            progress.update(1)
    if before_timing is not None:
        before_timing()
    # As operatorbench: an accuracy run is not a timing run.
    rounds = 1 if options.accuracy_checking else options.repeats
    for round_index in range(rounds):
        if progress is not None and prepared:
            progress.set_postfix_str(f"timing round {round_index + 1}/{rounds} of {len(prepared)} input(s)")
        for entry in list(prepared):
            try:
                with _record_function(f"rep_{round_index}", options.profile):
                    entry.rounds.append(_time_round(entry, options))
            except Exception as e:
                results[entry.index] = _error_result(entry.operator, entry.item, e)
                prepared.remove(entry)
                if progress is not None:
                    progress.update(1)
    for entry in prepared:
        best = [options.statistic.combine(samples) for samples in zip(*entry.rounds, strict=True)]
        results[entry.index] = InputMeasurement(
            str(entry.operator),
            entry.item.label,
            entry.item.location,
            eager_s=best[0],
            compiled_s=tuple(best[1:]),
            compile_s=entry.compile_s,
            compile_cached=entry.compile_cached,
            # read after the rounds: a Triton kernel autotunes on its first call
            kernels=tuple(generated_kernel(output) for output in entry.outputs),
            accuracy=entry.accuracy,
        )
        if progress is not None:
            progress.update(1)
    return [r for r in results if r is not None]


def measure_inputs(
    pairs: Sequence[tuple[Any, OperatorInput]],
    options: MeasureOptions,
    *,
    progress: Any = None,  # a `benchkit.util.progress_bar`,
) -> list[InputMeasurement]:
    """Compile every (operator, input) pair, then time them all (`time_compiled`).

    Compilation happens first and outside all timing.
    """
    if progress is not None and pairs:
        progress.set_postfix_str(f"compiling {len(pairs)} input(s) of {pairs[0][0]}")
    return time_compiled(compile_graphs(make_graphs(pairs, options), options), options, progress=progress)
