"""`benchkit operators`: TorchInductor speedups per aten operator and input (outside asv)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchkit.cli.options import add_profile_options
from benchkit.errors import UserError
from benchkit.measure.operators.kernels import configure_inductor_cache
from benchkit.measure.operators.suite import OperatorOutcome, measure_operators, warm_up_compiler
from benchkit.measure.operators.summary import OperatorSummary, render_csv, summarize, summary_backend_names
from benchkit.measure.operators.timing import (
    DEFAULT_ROUNDS,
    INDUCTOR_CONFIG_PRESETS,
    Backend,
    MeasureOptions,
)
from benchkit.measure.operators.workload import (
    SUITE_NAMES,
    load_input_file,
    load_suite,
    select_operators,
)
from benchkit.util import atomic_write_text, progress_bar


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
        help=f"inputs to load: {', '.join(SUITE_NAMES)}, or a directory of *.txt logs (default: default)",
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
    _add_timing_options(parser)
    parser.add_argument("--inp-file", default=None, help="an operator-input log to use instead of --suite")
    parser.add_argument("--start-idx", type=int, default=0, help="skip this many inputs per operator")
    parser.add_argument("--channels-last", action="store_true", help="make 4-d inputs channels-last")
    add_profile_options(parser, "record a torch.profiler trace per operator under --profile-dir")
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
        help="compile and autotune into fresh, empty inductor and Triton caches (honest compile "
        "times; kernels and autotuning choices made afresh) instead of benchkit's cache for this torch build",
    )
    parser.set_defaults(func=run_command)


def _add_timing_options(parser: argparse.ArgumentParser) -> None:
    """How each input is timed and compiled: rounds, CUDA graphs, inductor variants, device."""
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_ROUNDS,
        help="timing rounds per input, eager and compiled interleaved; on the CPU the fastest round "
        f"is kept, on CUDA the median (operatorbench's statistic) (default: {DEFAULT_ROUNDS})",
    )
    parser.add_argument(
        "--no-cudagraphs",
        dest="cudagraphs",
        action="store_false",
        help="CUDA: call eager and compiled directly instead of replaying CUDA graphs, so kernel "
        "launch overhead is part of both times (default: CUDA graphs, as operatorbench)",
    )
    parser.add_argument(
        "--no-compile-ahead",
        dest="compile_ahead",
        action="store_false",
        default=None,
        help="CUDA: compile each operator just before timing it (default with CUDA graphs: the next "
        "operator compiles on a background thread while this one's graph replays are timed)",
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
        cudagraphs=args.cudagraphs,
        compile_ahead=args.compile_ahead,
    )
    torch.set_float32_matmul_precision("high")

    csv_path = args.output_dir / f"operatorbench_{workload.name}_{args.dtype}.csv"
    names = summary_backend_names(backends)
    plan = [
        (op, workload.inputs(op, start_idx=args.start_idx, max_samples=args.max_samples)) for op in operators
    ]
    progress = progress_bar(sum(len(items) for _, items in plan), "input")
    torch.set_num_threads(options.threads)
    progress.set_postfix_str("warming up the compiler")
    warm_up_s = warm_up_compiler(options)
    progress.clear()
    print(f"Timing: {options.method}; speedup = eager / compiled time, per input")
    if options.overlaps_compile:
        print("Compiling ahead: each operator compiles on a background thread while the one before is timed")
    print(f"Compiler warm-up (once per process, not charged to any operator): {warm_up_s:.1f}s")
    summaries: list[OperatorSummary] = []
    failures = 0
    csv_text = functools.partial(
        render_csv, backend_names=names, device=device, statistic=options.statistic.value
    )
    atomic_write_text(csv_path, csv_text(summaries))  # always written, even if all skip
    around = functools.partial(_profiler, options=options, directory=args.profile_dir)
    for outcome in measure_operators(plan, options, progress=progress, around=around):
        progress.clear()
        _report_operator(outcome, backends, summaries)
        failures += sum(not r.ok for r in outcome.results)
        atomic_write_text(csv_path, csv_text(summaries))
    progress.close()
    print(f"Wrote {csv_path}")
    return 1 if failures else 0


def _report_operator(
    outcome: OperatorOutcome,
    backends: Sequence[Backend],
    summaries: list[OperatorSummary],
) -> None:
    operator, reason, results, elapsed = outcome.name, outcome.skip_reason, outcome.results, outcome.elapsed_s
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
        f"compile {compile_total:.1f}s{' (ahead)' if outcome.compiled_ahead else ''}, took {elapsed:.0f}s"
    )
    sys.stdout.flush()
