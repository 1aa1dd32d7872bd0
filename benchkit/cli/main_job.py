"""`benchkit main`: the whole job, from nothing to a published site (see `benchkit.mainjob`)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from benchkit import mainjob
from benchkit.cli.history import add_pip_options, pip_source
from benchkit.cli.options import add_damage_option, add_job_options
from benchkit.errors import UserError
from benchkit.mainjob import run_main_job
from benchkit.rounds_policy import FIRST_LOOK_ROUNDS, MAX_ROUNDS, MOVED_MAX_ROUNDS, WALL_TIME_ROUNDS
from benchkit.stats import MIN_ROUNDS


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _cmd_main(args: argparse.Namespace) -> int:
    if shutil.which("git") is None:
        raise UserError("git is needed for the torch history and asv; install it first")
    conf, checkout = args.asv_config, None
    if not conf.is_file() and conf == Path("asv.conf.json"):
        from benchkit.history.builds import source

        checkout = source.torch_checkout(Path.cwd())
        if checkout is not None:  # inside a PyTorch checkout: it is the repository asv measures
            if args.build:
                raise UserError(
                    "--build adds to the wheel history; inside a PyTorch checkout, check out a commit"
                )
            conf = source.source_project(checkout)
    try:
        return run_main_job(
            conf,
            builds=args.build,
            include_index=not args.no_index,
            rounds=args.rounds,
            max_rounds=args.max_rounds,
            rerun=args.rerun,
            bench=args.bench,
            machine=args.machine,
            source=pip_source(args),
            checkout=checkout,
            wait=not args.no_wait,
            skip_damaged=args.skip_damaged,
            baseline=args.baseline,
        )
    except KeyboardInterrupt:
        print(
            "benchkit main: interrupted. Run it again to resume; commits with results are kept.",
            file=sys.stderr,
        )
        return 130


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "main",
        help="the whole job: torch history -> asv run on every build -> html/ -> what changed",
        description=(mainjob.__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument(
        "--rounds",
        type=_positive,
        metavar="N",
        help=f"wall-time processes per build, the same for every wall time (default: {FIRST_LOOK_ROUNDS}, "
        f"then more, up to {MAX_ROUNDS} ({MOVED_MAX_ROUNDS} where the case's instruction count moved) "
        f"within what {WALL_TIME_ROUNDS} fixed rounds would cost, for those whose verdict is still "
        "open); the gate sees smaller "
        f"changes with more, roughly as 1/sqrt(N); under {MIN_ROUNDS} it judges wall times by the "
        "history alone",
    )
    parser.add_argument(
        "--max-rounds",
        type=_positive,
        metavar="M",
        help="the rounds every wall time whose verdict is open after the first look gets "
        f"(default: up to {MAX_ROUNDS}, {MOVED_MAX_ROUNDS} where the count moved, shared within what "
        f"{WALL_TIME_ROUNDS} fixed rounds would cost; "
        "with --rounds N: N, no rounds added)",
    )
    parser.add_argument(
        "--rerun", action="store_true", help="measure commits that already have results again"
    )
    parser.add_argument(
        "--build",
        action="append",
        metavar="WHEEL",
        help="torch builds for the history instead of the defaults (repeatable: wheel file or "
        "requirement); default: the installed torch and another release of pip's sources "
        "(newer, else older; of the same flavour where one exists)",
    )
    parser.add_argument(
        "--no-index",
        action="store_true",
        help="only the installed torch: no other release from pip's sources in the default builds",
    )
    add_pip_options(parser)
    parser.add_argument(
        "--bench", "-b", action="append", default=[], help="only benchmarks matching this regex"
    )
    parser.add_argument("--machine", help="asv machine name (default: this host's)")
    parser.add_argument(
        "--baseline",
        metavar="TAG_OR_COMMIT",
        help="also judge every measured build against this build of main (e.g. the last release's tag); "
        "each is always judged against its predecessor",
    )
    add_job_options(parser)
    add_damage_option(parser)
    parser.add_argument(
        "--asv-config",
        type=Path,
        default=Path("asv.conf.json"),
        help="default: ./asv.conf.json; inside a PyTorch checkout without one, a config measuring "
        "that checkout (results kept in benchkit's .asv/source/)",
    )
    parser.set_defaults(func=_cmd_main)
