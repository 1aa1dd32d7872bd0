"""Where inductor keeps what it compiles and tunes, and what it generated for one compiled
input: a hash of its output code and the launch configs its autotuning chose, recorded
beside the timing.

**Caches** (`configure_inductor_cache`): by default benchkit's own folder per torch build
holds inductor's generated code, its graph cache, the launch config each Triton kernel's
autotuning chose (inductor's local autotune cache, beside the kernel) and Triton's compiled
binaries (``triton/``, inductor's default place inside its cache). Every process that times
a build, and every later run of it, finds the first compile's kernels and autotuning
choices instead of tuning again: the kernel choice is the same across processes. Inductor
keys its autotune cache by the torch build as well, so a new build tunes anew; the record
below tells when that changed the choice. Cold, both caches start empty and are removed at
exit.

**Record**: inductor hands every output module it produces or loads from its cache to
``GraphLowering.save_output_code`` (its hook for inspecting generated code; unset by default).
benchkit installs a hook there once per process that passes the code to whichever compile on
the same thread is collecting it (`collecting_output_code`), so a compile on the background
thread (compiling ahead) and one on the timing thread never mix their code.

The code is hashed with its comments stripped, as inductor strips them for its own autotune
cache key: they hold the compile's number within the process (``# AOT ID``) and cache paths
(``# kernel path``), which differ between processes for the same kernel. The autotuning
choice is read from the Triton kernels of the loaded output modules once they have run:
each kernel keeps the launch config its autotuning picked (or the only one it had). C++
kernels (the CPU) have none. Library calls (cuBLAS, cuDNN) choose their own algorithms
inside the library; neither record sees that.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit.util import cache_dir, content_key, torch_build_id

HASH_DIGITS = 12  # 48 bits: a hash asv can store as a number, exactly
_COMMENT = re.compile(r"#.*$", re.MULTILINE)
_local = threading.local()
_install_lock = threading.Lock()
_chained: list[Any] = []  # a hook that was installed before benchkit's, still called


@dataclass(frozen=True)
class GeneratedKernel:
    """One compile's output: its code's hash and its Triton kernels' chosen launch configs."""

    code_hash: str
    configs: tuple[str, ...] = ()  # "kernel: config" per Triton kernel, in name order

    @property
    def fingerprint(self) -> str:
        """One hash of both: what changes when either the code or the autotuning choice does
        ("" when the code was not recorded)."""
        if not self.configs or not self.code_hash:
            return self.code_hash
        return content_key(self.code_hash, *self.configs, length=HASH_DIGITS)


def combined_fingerprint(kernels: Sequence[GeneratedKernel]) -> str:
    """One hash of several compiles' kernels, in order; "" when none was recorded."""
    prints = [kernel.fingerprint for kernel in kernels]
    return content_key(*prints, length=HASH_DIGITS) if any(prints) else ""


@dataclass
class OutputCode:
    """What one compile produced, collected while it ran (`collecting_output_code`)."""

    sources: list[str] = field(default_factory=list)
    modules: list[Any] = field(default_factory=list)  # the output modules it loaded

    @property
    def code_hash(self) -> str:
        """ "" when no code reached benchkit's hook (a torch build that does not call it)."""
        if not self.sources:
            return ""
        return content_key(*(_without_comments(s) for s in self.sources), length=HASH_DIGITS)


def _without_comments(source: str) -> str:
    return "\n".join(line.rstrip() for line in _COMMENT.sub("", source).splitlines() if line.strip())


def _pass_to_collector(code: str) -> None:
    collector: OutputCode | None = getattr(_local, "collector", None)
    if collector is not None:
        collector.sources.append(code)
    for hook in _chained:
        hook(code)


def _install_hook() -> None:
    """Once per process; a torch build without the hook never calls it (no code recorded)."""
    from torch._inductor.graph import GraphLowering

    with _install_lock:
        current = getattr(GraphLowering, "save_output_code", None)
        if current is _pass_to_collector:
            return
        _chained[:] = [current] if current is not None else []
        GraphLowering.save_output_code = _pass_to_collector


@contextlib.contextmanager
def collecting_output_code() -> Iterator[OutputCode]:
    """The output code of the compiles this thread runs inside the block, and the modules they
    loaded (benchkit compiles one input at a time, so the new modules are that compile's)."""
    from torch._inductor.codecache import PyCodeCache

    _install_hook()
    collected = OutputCode()
    previous = getattr(_local, "collector", None)
    _local.collector = collected
    modules = getattr(PyCodeCache, "modules", [])
    loaded = len(modules)
    try:
        yield collected
    finally:
        _local.collector = previous
        collected.modules.extend(modules[loaded:])


def autotuned_configs(modules: Sequence[Any]) -> tuple[str, ...]:
    """Per Triton kernel of `modules` that has run: ``name: config`` of the launch config it
    kept (after autotuning, one); a kernel not run yet says so."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:  # a torch build from before it: nothing to read
        return ()
    found: dict[str, str] = {}
    for module in modules:  # a kernel's own module, then the output module that launches it
        for name, value in vars(module).items():
            if not isinstance(value, CachingAutotuner):
                continue
            launchers = getattr(value, "launchers", None) or []
            if len(launchers) == 1:
                found[name] = str(launchers[0].config)
            else:
                found.setdefault(name, "not autotuned yet")
    return tuple(f"{name}: {config}" for name, config in sorted(found.items()))


def generated_kernel(output: OutputCode) -> GeneratedKernel:
    """The record of one compile, read once its kernels have run (autotuning happens then)."""
    return GeneratedKernel(output.code_hash, autotuned_configs(output.modules))


# ------------------------------------------------------------------ caches


def configure_inductor_cache(*, cold: bool = False) -> Path:
    """Point inductor's on-disk cache (and with it Triton's and the autotune choices) at
    benchkit's cache for this torch build, or at a fresh empty folder when `cold`.

    Warm: ``<benchkit cache>/inductor/<torch build>``, or ``<TORCHINDUCTOR_CACHE_DIR>/<torch
    build>`` where the user set that variable (a user-set ``TRITON_CACHE_DIR`` is kept): builds
    never share a cache, since inductor's C++ kernel cache is keyed by the generated source and
    a second build would find the first one's kernels. Cold: a new folder, Triton's cache inside
    it whatever the environment says, deleted at exit. Child processes inherit the choice
    through the environment (a folder already named after the build is kept as it is). Must run
    before the first compile in the process: inductor reads the variables once.
    """
    if cold:
        path = Path(tempfile.mkdtemp(prefix="benchkit-inductor-cold-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
        os.environ["TRITON_CACHE_DIR"] = str(path / "triton")
        return path
    build = torch_build_id()
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    root = Path(chosen) if chosen else cache_dir("inductor")
    path = root if root.name == build else root / build  # inductor creates it on first use
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
    return path


def compile_cached(
    gm: Any, example_inputs: Sequence[Any], config_patches: dict[str, Any] | None = None
) -> Any:
    """``compile_fx`` of `gm` where inductor's graph cache can serve it: in a tracing context
    of its own (this thread's) with a shape environment, the example tensors handed over as
    fake tensors of that context's mode with their shapes static, as the tensors themselves
    give them (real tensors would get symbolic sizes there, and other kernels)."""
    import torch
    from torch._guards import TracingContext, tracing
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = [
        fake_mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x
        for x in example_inputs
    ]
    with tracing(TracingContext(fake_mode)):
        return compile_fx(gm, fakes, config_patches=config_patches)


def inductor_cache_files() -> int:
    """Files in inductor's on-disk cache (lock files aside): a compile that adds none found
    every kernel there already (a warm cache)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    count = 0
    # os.walk, not Path.rglob: called twice per compile, and rglob's objects cost ~20 ms a scan
    for _folder, folders, files in os.walk(inductor_cache_dir()):
        folders[:] = [f for f in folders if f != "locks"]
        count += len(files)
    return count
