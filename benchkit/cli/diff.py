"""`benchkit diff BASE HEAD`: instruction-count changes function by function."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from benchkit.cli.cases import add_bench_option, nothing_matched
from benchkit.errors import UserError
from benchkit.measure.callgrind.profiles import load_profile
from benchkit.report.diff import diff_profiles, format_diff, resolve_profiles


def _key_pattern(bench: list[str]) -> str | None:
    """Profiles are keyed by the readable key: `-b` in any form a case has -> a regex over keys."""
    if not bench:
        return None
    from benchkit.define.expand import compile_pattern, select
    from benchkit.define.loader import load_cases

    for pattern in bench:
        compile_pattern(pattern, "-b")
    keys = [case.key for case in select(load_cases(), bench)]
    return "|".join([*(f"(?:{p})" for p in bench), *(f"^{re.escape(k)}$" for k in keys)])


def _cmd_diff(args: argparse.Namespace) -> int:
    paths = resolve_profiles((args.base, args.head), args.asv_config, args.machine, args.env)
    base, head = (load_profile(p) for p in paths)
    diffs = diff_profiles(base, head, _key_pattern(args.bench), args.top)
    if not diffs:
        raise UserError(nothing_matched(args.bench))
    sys.stdout.write(format_diff(diffs, base.label, head.label, args.all))
    if args.json:
        from benchkit.util import atomic_write_json

        atomic_write_json(args.json, {d.key: d.to_json() for d in diffs})
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "diff",
        help="explain instruction-count changes between two commits, function by function",
        description="Per case: the change of instructions per execution and the functions that moved most.",
    )
    parser.add_argument("base", metavar="BASE", help="commit hash (prefix), history ref, or profile file")
    parser.add_argument("head", metavar="HEAD", help="commit hash (prefix), history ref, or profile file")
    add_bench_option(parser)
    parser.add_argument("--top", type=int, default=8, help="functions shown per direction (default 8)")
    parser.add_argument("--all", action="store_true", help="also list unchanged cases")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the diff as JSON")
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument("--machine", help="asv machine name (when results hold several)")
    parser.add_argument("--env", help="asv environment name (when a commit has several)")
    parser.set_defaults(func=_cmd_diff)
