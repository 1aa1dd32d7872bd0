"""`benchkit history init|add|list`: the torch history asv measures (see `benchkit.history.builds.repo`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchkit.history.builds.defaults import command_source, pick_default_builds
from benchkit.history.builds.repo import (
    MAIN_BRANCH,
    HistoryRepo,
    HistoryRow,
    add_build,
    describe_refs,
    history_rows,
    init_history,
    init_history_records,
    log,
    record_for,
    repo_from_asv_config,
)
from benchkit.history.builds.sources import PipSource


def pip_source(args: argparse.Namespace) -> PipSource:
    return PipSource(
        index_url=args.index_url,
        extra_index_urls=tuple(args.extra_index_url or ()),
        find_links=tuple(args.find_links or ()),
        pre=args.pre,
    )


def add_pip_options(parser: argparse.ArgumentParser) -> None:
    """pip's own options for where torch wheels come from (same names and meaning as pip's)."""
    group = parser.add_argument_group("where pip looks for torch wheels (as in pip; default: pip's config)")
    group.add_argument("--index-url", metavar="URL", help="base URL of a PEP 503 simple index")
    group.add_argument("--extra-index-url", action="append", metavar="URL", help="another index (repeatable)")
    group.add_argument(
        "--find-links",
        action="append",
        metavar="URL_OR_DIR",
        help="a folder or page of wheels (repeatable)",
    )
    group.add_argument(
        "--pre", action="store_true", help="allow pre-releases and nightlies (e.g. 2.15.0.dev20251101)"
    )


def _repo(args: argparse.Namespace) -> HistoryRepo:
    return HistoryRepo(args.repo.resolve() if args.repo else repo_from_asv_config(args.asv_config))


def _cmd_init(args: argparse.Namespace) -> int:
    repo = _repo(args)
    source = command_source(pip_source(args), for_default_builds=not args.builds)
    if args.builds:
        added = init_history(repo, args.builds, source=source)
    else:
        picks = pick_default_builds(include_index=not args.no_index, source=source)
        added = init_history_records(repo, [pick.record for pick in picks])
    log(f"{repo.path}: {len(added)} build(s) added")
    _print_rows(history_rows(repo))
    for line in describe_refs(repo):
        print(line)
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    repo = _repo(args)
    source = command_source(pip_source(args), for_default_builds=False)
    record = record_for(args.build, note=args.note, source=source)
    add_build(repo, record, branch=args.branch, tag=args.tag, allow_duplicate=args.allow_duplicate)
    for line in describe_refs(repo):
        print(line)
    return 0


def _cmd_head(args: argparse.Namespace) -> int:
    repo = _repo(args)
    repo.require()
    if args.branch:
        repo.set_head(args.branch)
    for line in describe_refs(repo):
        print(line)
    return 0


def _print_rows(rows: Sequence[HistoryRow]) -> None:
    table = [HistoryRow.HEADER, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HistoryRow.HEADER))]
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def _cmd_list(args: argparse.Namespace) -> int:
    repo = _repo(args)
    rows = history_rows(repo)
    if not rows:
        print("(empty history)")
        return 0
    _print_rows(rows)
    for line in describe_refs(repo):
        print(line)
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
        help="create the history from wheels/requirements (default: the builds this machine has)",
    )
    init.add_argument(
        "builds",
        nargs="*",
        metavar="BUILD",
        help="wheel files or torch requirements (default: the installed torch, as its wheel when pip "
        "finds it, and the newest newer torch release pip finds)",
    )
    init.add_argument("--no-index", action="store_true", help="only the installed torch: no other release")
    add_pip_options(init)
    init.set_defaults(func=_cmd_init)

    add = sub.add_parser("add", parents=[common], help="append one torch build (wheel file or requirement)")
    add.add_argument(
        "build", metavar="WHEEL", help="a torch wheel file, or a requirement such as torch==2.14.1"
    )
    add.add_argument(
        "--branch",
        default=MAIN_BRANCH,
        help="branch to add to (new branches start at main's tip); HEAD then names this branch, so "
        "`asv continuous main HEAD` compares main's tip with this build",
    )
    add.add_argument("--tag", help="tag name (default: torch-VERSION, numbered when taken)")
    add.add_argument("--note", help="free text kept in the build record, e.g. what the build changes")
    add.add_argument("--allow-duplicate", action="store_true", help="add a wheel already on the branch again")
    add_pip_options(add)
    add.set_defaults(func=_cmd_add)

    head = sub.add_parser("head", parents=[common], help="show main and HEAD, or point HEAD at a branch")
    head.add_argument("branch", nargs="?", help="the branch HEAD names from now on")
    head.set_defaults(func=_cmd_head)

    show = sub.add_parser("list", parents=[common], help="show the builds on every branch")
    show.set_defaults(func=_cmd_list)
