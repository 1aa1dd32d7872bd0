"""One job per checkout: a kernel lock on the checkout's asv state.

`benchkit main`, `backfill` and `publish` hold ``.asv/benchkit.lock`` (beside the
asv config) while they run: ``flock`` on an open file, which the kernel drops when
the holder exits, even under ``kill -9``, so it can never be left stale. The file's
text names the holder (pid, command, since when) for the message a second job shows.

asv's own commands start benchkit's build step; `check_asv_step` refuses there when
another process holds the lock, so a plain ``asv run`` beside a benchkit job stops
before it tears down the job's environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from benchkit.errors import UserError

LOCK_NAME = "benchkit.lock"

# Locks this process holds, by path: a job that calls another (main -> publish) takes it once.
_held: dict[Path, int] = {}


@dataclasses.dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    since: float  # seconds since the epoch

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} (`{self.command}`, since {when})"


class CheckoutBusy(UserError):
    """Another job holds the checkout's lock and the caller would not wait."""


def lock_path(conf_dir: Path) -> Path:
    return conf_dir / ".asv" / LOCK_NAME


def _read_holder(fd: int) -> Holder | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
        return Holder(int(data["pid"]), str(data["command"]), float(data["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # the holder has not written its name yet


def _describe(holder: Holder | None) -> str:
    return holder.describe() if holder else "another process (it has not named itself yet)"


def _command_line() -> str:
    args = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else ["python"]
    if args[0] == "__main__.py":
        args[0] = "benchkit"
    return " ".join(args)


@contextlib.contextmanager
def job_lock(conf_path: Path, wait: bool = True) -> Iterator[None]:
    """Hold the lock of the checkout of asv config `conf_path` while the block runs.

    Busy: wait (saying who holds it), or raise `CheckoutBusy` when ``wait`` is False.
    """
    path = lock_path(conf_path.resolve().parent)
    if path in _held:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # not inherited by children (O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read_holder(fd))
            where = path.parent.parent
            if not wait:
                raise CheckoutBusy(
                    f"{where} is in use by {holder}; one benchkit job per checkout at a time "
                    "(without --no-wait this job waits for it)"
                ) from None
            print(f"benchkit: waiting for {holder} to finish with {where}", file=sys.stderr, flush=True)
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            print(
                f"benchkit: {where} is free after {time.monotonic() - started:.0f} s; going on",
                file=sys.stderr,
                flush=True,
            )
        me = {"pid": os.getpid(), "command": _command_line(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        _held[path] = fd
        try:
            yield
        finally:
            del _held[path]
    finally:
        os.close(fd)  # releases the lock


def _ancestors() -> set[int]:
    found = set()
    pid = os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command's name
    return found


def check_asv_step(conf_dir: Path) -> None:
    """Inside an asv command: go on when the lock is free or held by a benchkit job that started
    this asv; refuse (`CheckoutBusy`) when another job holds it."""
    path = lock_path(conf_dir)
    if not path.is_file():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return  # free (released when fd closes)
        except BlockingIOError:
            holder = _read_holder(fd)
        if holder is not None and holder.pid in _ancestors():
            return
        raise CheckoutBusy(
            f"{conf_dir} is in use by {_describe(holder)}; this asv command would tear down its "
            "environments: run it when that job has finished"
        )
    finally:
        os.close(fd)
