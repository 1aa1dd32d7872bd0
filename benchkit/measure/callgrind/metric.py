"""asv's ``track_instructions``: one batch per commit, shared through ``setup_cache``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from benchkit.measure.callgrind.results import BatchResult, CaseCount, ValgrindUnavailable, valgrind_version
from benchkit.measure.callgrind.supervisor import collect
from benchkit.names import CASES_MODULE, BenchmarkName, Metric

if TYPE_CHECKING:
    from benchkit.define.expand import Case


def suite_timeout(n_cases: int) -> float:
    """asv's limit for the one batch: C++ compile of a cold cache plus a generous
    10 s per case (many times what a case of the standard suite needs)."""
    return 1200.0 + 10.0 * n_cases


class InstructionCountMetric:
    """asv ``track_instructions`` (unit "instructions", per execution) for every case.

    All these benchmarks share one ``setup_cache``: a single batch counts the
    cases this asv command selected (`benchkit.measure.selection`) that have no stored
    count for this torch build yet (`benchkit.measure.callgrind.count_cache`), so later rounds and
    later selections reuse the counts; it stores the function-level profiles
    beside asv's results (`benchkit.measure.callgrind.profiles`). ``module`` is the suite module's
    name as asv sees it (for matching ``-b``). Each benchmark only looks its case
    up. Without valgrind the batch reports why and every instruction benchmark
    is skipped; wall-time benchmarks are unaffected. ``cpp_suite`` (a
    `benchkit.measure.cpp.shards.CppSuite`, the one the wall-time metric uses) shares
    C++ compiles between the two metrics.
    """

    method_name = Metric.INSTRUCTIONS.method

    def __init__(self, cases: Sequence[Case], module: str = CASES_MODULE, cpp_suite: Any = None) -> None:
        suite = tuple(cases)

        def count_instructions() -> dict[str, Any]:
            return _asv_batch(suite, module, cpp_suite)

        count_instructions.timeout = suite_timeout(len(suite))  # type: ignore[attr-defined]
        self._setup_cache = count_instructions

    def make_method(self, case: Case) -> Callable[..., Any]:
        key = case.key

        def track_instructions(self: Any, batch: dict[str, Any]) -> float:
            from asv_runner.benchmarks.mark import SkipNotImplemented

            if batch.get("unavailable"):
                raise SkipNotImplemented(batch["unavailable"])
            entry = batch["counts"].get(key)
            if entry is None:
                raise RuntimeError(f"{key}: not in this commit's instruction-count batch")
            if entry["status"] == "skipped":
                raise SkipNotImplemented(entry["error"])
            if entry["status"] != "ok":
                raise RuntimeError(f"{key}: {entry['error']}")
            return float(entry["instructions"])

        track_instructions.setup_cache = self._setup_cache  # type: ignore[attr-defined]
        track_instructions.unit = Metric.INSTRUCTIONS.unit  # type: ignore[attr-defined]
        track_instructions.timeout = 60  # type: ignore[attr-defined]
        return track_instructions


def _asv_batch(cases: Sequence[Case], module: str, cpp_suite: Any = None) -> dict[str, Any]:
    from benchkit.define.expand import asv_class_name
    from benchkit.measure import selection as asv_selection
    from benchkit.measure.callgrind import count_cache
    from benchkit.util import atomic_write_json

    started = time.monotonic()
    invocation = asv_selection.current_invocation()
    regexes = invocation.regexes if invocation else None
    names = {str(BenchmarkName(module, asv_class_name(c), Metric.INSTRUCTIONS.method)): c for c in cases}
    chosen = asv_selection.selected(names, regexes)
    wanted = [case for name, case in names.items() if name in chosen]
    # The wall-time stage's layout for this command: it may have compiled these shards already.
    from benchkit.define.api import Language
    from benchkit.measure.cpp.shards import CppSuite, Snippet

    cpp = [c for c in cases if c.timer_args.language is Language.CPP]
    key_of_class = {f"{module}.{asv_class_name(c)}": Snippet.of(c.timer_args).key for c in cpp}
    suite = cpp_suite or CppSuite([c.timer_args for c in cpp])
    layout_suite = suite.for_keys(asv_selection.cpp_layout_keys(key_of_class, regexes))
    try:
        store = count_cache.store_dir(valgrind_version())
        stored = count_cache.load(store, wanted)
        missing = [c for c in wanted if c.key not in stored]
        print(
            f"instruction counts: {len(wanted)} of {len(cases)} case(s) selected, "
            f"{len(stored)} already counted for this torch build, {len(missing)} to count",
            flush=True,
        )
        metadata_path = store / "metadata.json"
        new: dict[str, CaseCount] = {}
        if missing:
            result = collect(
                missing, progress=lambda message: print(message, flush=True), cpp_suite=layout_suite
            )
            new = result.counts
            count_cache.save(store, missing, new)
            atomic_write_json(metadata_path, result.metadata)
            metadata = result.metadata
        else:
            metadata = json.loads(metadata_path.read_text()) if metadata_path.exists() else {}
    except ValgrindUnavailable as e:
        message = f"instruction counts unavailable: {e}"
        print(message, file=sys.stderr, flush=True)
        return {"unavailable": message}
    metadata = {
        **metadata,
        "suite_cases": len(cases),
        "selected_cases": len(wanted),
        "counted_cases": len(missing),
        "reused_cases": len(stored),
        "selection": list(regexes) if regexes is not None else None,
    }
    counts = {c.key: stored.get(c.key) or new[c.key] for c in wanted}
    result = BatchResult(counts, metadata, time.monotonic() - started)
    from benchkit.measure.callgrind.profiles import save_asv_profile

    try:
        path = save_asv_profile(result)
        print(f"profiles saved to {path}", flush=True)
    except Exception as e:  # counts are still valid without their profiles
        print(f"profiles not saved: {e}", file=sys.stderr, flush=True)
    return {"counts": {key: count.summary() for key, count in counts.items()}, "metadata": metadata}
