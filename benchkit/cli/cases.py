"""`benchkit list` and `benchkit run`: the suite's cases, and their wall time outside asv."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from benchkit.errors import UserError
from benchkit.util import atomic_write_json


def add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--definitions",
        action="append",
        metavar="PATH",
        help="a definitions module (a .py file with BENCHMARKS); repeatable. "
        "Default: the standard suite plus $BENCHKIT_DEFINITIONS",
    )
    parser.add_argument(
        "--no-standard",
        action="store_true",
        help="leave out the standard suite (as BENCHKIT_STANDARD=0 does)",
    )
    add_bench_option(parser)


BENCH_HELP = (
    "only cases with a name matching REGEX (repeatable, any of them): asv's name as `benchkit list` "
    "prints it first (e.g. Pointwise_Math_add_...), its readable key (e.g. 'Pointwise/Math/add | Python') "
    "or asv's full benchmark name"
)


def add_bench_option(parser: argparse.ArgumentParser, help: str = BENCH_HELP) -> None:
    """`-b/--bench REGEX` as asv spells it; `--filter` is the same option's older name."""
    parser.add_argument(
        "--bench", "-b", "--filter", dest="bench", action="append", default=[], metavar="REGEX", help=help
    )


def selected_cases(args: argparse.Namespace) -> list[Any]:
    """The cases chosen by the shared --definitions/--no-standard/-b options; none is an error."""
    from benchkit.define.expand import select
    from benchkit.define.loader import load_cases

    standard = False if args.no_standard else None  # None: BENCHKIT_STANDARD decides (default: in)
    cases = select(load_cases(args.definitions, standard=standard), args.bench)
    if not cases:
        raise UserError(nothing_matched(args.bench))
    return cases


def asv_bench(patterns: Sequence[str], definitions: Sequence[str] | None = None) -> list[str]:
    """asv ``-b`` regexes for `patterns` in any form a user sees (`benchkit.define.expand.case_names`)."""
    if not patterns:
        return []
    from benchkit.define.expand import asv_bench_regexes
    from benchkit.define.loader import load_cases

    return asv_bench_regexes(patterns, load_cases(definitions))


def nothing_matched(patterns: list[str]) -> str:
    shown = " ".join(f"-b {p!r}" for p in patterns) or "the definitions"
    return f"nothing matched: no benchmark case matches {shown} (`benchkit list` prints every name)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="print every concrete case, one per line")
    add_selection(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="measure wall time of cases in isolated worker processes")
    add_selection(p)
    p.add_argument("--json", metavar="OUT", help="also write results as JSON to OUT")
    p.add_argument("--jobs", type=int, default=None, help="cases measured at once (default: one per core)")
    p.add_argument("--min-run-time", type=float, default=0.2, help="seconds measured per case (default 0.2)")
    p.add_argument(
        "--case-timeout",
        "--timeout",
        dest="case_timeout",
        type=float,
        default=300.0,
        help="seconds before a case is killed (default 300; as in `benchkit counts`)",
    )
    p.set_defaults(func=cmd_run)


def cmd_list(args: argparse.Namespace) -> int:
    from benchkit.define.expand import asv_class_name

    cases = selected_cases(args)
    for case in cases:
        print(f"{asv_class_name(case)}\t{case.key}")
    print(f"{len(cases)} case(s): asv's name (for -b, `asv run -b`, `asv find`), then its readable key",
          file=sys.stderr)  # fmt: skip
    return 0


def _measurement(case: Any, outcome: Any) -> Any:
    from torch.utils.benchmark import Measurement
    from torch.utils.benchmark.utils.common import TaskSpec

    modes = case.autolabels.as_dict
    variant = ", ".join(v for v in (modes["runtime"], modes["autograd"]) if v != "explicit")
    sub_label = "/".join(case.label[1:]) or case.label[0]
    return Measurement(
        number_per_run=outcome.block_size,
        raw_times=list(outcome.block_seconds),
        task_spec=TaskSpec(
            stmt=case.timer_args.stmt,
            setup=case.timer_args.setup,
            global_setup=case.timer_args.global_setup,
            label=case.label[0],
            sub_label=f"{sub_label} [{variant}]" if variant else sub_label,
            description=modes["language"],
            num_threads=case.timer_args.num_threads,
        ),
    )


def cmd_run(args: argparse.Namespace) -> int:
    from benchkit.measure.cpp.shards import CppSuite, build_all
    from benchkit.measure.walltime.worker import Outcome, run_cases

    cases = selected_cases(args)
    cpp_suite = CppSuite([c.timer_args for c in cases])
    compile_errors = build_all(cpp_suite.shards, progress=lambda m: print(m, file=sys.stderr, flush=True))

    from benchkit.define.api import Language
    from benchkit.measure.cpp.shards import Snippet

    to_run, outcomes = [], {}
    for case in cases:
        a = case.timer_args
        error = compile_errors.get(Snippet.of(a).key) if a.language is Language.CPP else None
        if error:
            outcomes[case.key] = Outcome(case.key, "failed", error=error)
        else:
            to_run.append((case.key, a))

    def report(outcome: Outcome, done: int, total: int) -> None:
        if outcome.status == "ok":
            per_call = min(outcome.block_seconds) / outcome.block_size
            result = f"{per_call * 1e6:10.3f} us (best block)"
        else:
            result = f"{outcome.status.upper()}: {outcome.error.strip().splitlines()[-1][:120]}"
        print(f"[{done:>4}/{total}] {result}  {outcome.key}", file=sys.stderr, flush=True)

    for outcome in run_cases(
        to_run,
        cpp_suite,
        jobs=args.jobs,
        timeout=args.case_timeout,
        min_run_time=args.min_run_time,
        on_done=report,
    ):
        outcomes[outcome.key] = outcome

    from torch.utils.benchmark import Compare

    measurements = [_measurement(c, outcomes[c.key]) for c in cases if outcomes[c.key].status == "ok"]
    if measurements:
        compare = Compare(measurements)
        compare.trim_significant_figures()
        compare.print()
    bad = [o for o in outcomes.values() if o.status != "ok"]
    for o in bad:
        print(f"{o.status}: {o.key}\n{o.error.rstrip()}\n", file=sys.stderr)
    if args.json:
        payload = {}
        for case in cases:
            o = outcomes[case.key]
            entry: dict[str, Any] = {"label": list(case.label), **case.autolabels.as_dict}
            entry.update(num_threads=case.timer_args.num_threads, status=o.status)
            if o.status == "ok":
                m = _measurement(case, o)
                entry.update(median_s=m.median, iqr_s=m.iqr, block_size=o.block_size, times_s=m.times)
            else:
                entry["error"] = o.error
            payload[case.key] = entry
        atomic_write_json(args.json, payload)
        print(f"wrote {args.json}", file=sys.stderr)
    ok = len(cases) - len(bad)
    print(
        f"{ok} measured, {sum(o.status == 'failed' for o in bad)} failed, "
        f"{sum(o.status == 'skipped' for o in bad)} skipped",
        file=sys.stderr,
    )
    return 1 if any(o.status == "failed" for o in bad) else 0
