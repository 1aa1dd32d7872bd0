"""`benchkit check BASE HEAD`: the regression gate (see `benchkit.report.gate.check`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchkit.cli.cases import add_bench_option, asv_bench
from benchkit.cli.options import add_damage_option
from benchkit.history.results.read import DamagedFile
from benchkit.report.gate import check as gate
from benchkit.report.gate.check import WHY_HINT, run_check


def _cmd_check(args: argparse.Namespace) -> int:
    damaged: list[DamagedFile] | None = [] if args.skip_damaged else None
    verdict = run_check(
        args.base,
        args.head,
        asv_config=args.asv_config,
        config_path=args.config,
        machine=args.machine,
        env=args.env,
        factor=args.factor,
        show_unchanged=args.show_unchanged,
        bench=asv_bench(args.bench),
        damaged=damaged,
    )
    for found in damaged or ():
        print(f"benchkit check: --skip-damaged: left out {found.describe()}", file=sys.stderr)
    sys.stdout.write(verdict.markdown)
    for problem in verdict.problems:
        print(f"benchkit check: could not compare: {problem}", file=sys.stderr)
    if verdict.problems:
        print(f"benchkit check: {WHY_HINT}", file=sys.stderr)
    for reason in verdict.not_judged:
        print(f"benchkit check: not judged: {reason}", file=sys.stderr)
    if args.markdown:
        from benchkit.util import atomic_write_text

        atomic_write_text(args.markdown, verdict.markdown)
    if args.json:
        from benchkit.report.gate.check_json import verdict_json
        from benchkit.util import atomic_write_json

        atomic_write_json(args.json, verdict_json(verdict, args.base, args.head))
    return verdict.exit_code


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "check",
        help="regression gate over asv results of two commits "
        "(exit 0 ok, 1 regression or lost benchmark, 2 cannot compare or not judged)",
        description=gate.__doc__.split("\n\n")[0],  # type: ignore[union-attr],
    )
    parser.add_argument("base", metavar="BASE", help="reference commit: branch, tag or hash (e.g. main)")
    parser.add_argument("head", metavar="HEAD", help="commit under test (e.g. a PR branch)")
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="thresholds and per-benchmark overrides (default: benchkit-check.toml/.json by asv.conf.json)",
    )
    parser.add_argument("--machine", help="asv machine name (needed when results hold several machines)")
    parser.add_argument("--env", help="compare only this asv environment")
    parser.add_argument("--factor", type=float, help="wall-time factor, e.g. 1.10 (overrides the config)")
    parser.add_argument("--markdown", type=Path, metavar="OUT", help="also write the Markdown report to OUT")
    parser.add_argument(
        "--json",
        type=Path,
        metavar="OUT",
        help="also write the verdicts as JSON to OUT (each benchmark's verdict, ratio, threshold, MDC; "
        "exit code and its reason; why a comparison is incomplete)",
    )
    parser.add_argument("--show-unchanged", action="store_true", help="list unchanged benchmarks too")
    add_bench_option(
        parser,
        "judge only benchmarks matching REGEX (repeatable; asv's name or a case's readable "
        "key, as `benchkit list` prints them); a selected benchmark without a number on HEAD fails",
    )
    add_damage_option(parser)
    parser.set_defaults(func=_cmd_check)
