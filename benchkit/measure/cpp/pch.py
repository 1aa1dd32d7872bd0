"""A precompiled header of torch's headers, one per torch build, shared by every C++ shard.

Parsing torch's headers is about half of a shard's compile. gcc reuses a ``.gch``
only when the compile's flags match, so the header is built with exactly the flags
`torch.utils.cpp_extension` gives a shard; a stale or foreign one costs time but never
changes what is compiled.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchkit import settings
from benchkit.util import atomic_path, atomic_write_text, cache_dir, content_key, torch_build_id


def extra_cflags() -> list[str]:
    from torch.utils.benchmark.utils import cpp_jit

    # torch.utils.benchmark's flags for C++ timers, without debug info (smaller, faster builds).
    return [f for f in (cpp_jit.CXX_FLAGS or []) if f != "-g"]


# Headers every shard includes (callgrind.h is a few macros): parsed once per torch build
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


def pch_header(extra_cflags: list[str]) -> Path | None:
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

    extra = extra_cflags()
    existing = pch_header(extra)
    if existing is not None or settings.current().measure.no_pch:
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
            raise PchFailed
    if progress:
        progress(f"precompiled torch's headers in {time.monotonic() - start:.0f}s")
    _prune_precompiled_headers(keep=directory)
    return header


# A precompiled header of torch's headers is large: keep those of the last
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


class PchFailed(Exception):
    pass


def worth_precompiling(missing: int, jobs: int) -> bool:
    """Whether building a precompiled header first makes `missing` shard compiles finish sooner.

    A shard compiles in about half the time with the header, and building the header
    costs about as much as one shard and a half without it. On `jobs` cores that pays
    off only when each core has more than two shards to compile; an existing header is
    used whatever the count.
    """
    return missing > 2 * jobs
