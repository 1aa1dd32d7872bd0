"""One table of every flag (docs/cli.md) made from the parsers, and one meaning per flag."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchkit.cli import build_parser
from benchkit.cli.flags import table

REPO_ROOT = Path(__file__).resolve().parent.parent
# Flags whose meaning differs between commands, each with the reason it stays so.
KNOWN_DIFFERENT: dict[str, str] = {}


def _flags() -> dict[str, dict[tuple[str, str], list[str]]]:
    seen: dict[str, dict[tuple[str, str], list[str]]] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(f"{name} {sub_name}", sub)
                continue
            for option in action.option_strings:
                kind = (action.dest, type(action).__name__)
                seen.setdefault(option, {}).setdefault(kind, []).append(name)

    walk("benchkit", build_parser())
    return seen


def test_docs_table_is_the_parsers_table() -> None:
    assert (REPO_ROOT / "docs" / "cli.md").read_text() == table(), (
        "run: python -m benchkit.cli.flags > docs/cli.md"
    )


def test_a_flag_means_one_thing_everywhere() -> None:
    differing = {flag: uses for flag, uses in _flags().items() if len(uses) > 1}
    assert set(differing) == set(KNOWN_DIFFERENT), differing


def test_asv_spellings() -> None:
    flags = _flags()
    assert {dest for dest, _ in flags["-b"]} == {"bench"}  # asv's -b/--bench everywhere it exists
    assert {dest for dest, _ in flags["--machine"]} == {"machine"}
    for command in ("list", "run", "counts", "diff", "check", "backfill", "main"):
        assert any(f"benchkit {command}" in uses for uses in flags["-b"].values()), command
