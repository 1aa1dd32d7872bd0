"""One valgrind'ed template process as the supervisor sees it: its command line and
fixed environment, the protocol lines it writes, starting it and warming it up.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit.measure.callgrind.child import WARM_UP_NAME
from benchkit.measure.callgrind.dumps import TYPE_CACHE_MISS
from benchkit.measure.callgrind.place import Place
from benchkit.measure.callgrind.policy import MKL_INSTRUCTIONS, TEMPLATE_START_TIMEOUT
from benchkit.measure.callgrind.results import ValgrindUnavailable


def fixed_environment(place: Place) -> dict[str, str]:
    """The whole environment of a worker: the same size and contents for every batch,
    whoever starts it (the CLI, asv, a test, a backfill worker) and wherever (see `place`),
    so the stack, environ and every path the worker holds start alike."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "MKL_ENABLE_INSTRUCTIONS": MKL_INSTRUCTIONS,
        # No compile-worker pool forked from inside valgrind for torch.compile cases.
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        # Each child sets its case's own; this one only keeps torch's default (a
        # user-named folder in TMPDIR) out of the template.
        "TORCHINDUCTOR_CACHE_DIR": str(place.root / "tmp" / "inductor"),
        **place.environment(),
    }
    # Needed to find torch at all in some installs; constant for one installation.
    if os.environ.get("LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    return env


def aslr_prefix() -> list[str]:
    """``setarch <arch> -R`` when the kernel lets us turn ASLR off, else nothing."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    prefix = [setarch, platform.machine(), "-R"]
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else []


class TemplateDied(Exception):
    pass


class Template:
    """One valgrind'ed template process and the thread reading its protocol lines."""

    def __init__(self, cwd: Path, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as log_file:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float | None) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            raise TemplateDied(self.tail())
        if not line.startswith(prefix):
            raise TemplateDied(f"unexpected worker output {line!r}\n{self.tail()}")
        return line[len(prefix) :]

    def send(self, name: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(f"{name}\n".encode())
            self.process.stdin.flush()
        except OSError as e:
            raise TemplateDied(f"worker stdin closed: {e}\n{self.tail()}") from e

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = self.log.read_text(errors="replace").splitlines()
            return "\n".join(text[-lines:])
        return ""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(sig).name}"
        return f"killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(status)}"


def log_tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def warm_up_fork_loop(template: Template) -> None:
    """Two rounds of the fork loop that run nothing: from then on its state is the same
    before every case."""
    for _ in range(2):
        template.send(WARM_UP_NAME)
        template.expect(f"started {WARM_UP_NAME} ", TEMPLATE_START_TIMEOUT)
        template.expect(f"finished {WARM_UP_NAME} ", TEMPLATE_START_TIMEOUT)


def start_template(make_template: Callable[[], Template]) -> tuple[Template, dict[str, Any]]:
    """A template that has imported torch and run its fork loop twice (steady state)."""
    for attempt in range(3):
        template = make_template()
        try:
            info = json.loads(template.expect("ready ", TEMPLATE_START_TIMEOUT))
            warm_up_fork_loop(template)
            return template, info
        except (TimeoutError, TemplateDied) as e:
            tail = template.tail() if isinstance(e, TimeoutError) else str(e)
            template.close()
            if attempt == 2:
                raise ValgrindUnavailable(f"the valgrind worker does not start:\n{tail}") from e
    raise AssertionError("unreachable")


def template_command(aslr: list[str], place: Place, control: Path) -> list[str]:
    """valgrind running the worker in `place` (its names for the batch folder and the
    control extension: argv is the same in every place)."""
    root = place.run
    return [
        *aslr,
        shutil.which("valgrind") or "valgrind",
        "--tool=callgrind",
        # Less optimisation of translated code: a child translates everything its
        # statement runs anew (instrumented), which costs more than running it.
        "--vex-iropt-level=1",
        "--instr-atstart=no",
        # CPython's type-attribute cache misses: which (type, name) pairs collide in
        # its method cache depends on where the name strings lie, so any change to the
        # heap (a torch commit, this file) moves them. Nothing inside the miss path
        # (walking the MRO's dicts) is counted; the lookup's own cost still is.
        f"--toggle-collect={TYPE_CACHE_MISS}",
        "--collect-atstart=yes",  # after --toggle-collect, which turns it off
        "--dump-line=no",
        f"--callgrind-out-file={root}/cg.%p",
        f"--log-file={root}/valgrind.%p.log",
        *place.python(),
        "-m",
        "benchkit.measure.callgrind.child",
        str(root),
        str(control),
    ]
