"""Compile many C++ snippets into a few shared objects, cached by content.

`torch.utils.benchmark`'s C++ Timer compiles one extension per statement into
a per-process temporary directory: ~20 s of compiler time per case, paid again
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
import shlex
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
from typing import Any, ClassVar

from benchkit.define.api import Language, TimerArgs
from benchkit.errors import UserError
from benchkit.util import atomic_path, atomic_write_text, cache_dir, content_key, file_lock, torch_build_id

# Each translation unit pays ~20 CPU-s (~45 without a precompiled header) for
# torch's headers however few functions it holds, and ~0.1 s per snippet on top:
# so few, large shards. The standard suite's 111 C++ cases make two (one per
# global setup), one per core here.
SNIPPETS_PER_SHARD = 128

# Per-snippet body of the timing TU. The loop reports its own duration, so setup
# and the Python call into the extension are never part of a measurement.
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

_TIMEIT_PRELUDE = """\
#include <chrono>
#include <cstdint>
#include <torch/extension.h>
#include <pybind11/pybind11.h>
"""


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
        return cls(args.stmt, args.setup, args.global_setup, args.num_threads)

    @property
    def key(self) -> str:
        return content_key(self.stmt, self.setup, self.global_setup, str(self.num_threads))

    @property
    def function_name(self) -> str:
        return f"timeit_{self.key}"


@dataclasses.dataclass(frozen=True)
class Shard:
    """One translation unit of C++ cases: a function per case, exported to Python.

    Timing shards hold ``timeit_*`` functions; the Callgrind stage subclasses this
    with counting functions (`benchkit.measure.callgrind.cpp_counting`), same layout."""

    global_setup: str
    snippets: tuple[Snippet, ...]

    FUNCTION: ClassVar[str] = _TIMEIT_FUNCTION
    PREFIX: ClassVar[str] = "benchkit_timeit"

    def prelude(self) -> str:
        return _TIMEIT_PRELUDE

    def function_name(self, snippet: Snippet) -> str:
        return snippet.function_name

    @property
    def source(self) -> str:
        bodies = [
            self.FUNCTION.format(
                name=self.function_name(s),
                threads=s.num_threads,
                setup=textwrap.indent(s.setup, "  "),
                stmt=textwrap.indent(s.stmt, "    "),
            )
            for s in self.snippets
        ]
        exports = "\n".join(
            f'  m.def("{self.function_name(s)}", &{self.function_name(s)});' for s in self.snippets
        )
        return (
            f"{self.prelude()}\n// global setup\n{self.global_setup}\n"
            + "\n".join(bodies)
            + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{exports}\n}}\n"
        )

    @property
    def name(self) -> str:
        return f"{self.PREFIX}_{content_key(self.source, torch_build_id())}"


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


def _extra_cflags() -> list[str]:
    from torch.utils.benchmark.utils import cpp_jit

    # torch.utils.benchmark's flags for C++ timers, without debug info (smaller, faster builds).
    return [f for f in (cpp_jit.CXX_FLAGS or []) if f != "-g"]


# Headers every shard (timing or counting) includes: parsed once per torch build
# into a precompiled header instead of once per shard.
_PCH_HEADER = """\
#include <chrono>
#include <cstdint>
#include <functional>
#include <torch/extension.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
"""


def _cpp_extension_cflags(extra_cflags: list[str]) -> list[str]:
    """The flags `cpp_extension.load` compiles a shard with (its module name left out).

    Read from the build file it writes, with its build step skipped: any torch
    version then gets exactly its own flags (include paths, -std, ABI macros).
    """
    from torch.utils import cpp_extension

    with tempfile.TemporaryDirectory(prefix="benchkit-flags-") as scratch:
        source = Path(scratch) / "probe.cpp"
        source.write_text("")
        run_ninja_build = cpp_extension._run_ninja_build
        cpp_extension._run_ninja_build = lambda *args, **kwargs: None
        try:
            cpp_extension.load(
                name="benchkit_flags_probe", sources=[str(source)], build_directory=scratch,
                extra_cflags=extra_cflags,
            )  # fmt: skip
        except ImportError:
            pass  # nothing was built to import: expected
        finally:
            cpp_extension._run_ninja_build = run_ninja_build
        ninja = (Path(scratch) / "build.ninja").read_text()
    line = next(x for x in ninja.splitlines() if x.startswith("cflags = "))
    flags = shlex.split(line.removeprefix("cflags = "))
    return [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def _pch_header(extra_cflags: list[str]) -> Path | None:
    """The precompiled-header file to force-include (``<dir>/shards.h``, beside ``shards.h.gch``).

    None when there is none for this torch build and these flags. gcc ignores a
    .gch that does not match a compile's flags and parses the header instead, so
    a stale or foreign one can cost time but never change what is compiled.
    """
    header = _pch_dir(extra_cflags) / "shards.h"
    if not header.with_suffix(".h.gch").exists():
        return None
    with contextlib.suppress(OSError):  # "in use": pruning leaves recently used headers alone
        os.utime(header.parent)
    return header


def _pch_dir(extra_cflags: list[str]) -> Path:
    """Where this torch build's precompiled header lives (not created: most builds only look)."""
    return cache_dir("cpp") / f"pch_{content_key(torch_build_id(), _PCH_HEADER, *extra_cflags)}"


def build_precompiled_header(progress: Callable[[str], None] | None = None) -> Path | None:
    """Precompile the shards' common headers once for this torch build; None if that fails.

    Parsing torch's headers is about half of a shard's compile; the other half,
    instantiating and emitting the headers' inline code, every shard pays anyway.
    """

    extra = _extra_cflags()
    existing = _pch_header(extra)
    if existing is not None or os.environ.get("BENCHKIT_NO_PCH") == "1":
        return existing
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None or "clang" in Path(compiler).name:  # clang's PCH works differently
        return None
    start = time.monotonic()
    try:
        flags = _cpp_extension_cflags(extra)
    except Exception as e:  # an unfamiliar torch version: compile without a PCH
        if progress:
            progress(f"no precompiled header ({type(e).__name__}: {e}); shards parse torch's headers")
        return None
    directory = _pch_dir(extra)
    directory.mkdir(parents=True, exist_ok=True)
    header = directory / "shards.h"
    atomic_write_text(header, _PCH_HEADER)
    with atomic_path(header.with_suffix(".h.gch")) as tmp:
        done = subprocess.run(
            [compiler, "-x", "c++-header", *flags, str(header), "-o", str(tmp)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            if progress:
                progress(f"no precompiled header (compiler said: {done.stderr.strip()[-500:]})")
            raise _PchFailed
    if progress:
        progress(f"precompiled torch's headers in {time.monotonic() - start:.0f}s")
    _prune_precompiled_headers(keep=directory)
    return header


# A precompiled header of torch's headers takes ~0.8 GB: keep those of the last
# few torch builds, not one per commit of a long history.
PCH_KEPT = 2


# A header used this recently may be in use by a compile of another process (another
# asv environment, a parallel `benchkit run`): it is never deleted.
PCH_IN_USE_SECONDS = 24 * 3600


def _prune_precompiled_headers(keep: Path) -> None:
    others = [d for d in keep.parent.glob("pch_*") if d != keep]
    others.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    now = time.time()
    for stale in others[PCH_KEPT - 1 :]:
        if now - stale.stat().st_mtime > PCH_IN_USE_SECONDS:
            shutil.rmtree(stale, ignore_errors=True)


class _PchFailed(Exception):
    pass


def worth_precompiling(missing: int, jobs: int) -> bool:
    """Whether building a precompiled header first makes `missing` shard compiles finish sooner.

    Measured here (torch 2.13, gcc 12): a shard takes ~46 s without the header and
    ~22 s with it, and building the header takes ~62 s on one core. On `jobs` cores
    that pays off only when each core has more than two shards to compile; an
    existing header is used whatever the count.
    """
    return missing > 2 * jobs


DEFAULT_COMPILE_TIMEOUT = 1800.0  # seconds; a cold shard takes ~46 s on one idle core

# Runs in a child process: the compile can then be time-limited and killed whole.
_COMPILE_CHILD = """
import sys
from torch.utils import cpp_extension
name, source, directory, verbose, *flags = sys.argv[1:]
cpp_extension.load(name=name, sources=[source], build_directory=directory, extra_cflags=flags,
                   verbose=verbose == "1")
"""


def compile_timeout() -> float:
    value = os.environ.get("BENCHKIT_COMPILE_TIMEOUT", "")
    try:
        return float(value) if value else DEFAULT_COMPILE_TIMEOUT
    except ValueError:
        raise UserError(f"BENCHKIT_COMPILE_TIMEOUT={value!r} is not a number of seconds") from None


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
        extra = _extra_cflags()
        pch = _pch_header(extra)
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
        with contextlib.suppress(_PchFailed):
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
    """The C++ cases of a suite: their shard layout, compilation and lookup."""

    def __init__(self, cases: Sequence[TimerArgs]) -> None:
        snippets = [Snippet.of(a) for a in cases if a.language is Language.CPP]
        self.shards = layout(snippets)
        self._shard_of = {s.key: shard for shard in self.shards for s in shard.snippets}

    def shard_for(self, args: TimerArgs) -> Shard:
        snippet = Snippet.of(args)
        alone = Shard(args.global_setup, (snippet,))
        shard = self._shard_of.get(snippet.key, alone)  # a case outside the suite: alone
        # A shard that failed to compile was rebuilt case by case (see build_all).
        return alone if not is_built(shard) and is_built(alone) else shard

    def timeit_function(self, args: TimerArgs) -> Callable[[int], float]:
        module: Any = load(self.shard_for(args))
        return getattr(module, Snippet.of(args).function_name)
