"""Options several commands share: waiting for the checkout's lock, damaged results files."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="exit (2) when another benchkit job uses this checkout instead of waiting for it",
    )


def add_damage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skip-damaged",
        action="store_true",
        help="leave unreadable asv results files out (listed in the output) instead of failing",
    )


def add_profile_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--profile`` (a switch, as in asv) and ``--profile-dir DIR`` (default ./log); `what` says
    what the switch saves."""
    parser.add_argument("--profile", action="store_true", help=what)
    parser.add_argument(
        "--profile-dir",
        type=Path,
        default=Path("log"),
        metavar="DIR",
        help="where --profile writes (default: ./log)",
    )
