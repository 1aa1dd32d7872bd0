"""`benchkit history init|add|list`: the torch history asv measures (see `benchkit.history.repo`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchkit.history.repo import (
    DEFAULT_INDEX_REQUIREMENT,
    DEFAULT_LOCAL_WHEEL,
    MAIN_BRANCH,
    HistoryRepo,
    add_build,
    default_builds,
    history_rows,
    init_history,
    log,
    record_for,
    repo_from_asv_config,
)


def _repo(args: argparse.Namespace) -> HistoryRepo:
    return HistoryRepo(args.repo.resolve() if args.repo else repo_from_asv_config(args.asv_config))


def _cmd_init(args: argparse.Namespace) -> int:
    repo = _repo(args)
    builds = list(args.builds) or default_builds(include_index=not args.no_index)
    optional = [] if args.builds else [DEFAULT_INDEX_REQUIREMENT]
    added = init_history(repo, builds, optional=optional)
    log(f"{repo.path}: {len(added)} build(s) added")
    _print_rows(history_rows(repo))
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    repo = _repo(args)
    record = record_for(args.build, note=args.note)
    add_build(repo, record, branch=args.branch, tag=args.tag, allow_duplicate=args.allow_duplicate)
    return 0


def _print_rows(rows: Sequence[tuple[str, ...]]) -> None:
    header = ("branch", "commit", "built", "torch", "git_version", "tags")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _cmd_list(args: argparse.Namespace) -> int:
    rows = history_rows(_repo(args))
    if not rows:
        print("(empty history)")
    _print_rows(rows)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "history",
        help="manage the torch history asv measures (one git commit per torch build)",
        description=__doc__.split("\n\n")[0],
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", type=Path, help="history repository (default: `repo` of asv.conf.json)")
    common.add_argument(
        "--asv-config", type=Path, help="asv config naming the repository (default: ./asv.conf.json)"
    )
    sub = parser.add_subparsers(dest="history_command", metavar="ACTION", required=True)

    init = sub.add_parser(
        "init",
        parents=[common],
        help="create the history from wheels/requirements (default: this machine's two torch builds)",
    )
    init.add_argument(
        "builds",
        nargs="*",
        metavar="BUILD",
        help=f"wheel files or torch requirements (default: {DEFAULT_LOCAL_WHEEL} and "
        f"{DEFAULT_INDEX_REQUIREMENT} when the index has it)",
    )
    init.add_argument(
        "--no-index", action="store_true", help=f"leave {DEFAULT_INDEX_REQUIREMENT} out of the defaults"
    )
    init.set_defaults(func=_cmd_init)

    add = sub.add_parser("add", parents=[common], help="append one torch build (wheel file or requirement)")
    add.add_argument(
        "build", metavar="WHEEL", help="a torch wheel file, or a requirement such as torch==2.14.1"
    )
    add.add_argument(
        "--branch", default=MAIN_BRANCH, help="branch to add to (new branches start at main's tip)"
    )
    add.add_argument("--tag", help="tag name (default: torch-VERSION, numbered when taken)")
    add.add_argument("--note", help="free text kept in the build record, e.g. what the build changes")
    add.add_argument("--allow-duplicate", action="store_true", help="add a wheel already on the branch again")
    add.set_defaults(func=_cmd_add)

    show = sub.add_parser("list", parents=[common], help="show the builds on every branch")
    show.set_defaults(func=_cmd_list)
