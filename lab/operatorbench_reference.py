"""PyTorch operatorbench's CUDA timing loop, written out as a yardstick for `benchkit operators`.

    python -m lab.operatorbench_reference --inp-file LOG --dtype float16 --repeats 10 \
        --max-samples 2 --json OUT.json
    python -m lab.operatorbench_reference --suite default --dtype float32 --json OUT.json
    python -m lab.operatorbench_reference ... --no-cudagraphs   # operatorbench's direct calls

For every input: the operator alone in a graph module (``gen_gm_and_inputs``), compiled
by ``compile_fx``; the eager module and the compiled one each captured in a CUDA graph
(``cudagraphs_inner``, neither inputs nor outputs copied), as `benchkit operators` does by
default (operatorbench itself calls eager and inductor directly and captures only its
nvfuser variant; ``--no-cudagraphs`` does so too); then, per repeat and in turn for eager
and compiled, one plain call followed by ``benchmarker.benchmark_gpu`` (which flushes the L2
cache); per model the median over repeats; the input's speedup is eager / compiled. Per
operator the 20th, 50th and 80th percentiles over its inputs (``numpy.quantile``).
Operators skipped as operatorbench skips them: inputs its generator cannot make (gather,
nll_loss, index, scatter_, masked_fill_.Scalar, embedding), the ``_unsafe_view`` view,
operators without an inductor lowering or decomposition, and convolutions.

Only the timing method is the reference's own: inputs are benchkit's (the same log
parser, the same values from `materialize`), so any difference in the figures comes from
how they were timed. Dtypes follow operatorbench: float16 keeps the log's dtypes,
float32 casts every floating tensor.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchkit.measure.operators.workload import (
    OPERATORBENCH_INPUT_GENERATOR_NYI,
    load_input_file,
    load_suite,
    resolve_operator,
)


def skipped(operator: Any) -> str | None:
    import torch
    from torch._inductor.decomposition import decompositions
    from torch._inductor.lowering import lowerings

    name = str(operator)
    if any(part in name for part in OPERATORBENCH_INPUT_GENERATOR_NYI):
        return "input generator NYI"
    if operator == torch.ops.aten._unsafe_view.default:
        return "non compute"
    if all(op not in decompositions and op not in lowerings for op in (operator, operator.overloadpacket)):
        return "no inductor impl"
    if "convolution" in name:
        return "convolution"
    return None


def time_input(
    operator: Any, args: tuple, kwargs: dict, repeats: int, cudagraphs: bool = True
) -> tuple[float, float]:
    """(eager, compiled) milliseconds: medians over repeats of benchmark_gpu on CUDA-graph
    replays (or direct calls without `cudagraphs`)."""
    import numpy as np
    from torch._dynamo.backends.cudagraphs import cudagraphs_inner
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.runtime.benchmarking import benchmarker
    from torch._inductor.utils import gen_gm_and_inputs

    gm, gm_args = gen_gm_and_inputs(operator, args, kwargs)
    models = (gm, compile_fx(gm, gm_args))
    if cudagraphs:
        models = tuple(cudagraphs_inner(m, gm_args, copy_outputs=False, copy_inputs=False) for m in models)
    timings = np.zeros((repeats, len(models)))
    for repeat in range(repeats):
        for index, model in enumerate(models):  # interleaved, as operatorbench
            model(*gm_args)
            timings[repeat, index] = benchmarker.benchmark_gpu(lambda model=model: model(*gm_args))
    eager_ms, compiled_ms = np.median(timings, axis=0)
    return float(eager_ms), float(compiled_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--inp-file", help="an operator-input log")
    source.add_argument("--suite", help="a benchkit suite (default, cuda-default, ...)")
    parser.add_argument("--dtype", choices=("float16", "float32"), default="float32")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--max-samples", type=int, default=15)
    parser.add_argument("--op", action="append", default=[], help="only this operator (repeatable)")
    parser.add_argument(
        "--no-cudagraphs", dest="cudagraphs", action="store_false", help="call eager and compiled directly"
    )
    parser.add_argument("--json", type=Path, required=True, help="where the per-operator figures go")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from benchkit.measure.operators.materialize import materialize

    torch.set_float32_matmul_precision("high")
    started = time.perf_counter()
    workload = load_input_file(args.inp_file) if args.inp_file else load_suite(args.suite)
    cast = None if args.dtype == "float16" else torch.float32
    method = "operatorbench reference" + ("" if args.cudagraphs else ", direct calls")
    report: dict[str, Any] = {"method": method, "repeats": args.repeats, "operators": {}}
    for name in workload.operators:
        if args.op and name not in args.op:
            continue
        operator = resolve_operator(name)
        reason = skipped(operator)
        if reason is not None:
            print(f"Skipping {name}, {reason}")
            continue
        operator_started = time.perf_counter()
        speedups, errors, milliseconds = [], [], []
        for item in workload.inputs(name, max_samples=args.max_samples):
            try:
                call_args, call_kwargs = materialize(item, device="cuda", dtype=cast)
                eager_ms, compiled_ms = time_input(
                    operator, call_args, call_kwargs, args.repeats, args.cudagraphs
                )
                speedups.append(eager_ms / compiled_ms)
                milliseconds.append([eager_ms, compiled_ms])
            except Exception as error:  # recorded; the run goes on, as operatorbench
                message = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
                errors.append(f"{item.label}: {message}")
                print(f"error {name} [{item.label}]: {message}")
        elapsed = time.perf_counter() - operator_started
        if speedups:
            low, mid, high = np.quantile(speedups, (0.2, 0.5, 0.8)).tolist()
            print(f"{name}: inductor={mid:.4f}x ({low:.4f}-{high:.4f}) n={len(speedups)} took {elapsed:.1f}s")
            report["operators"][name] = {
                "quantiles": [low, mid, high],
                "speedups": speedups,
                "eager_compiled_ms": milliseconds,
            }
        else:
            report["operators"][name] = {"quantiles": None, "speedups": []}
        report["operators"][name].update(errors=errors, elapsed_s=elapsed)
        sys.stdout.flush()
    report["elapsed_s"] = time.perf_counter() - started
    args.json.write_text(json.dumps(report, indent=1))
    print(f"Wrote {args.json} ({report['elapsed_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
