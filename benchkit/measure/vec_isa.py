"""Inductor's vector-ISA probe, paid once per torch build and machine instead of once per
measuring process.

Before its first C++ compile in a process, inductor checks each vector instruction set the
CPU lists (AVX2, AVX-512, ...) by compiling a small library with that ISA's flags and loading
it in a new Python process: about 1 s of every operator timing process and of every wall-time
round whose cases compile, on the project's 2-core machine (lab/reports/probe-skip.md), and
nothing that either measures. Where
this machine's probe for this build found exactly the ISAs the CPU lists, telling inductor so
(``TORCHINDUCTOR_VEC_ISA_OK=1``, its ``config.cpp.vec_isa_ok``) gives the same ISAs, the same
choice among them and the same generated code, without the probe. Where they differ (a
compiler without some ISA's flags) nothing is changed and inductor probes as before.

The decision is kept in benchkit's cache, keyed by the torch build, the CPU's flags and the
C++ compiler. Inductor keys its graph cache by that setting too, so every process that times a
build's operators takes the same decision (`skip_probe_here`, before the first compile), and
a build's wall-time rounds get it through the environment (`benchkit.measure.walltime.batch`).
A user who set the variable keeps their choice.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from benchkit.util import atomic_write_json, cache_dir, content_key, torch_build_id

ENV = "TORCHINDUCTOR_VEC_ISA_OK"


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    return next((line for line in text.splitlines() if line.startswith("flags")), "")


def _compiler_identity() -> str:
    """The C++ compiler inductor uses by default (``CXX``, else ``g++``), by path and file."""
    found = shutil.which(os.environ.get("CXX") or "g++")
    if found is None:
        return "none"
    stat = Path(found).resolve().stat()
    return f"{Path(found).resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def _decision_path() -> Path:
    key = content_key(torch_build_id(), _cpu_flags(), _compiler_identity())
    return cache_dir("inductor-vec-isa") / f"{key}.json"


def _probe() -> dict[str, list[str]]:
    """The ISAs inductor finds by probing, and those it would take unprobed (the CPU's list)."""
    from torch._inductor import config, cpu_vec_isa

    previous = config.cpp.vec_isa_ok
    try:
        config.cpp.vec_isa_ok = None
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
        probed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
        config.cpp.vec_isa_ok = True
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
        listed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    finally:
        config.cpp.vec_isa_ok = previous
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
    return {"probed": probed, "listed": listed}


def probe_skippable() -> bool:
    """Whether this process's torch, on this machine, may skip inductor's ISA probe: the probe
    (run here once per build, machine and compiler; its outcome cached) finds exactly the ISAs
    the CPU lists. False where the user set ``TORCHINDUCTOR_VEC_ISA_OK`` themselves."""
    if os.environ.get(ENV) is not None:
        return False
    path = _decision_path()
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        found = _probe()
        atomic_write_json(path, found)
    return bool(found.get("probed")) and found.get("probed") == found.get("listed")


def skip_probe_here() -> bool:
    """Let this process's inductor skip the ISA probe where `probe_skippable` allows it; call
    before the first compile. Whether it was skipped."""
    if not probe_skippable():
        return False
    from torch._inductor import config

    config.cpp.vec_isa_ok = True
    return True
