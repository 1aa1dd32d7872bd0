"""C++ cases: the counting functions compiled into shards laid out like the timing
shards of `benchkit.measure.cpp.shards` (same layout and content-keyed cache).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchkit.measure.callgrind.control import valgrind_headers

if TYPE_CHECKING:
    from benchkit.define.expand import Case
    from benchkit.measure.cpp.shards import Shard, Snippet


_COUNT_PRELUDE = """\
#include <cstdint>
#include <functional>
#include <torch/extension.h>
#include <pybind11/functional.h>
#include "{callgrind_h}"
"""

# Per-snippet counting function. Python passes `after_probe`, which reads the
# probe's dump and returns the executions per repeat.
_COUNT_FUNCTION = """
void {name}(int64_t warmup, int64_t repeats, int64_t single_execution_repeats,
            const std::function<int64_t()>& after_probe) {{
  // As in C++ programs (autograd refuses to run under the GIL); pybind11 takes
  // the GIL back to call `after_probe`.
  pybind11::gil_scoped_release no_gil;
  torch::set_num_threads({threads});
{setup}
  // One copy of the statement (compile time), called from every loop.
  auto benchkit_stmt = [&]() {{
{stmt}
  }};
  for (int64_t benchkit_i = 0; benchkit_i < warmup; benchkit_i++) benchkit_stmt();
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
  benchkit_stmt();
  CALLGRIND_DUMP_STATS_AT("probe");
  const int64_t number = after_probe();
  const int64_t rounds = number > 1 ? repeats : single_execution_repeats;  // as repeats_for()
  for (int64_t benchkit_r = 0; benchkit_r < rounds; benchkit_r++) {{
    CALLGRIND_ZERO_STATS;
    for (int64_t benchkit_i = 0; benchkit_i < number; benchkit_i++) benchkit_stmt();
    CALLGRIND_DUMP_STATS_AT("repeat");
  }}
}}
"""


def count_function_name(snippet: Snippet) -> str:
    return f"count_{snippet.key}"


def count_shard_class() -> type[Shard]:
    """`cpp_batch.Shard` with counting functions instead of timing ones (same layout and cache)."""
    global _CountShard
    if _CountShard is None:
        from benchkit.measure.cpp.shards import Shard

        @dataclasses.dataclass(frozen=True)
        class CountShard(Shard):
            FUNCTION = _COUNT_FUNCTION
            PREFIX = "benchkit_count"

            def prelude(self) -> str:
                return _COUNT_PRELUDE.format(callgrind_h=valgrind_headers() / "callgrind.h")

            def function_name(self, snippet: Snippet) -> str:
                return count_function_name(snippet)

        _CountShard = CountShard
    return _CountShard


_CountShard: type[Shard] | None = None


def count_shards(cases: Sequence[Case]) -> list[Shard]:
    """The counting shards for the C++ cases, laid out like the timing shards."""
    from benchkit.define.api import Language
    from benchkit.measure.cpp.shards import Snippet, layout

    snippets = [Snippet.of(c.timer_args) for c in cases if c.timer_args.language is Language.CPP]
    cls = count_shard_class()
    return [cls(s.global_setup, s.snippets) for s in layout(snippets)]


def library_for(snippet: Snippet, shards: Sequence[Shard]) -> tuple[str, Path] | None:
    """(module name, built library) holding `snippet`: its shard, or, when that shard
    failed to compile and was rebuilt case by case, its own single-case shard."""
    from benchkit.measure.cpp.shards import _library_path, is_built

    shard = next((s for s in shards if snippet in s.snippets), None)
    alone = count_shard_class()("" if shard is None else shard.global_setup, (snippet,))
    for candidate in (shard, alone):
        if candidate is not None and is_built(candidate):
            return candidate.name, _library_path(candidate)
    return None
