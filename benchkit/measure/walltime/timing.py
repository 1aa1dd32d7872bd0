"""Wall-time measurement of one case, shared by asv and `benchkit run`.

Why not let asv time a method that runs the statement? asv (asv_runner >= 0.3)
times a single call per sample whenever a benchmark has setup hooks, and even
without them it adds a Python call per iteration around the statement: for a
microsecond-scale statement both are a large part of what is measured.

Instead a case is *prepared* once (setup run, TorchScript artifact loaded, C++
compiled) and then run in blocks: a loop of ``n`` executions that reports its
own duration, exactly like `torch.utils.benchmark.Timer` (Python: the
statement inlined in a loop whose variables are locals, as timeit does; C++: a
compiled loop timed with std::chrono). asv reads those reported durations
through `MeasuredClock`, so asv's statistics apply to the same numbers
`Timer.blocked_autorange` would produce.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit import settings
from benchkit.define.api import Language, TimerArgs, TorchScriptModel
from benchkit.measure.stmt_loop import compile_statement_loop
from benchkit.names import CASES_MODULE, Metric
from benchkit.rounds_policy import WALL_TIME_ROUNDS

# A block should be long enough that clock resolution and the call into the
# loop are negligible (<0.1%), short enough to give asv many samples.
TARGET_BLOCK_SECONDS = 0.01

# Samples per round (asv's ``repeat``): three give each process its fastest sample; more would
# not shrink the between-process part (lab/bench_wall_noise.py compares 3 and 7).
SAMPLES_PER_ROUND = 3

# asv's own warm-up before the first sample (by default a tenth of a second of calls), and its
# choice of ``number`` (one more block before the samples). A process here is already warm when
# asv's first sample ends: that call prepares the case and `PreparedCase.calibrate` runs the
# statement up to a full block before the sample's own block, and the clock asv reads advances
# only by that block. So every call is one block (``number = 1``) and there is no warm-up:
# either would only lengthen every round.
WARMUP_SECONDS = 0.0
CALLS_PER_SAMPLE = 1

# A round's blocks are shorter than `TARGET_BLOCK_SECONDS` (`benchkit run`'s, torch's choice for
# its 0.2 s of measurement): a round is a process, and what a process adds to a sample (where its
# code and buffers landed) does not average out over a longer block, while every millisecond of
# every block is paid in every round of every case. lab/bench_round_cost.py measures the cost
# of a round's parts; docs/verdicts.md gives the verdict figures at this length.
ROUND_BLOCK_SECONDS = 0.005


def wall_time_rounds() -> int:
    """Rounds of ``time_wall`` for this process: ``BENCHKIT_WALL_ROUNDS`` or `WALL_TIME_ROUNDS`."""
    return settings.current().asv.wall_rounds or WALL_TIME_ROUNDS


class CaseSkipped(Exception):
    """The case cannot run on this torch build (e.g. TorchScript unavailable)."""


@dataclasses.dataclass
class PreparedCase:
    """A case ready to time: `run_block(n)` returns the seconds n executions took."""

    run_block: Callable[[int], float]
    block_size: int = 1

    def calibrate(self, target: float = TARGET_BLOCK_SECONDS) -> int:
        """Pick the block size: the smallest power of ten whose block takes >= target.

        The first call also serves as warm-up (lazy initialisation, caches).
        """
        self.run_block(1)
        n = 1
        while True:
            elapsed = self.run_block(n)
            if elapsed >= target or n >= 10**9:
                break
            # Jump close to the target, but at most 10x at a time.
            n = min(n * 10, max(n + 1, int(n * target / max(elapsed, 1e-9) * 1.2)))
        self.block_size = n
        return n

    def use_block(self, n: int) -> None:
        """Take block size `n` that an earlier process calibrated for this case, after one call
        as warm-up; a round's fastest sample, the one judged, is not its first where that
        warm-up is short of a block."""
        self.run_block(1)
        self.block_size = n


def _python_block(args: TimerArgs, label: str) -> Callable[[int], float]:
    import torch

    loop, values = compile_statement_loop(args.stmt, args.setup, {"torch": torch}, label)
    clock = time.perf_counter

    def run_block(n: int) -> float:
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            began, ended = loop(itertools.repeat(None, n), clock, clock, **values)
            return ended - began
        finally:
            if gc_was_enabled:
                gc.enable()

    return run_block


def prepare(args: TimerArgs, label: str = "case", cpp_suite: Any = None) -> PreparedCase:
    """Run setup (once) and return a timer for blocks of executions.

    `cpp_suite` (a `benchkit.measure.cpp.shards.CppSuite`) places C++ cases in shared,
    cached shards; without one a C++ case gets a shard of its own.
    """
    import torch

    if args.torchscript is not None:
        from benchkit.measure.cpp.torchscript import TorchScriptUnavailable, ensure_artifact

        try:
            ensure_artifact(args.torchscript)
        except TorchScriptUnavailable as e:
            raise CaseSkipped(str(e)) from e

    if args.language is Language.CPP:
        from benchkit.measure.cpp.shards import CppSuite

        suite = cpp_suite or CppSuite([args])
        timeit = suite.timeit_function(args)
        return PreparedCase(run_block=lambda n: float(timeit(n)))

    torch.set_num_threads(args.num_threads)
    return PreparedCase(run_block=_python_block(args, label))


class MeasuredClock:
    """A clock that advances only by the time measured blocks report.

    Given to asv as a benchmark's ``timer``: asv computes durations as
    differences of this clock around its calls, so what it records is the
    blocks' own measurement divided by the block size, i.e. seconds per
    execution of the statement.
    """

    def __init__(self) -> None:
        self.elapsed_per_execution = 0.0

    def add(self, seconds: float, executions: int) -> None:
        self.elapsed_per_execution += seconds / executions

    def __call__(self) -> float:
        return self.elapsed_per_execution


MEASURED_CLOCK = MeasuredClock()


@dataclasses.dataclass(frozen=True)
class Timing:
    """Raw block times of one case, the input for torch's Measurement."""

    block_size: int
    block_seconds: tuple[float, ...]


def blocked_autorange(prepared: PreparedCase, min_run_time: float = 0.2) -> Timing:
    """Blocks until `min_run_time` has been measured (as Timer.blocked_autorange does)."""
    n = prepared.calibrate()
    times: list[float] = []
    total = 0.0
    while total < min_run_time or len(times) < 3:
        t = prepared.run_block(n)
        times.append(t)
        total += t
    return Timing(block_size=n, block_seconds=tuple(times))


class WallTimeMetric:
    """asv ``time_wall`` for every case (see the module docstring for the method).

    Preparation happens on the first call, inside the benchmark process, and
    `MEASURED_CLOCK` does not advance during it. C++ cases share one ``setup_cache``
    that compiles, in parallel and before any C++ benchmark runs, the C++ shards of the whole suite or, for a
    ``-b`` selection, shards laid out from the selected cases alone
    (`benchkit.measure.selection.cpp_layout_keys`; the instruction counts use the same
    layout and find them built); built shards are kept by content, so later rounds and
    commands find them built.
    """

    method_name = Metric.WALL_TIME.method

    def __init__(self, cpp_suite: Any, module: str = CASES_MODULE) -> None:
        self.cpp_suite = cpp_suite
        self.rounds = wall_time_rounds()
        suite = cpp_suite
        key_of_class: dict[str, str] = {}  # C++ case's asv class -> snippet key, filled by make_method
        self._key_of_class = key_of_class
        self._module = module
        # Every case's TorchScript model, filled by make_method: the first case that finds its
        # artifact missing builds them all, in one scripting process for the whole suite.
        self._torchscript_models: list[TorchScriptModel] = []

        def compile_cpp_cases() -> dict[str, Any]:
            from benchkit.measure import selection as asv_selection
            from benchkit.measure.cpp.shards import build_all

            invocation = asv_selection.current_invocation()
            keys = asv_selection.cpp_layout_keys(key_of_class, invocation.regexes if invocation else None)
            shards = suite.for_keys(keys).shards
            chosen = "all" if keys is None else str(len(keys))
            print(f"C++: {chosen} selected case(s) in {len(shards)} shard(s)")
            errors = build_all(shards, progress=lambda m: print(m, flush=True))
            return {"errors": errors, "layout": keys}

        compile_cpp_cases.timeout = 3600  # type: ignore[attr-defined]  # cold compile of all shards
        self._setup_cache = compile_cpp_cases

    def make_method(self, case: Any) -> Callable[..., Any]:
        args, label = case.timer_args, case.key
        state: dict[str, PreparedCase] = {}

        if args.torchscript is not None:
            self._torchscript_models.append(args.torchscript)

        def run_one_block(cpp_layout: list[str] | None = None) -> None:
            prepared = state.get("case")
            if prepared is None:
                if args.torchscript is not None and not Path(args.torchscript.path).exists():
                    from benchkit.measure.cpp.torchscript import ensure_artifacts

                    ensure_artifacts(self._torchscript_models)  # errors: `prepare` skips the case
                try:
                    cpp_suite = self.cpp_suite.for_keys(cpp_layout) if args.language is Language.CPP else None
                    prepared = prepare(args, label, cpp_suite)
                except CaseSkipped as e:
                    from asv_runner.benchmarks.mark import SkipNotImplemented

                    raise SkipNotImplemented(str(e)) from e
                prepared.calibrate(ROUND_BLOCK_SECONDS)
                state["case"] = prepared
            MEASURED_CLOCK.add(prepared.run_block(prepared.block_size), prepared.block_size)

        if args.language is Language.CPP:
            from benchkit.define.expand import asv_class_name
            from benchkit.measure.cpp.shards import Snippet

            snippet_key = Snippet.of(args).key
            self._key_of_class[f"{self._module}.{asv_class_name(case)}"] = snippet_key

            def time_wall(self: Any, compiled: dict[str, Any]) -> None:
                error = compiled["errors"].get(snippet_key)
                if error:
                    raise RuntimeError(error)
                run_one_block(compiled["layout"])

            time_wall.setup_cache = self._setup_cache  # type: ignore[attr-defined]
            time_wall.timeout = 600  # type: ignore[attr-defined]
        else:

            def time_wall(self: Any) -> None:  # type: ignore[misc]
                run_one_block()

            time_wall.timeout = 120  # type: ignore[attr-defined]
        time_wall.timer = MEASURED_CLOCK  # type: ignore[attr-defined]
        time_wall.unit = Metric.WALL_TIME.unit  # type: ignore[attr-defined]
        time_wall.rounds = self.rounds  # type: ignore[attr-defined]
        time_wall.repeat = SAMPLES_PER_ROUND  # type: ignore[attr-defined]
        time_wall.warmup_time = WARMUP_SECONDS  # type: ignore[attr-defined]
        time_wall.number = CALLS_PER_SAMPLE  # type: ignore[attr-defined]
        return time_wall
