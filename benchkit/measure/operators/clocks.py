"""How one call is timed, per device: alternating single calls on the CPU, inductor's
GPU benchmarker on CUDA; and the CPU allocator setting that keeps page faults out of
small ops' times."""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any


def median_seconds_cpu(fns: Sequence[Callable[[], Any]], window_s: float) -> list[float]:
    """Median per-call time of each function, calls alternating between them.

    On a shared machine the speed available to a process drifts over
    milliseconds (neighbours, a busy hyperthread sibling); alternating single
    calls gives eager and compiled the same conditions, which operatorbench's
    per-repeat interleaving only does at a coarse grain. The order flips each
    round so neither always runs right after the other. Medians over many
    calls shrug off preemptions; the window adapts the call count to the cost.
    """
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one call would be charged to that op
    try:
        start = time.perf_counter()
        while True:
            for index in order:
                before = time.perf_counter()
                fns[index]()
                samples[index].append(time.perf_counter() - before)
            order.reverse()
            if time.perf_counter() - start >= window_s and len(samples[0]) >= 3:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return [statistics.median(s) for s in samples]


def seconds_cuda(fn: Callable[[], Any]) -> float:
    """GPU time per call via inductor's benchmarker (it flushes L2 so launches are comparable)."""
    import torch

    fn()
    try:
        from torch._inductor.runtime.benchmarking import benchmarker
    except ImportError:  # older builds: plain CUDA events
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(10):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 10 / 1e3
    return benchmarker.benchmark_gpu(fn) / 1e3


_ALLOCATOR_PINNED = False


def keep_allocations_off_fresh_pages() -> None:
    """Stop glibc from mmap-ing (and trimming) blocks up to 32 MB, once per process.

    By default glibc serves a large block with fresh pages from the kernel and
    moves that threshold as the process runs, so whether an op's output costs
    dozens of page faults drifts from call to call and from process to process.
    That cost lands on eager and compiled alike and drowns the kernels'
    difference; with reuse of freed memory every call sees warm pages.
    """
    global _ALLOCATOR_PINNED
    if _ALLOCATOR_PINNED or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # from <malloc.h>
        libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)
        libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        return  # not glibc: its allocator keeps its own policy
    _ALLOCATOR_PINNED = True
