"""`benchkit counts`: Callgrind instruction counts of cases, outside asv."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchkit.cli.cases import add_selection
from benchkit.cli.options import add_profile_options
from benchkit.measure.callgrind.policy import DEFAULT_CASE_TIMEOUT
from benchkit.measure.callgrind.profiles import PROFILE_FILE, profile_path
from benchkit.measure.callgrind.results import BatchResult, ValgrindUnavailable
from benchkit.measure.callgrind.supervisor import collect


# The file `--profile` writes into `--profile-dir`; `benchkit diff` reads it.
def counts_json(result: BatchResult) -> dict[str, Any]:
    """``{case key: {"instructions": N, ...}}`` with the batch's CPU capability on each."""
    capability = result.metadata.get("cpu_capability_under_valgrind")
    return {key: {**count.summary(), "cpu_capability": capability} for key, count in result.counts.items()}


def _cmd_counts(args: argparse.Namespace) -> int:
    from benchkit.cli.cases import selected_cases
    from benchkit.errors import UserError
    from benchkit.util import atomic_write_json

    if args.unexpected:
        if args.profile:  # the spelling the docs gave when --profile took a file
            raise UserError(
                f"--profile is a switch (as in asv and `benchkit operators`): "
                f"`--profile --profile-dir DIR` saves DIR/{PROFILE_FILE}, not {args.unexpected[0]}"
            )
        raise UserError(f"unrecognized arguments: {' '.join(args.unexpected)}")
    cases = selected_cases(args)
    try:
        result = collect(cases, jobs=args.jobs, case_timeout=args.case_timeout, keep_files=args.keep_files)
    except ValgrindUnavailable as e:
        raise UserError(str(e)) from None
    failed = [c for c in result.counts.values() if c.status == "failed"]
    meta = result.metadata
    print(
        f"{len(result.counts) - len(failed)}/{len(result.counts)} case(s) counted in {result.seconds:.0f}s "
        f"({meta['valgrind']}, CPU capability under valgrind: {meta['cpu_capability_under_valgrind']}, "
        f"native: {meta['cpu_capability_native']}, ASLR {meta['aslr']})",
        file=sys.stderr,
    )
    width = max(len(k) for k in result.counts)
    for key, count in result.counts.items():
        value = f"{count.instructions:>14,.1f}" if count.status == "ok" else f"{count.status:>14}"
        print(f"{key:<{width}}  {value}")
    if args.json:
        atomic_write_json(args.json, counts_json(result))
    if args.profile:
        from benchkit.measure.callgrind.profiles import save_profile

        path = save_profile(profile_path(args.profile_dir), result)
        print(f"function-level profile: {path} (`benchkit diff` compares two)", file=sys.stderr)
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "counts",
        help="Callgrind instruction counts of cases (outside asv)",
        description="Count instructions per statement execution under Callgrind, in batches.",
    )
    add_selection(parser)
    parser.add_argument("--json", type=Path, metavar="OUT", help='write {case: {"instructions": N, ...}}')
    add_profile_options(
        parser, f"also save the function-level profile of every case as --profile-dir/{PROFILE_FILE}"
    )
    parser.add_argument("--jobs", type=int, help="valgrind workers (default: one per core)")
    parser.add_argument(
        "--case-timeout", type=float, default=DEFAULT_CASE_TIMEOUT, help="seconds per case (default 300)"
    )
    parser.add_argument("--keep-files", action="store_true", help="keep callgrind dumps and worker logs")
    # counts takes no positional argument; this catches `--profile FILE` (the spelling from
    # before --profile was a switch) to say what it is now instead of argparse's bare complaint.
    parser.add_argument("unexpected", nargs="*", help=argparse.SUPPRESS)
    parser.set_defaults(func=_cmd_counts)
