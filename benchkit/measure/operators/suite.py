"""Measuring operators and whole suites: compiler warm-up, then every input in interleaved rounds."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchkit.measure.operators.inputs import (
    OperatorInput,
)
from benchkit.measure.operators.timing import InputMeasurement, MeasureOptions, measure_inputs
from benchkit.measure.operators.workload import Workload, resolve_operator, skip_reason


def measure_operator(
    name: str,
    items: Sequence[OperatorInput],
    options: MeasureOptions,
    *,
    progress: Any = None,  # a `benchkit.util.progress_bar`,
) -> tuple[str | None, list[InputMeasurement], float]:
    """(skip reason, per-input measurements, elapsed seconds) for one operator."""
    import torch

    started = time.perf_counter()
    # Before compiling: CPU kernels are generated for the current thread count.
    torch.set_num_threads(options.threads)
    operator = resolve_operator(name)
    reason = skip_reason(operator)
    if reason is not None:
        if progress is not None:
            progress.update(len(items))
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
