"""asv plugin: asv's questions about the machine never block a run without a terminal.

benchkit's asv configs name this module in ``"plugins"`` (``".benchkit.history.asv_machine"``:
asv imports it from the config's folder, or from the installed benchkit, and calls `setup`
before every command). On a runner that ``~/.asv-machine.json`` does not describe yet,
``asv run``, ``asv continuous`` and ``asv find`` ask six questions at a terminal and, without
one, stop with "Run asv at the console the first time to generate one, or run `asv machine
--yes`". Without a terminal (stdin or stdout not a tty) `setup` records asv's own defaults
for this host under the name asv will look up (``--machine`` or the host name), as ``asv
machine --yes`` does, and says so in one line; at a terminal asv's questions are left alone.

It imports only asv and the standard library, and does nothing else: it runs before every
asv command of the project, so it parses nothing for commands that never ask.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence

# The asv commands that load the machine interactively (`Machine.load(interactive=True)` in
# asv/commands/run.py and find.py; continuous runs through Run).
ASKING_COMMANDS = ("run", "continuous", "find")


def setup() -> None:
    """asv's plugin hook: record the machine's defaults when nobody can answer asv's questions."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return  # someone can answer: asv asks as it always does
    try:
        name = machine_to_record(sys.argv[1:])
        if name is not None:
            record_defaults(name)
    except Exception as error:  # a plugin must never stop the asv command it runs before
        print(
            f"benchkit: asv's machine defaults not recorded ({type(error).__name__}: {error}); "
            "`asv machine --yes` records them",
            file=sys.stderr,
        )


def machine_to_record(argv: Sequence[str]) -> str | None:
    """The machine name an asking asv command given `argv` will look up, if
    ``~/.asv-machine.json`` has no entry for it (None: nothing to record)."""
    from asv import util
    from asv.commands import make_argparser
    from asv.machine import Machine, MachineCollection

    if not set(argv) & set(ASKING_COMMANDS):
        return None  # `asv publish`, `asv compare`, ...: no questions, no parser to build
    parser, _ = make_argparser()
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # not asv's command line: not ours to judge
            args, _ = parser.parse_known_args(list(argv))
    except SystemExit:
        return None
    command = getattr(getattr(args, "func", None), "__self__", None)
    if command is None or command.__name__.lower() not in ASKING_COMMANDS:
        return None
    name = getattr(args, "machine", None) or Machine.get_unique_machine_name()
    try:
        MachineCollection.load(name)  # asv's own lookup (an only entry also serves the host name)
    except util.UserError:
        return name
    return None


def record_defaults(name: str) -> None:
    """Save asv's defaults for this host under `name` in ``~/.asv-machine.json``."""
    from asv.machine import Machine, MachineCollection

    # What `asv machine --yes` saves for the host name; under another name it would save the
    # name alone, and the results would not say which CPU they came from.
    info = {**Machine.get_defaults(), "machine": name}
    MachineCollection.save(name, info)
    print(
        f"benchkit: no terminal to ask asv's machine questions at: machine {name!r} recorded "
        f"with asv's defaults ({info['cpu']}, {info['num_cpu']} CPUs, {info['os']}) in "
        f"{MachineCollection.get_machine_file_path()}; `asv machine` changes it",
        file=sys.stderr,
    )
