"""The `benchkit` command line: one thin module per command in this package.

Each exposes ``register(subparsers)``, which adds its parser and sets ``func``
(taking the parsed args, returning an exit code); the work is done by the stage
modules, which know nothing of argparse. Commands import torch lazily so that
`benchkit --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from benchkit.errors import UserError

# Order is the order in `benchkit --help`.
_COMMAND_MODULES = (
    "benchkit.cli.cases",  # list, run
    "benchkit.cli.counts",
    "benchkit.cli.diff",
    "benchkit.cli.operators",
    "benchkit.cli.history",  # history init/add/list
    "benchkit.cli.check",
    "benchkit.cli.regressions",
    "benchkit.cli.publish",
    "benchkit.cli.export",
    "benchkit.cli.backfill",
    "benchkit.cli.main_job",  # main
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchkit",
        description="Historical performance tracking for PyTorch on asv.",
    )
    from benchkit import __version__

    parser.add_argument("--version", action="version", version=f"benchkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"benchkit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"benchkit {args.command}: interrupted", file=sys.stderr)
        return 130
