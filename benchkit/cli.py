"""The `benchkit` command line.

Each subcommand lives in the module that owns its work; that module exposes
``register(subparsers)`` which adds its parser and sets ``func`` (taking the
parsed args, returning an exit code). Modules are imported only when listed
here, so `benchkit --help` stays fast as long as they import torch lazily.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from benchkit.errors import UserError

# Order is the order in `benchkit --help`.
_COMMAND_MODULES = (
    "benchkit.commands.cases",  # list, run
    "benchkit.callgrind_track",  # counts
    "benchkit.profiles",  # diff
    "benchkit.operators",  # operators
    "benchkit.history",  # history init/add/list
    "benchkit.check",  # check
    "benchkit.site",  # publish
    "benchkit.mainjob",  # main
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchkit",
        description="Historical performance tracking for PyTorch on asv.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue  # subcommand not built yet
            raise
        module.register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
