"""Small shared helpers: cache locations, atomic writes, torch build identity, a forked map."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import gc
import hashlib
import importlib.util
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from benchkit import settings

T = TypeVar("T")
R = TypeVar("R")

REPO_ROOT = Path(__file__).resolve().parent.parent
_UMASK = os.umask(0)
os.umask(_UMASK)


def cache_dir(*parts: str) -> Path:
    """Persistent cache shared by all processes and asv environments.

    ``BENCHKIT_CACHE_DIR`` overrides the default ``~/.cache/benchkit``. Caches
    are keyed by content (and torch build), so sharing them across commits is safe.
    """
    root = settings.current().cache_dir or Path.home() / ".cache" / "benchkit"
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to `target`; rename it over `target` on success.

    Readers see either the old file or the complete new one, never a half-written one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; published files must be readable
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(target, text.encode())


def atomic_write_json(target: str | os.PathLike[str], data: Any) -> None:
    atomic_write_text(target, json.dumps(data, indent=1, sort_keys=True) + "\n")


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive lock between processes, held while the block runs.

    ``flock`` on an open file: the kernel drops it when its holder exits, even
    under ``kill -9``, so a lock can never be left stale (unlike a lock *file*
    whose existence is the lock, as torch's cpp_extension uses).
    """
    import fcntl

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child process that must import this checkout's benchkit.

    Inside an asv environment benchkit is importable only through the ``sys.path``
    insert of ``benchmarks/__init__.py``, which a child process does not inherit;
    asv also drops the user's PYTHONPATH. Put the checkout first on PYTHONPATH
    explicitly so the child never depends on what happens to be installed.
    """
    env = dict(os.environ if base is None else base)
    parts = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


def content_key(*parts: str, length: int = 16) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:length]


def torch_build_id() -> str:
    """Identity of the installed torch build, read without importing torch.

    ``torch/version.py`` holds the version and the upstream git commit; a wheel's
    ``RECORD`` lists a hash of every file, so a wheel patched in one Python file
    (see `benchkit.history.builds.wheels.patch_wheel`) is a different build too. Source
    builds have no RECORD and are told apart by version.py alone.
    """
    package = torch_package_dir()
    return "no-torch" if package is None else _build_id(package)


def torch_package_dir() -> Path | None:
    """The installed ``torch`` package's folder, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _build_id(package: Path) -> str:
    try:
        version = (package / "version.py").read_text()
    except OSError:
        return "unknown-torch"
    records = sorted(package.parent.glob("torch-*.dist-info/RECORD"))
    record = records[0].read_text() if len(records) == 1 else ""
    return content_key(version, record)


def progress_bar(total: int, unit: str) -> Any:
    """A tqdm bar on stderr: live on a terminal; in logs (asv's, CI's) at most a line every 30 s,
    so a status text (``set_postfix_str``) is shown with the next line rather than forcing one."""
    from tqdm import tqdm

    interactive = sys.stderr.isatty()

    class Bar(tqdm):  # type: ignore[misc]
        def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
            super().set_postfix_str(s, refresh=refresh and interactive)

    return Bar(
        total=total,
        unit=unit,
        file=sys.stderr,
        mininterval=0.5 if interactive else 30.0,
        dynamic_ncols=interactive,
        ncols=None if interactive else 120,
    )


# The function `forked_map`'s workers run: they inherit it by fork, so it needs no pickling.
_FORKED: Any = None


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _call_forked(item: Any) -> Any:
    return _FORKED(item)


def forked_map(fn: Callable[[T], R], items: Sequence[T], min_per_worker: int = 20) -> list[R]:
    """``[fn(item) for item in items]``, split over forked processes, one per usable core, where
    each gets `min_per_worker` items or more (else, or without fork, in this process).

    The workers inherit `fn` and what it refers to (a history's results) instead of receiving
    it pickled; only items and results travel, so both must pickle."""
    global _FORKED
    workers = min(usable_cores(), len(items) // max(1, min_per_worker))
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods() or _FORKED is not None:
        return [fn(item) for item in items]
    try:  # a machine without POSIX semaphores (/dev/shm) has no pool: the items run here
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    except (OSError, NotImplementedError):
        return [fn(item) for item in items]
    _FORKED = fn
    try:
        with pool:
            return list(pool.map(_call_forked, items, chunksize=max(1, len(items) // (workers * 8))))
    finally:
        _FORKED = None


class Beside:
    """`fn()` run in a forked child while this process goes on (`start_beside`); `wait` returns
    once it has ended and raises `RuntimeError` with the child's traceback if it failed. Without
    fork the call runs at once, in this process."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._process: Any = None
        self._pipe: Any = None
        if "fork" not in multiprocessing.get_all_start_methods():
            fn()
            return
        context = multiprocessing.get_context("fork")
        self._pipe, child_end = context.Pipe(duplex=False)
        # Not a daemon: the child may start workers of its own (a daemon may not).
        self._process = context.Process(target=_run_beside, args=(fn, child_end), daemon=False)
        self._process.start()
        child_end.close()

    def wait(self) -> None:
        if self._process is None:
            return
        try:
            failure = self._pipe.recv()
        except EOFError:
            failure = "the process ended without a word"
        self._process.join()
        if failure or self._process.exitcode:
            raise RuntimeError(failure or f"exit code {self._process.exitcode}")

    def stop(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join()


def _run_beside(fn: Callable[[], None], pipe: Any) -> None:
    import traceback

    try:
        fn()
    except BaseException:
        pipe.send(traceback.format_exc())
        pipe.close()
        os._exit(1)
    pipe.send(None)
    pipe.close()


@contextlib.contextmanager
def bulk_load() -> Iterator[None]:
    """Build many long-lived objects (a history's results) without Python's cyclic garbage
    collector, then freeze them (`gc.freeze`) so that later collections skip them. With
    millions of live objects every full collection walks all of them: reading a synthetic
    history of 1,000 builds x 1,400 benchmarks took 55 s with it, 27 s without
    (lab/bench_publish.py). Frozen objects are still freed by reference counting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
