"""Measure cases in isolated processes: a crash or hang costs one case, not the run.

Workers fork from a forkserver that has imported torch once, so a case costs a
fork rather than a torch import. The worker knows nothing of the suite: it gets
one `TimerArgs` (plus the C++ shard layout) and sends back a JSON-able dict;
failures come back as data (the formatted traceback), never as exceptions.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from benchkit.define.api import TimerArgs


@dataclasses.dataclass(frozen=True)
class Outcome:
    key: str
    status: str  # "ok" | "failed" | "skipped"
    block_size: int = 0
    block_seconds: tuple[float, ...] = ()
    error: str = ""
    elapsed: float = 0.0


def _measure(
    conn: Connection, args_json: str, label: str, cpp_suite: Any, cores: list[int], min_run_time: float
) -> None:
    """Child process body. Sends exactly one JSON message."""
    from benchkit.measure.walltime.timing import CaseSkipped, blocked_autorange, prepare

    os.sched_setaffinity(0, cores)
    try:
        args = TimerArgs.from_json(json.loads(args_json))
        timing = blocked_autorange(prepare(args, label, cpp_suite), min_run_time=min_run_time)
        message = {"status": "ok", "block_size": timing.block_size, "block_seconds": timing.block_seconds}
    except CaseSkipped as e:
        message = {"status": "skipped", "error": str(e)}
    except BaseException:
        message = {"status": "failed", "error": traceback.format_exc()}
    conn.send_bytes(json.dumps(message).encode())
    conn.close()


def _context() -> multiprocessing.context.BaseContext:
    ctx = multiprocessing.get_context("forkserver")
    # Importing torch creates no thread pools, so forking from this server is safe.
    ctx.set_forkserver_preload(
        ["torch", "benchkit.measure.walltime.timing", "benchkit.measure.walltime.worker"]
    )
    return ctx


class CoreAllocator:
    """Hands out CPU cores so concurrently timed cases never share one.

    A case with N threads takes N cores (all of them if N is larger), so
    multi-threaded cases run alone on a small machine instead of being
    measured while competing for cores.
    """

    def __init__(self, cores: Sequence[int] | None = None) -> None:
        self.free = sorted(cores if cores is not None else os.sched_getaffinity(0))
        self.total = len(self.free)
        self.cond = threading.Condition()

    def acquire(self, count: int) -> list[int]:
        count = min(max(count, 1), self.total)
        with self.cond:
            self.cond.wait_for(lambda: len(self.free) >= count)
            taken, self.free = self.free[:count], self.free[count:]
            return taken

    def release(self, cores: list[int]) -> None:
        with self.cond:
            self.free = sorted(self.free + cores)
            self.cond.notify_all()


def run_case(
    key: str,
    args: TimerArgs,
    cpp_suite: Any,
    cores: list[int],
    timeout: float,
    min_run_time: float,
) -> Outcome:
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    start = time.monotonic()
    process = ctx.Process(
        target=_measure,
        args=(child, json.dumps(args.to_json()), key, cpp_suite, cores, min_run_time),
        daemon=True,
    )
    process.start()
    child.close()
    message: dict[str, Any] | None = None
    if parent.poll(timeout):
        try:
            message = json.loads(parent.recv_bytes())
        except EOFError:
            message = None
    process.join(5 if message is not None else 0.1)
    elapsed = time.monotonic() - start
    if process.is_alive():
        process.kill()
        process.join()
        if message is None:
            return Outcome(key, "failed", error=f"timed out after {timeout:.0f}s", elapsed=elapsed)
    if message is None:
        code = process.exitcode
        return Outcome(key, "failed", error=f"worker died (exit code {code})", elapsed=elapsed)
    return Outcome(
        key,
        message["status"],
        block_size=message.get("block_size", 0),
        block_seconds=tuple(message.get("block_seconds", ())),
        error=message.get("error", ""),
        elapsed=elapsed,
    )


def run_cases(
    cases: Sequence[tuple[str, TimerArgs]],
    cpp_suite: Any,
    jobs: int | None = None,
    timeout: float = 300.0,
    min_run_time: float = 0.2,
    on_done: Callable[[Outcome, int, int], None] | None = None,
) -> list[Outcome]:
    """Measure all cases, `jobs` at a time, each pinned to its own cores."""
    from benchkit.measure.cpp.torchscript import ensure_artifacts

    # Missing TorchScript artifacts in one scripting process; a case whose model does not
    # script is skipped by its worker, with torch's reason.
    ensure_artifacts([args.torchscript for _, args in cases if args.torchscript is not None])
    allocator = CoreAllocator()
    jobs = min(jobs or allocator.total, allocator.total)
    outcomes: dict[str, Outcome] = {}
    lock = threading.Lock()
    pending = list(cases)

    def work() -> None:
        while True:
            with lock:
                if not pending:
                    return
                key, args = pending.pop(0)
            cores = allocator.acquire(args.num_threads)
            try:
                outcome = run_case(key, args, cpp_suite, cores, timeout, min_run_time)
            finally:
                allocator.release(cores)
            with lock:
                outcomes[key] = outcome
                if on_done:
                    on_done(outcome, len(outcomes), len(cases))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [outcomes[key] for key, _ in cases]
