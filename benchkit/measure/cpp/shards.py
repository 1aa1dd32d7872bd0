"""Compile many C++ snippets into a few shared objects, cached by content.

`torch.utils.benchmark`'s C++ Timer compiles one extension per statement into
a per-process temporary directory: a full compile per case, paid again
in every process. Most of that time is torch's headers (parsing them, then
instantiating and emitting their inline code), which does not depend on the
statement. So we put many snippets into one translation unit
(one function each), split into a few shards so two cores can compile in
parallel and an edit to one case recompiles only its shard, and key each
shard's build directory by its source and the torch build.

The layout (which snippet lives in which shard) is a pure function of the set
of snippets, so any process that knows the suite finds a case's shard
without compiling anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.machinery
import importlib.util
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from benchkit import settings
from benchkit.define.api import Language, TimerArgs
from benchkit.measure.callgrind.place import TORCHSCRIPT
from benchkit.measure.cpp.pch import (
    PchFailed,
    build_precompiled_header,
    extra_cflags,
    pch_header,
    worth_precompiling,
)
from benchkit.util import cache_dir, content_key, file_lock, torch_build_id

# Each translation unit pays for torch's headers (less with a precompiled header)
# however few functions it holds, and little per snippet on top: so few, large
# shards. The standard suite's C++ cases make two (one per global setup), one per
# core on a 2-core machine.
SNIPPETS_PER_SHARD = 128

# Per case, a shard holds two functions: one that times the statement and one that
# counts its instructions under Callgrind. One compile serves both metrics (a cold
# shard's cost is almost all torch's headers; the functions themselves add little).

# Timing: the loop reports its own duration, so setup and the Python call into the
# extension are never part of a measurement.
_TIMEIT_FUNCTION = """
double {name}(int64_t n) {{
  pybind11::gil_scoped_release no_gil;
  torch::set_num_threads({threads});
{setup}
  {{  // warm-up
{stmt}
  }}
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; i++) {{
{stmt}
  }}
  auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}}
"""

# Counting (`benchkit.measure.callgrind`): Python passes `after_probe`, which reads
# the probe's dump and returns the executions per repeat. Outside valgrind the
# client requests are a few no-op instructions.
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

# Nothing in a shard's source depends on where torch, the checkout or the cache are: the
# source names the shard, and a shard named by a path would move its cases' instruction
# counts from one place to the next. Callgrind's client-request header (torch ships it;
# torch.utils.benchmark uses it) is found through torch's include folder, and a TorchScript
# artifact by its file name in a folder the process sets (`set_artifact_dir`): the cache's
# for timing, the Callgrind worker's place-relative folder by default.
CALLGRIND_HEADER = "utils/benchmark/utils/valgrind_wrapper/callgrind.h"
_PRELUDE = f"""\
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <torch/extension.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <../{CALLGRIND_HEADER}>

static std::string benchkit_artifact_dir = "{TORCHSCRIPT}";
static std::string benchkit_artifact(const std::string& name) {{
  return benchkit_artifact_dir + "/" + name;
}}
"""
_SET_ARTIFACT_DIR = "set_artifact_dir"


@dataclasses.dataclass(frozen=True)
class Snippet:
    """The C++ parts of one case that shape its compiled code."""

    stmt: str
    setup: str
    global_setup: str
    num_threads: int

    @classmethod
    def of(cls, args: TimerArgs) -> Snippet:
        if args.language is not Language.CPP:
            raise ValueError("only C++ cases are compiled")
        setup = args.setup
        if args.torchscript is not None:
            path = args.torchscript.path
            setup = setup.replace(f'"{path}"', f'benchkit_artifact("{Path(path).name}")')
        return cls(args.stmt, setup, args.global_setup, args.num_threads)

    @property
    def key(self) -> str:
        return content_key(self.stmt, self.setup, self.global_setup, str(self.num_threads))

    @property
    def function_name(self) -> str:
        """The timing function."""
        return f"timeit_{self.key}"

    @property
    def count_function_name(self) -> str:
        """The counting function (run under Callgrind)."""
        return f"count_{self.key}"


@dataclasses.dataclass(frozen=True)
class Shard:
    """One translation unit of C++ cases: per case a timing and a counting function,
    exported to Python."""

    global_setup: str
    snippets: tuple[Snippet, ...]

    @property
    def source(self) -> str:
        bodies, exports = [], []
        for s in self.snippets:
            parts = {"threads": s.num_threads, "stmt": textwrap.indent(s.stmt, "    ")}
            for template, name in (
                (_TIMEIT_FUNCTION, s.function_name),
                (_COUNT_FUNCTION, s.count_function_name),
            ):
                bodies.append(template.format(name=name, setup=textwrap.indent(s.setup, "  "), **parts))
                exports.append(f'  m.def("{name}", &{name});')
        exports.append(
            f'  m.def("{_SET_ARTIFACT_DIR}", [](const std::string& d) {{ benchkit_artifact_dir = d; }});'
        )
        exported = "\n".join(exports)
        return (
            f"{_PRELUDE}\n// global setup\n{self.global_setup}\n"
            + "\n".join(bodies)
            + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{exported}\n}}\n"
        )

    @property
    def name(self) -> str:
        return f"benchkit_cpp_{content_key(self.source, torch_build_id())}"


class CompileError(RuntimeError):
    pass


def layout(snippets: Sequence[Snippet]) -> list[Shard]:
    """Group snippets by global setup (they share a TU), then bucket by key hash."""
    by_global: dict[str, dict[str, Snippet]] = defaultdict(dict)
    for snippet in snippets:
        by_global[snippet.global_setup][snippet.key] = snippet
    shards = []
    for global_setup, members in sorted(by_global.items()):
        n_buckets = max(1, math.ceil(len(members) / SNIPPETS_PER_SHARD))
        buckets: dict[int, list[Snippet]] = defaultdict(list)
        for key, snippet in sorted(members.items()):
            buckets[int(key, 16) % n_buckets].append(snippet)
        shards.extend(Shard(global_setup, tuple(b)) for _, b in sorted(buckets.items()))
    return shards


def _build_dir(shard: Shard) -> Path:
    return cache_dir("cpp", shard.name)


def _library_path(shard: Shard) -> Path:
    return _build_dir(shard) / f"{shard.name}.so"


def is_built(shard: Shard) -> bool:
    return _library_path(shard).exists()


DEFAULT_COMPILE_TIMEOUT = 1800.0  # seconds; far beyond a cold shard's compile on one idle core

# Runs in a child process: the compile can then be time-limited and killed whole.
_COMPILE_CHILD = """
import sys
from torch.utils import cpp_extension
name, source, directory, verbose, *flags = sys.argv[1:]
cpp_extension.load(name=name, sources=[source], build_directory=directory, extra_cflags=flags,
                   verbose=verbose == "1")
"""


def compile_timeout() -> float:
    return settings.current().measure.compile_timeout or DEFAULT_COMPILE_TIMEOUT


def build(shard: Shard, verbose: bool = False) -> Path:
    """Compile one shard (no-op when already built); safe across processes and interruptions.

    The compile runs in a private scratch folder, in a child process with a time
    limit (``BENCHKIT_COMPILE_TIMEOUT``, default 30 min), and its library is renamed
    into place only when complete: a compile killed mid-way (OOM, asv's timeout,
    Ctrl-C) leaves neither a half-written ``.so`` nor a lock file that would make
    the next build wait forever (torch's own build baton is such a file). Builds of
    one shard are serialised with ``flock``, which the kernel releases when its
    holder dies.
    """
    library = _library_path(shard)
    if library.exists():
        return library
    build_dir = _build_dir(shard)
    with file_lock(build_dir / "build.flock"):
        if library.exists():  # another process built it while we waited
            return library
        extra = extra_cflags()
        pch = pch_header(extra)
        flags = [*extra, *(["-include", str(pch)] if pch else [])]
        with tempfile.TemporaryDirectory(prefix="build-", dir=build_dir) as scratch:
            source_path = Path(scratch) / "batch.cpp"
            source_path.write_text(shard.source)
            command = [sys.executable, "-c", _COMPILE_CHILD, shard.name, str(source_path), scratch]
            timeout = compile_timeout()
            pipe = None if verbose else subprocess.PIPE
            # Its own process group, so a timeout or Ctrl-C stops ninja and the compilers too.
            child = subprocess.Popen(
                [*command, "1" if verbose else "0", *flags],
                stdout=pipe, stderr=pipe, text=True, start_new_session=True,
            )  # fmt: skip
            try:
                out, err = child.communicate(timeout=timeout)
            except BaseException as e:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.communicate()
                if isinstance(e, subprocess.TimeoutExpired):
                    raise CompileError(
                        f"C++ compile of {len(shard.snippets)} case(s) took longer than {timeout:.0f} s "
                        "(BENCHKIT_COMPILE_TIMEOUT)"
                    ) from None
                raise
            built = Path(scratch) / f"{shard.name}.so"
            if child.returncode != 0 or not built.is_file():
                output = ((out or "") + (err or "")).strip()[-4000:]
                raise CompileError(f"C++ compile of {len(shard.snippets)} case(s) failed:\n{output}")
            with contextlib.suppress(OSError):  # how it was compiled, for whoever debugs it
                shutil.copyfile(Path(scratch) / "build.ninja", build_dir / "build.ninja")
            os.replace(built, library)
    return library


def build_all(
    shards: Sequence[Shard],
    jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """Compile every missing shard; returns {snippet key: error} for shards that failed."""
    missing = [s for s in shards if not is_built(s)]
    if not missing:
        return {}
    jobs = jobs or max(1, min(len(missing), os.cpu_count() or 1))
    errors: dict[str, str] = {}
    start = time.monotonic()

    def one(shard: Shard) -> None:
        try:
            build(shard)
        except CompileError as e:
            if len(shard.snippets) == 1:
                errors[shard.snippets[0].key] = str(e)
            else:
                # One broken snippet must not fail its shard-mates: compile each
                # alone so only the broken ones are reported.
                if progress:
                    progress(f"C++ shard {shard.name} failed to compile; compiling its cases one by one")
                for snippet in shard.snippets:
                    try:
                        build(dataclasses.replace(shard, snippets=(snippet,)))
                    except CompileError as single_error:
                        errors[snippet.key] = str(single_error)
        if progress:
            progress(
                f"compiled C++ shard {shard.name} ({len(shard.snippets)} cases) "
                f"in {time.monotonic() - start:.0f}s"
            )

    if worth_precompiling(len(missing), jobs):
        with contextlib.suppress(PchFailed):
            build_precompiled_header(progress)
    if progress:
        progress(f"compiling {len(missing)} C++ shard(s) with {jobs} job(s)...")
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, missing))
    return errors


_loaded: dict[str, ModuleType] = {}


def load(shard: Shard) -> ModuleType:
    """Import a built shard directly (no ninja check: the name is content-keyed)."""
    if shard.name not in _loaded:
        import torch  # noqa: F401 - the extension links against libtorch

        library = build(shard)
        loader = importlib.machinery.ExtensionFileLoader(shard.name, str(library))
        spec = importlib.util.spec_from_file_location(shard.name, library, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[shard.name] = module
        _loaded[shard.name] = module
    return _loaded[shard.name]


class CppSuite:
    """The C++ cases of a suite: their shard layout, compilation and lookup.

    Wall time and instruction counts of one suite share this layout, so a shard
    compiled for one metric serves the other."""

    def __init__(self, cases: Sequence[TimerArgs] = (), snippets: Sequence[Snippet] = ()) -> None:
        found = [*snippets, *(Snippet.of(a) for a in cases if a.language is Language.CPP)]
        self.snippets = {s.key: s for s in found}
        self.shards = layout(list(self.snippets.values()))
        self._shard_of = {s.key: shard for shard in self.shards for s in shard.snippets}
        self._subsets: dict[tuple[str, ...], CppSuite] = {}

    def for_keys(self, keys: Sequence[str] | None) -> CppSuite:
        """The layout of only these snippets (an asv ``-b`` selection; None: this whole suite).

        A selection then compiles small shards of its own cases instead of the suite's
        large ones; the layout is a pure function of the keys, so every process of the
        command that knows them finds the same shards."""
        if keys is None:
            return self
        key = tuple(sorted(keys))
        if key not in self._subsets:
            self._subsets[key] = CppSuite(snippets=[self.snippets[k] for k in key if k in self.snippets])
        return self._subsets[key]

    def shards_holding(self, cases: Sequence[TimerArgs]) -> list[Shard]:
        """The shards of the layout that hold any of these cases (what to compile for them)."""
        keys = {Snippet.of(a).key for a in cases if a.language is Language.CPP}
        return [shard for shard in self.shards if any(s.key in keys for s in shard.snippets)]

    def shard_for(self, args: TimerArgs) -> Shard:
        snippet = Snippet.of(args)
        alone = Shard(args.global_setup, (snippet,))
        shard = self._shard_of.get(snippet.key, alone)  # a case outside the suite: alone
        # A shard that failed to compile was rebuilt case by case (see build_all).
        return alone if not is_built(shard) and is_built(alone) else shard

    def built_library(self, args: TimerArgs) -> tuple[str, Path] | None:
        """(module name, library) holding the case's functions, or None when not built."""
        shard = self.shard_for(args)
        return (shard.name, _library_path(shard)) if is_built(shard) else None

    def timeit_function(self, args: TimerArgs) -> Callable[[int], float]:
        module: Any = load(self.shard_for(args))
        if args.torchscript is not None:  # the artifacts of one torch build share a folder
            getattr(module, _SET_ARTIFACT_DIR)(str(Path(args.torchscript.path).parent))
        return getattr(module, Snippet.of(args).function_name)
