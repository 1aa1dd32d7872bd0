"""Running asv from benchkit's jobs: the command line of an ``asv run``, the settings its
benchmark processes are told, and the job's progress lines."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchkit import settings
from benchkit.errors import UserError

STEPS = 5


class Progress:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def step(self, number: int, text: str) -> None:
        elapsed = time.monotonic() - self.start
        print(f"\n==> [{number}/{STEPS}] {text}  (+{elapsed:.0f} s)", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        print(f"    {text}", file=sys.stderr, flush=True)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


def run_asv(
    args: Sequence[str], conf_path: Path, check: bool = True, env: Mapping[str, str] | None = None
) -> int:
    """Run asv on the config, its output streamed to the terminal (asv prints its own progress)."""
    command = [sys.executable, "-m", "asv", *args, "--config", str(conf_path)]
    print("    $ " + " ".join(["asv", *args]), file=sys.stderr, flush=True)
    code = subprocess.run(command, cwd=conf_path.parent, env=None if env is None else dict(env)).returncode
    if check and code != 0:
        raise UserError(f"`asv {' '.join(args)}` failed with exit code {code}")
    return code


def asv_run_args(
    commits: str, bench: Sequence[str], machine: str | None, append: bool = False, interleave: bool = True
) -> list[str]:
    """``commits``: an asv range, e.g. ``ALL`` or ``HASHFILE:path``. Rounds and samples are
    the suite's own (the settings' ``wall_rounds``, in the environment, change the rounds).
    `append`: add the new rounds' samples to the commits' results instead of replacing them.
    `interleave`: a round of every commit, then the next round (else every round of a commit,
    then the next commit, in the order given)."""
    args = ["run", commits, "--record-samples", "--show-stderr"]
    if interleave:
        args.append("--interleave-rounds")
    if append:
        args.append("--append-samples")
    for regex in bench:
        args += ["--bench", regex]
    if machine:
        args += ["--machine", machine]
    return args


def asv_run_settings(
    config: settings.Settings, machine: str, results_dir: Path, rounds: int, bench: Sequence[str]
) -> settings.Settings:
    selection = settings.Selection(
        settings.SelectionSource.GIVEN, uuid.uuid4().hex, tuple(bench) if bench else None
    )
    asv = settings.AsvRunSettings(rounds, machine, results_dir.resolve(), selection)
    return dataclasses.replace(config, asv=asv)
