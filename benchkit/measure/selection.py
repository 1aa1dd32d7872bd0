"""Which benchmarks the running asv command selected, seen from inside ``setup_cache``.

asv runs a shared ``setup_cache`` once per environment (and once per round with
``--interleave-rounds``) and does not tell it which benchmarks were selected with
``-b``. Where the selection comes from (`benchkit.settings.Selection`):

* benchkit's main job starts asv itself, so it says the selection and an id of that asv
  command in the settings it hands asv's benchmark processes;
* ``BENCHKIT_ASV_SELECTION=all`` says "everything" and turns the mechanism off;
* otherwise (a user's own ``asv run -b ...``), as a last resort, `command_line_invocation`
  reads the asv command's line from ``/proc``: the process running ``setup_cache`` is
  started by the asv command itself, so that command is the nearest ancestor process whose
  arguments are an asv invocation. It is parsed with asv's own argument parser (run in that
  command's own interpreter, since benchmark environments hold asv_runner, not asv).

asv's own matching rule is applied (``re.search`` of any ``-b`` regex on ``module.Class.method``,
or on ``module.Class.method(p0, p1)`` for one parameter combination, parameter values as
their ``repr``). When the selection cannot be known (no asv ancestor, e.g. ``benchkit
counts``; a command line asv's parser rejects; no ``-b``) the answer is ``None``:
everything. A selection therefore only ever saves work; it never drops a benchmark asv runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchkit import settings
from benchkit.names import CASE_METRICS

_MAX_ANCESTORS = 6


@dataclass(frozen=True)
class AsvInvocation:
    """The asv command that started this process: its identity and ``-b`` regexes."""

    identity: str  # unique for this asv command: its rounds share work under it
    regexes: tuple[str, ...] | None  # None: the whole suite
    pid: int | None = None  # the asv process, when found among the ancestors


def _proc_argv(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _proc_stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks) from /proc/PID/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
    return int(fields[1]), int(fields[19])


def asv_arguments(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``asv`` in a command line (``asv run ...``, ``python -m asv run ...``)."""
    for index, part in enumerate(argv):
        if Path(part).name == "asv" and index <= 1:
            return list(argv[index + 1 :])
        if part == "-m" and index + 1 < len(argv) and argv[index + 1] == "asv":
            return list(argv[index + 2 :])
    return None


_PARSE = """
import contextlib, json, os, sys
from asv.commands import make_argparser
parser, _ = make_argparser()
try:
    with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
        bench = getattr(parser.parse_args(sys.argv[1:]), "bench", None)
except SystemExit:
    bench = None
print(json.dumps([bench] if isinstance(bench, str) else bench or None))
"""


def parse_regexes(arguments: Sequence[str], python: str = sys.executable) -> tuple[str, ...] | None:
    """The ``-b`` regexes of an asv command line, or None when it selects everything or cannot be read.

    asv's own argument parser does the reading, in ``python`` -- the asv command's own
    interpreter: the benchmark environment holds asv_runner, not asv.
    """
    try:
        done = subprocess.run(
            [python, "-c", _PARSE, *arguments], capture_output=True, text=True, timeout=60, check=True
        )
        bench = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not bench or not all(isinstance(regex, str) for regex in bench):
        return None
    for regex in bench:
        try:
            re.compile(regex)
        except re.error:
            return None  # asv would refuse it; do not guess
    return tuple(bench)


def current_invocation(selection: settings.Selection | None = None) -> AsvInvocation | None:
    """The asv command running this process as the settings say it (this process's by
    default), else as its command line says; None: not under asv, or everything selected."""
    selection = selection or settings.current().asv.selection
    if selection.source is settings.SelectionSource.ALL:
        return None
    if selection.source is settings.SelectionSource.GIVEN:
        return AsvInvocation(selection.command, selection.regexes)
    return command_line_invocation()


def command_line_invocation() -> AsvInvocation | None:
    """The last resort: the asv command among this process's ancestors (from ``/proc``), its
    ``-b`` read with asv's own parser; None when there is none."""
    pid = os.getppid()
    for _ in range(_MAX_ANCESTORS):
        if pid <= 1:
            return None
        try:
            arguments = asv_arguments(_proc_argv(pid))
            parent, start = _proc_stat(pid)
            python = os.readlink(f"/proc/{pid}/exe")
        except (OSError, ValueError, IndexError):
            return None
        if arguments is not None:
            # pid and start time: a pid alone may be reused later
            return AsvInvocation(f"{pid}-{start}", parse_regexes(arguments, python), pid)
        pid = parent
    return None


def benchmark_name(name: str, params: Sequence[object] = ()) -> str:
    """The name asv matches ``-b`` against: ``name`` or ``name(repr(p0), repr(p1))``."""
    return f"{name}({', '.join(repr(p) for p in params)})" if params else name


def cpp_layout_keys(key_of_class: Mapping[str, str], regexes: Sequence[str] | None) -> list[str] | None:
    """The C++ snippets to lay out into shards for this asv command, or None for the whole suite.

    ``key_of_class`` maps each C++ case's asv class (``module.Class``) to its snippet key. A
    case counts when asv runs *either* of its C++ benchmarks (`CASE_METRICS`): both metrics'
    ``setup_cache`` then derive the same layout, so they compile the same shards once.
    """
    if regexes is None:
        return None
    names = {f"{cls}.{metric.method}": key for cls, key in key_of_class.items() for metric in CASE_METRICS}
    return sorted({names[name] for name in selected(names, regexes)})


def selected(names: Iterable[str], regexes: Sequence[str] | None) -> set[str]:
    """The names asv would run for these regexes (all of them when ``regexes`` is None)."""
    names = list(names)
    if regexes is None:
        return set(names)
    return {name for name in names if any(re.search(regex, name) for regex in regexes)}
