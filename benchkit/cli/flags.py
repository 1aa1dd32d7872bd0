"""`docs/cli.md`'s table of every flag of every command, made from the parsers themselves
(`python -m benchkit.cli.flags > docs/cli.md`; a test keeps the file in step)."""

from __future__ import annotations

import argparse

from benchkit.cli import build_parser

HEADER = """# Every flag of every command

Made from the command line itself (`python -m benchkit.cli.flags > docs/cli.md`;
`tests/test_cli_table.py` fails when this file and the parsers differ). A flag has one
meaning everywhere, and asv's meaning where asv has the flag: `-b/--bench REGEX`
(repeatable; `--filter` is its older name) selects benchmarks by any name a case has,
`--machine` is asv's machine name, `--asv-config` the asv config (`--config` is always
benchkit's own config file), `--json OUT`/`--markdown OUT` also write a report to OUT,
`--definitions PATH` (repeatable) adds definitions modules and `--no-standard` leaves
the standard suite out. Exit status everywhere: 0 success, 1 the command ran and found
a problem (a regression, a failed case), 2 it could not do what was asked (bad input,
nothing matched the selection, no results), 130 interrupted.

| command | flag | meaning |
| --- | --- | --- |
"""


def _rows(name: str, parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue  # hidden: catches an old spelling to name the new one
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                rows += _rows(f"{name} {sub_name}", sub)
            continue
        flags = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
        text = (action.help or "").replace("|", "\\|").replace("\n", " ")
        if action.help and "%(default)" in action.help:
            text = text.replace("%(default)s", str(action.default))
        rows.append(f"| `{name}` | {flags} | {text} |")
    return rows


def table() -> str:
    return HEADER + "\n".join(_rows("benchkit", build_parser())) + "\n"


if __name__ == "__main__":
    print(table(), end="")
