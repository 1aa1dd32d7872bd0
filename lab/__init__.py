"""benchkit's lab: the programs that measure benchkit itself, and their reports (`reports/`).

Run one from the repository root as ``python -m lab.NAME`` (the shell ones as ``bash lab/NAME.sh``),
with benchkit installed (``pip install -e .``); lab/README.md lists the question each answers and
its latest report. benchkit never imports lab, and lab imports benchkit as the installed package.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
REPORTS = Path(__file__).resolve().parent / "reports"
WORK = "<work>"  # what a report shows for a folder of the machine that made it


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path as a report names it: relative to the repository root when inside it, else
    ``<work>/`` and its last part (a temporary or home folder names the machine, not the figure)."""
    text = os.fspath(path)
    if not os.path.isabs(text):
        return text
    resolved = Path(text).resolve()
    if resolved == REPO_ROOT or REPO_ROOT in resolved.parents:
        return resolved.relative_to(REPO_ROOT).as_posix() or "."
    return f"{WORK}/{resolved.name}" if resolved.name else WORK


def _shown_argument(argument: str) -> str:
    name, equals, value = argument.partition("=")
    if equals and name.startswith("--") and os.path.isabs(value):
        return f"{name}={shown_path(value)}"
    if os.path.isabs(argument):
        return shown_path(argument)
    return shlex.quote(argument)


def command_line(module: str, arguments: Sequence[str]) -> str:
    """``python -m lab.MODULE ARGUMENTS`` as a report shows the command that made it: machine
    paths among the arguments shown by `shown_path`."""
    return " ".join(["python", "-m", f"lab.{module}", *(_shown_argument(a) for a in arguments)])
