"""`benchkit backfill`: instruction counts of many torch builds over a Dask cluster
(see `benchkit.history.results.backfill`)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import settings as benchkit_settings
from benchkit.cli.cases import add_bench_option, nothing_matched
from benchkit.cli.options import add_job_options

if TYPE_CHECKING:
    from benchkit.settings import DefineSettings


def _cmd_backfill(args: argparse.Namespace) -> int:
    from benchkit.define.expand import select
    from benchkit.define.loader import load_cases
    from benchkit.errors import UserError
    from benchkit.history.builds.repo import HistoryRepo
    from benchkit.history.lock import job_lock
    from benchkit.history.results import backfill
    from benchkit.history.results.read import load_asv_config

    config = args.asv_config.resolve()
    conf = load_asv_config(config)
    repo = HistoryRepo(Path(conf.repo))
    repo.require()
    commits = backfill.parse_commits(repo, args.revisions)
    cases = select(load_cases(args.definitions), args.bench)
    if not cases:
        raise UserError(nothing_matched(args.bench))
    case_filter = "|".join(f"(?:{p})" for p in args.bench) or None
    # asv's discovery and the workers learn definitions as `asv run` does: from the environment.
    define = benchkit_settings.current().define
    if args.definitions:
        given = [Path(d).resolve() for d in args.definitions]
        define = dataclasses.replace(define, definitions=tuple(dict.fromkeys([*define.definitions, *given])))
    with job_lock(config, wait=not args.no_wait):
        return _backfill(args, conf, config, repo, commits, cases, define, case_filter)


def _backfill(
    args: argparse.Namespace,
    conf: Any,
    config: Path,
    repo: Any,
    commits: list[str],
    cases: list[Any],
    define: DefineSettings,
    case_filter: str | None,
) -> int:
    from distributed import Client, LocalCluster

    from benchkit.define.expand import asv_class_name
    from benchkit.history.results import backfill

    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        cluster = LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
        backfill._say(f"started a LocalCluster of {args.workers} worker process(es)")
    try:
        fingerprint = backfill.expected_fingerprint(client)
        client_settings = dataclasses.replace(benchkit_settings.current(), define=define)
        target = backfill.make_target(
            conf, config.parent, {c.key: asv_class_name(c) for c in cases}, fingerprint, client_settings
        )
        # what the workers must see as the client does: the suite's definitions
        settings = benchkit_settings.to_environ(benchkit_settings.Settings(define=define))
        backfill._say(
            f"{len(commits)} build(s), {len(cases)} case(s) each, into {target.results_dir / target.machine}"
        )
        summary = backfill.run_backfill(
            client, repo, commits, target, case_filter=case_filter, definitions=args.definitions or (),
            settings=settings, wait_for_workers=args.wait,
        )  # fmt: skip
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    backfill._say(
        f"finished in {summary.elapsed:.0f}s: {len(summary.done)} build(s) counted, "
        f"{len(summary.skipped)} already complete, {len(summary.failed)} failed"
        + (f", {len(summary.refused_workers)} worker(s) refused" if summary.refused_workers else "")
    )
    for commit, reason in summary.failed.items():
        backfill._say(f"FAILED {commit[:12]}: {reason}")
    backfill._say(
        f"results: asv machine {target.machine} (benchkit check --machine {target.machine} BASE HEAD)"
    )
    return 0 if summary.ok else 1


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "backfill",
        help="instruction counts of many torch builds over a Dask cluster, into asv's results",
        description="Count the history's builds on a Dask cluster (a LocalCluster without --scheduler); "
        "every build's counts land in asv's results under one logical machine. Exit 0 only when every "
        "build was counted completely.",
    )
    parser.add_argument(
        "revisions", nargs="*", metavar="REV", help="commits or ranges of the torch history (default: main)"
    )
    parser.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler, e.g. tcp://host:8786")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    add_bench_option(parser)
    parser.add_argument(
        "--definitions", action="append", metavar="PATH", help="benchmark definitions module (repeatable)"
    )
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="(default: asv.conf.json)"
    )
    parser.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for workers to join (default 60)"
    )
    add_job_options(parser)
    parser.set_defaults(func=_cmd_backfill)
