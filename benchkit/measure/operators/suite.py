"""Measuring operators and whole suites: compiler warm-up, then every input in interleaved rounds."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from benchkit.measure import vec_isa
from benchkit.measure.operators.inputs import (
    OperatorInput,
)
from benchkit.measure.operators.kernels import compile_cached
from benchkit.measure.operators.timing import (
    InputMeasurement,
    MeasureOptions,
    Staged,
    compile_graphs,
    make_graphs,
    measure_inputs,
    time_compiled,
)
from benchkit.measure.operators.workload import Workload, resolve_operator, skip_reason


@dataclass(frozen=True)
class OperatorOutcome:
    """One operator of a plan: why it was skipped, or its per-input measurements."""

    name: str
    skip_reason: str | None
    results: list[InputMeasurement]
    elapsed_s: float  # on the timing thread: a wait for a compile made ahead is in it, that compile not
    compiled_ahead: bool


# While compiling ahead the timing thread gets the interpreter back within this many seconds
# after a GPU wait (Python's default, 5 ms, would idle the GPU between benchmark calls).
_SWITCH_INTERVAL_S = 0.001


@contextlib.contextmanager
def _background_compiler(enabled: bool) -> Iterator[ThreadPoolExecutor | None]:
    if not enabled:
        yield None
        return
    previous = sys.getswitchinterval()
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="benchkit-compile")
    try:
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        sys.setswitchinterval(previous)


def _retry_failures_here(
    graphs: list[Staged], compiled: list[Staged], options: MeasureOptions
) -> list[Staged]:
    """Compile again on this thread what failed on the background one: a failure that only a
    thread could cause must not become a failed input."""
    return [
        compile_graphs([graph], options)[0]
        if isinstance(entry, InputMeasurement) and graph is not entry
        else entry
        for graph, entry in zip(graphs, compiled, strict=True)
    ]


def measure_operators(
    plan: Sequence[tuple[str, Sequence[OperatorInput]]],
    options: MeasureOptions,
    *,
    progress: Any = None,  # a `benchkit.util.progress_bar`
    around: Callable[[str], contextlib.AbstractContextManager[Any]] | None = None,
) -> Iterator[OperatorOutcome]:
    """Measure a plan operator by operator, in order, yielding each when it is done.

    With ``options.overlaps_compile`` (CUDA graphs on CUDA, by default) the next operator's
    inputs are drawn on the device, then compiled on a background thread while this
    operator is timed: compile_fx launches no kernels, and each figure is a CUDA graph
    replay timed on the GPU, so the two do not meet; the CUDA graph capture waits until the
    compile is done. Otherwise each operator compiles, then times.
    ``around(name)`` wraps each operator's work on the timing thread (a profiler).
    """
    import torch

    torch.set_num_threads(options.threads)
    operators: list[tuple[str, Any, str | None, Sequence[OperatorInput]]] = []
    for name, items in plan:
        operator = resolve_operator(name)
        operators.append((name, operator, skip_reason(operator), items))
    measured = [i for i, (_, _, reason, _) in enumerate(operators) if reason is None]

    def graphs_of(position: int) -> list[Staged]:
        _, operator, _, items = operators[position]
        return make_graphs([(operator, item) for item in items], options)

    with _background_compiler(options.overlaps_compile) as executor:
        upcoming: tuple[list[Staged], Future[list[Staged]]] | None = None
        for position, (name, _, reason, items) in enumerate(operators):
            if reason is not None:
                if progress is not None:
                    progress.update(len(items))
                yield OperatorOutcome(name, reason, [], 0.0, False)
                continue
            with around(name) if around is not None else contextlib.nullcontext():
                started = time.perf_counter()
                ahead = upcoming is not None
                if upcoming is not None:
                    if progress is not None:
                        progress.set_postfix_str(f"waiting for {name}'s compile")
                    graphs, pending = upcoming
                    compiled = _retry_failures_here(graphs, pending.result(), options)
                    upcoming = None
                else:
                    if progress is not None:
                        progress.set_postfix_str(f"compiling {len(items)} input(s) of {name}")
                    compiled = compile_graphs(graphs_of(position), options)
                following = [p for p in measured if p > position][:1]

                def compile_next(following: list[int] = following) -> None:
                    nonlocal upcoming
                    if executor is not None and following:
                        # Drawn here (GPU kernels), compiled there, captured when its turn comes;
                        # started after this operator's captures, which must have the GPU alone.
                        graphs = graphs_of(following[0])
                        upcoming = graphs, executor.submit(compile_graphs, graphs, options)

                results = time_compiled(compiled, options, progress=progress, before_timing=compile_next)
                elapsed = time.perf_counter() - started
            yield OperatorOutcome(name, None, results, elapsed, ahead)


def warm_up_compiler(options: MeasureOptions) -> float:
    """Compile one tiny graph so per-input compile times exclude once-per-process setup.

    The first compile in a process also loads inductor's modules and probes
    the C++ toolchain; charging that to whichever operator comes first would
    make its compile time meaningless. On the CPU the vector-ISA probe is skipped where this
    build's first probe on this machine allows it (`benchkit.measure.vec_isa`). Returns the
    seconds it took.
    """
    import torch
    from torch._inductor.utils import gen_gm_and_inputs

    started = time.perf_counter()
    if options.device == "cpu":
        vec_isa.skip_probe_here()
    example = torch.ones(8, device=options.device)
    gm, gm_args = gen_gm_and_inputs(torch.ops.aten.mul.Tensor, (example, example), {})
    compile_cached(gm, gm_args)(*gm_args)
    return time.perf_counter() - started


@dataclass(frozen=True)
class SuiteResult:
    """Everything one measurement of a suite produced, per operator."""

    skipped: dict[str, str]  # operator -> reason
    results: dict[str, list[InputMeasurement]]
    warm_up_s: float
    elapsed_s: float


def measure_suite(
    workload: Workload,
    options: MeasureOptions,
    *,
    progress: Any = None,  # a `benchkit.util.progress_bar`
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
    if progress is not None:
        progress.reset(total=len(pairs))
    results: dict[str, list[InputMeasurement]] = {}
    for measurement in measure_inputs(pairs, options, progress=progress):
        results.setdefault(measurement.operator, []).append(measurement)
    return SuiteResult(skipped, results, warm_up_s, time.perf_counter() - started)


# asv history: the default set is timed in this many fresh processes, each
