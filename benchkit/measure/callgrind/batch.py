"""One batch's state while it runs, and turning a finished child's dumps into its `CaseCount`."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit.measure.callgrind.dumps import read_function_counts, standardize
from benchkit.measure.callgrind.place import Place
from benchkit.measure.callgrind.policy import (
    measured_dumps,
)
from benchkit.measure.callgrind.results import CaseCount
from benchkit.measure.callgrind.template import (
    Template,
    describe_status,
    log_tail,
)
from benchkit.util import cache_dir

if TYPE_CHECKING:
    from benchkit.define.expand import Case
    from benchkit.measure.cpp.shards import CppSuite


@dataclasses.dataclass
class Batch:
    root: Path
    cases: list[Case]
    names: list[str]  # file name of each case (its fingerprint)
    case_timeout: float
    progress: Callable[[str], None]
    cpp_suite: CppSuite  # where the C++ cases' counting functions are compiled
    place: Place  # where the worker runs, under the same names in every batch
    specs: dict[int, dict[str, Any] | None] = dataclasses.field(default_factory=dict)  # None: not run
    preset: dict[int, CaseCount] = dataclasses.field(default_factory=dict)  # skipped, compile failed
    results: dict[int, CaseCount] = dataclasses.field(default_factory=dict)
    # (index, wait status, child pid, seconds, note) of cases whose dumps await parsing
    finished: queue.Queue[tuple[int, int | None, int, float, str] | None] = dataclasses.field(
        default_factory=queue.Queue
    )
    done: int = 0
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    keep_files: bool = False
    templates: list[Template] = dataclasses.field(default_factory=list)
    stopping: threading.Event = dataclasses.field(default_factory=threading.Event)
    # Every runnable case is in the work queue (Python cases go in before the C++ compile)
    queued_all: threading.Event = dataclasses.field(default_factory=threading.Event)
    started: float = dataclasses.field(default_factory=time.monotonic)
    # How long nested templates took to start (scheduling, as case durations)
    template_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    cpp_compile_seconds: float = 0.0  # while the Python cases are counted

    def record(self, index: int, count: CaseCount) -> None:
        with self.lock:
            self.results[index] = count
            self.done += 1
            elapsed = time.monotonic() - self.started
            if count.status == "ok":
                what = f"{count.instructions:,.1f}"
            else:
                what = (
                    f"{count.status.upper()}: {count.error.strip().splitlines()[-1] if count.error else ''}"
                )
            self.progress(
                f"[{self.done:>{len(str(len(self.cases)))}}/{len(self.cases)} {elapsed:5.0f}s] "
                f"{self.cases[index].key}: {what}"
            )


def outcome(batch: Batch, index: int, status: int | None, pid: int, elapsed: float, note: str) -> CaseCount:
    """Read a finished child's result line and dumps into a `CaseCount`."""
    key = batch.cases[index].key
    case_dir = batch.root / "cases"
    name = batch.names[index]
    try:
        text = (case_dir / f"{name}.result").read_text(errors="replace")
    except FileNotFoundError:
        text = ""
    try:
        fields = text.split()
        if len(fields) != 3 or fields[0] != "ok" or note:
            if text.startswith("failed\n") and not note:
                return CaseCount(key, "failed", error=text.removeprefix("failed\n"), seconds=elapsed)
            reason = note or (f"worker {describe_status(status)}" if status is not None else "worker lost")
            log = log_tail(case_dir / f"{name}.log")
            return CaseCount(key, "failed", error=f"{reason}\n{log}".strip(), seconds=elapsed)
        number, probe = int(fields[1]), int(fields[2])
        dumps = [batch.root / f"cg.{pid}.{i}" for i in measured_dumps(number)]
        missing = [str(d) for d in dumps if not d.exists()]
        if missing:
            return CaseCount(key, "failed", error=f"callgrind wrote no dump {missing}", seconds=elapsed)
        # Generated code is named by the real folder or the place's link to it.
        compile_caches = (inductor_root(), batch.place.root / "inductor")
        profiles = [standardize(read_function_counts(d), compile_caches) for d in dumps]
        totals = [sum(p.values()) for p in profiles]
        best = min(totals)
        chosen = profiles[totals.index(best)]
        return CaseCount(
            key,
            "ok",
            instructions=best / number,
            number=number,
            repeat_totals=tuple(totals),
            probe=probe,
            functions=chosen,
            seconds=elapsed,
        )
    finally:
        for path in [] if batch.keep_files else batch.root.glob(f"cg.{pid}.*"):
            path.unlink(missing_ok=True)


def inductor_root() -> Path:
    """Per torch build and counting code, each case's torch.compile cache
    (`TORCHINDUCTOR_CACHE_DIR`): code compiled by another version of the worker (other
    paths, another launch) may not load, and compiling in a counted run moves its count."""
    from benchkit.measure.callgrind.count_cache import counting_code_key
    from benchkit.util import content_key, torch_build_id

    return cache_dir("callgrind", "inductor", content_key(torch_build_id(), counting_code_key()))


def bytecode_root() -> Path:
    """Per torch build, Python and counting code, the bytecode the worker imports
    (the place's ``pyc``, `PYTHONPYCACHEPREFIX`), kept across batches."""
    import sys

    from benchkit.measure.callgrind.count_cache import counting_code_key
    from benchkit.util import content_key, torch_build_id

    return cache_dir("callgrind", "pyc", content_key(torch_build_id(), counting_code_key(), sys.version))
