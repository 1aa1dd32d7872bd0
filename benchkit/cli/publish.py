"""`benchkit publish`: asv's site plus benchkit's pages (see `benchkit.report.site`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchkit.cli.options import add_damage_option, add_job_options
from benchkit.report import site
from benchkit.report.site.publish import publish


def _cmd_publish(args: argparse.Namespace) -> int:
    publish(args.asv_config, args.html_dir, args.config, args.skip_damaged, wait=not args.no_wait)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "publish",
        help="asv publish into html/ plus benchkit's changes, why, operators and regressions pages",
        description=(site.__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument("--html-dir", type=Path, help="output folder (default: html_dir of the asv config)")
    parser.add_argument(
        "--config",
        type=Path,
        help="benchkit check thresholds for the changes page "
        "(default: benchkit-check.toml/.json by asv.conf.json)",
    )
    add_damage_option(parser)
    add_job_options(parser)
    parser.set_defaults(func=_cmd_publish)
