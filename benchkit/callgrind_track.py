"""Callgrind instruction counts for many cases in a few valgrind processes.

`Timer.collect_callgrind` starts one valgrind process per statement and imports
torch in it with instrumentation on: most of its ~50 s per statement is that
import. Here a batch of cases runs like this:

* **Few valgrind processes.** One *template* Python process per core runs under
  ``valgrind --tool=callgrind --instr-atstart=no``; it imports torch once,
  uninstrumented (~15 s instead of ~60 s).
* **One fork per case.** The template forks a child per case. Every child
  starts from the same post-import state, so a case's count does not depend on
  which cases ran before it, on the shard it landed in, or on ``--filter``.
  A child that crashes, hangs or raises costs only its own case: the supervisor
  records the failure and the template carries on.
* **Instrumentation only around the measured region.** The template discards
  the import's translations before forking, so a child's
  ``CALLGRIND_START_INSTRUMENTATION`` (which throws away all translated code)
  is cheap; it then runs a small fixed workload (eager ops, autograd, a
  TorchScript load, an extension load) whose translations every child
  inherits for its uninstrumented setup (a third less time per batch). Setup
  and a warm-up execution run uninstrumented; the statement then runs in
  collected regions that are each dumped to their own file (a probe
  execution, then ``REPEATS`` repeats of ``number`` executions; a statement
  that fills a repeat alone has its probe as the first of its repeats).
* **torch.compile cases** run in a *compile template*: a process forked from
  the template that imports dynamo and inductor once per batch (instead of
  once per case, ~16 s each under valgrind) and then forks their children.
  Which template a case runs in follows from its setup alone, so its count
  still does not depend on the batch.
* **C++ cases** are compiled into a few shared extension modules (the shard
  layout and content-keyed cache of `benchkit.cpp_batch`, with a counting
  function per case instead of a timing one) and run in the same children.

Determinism: the same case on the same build repeats exactly. What could move
a count and what holds it still:

* hash randomisation: ``PYTHONHASHSEED=0``; Python's `random` seeded per case;
* environment size and contents, argv, working directory: the template gets a
  fixed environment and command line, whatever the caller's;
* address-space layout: ASLR off (``setarch -R``) where the kernel allows;
* what ran before: each case is forked from the same template state; the
  template's fork loop does identical work per case (fixed-width protocol and
  file names), and a child allocates nothing pid-dependent before measuring;
* garbage collection: collected before, disabled during, the measured region;
  CPython's type attribute cache emptied after setup;
* allocator and interpreter warm-up (malloc free lists, CPython's adaptive
  specialisation): ``WARMUP`` uninstrumented executions and the probe;
* the number of executions per repeat comes from the probe's *count*, never a
  clock, bucketed to a power of two so that small changes do not move it;
* thread pools: OpenMP waits passively (no spinning counted under valgrind's
  serialised threads); torch.compile gets a fresh cache per case;
* the statistic: the *minimum* of the repeats, per execution. glibc malloc
  now and then consolidates its fast bins (~50-90k instructions); whether a
  repeat catches one depends on the heap's layout, which any change to setup
  or torch shifts. The median moved a small Python statement by up to 5% when
  unrelated setup objects changed size; the minimum moved it by 0.13%.

Valgrind emulates AVX2 (not AVX-512), so torch picks its AVX2 kernels; the
CPU capability seen under valgrind is recorded in the batch metadata. MKL is
limited to SSE4.2 kernels (``MKL_ENABLE_INSTRUCTIONS``): valgrind emulates FMA
instructions about 100x slower than others, which made one 256x512x512 linear
layer take ~10 s per execution; its counts then describe MKL's SSE kernels.

This file is also the worker: valgrind runs it as a script
(``python callgrind_track.py --template ...``) so that a worker imports only the
standard library and torch. Hence no top-level benchkit imports here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import gc
import importlib.machinery
import importlib.util
import itertools
import json
import os
import platform
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if __package__:
    from benchkit.stmt_loop import compile_statement_loop
else:  # valgrind runs this file as a script; its folder is sys.path[0]
    from stmt_loop import compile_statement_loop  # type: ignore[no-redef]

if TYPE_CHECKING:
    from benchkit.cpp_batch import Shard, Snippet
    from benchkit.expand import Case

# Executions before instrumentation starts (setup's lazy initialisation). The
# allocator's and interpreter's slower settling shows in early repeats, which
# the minimum leaves out; the probe is a second warm-up for cases with several
# executions per repeat. Heavy statements cost seconds per execution here.
WARMUP = 1
# Collected repeats per case; the reported count is their minimum (see `repeats_for`).
REPEATS = 5
# A case whose single execution fills a repeat needs fewer: its count dwarfs the
# allocator's occasional extra work, and each repeat costs seconds under valgrind.
# Its probe is already such a repeat (one execution, zeroed and dumped alike), so
# it counts as the first: the heavy cases hold ~90% of all instructions counted.
SINGLE_EXECUTION_REPEATS = 2
# A repeat should hold about this many instructions: enough executions that the
# few hundred instructions of starting and dumping a region weigh little (and
# the same in every run), few enough that some repeats escape glibc's periodic
# consolidation (below). Repeats are most of the instrumented time of a light case.
TARGET_REPEAT_INSTRUCTIONS = 500_000
# Statements above this many instructions run once per repeat; below, at least twice.
SINGLE_EXECUTION_INSTRUCTIONS = 500_000
MAX_NUMBER = 1024
DEFAULT_CASE_TIMEOUT = 300.0
TEMPLATE_START_TIMEOUT = 600.0
MKL_INSTRUCTIONS = "SSE4_2"

_TEMPLATE_FLAG = "--benchkit-callgrind-template"


def repeats_for(number: int) -> int:
    """Measured repeats of a case run `number` executions per repeat."""
    return REPEATS if number > 1 else SINGLE_EXECUTION_REPEATS


def repeats_after_probe(number: int) -> int:
    """Repeats run after the probe: with one execution per repeat the probe is the first."""
    return repeats_for(number) - (number == 1)


def measured_dumps(number: int) -> range:
    """Which of a child's dumps (numbered from 1, the probe) are its measured repeats."""
    first = 1 if number == 1 else 2
    return range(first, first + repeats_for(number))


def choose_number(probe_instructions: int) -> int:
    """Executions per repeat: a power of two so that a repeat holds ~TARGET instructions."""
    if probe_instructions > SINGLE_EXECUTION_INSTRUCTIONS:
        return 1
    wanted = TARGET_REPEAT_INSTRUCTIONS // max(probe_instructions, 1)
    number = 2
    while number * 2 <= min(wanted, MAX_NUMBER):
        number *= 2
    return number


# =============================================================================
# Callgrind output files
# =============================================================================


def read_total(path: str | os.PathLike[str]) -> int:
    """Total Ir of a dump from its ``summary:``/``totals:`` line (cheap: no body parse)."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                fields = line.split()
                return int(fields[1]) if len(fields) > 1 else 0
    raise ValueError(f"{path}: no summary line; not a complete callgrind dump")


# A call: the ``calls=`` line and the cost line after it, which is the callee's
# inclusive cost, not the caller's own.
_CALL = re.compile(r"^calls=.*\n.*\n?", re.MULTILINE)
# Name definitions: callgrind numbers files, functions and objects separately and
# writes ``(12) name`` the first time, ``(12)`` after (in any line of that kind).
_DEFINITION = re.compile(r"^(?:c?f[lie]|c?fn|jf[in]|c?ob)=\((\d+)\) (.*)$", re.MULTILINE)
_TABLE_OF = {"fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl", "jfi": "fl",
             "fn": "fn", "cfn": "fn", "jfn": "fn", "ob": "ob", "cob": "ob"}  # fmt: skip
# Lines that only describe calls and jumps; with the calls removed, they own no cost.
_CALL_DETAIL = re.compile(r"^(?:cob|cfi|cfl|cfn|jfi|jfn|jump|jcnd)=.*\n", re.MULTILINE)
# The lines that decide whose the following cost lines are.
_OWNER = re.compile(r"^(fn|fi|fe|fl|ob)=(.*)$", re.MULTILINE)


def read_function_counts(path: str | os.PathLike[str]) -> dict[str, int]:
    """Exclusive (self) Ir per function of one callgrind dump.

    Keys are ``file:function [object]``, the strings ``callgrind_annotate``
    prints and torch's `FunctionCounts` expects: cost lines after ``fi=``/``fe=``
    (inlined code) go to that file, as callgrind_annotate does, and the cost
    line following a ``calls=`` line is the callee's inclusive cost, so it is
    not the caller's own. Parsed here rather than through callgrind_annotate
    (a Perl process per dump) because a batch reads hundreds of dumps while the
    valgrind workers want both cores: regular expressions drop the call lines,
    collect the name definitions and sum each run of cost lines, so Python
    handles only the lines that change whose costs follow (a sixth of them).
    """
    text = Path(path).read_text()
    positions = re.search(r"^positions:(.*)$", text, re.MULTILINE)
    n_positions = len(positions.group(1).split()) if positions else 1
    # The first event (Ir) after the position columns.
    cost = re.compile(r"^[0-9+*-]\S*" + r" \S+" * (n_positions - 1) + r" (\d+)", re.MULTILINE)
    tables: dict[str, dict[str, str]] = {"fl": {}, "fn": {}, "ob": {}}
    for match in _DEFINITION.finditer(text):
        kind = match.group(0).partition("=")[0]
        tables[_TABLE_OF[kind]][f"({match.group(1)})"] = match.group(2)
    text = _CALL_DETAIL.sub("", _CALL.sub("", text))

    def name(kind: str, value: str) -> str:
        ident, _, _ = value.partition(" ")
        return tables[kind].get(ident, value) if ident[:1] == "(" else value

    counts: dict[str, int] = {}
    obj = file = fn = ""
    key = ""
    parts = _OWNER.split(text)
    for i in range(1, len(parts), 3):
        head, value, costs = parts[i], parts[i + 1], parts[i + 2]
        if head == "fn":
            fn = name("fn", value)
            key = f"{file}:{fn} [{obj}]"
        elif head == "fl":
            file = name("fl", value)
        elif head == "ob":
            obj = name("ob", value)
        else:  # fi, fe: inlined code from another file
            file = name("fl", value)
            key = f"{file}:{fn} [{obj}]"
        if len(costs) > 1:
            found = cost.findall(costs)
            if found:
                counts[key] = counts.get(key, 0) + sum(map(int, found))
    return {k: v for k, v in counts.items() if v}


_STANDARD_NAMES: dict[str, str | None] = {}

# Functions whose cost follows where things happen to lie in memory, not what a
# statement does; dropped like torch's own `denoise()` drops CPython's noisy
# symbols (whose Python 3.11+ counterpart is `unicodekeys_lookup_unicode`).
# glibc's slow paths (bins, consolidation, aligned allocation) depend on the heap
# that everything before the statement left; the public malloc/free/memalign
# entry points, with their per-call cost and thread-cache fast path, stay. In a
# real experiment (a torch wheel changed in one Python function) these moved 12
# unrelated cases by 0.5-1.4%; without them one tiny case did (15 instructions, see docs).
LAYOUT_NOISE = re.compile(
    r"malloc\.c:(_int_malloc|_int_free|_int_memalign|_int_realloc|malloc_consolidate"
    r"|unlink_chunk[\w.]*|alloc_perturb|sysmalloc[\w.]*|systrim[\w.]*)$"
    r"|dictobject\.c:unicodekeys_lookup_unicode$"
    # pymalloc's pool bookkeeping: whether freeing an object empties its pool (and the
    # next allocation sets one up again) depends on what else lives in that pool. Its
    # public entry points (PyObject_Malloc, PyObject_Free, ...) stay, one per call.
    r"|:_PyObject_(Malloc|Calloc|Realloc|Free)$"
)

# Excluded with its whole call tree by valgrind (--toggle-collect), see _template_command.
TYPE_CACHE_MISS = "find_name_in_mro"


def _standard_name(raw: str) -> str | None:
    """torch's clean-up of one function name (None: a noisy symbol that is dropped).

    `CallgrindStats.as_standardized` strips build-directory prefixes and library
    names (so two builds diff cleanly) and `FunctionCounts.denoise` drops CPython
    symbols known to be noisy. Both work on whole profiles and cost ~1 ms per
    function, so each distinct name goes through them once per process.
    """
    if raw not in _STANDARD_NAMES:
        from torch.utils.benchmark.utils.common import TaskSpec
        from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
            CallgrindStats,
            FunctionCount,
            FunctionCounts,
        )

        inclusive = FunctionCounts((), inclusive=True)
        stats = CallgrindStats(
            task_spec=TaskSpec(stmt="", setup=""),
            number_per_run=1,
            built_with_debug_symbols=False,
            baseline_inclusive_stats=inclusive,
            baseline_exclusive_stats=FunctionCounts((), inclusive=False),
            stmt_inclusive_stats=inclusive,
            stmt_exclusive_stats=FunctionCounts((FunctionCount(1, raw),), inclusive=False),
            stmt_callgrind_out=None,
        )
        kept = list(stats.as_standardized().stats(inclusive=False).denoise())
        name = kept[0].function if kept else None
        _STANDARD_NAMES[raw] = None if name is None or LAYOUT_NOISE.search(name) else name
    return _STANDARD_NAMES[raw]


def standardize(counts: Mapping[str, int], inductor_root: Path | None = None) -> dict[str, int]:
    """Exclusive counts under torch's standardized names (`_standard_name`), noisy
    symbols dropped. Code that torch.compile generated into a case's cache folder
    under `inductor_root` is named without that (per-build, per-case) folder."""
    generated = re.compile(re.escape(str(inductor_root)) + r"/[0-9a-f]+/") if inductor_root else None
    merged: dict[str, int] = {}
    for raw, count in counts.items():
        name = _standard_name(raw)
        if name is None:
            continue
        if generated is not None:
            name = generated.sub("<torch.compile cache>/", name)
        merged[name] = merged.get(name, 0) + count
    return {name: count for name, count in merged.items() if count}


# =============================================================================
# Worker: runs under valgrind (standard library and torch only)
# =============================================================================


CONTROL_MODULE = "benchkit_callgrind_control"


def _control_source() -> str:
    """A minimal CPython extension for the client requests torch does not expose.

    Why not torch's ``_valgrind_toggle``: callgrind keeps the collect flag per
    thread, so toggling counts only the calling thread and misses the work of
    intra-op threads (a 2-thread matmul counted half). Instead collection is on
    for every thread and a measured region is ``zero()`` ... ``dump_*()``.
    METH_NOARGS functions: a few dozen instructions per call, not ctypes' thousands.
    """
    return textwrap.dedent(
        f"""\
        #define PY_SSIZE_T_CLEAN
        #include <Python.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>
        #include "callgrind.h"

        #define NOARGS(name) static PyObject* name(PyObject* self, PyObject* unused)
        NOARGS(zero) {{ CALLGRIND_ZERO_STATS; Py_RETURN_NONE; }}
        NOARGS(dump_probe) {{ CALLGRIND_DUMP_STATS_AT("probe"); Py_RETURN_NONE; }}
        NOARGS(dump_repeat) {{ CALLGRIND_DUMP_STATS_AT("repeat"); Py_RETURN_NONE; }}
        NOARGS(start_instrumentation) {{ CALLGRIND_START_INSTRUMENTATION; Py_RETURN_NONE; }}
        NOARGS(discard_translations) {{
          VALGRIND_DISCARD_TRANSLATIONS(0x1000, ~(unsigned long)0xfff);
          Py_RETURN_NONE;
        }}
        NOARGS(running_on_valgrind) {{ return PyLong_FromLong(RUNNING_ON_VALGRIND); }}

        /* Total of this process's first dump (the probe), read without Python objects
           whose size would depend on the pid's digits. */
        static PyObject* probe_total(PyObject* self, PyObject* prefix) {{
          char path[4096], line[512];
          long long total = -1;
          if (!PyBytes_Check(prefix)) {{
            PyErr_SetString(PyExc_TypeError, "prefix must be bytes");
            return NULL;
          }}
          snprintf(path, sizeof path, "%s.%d.1", PyBytes_AS_STRING(prefix), (int)getpid());
          FILE* f = fopen(path, "r");
          if (f == NULL) return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
          while (total < 0 && fgets(line, sizeof line, f) != NULL) {{
            if (strncmp(line, "summary:", 8) == 0 || strncmp(line, "totals:", 7) == 0)
              total = strtoll(strchr(line, ':') + 1, NULL, 10);
          }}
          fclose(f);
          if (total < 0) return PyErr_Format(PyExc_ValueError, "%s: no summary line", path);
          return PyLong_FromLongLong(total);
        }}

        static PyMethodDef methods[] = {{
          {{"zero", zero, METH_NOARGS, NULL}},
          {{"dump_probe", dump_probe, METH_NOARGS, NULL}},
          {{"dump_repeat", dump_repeat, METH_NOARGS, NULL}},
          {{"start_instrumentation", start_instrumentation, METH_NOARGS, NULL}},
          {{"discard_translations", discard_translations, METH_NOARGS, NULL}},
          {{"running_on_valgrind", running_on_valgrind, METH_NOARGS, NULL}},
          {{"probe_total", probe_total, METH_O, NULL}},
          {{NULL, NULL, 0, NULL}},
        }};
        static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{CONTROL_MODULE}", NULL, -1, methods}};
        PyMODINIT_FUNC PyInit_{CONTROL_MODULE}(void) {{ return PyModule_Create(&module); }}
        """
    )


def _load_extension(name: str, path: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _settle() -> None:
    """Bring state that setup left behind to a canonical form before warm-up: collect
    garbage, then no collections; empty CPython's type attribute cache."""
    gc.collect()
    gc.disable()
    sys._clear_type_cache()


def _count_python(spec: dict[str, Any], ctl: Any, after_probe: Callable[[], int], torch: Any) -> None:
    # A fixed label: code objects keep it, and the child must allocate the same in every run.
    loop, values = compile_statement_loop(spec["stmt"], spec["setup"], {"torch": torch}, "case")
    _log_phase("setup")
    nothing = int  # a builtin taking no arguments: warm-up rounds measure nothing
    _settle()
    loop(itertools.repeat(None, spec["warmup"]), nothing, nothing, **values)
    _log_phase("warm-up")
    ctl.start_instrumentation()
    loop(itertools.repeat(None, 1), ctl.zero, ctl.dump_probe, **values)
    number = after_probe()
    for _ in range(repeats_after_probe(number)):
        loop(itertools.repeat(None, number), ctl.zero, ctl.dump_repeat, **values)


def _count_cpp(spec: dict[str, Any], after_probe: Callable[[], int]) -> None:
    module = _load_extension(spec["module"], spec["library"])
    _settle()
    _log_phase("setup")
    # Repeats after the probe, as `repeats_after_probe`.
    getattr(module, spec["function"])(spec["warmup"], REPEATS, SINGLE_EXECUTION_REPEATS - 1, after_probe)


def _log_phase(step: str) -> None:
    """When a step ended, in the case's log (kept with --keep-files). Only before
    instrumentation starts: after it, every new line of code is translated anew."""
    os.write(1, f"{step} done at {time.monotonic():.3f}\n".encode())


# A case's files are named by its fingerprint: the same names (and lengths) in
# every batch, whatever else the batch holds. Fingerprints are hex digits, so
# the fork loop's two other names (of the same length) cannot be one.
WARM_UP_NAME = "0" * 16
COMPILE_TEMPLATE_NAME = "compile-template"
# Ends a compile template's fork loop (the outer template never reads it).
END_OF_TEMPLATE = "end"
# What every torch.compile case imports in its setup (~16 s under valgrind).
COMPILE_MODULES = ("torch._dynamo", "torch._inductor.compile_fx")


def uses_compile(spec: Mapping[str, Any]) -> bool:
    """Whether a case's setup calls torch.compile: such cases run in the compile
    template, and their first run for a torch build prepares their cache."""
    return spec.get("language") == "PYTHON" and "compile" in spec.get("setup", "")


def _child(root: Path, name: str, ctl: Any, torch: Any, probe_prefix: bytes) -> NoReturn:
    """One case in a forked child. Never returns: it SIGKILLs itself so that
    callgrind's exit-time dump (nothing left to collect) is skipped.

    Once instrumentation is on, any code not run before costs a fresh
    translation, so after its last dump the child only writes one prepared
    line and dies; the supervisor finds the dumps by pid and reads them.
    """
    # Everything the child allocates before measuring is the same in every run:
    # fixed names, nothing derived from the pid.
    case_dir = root / "cases"
    log = os.open(case_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    # Read by the supervisor only after this process is gone: no partial reads.
    result = os.open(case_dir / f"{name}.result", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(1, f"started at {time.monotonic():.3f}\n".encode())
    outcome = [b"failed\nno count: the case ended before its probe\n"]
    try:
        spec = json.loads((case_dir / f"{name}.json").read_text())
        # A torch.compile cache of the case's own, kept across batches (see _drive).
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = spec["inductor_dir"]
        random.seed(0)  # setup's Python-level randomness (and libraries', e.g. temp names)

        def after_probe() -> int:
            probe = ctl.probe_total(probe_prefix)
            number = choose_number(probe)
            outcome[0] = b"ok %d %d\n" % (number, probe)
            return number

        torch.set_num_threads(spec["num_threads"])
        if spec["language"] == "PYTHON":
            _count_python(spec, ctl, after_probe, torch)
        else:
            _count_cpp(spec, after_probe)
        os.write(result, outcome[0])
    except BaseException:
        os.write(result, b"failed\n" + traceback.format_exc().encode())
    finally:
        os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def _prime_translations(torch: Any, control_library: str) -> None:
    """Run code paths most cases share, once, so that children inherit their translations.

    Valgrind translates code on first execution, and a forked child inherits the
    template's translations. Without this every child translated eager dispatch,
    autograd and the TorchScript loader anew for its setup (uninstrumented).
    The workload is fixed, whatever the batch holds, so the template's state is
    too. A step that fails (an unusual build, or one that changed nn.Linear so
    it no longer scripts) only loses its speed-up; the template goes on.
    """
    import io

    class Primer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4, 4))
            self.bias = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):  # unannotated: TorchScript reads it as a Tensor
            y = torch.nn.functional.linear(x, self.weight, self.bias) + torch.mm(x, self.weight)
            return torch.sigmoid(torch.relu(y) * 2)

    x = torch.ones(4, 4, requires_grad=True)
    with contextlib.suppress(Exception):
        Primer()(x).sum().backward()
    # Loading compiles the module's serialized code: a scripted nn.Linear warms
    # what loading the suite's (mostly Linear-based) TorchScript artifacts runs.
    for module in (Primer(), torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())):
        with contextlib.suppress(Exception):
            buffer = io.BytesIO()
            torch.jit.save(torch.jit.script(module), buffer)
            buffer.seek(0)
            torch.jit.load(buffer)(x).sum().backward()
    with contextlib.suppress(Exception):
        _load_extension(CONTROL_MODULE, str(_priming_copy(Path(control_library))))


def _template_main(root: Path, control_library: str) -> None:
    """Import torch uninstrumented, then fork one child per case index read from stdin.

    Protocol on stdout (one line each): ``ready <json>``, then per case name read
    from stdin ``started <name> <pid>`` and ``finished <name> <wait status>``. The
    loop does the same work for every case, so every child starts from the same state.
    """
    import torch

    # Children's gc.collect() need not walk the objects of the torch import.
    gc.collect()
    gc.freeze()
    ctl = _load_extension(CONTROL_MODULE, control_library)
    info = {
        "running_on_valgrind": bool(ctl.running_on_valgrind()),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", ""),
        "python": platform.python_version(),
    }
    # Children start instrumentation, which discards every translation: the
    # import's (a second per case to discard) are dropped here, and only those of
    # the paths most cases take are made again, to be inherited by every child.
    probe_prefix = str(root / "cg").encode()
    ctl.discard_translations()
    _prime_translations(torch, control_library)
    gc.collect()
    gc.freeze()
    os.write(1, f"ready {json.dumps(info)}\n".encode())
    _fork_loop(root, ctl, torch, probe_prefix, nested=False)


def _fork_loop(root: Path, ctl: Any, torch: Any, probe_prefix: bytes, nested: bool) -> None:
    """Fork a child per name read from stdin until end of input (or `END_OF_TEMPLATE`)."""
    stdin = sys.stdin.buffer
    end, warm_up, compile_template = (
        f"{n}\n".encode() for n in (END_OF_TEMPLATE, WARM_UP_NAME, COMPILE_TEMPLATE_NAME)
    )
    while True:
        line = stdin.readline()
        if not line or line == end:
            return
        name = line[:-1]
        pid = os.fork()
        if pid == 0:
            if line == warm_up:  # warm-up round of this loop: nothing to run
                os._exit(0)
            if line == compile_template and not nested:
                _compile_template(root, ctl, torch, probe_prefix)
            _child(root, name.decode(), ctl, torch, probe_prefix)
        os.write(1, b"started %s %08d\n" % (name, pid))
        _, status = os.waitpid(pid, 0)
        os.write(1, b"finished %s %08d\n" % (name, status))


def _compile_template(root: Path, ctl: Any, torch: Any, probe_prefix: bytes) -> NoReturn:
    """A template for the torch.compile cases, forked from the torch template.

    Their setups import dynamo and inductor, ~16 s under valgrind, once per
    case before; here once per batch. Every torch.compile case runs here and
    no other case does, so each still starts from the same state in every batch.
    The outer template waits for this process; both read the same stdin and
    write the same stdout, one at a time.
    """
    status = 0
    try:
        # Reply only once the supervisor has read our pid from the outer template.
        sys.stdin.buffer.readline()
        for module in COMPILE_MODULES:
            importlib.import_module(module)
        gc.collect()
        gc.freeze()
        os.write(1, b"ready compile\n")
        _fork_loop(root, ctl, torch, probe_prefix, nested=True)
    except BaseException:
        traceback.print_exc()  # into the worker's log
        status = 1
    os._exit(status)


# =============================================================================
# Supervisor: outside valgrind
# =============================================================================


class ValgrindUnavailable(RuntimeError):
    """Instruction counts cannot be collected here (no valgrind, no compiler, unsupported build)."""


@dataclasses.dataclass(frozen=True)
class CaseCount:
    """The instruction count of one case, or why there is none.

    ``instructions`` is per execution of the statement: the smallest repeat's
    total divided by ``number``. ``functions`` are that repeat's standardized
    exclusive counts (totals over ``number`` executions).
    """

    key: str
    status: str  # "ok" | "failed" | "skipped"
    instructions: float | None = None
    number: int = 0
    repeat_totals: tuple[int, ...] = ()
    probe: int | None = None
    functions: Mapping[str, int] = dataclasses.field(default_factory=dict, repr=False)
    error: str = ""
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-able, without the function-level profile."""
        return {
            "instructions": self.instructions,
            "status": self.status,
            "number": self.number,
            "repeats": [t / self.number for t in self.repeat_totals] if self.number else [],
            "error": self.error or None,
        }


@dataclasses.dataclass(frozen=True)
class BatchResult:
    counts: dict[str, CaseCount]  # case key -> count, in the order of the input cases
    metadata: dict[str, Any]
    seconds: float


def valgrind_version() -> str:
    """valgrind's version string; `ValgrindUnavailable` with what to do when missing."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise ValgrindUnavailable(
            "valgrind is not installed (needed for instruction counts; e.g. `apt-get install valgrind`); "
            "wall-time benchmarks do not need it"
        )
    try:
        out = subprocess.run([valgrind, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValgrindUnavailable(f"{valgrind} --version failed: {e}") from e
    return out.stdout.strip()


def _valgrind_headers() -> Path:
    import torch.utils.benchmark.utils.valgrind_wrapper as wrapper

    return Path(wrapper.__file__).resolve().parent


def build_control_library() -> Path:
    """Compile the control extension (`_control_source`) for this Python; cached by content."""
    import sysconfig

    from benchkit.util import atomic_path, cache_dir, content_key

    headers = _valgrind_headers()
    python_include = sysconfig.get_paths()["include"]
    source = _control_source()
    header_text = (headers / "callgrind.h").read_text() + (headers / "valgrind.h").read_text()
    key = content_key(source, header_text, sys.version, python_include)
    directory = cache_dir("callgrind", "control", key)
    library = directory / f"{CONTROL_MODULE}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if library.exists():
        return library
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ValgrindUnavailable("no C compiler (cc/gcc) to build the callgrind control extension")
    source_path = directory / "control.c"
    source_path.write_text(source)
    with atomic_path(library) as tmp:
        cmd = [compiler, "-O2", "-shared", "-fPIC", f"-I{headers}", f"-I{python_include}"]
        done = subprocess.run([*cmd, str(source_path), "-o", str(tmp)], capture_output=True, text=True)
        if done.returncode:
            raise ValgrindUnavailable(f"building the callgrind control extension failed:\n{done.stderr}")
    return library


def _priming_copy(control_library: Path) -> Path:
    """A second file of the control extension: loading it in the template runs the
    dynamic loader's paths that every C++ case's extension loading takes."""
    return control_library.parent / "prime" / control_library.name


# -- C++ cases -------------------------------------------------------------------

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


def _count_function_name(snippet: Snippet) -> str:
    return f"count_{snippet.key}"


def _shard_class() -> type[Shard]:
    """`cpp_batch.Shard` with counting functions instead of timing ones (same layout and cache)."""
    global _CountShard
    if _CountShard is None:
        from benchkit.cpp_batch import Shard
        from benchkit.util import content_key, torch_build_id

        @dataclasses.dataclass(frozen=True)
        class CountShard(Shard):
            @property
            def source(self) -> str:
                bodies = [
                    _COUNT_FUNCTION.format(
                        name=_count_function_name(s),
                        threads=s.num_threads,
                        setup=textwrap.indent(s.setup, "  "),
                        stmt=textwrap.indent(s.stmt, "    "),
                    )
                    for s in self.snippets
                ]
                exports = "\n".join(
                    f'  m.def("{_count_function_name(s)}", &{_count_function_name(s)});'
                    for s in self.snippets
                )
                prelude = _COUNT_PRELUDE.format(callgrind_h=_valgrind_headers() / "callgrind.h")
                return (
                    f"{prelude}\n// global setup\n{self.global_setup}\n"
                    + "\n".join(bodies)
                    + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{exports}\n}}\n"
                )

            @property
            def name(self) -> str:
                return f"benchkit_count_{content_key(self.source, torch_build_id())}"

        _CountShard = CountShard
    return _CountShard


_CountShard: type[Shard] | None = None


def count_shards(cases: Sequence[Case]) -> list[Shard]:
    """The counting shards for the C++ cases, laid out like the timing shards."""
    from benchkit.api import Language
    from benchkit.cpp_batch import Snippet, layout

    snippets = [Snippet.of(c.timer_args) for c in cases if c.timer_args.language is Language.CPP]
    cls = _shard_class()
    return [cls(s.global_setup, s.snippets) for s in layout(snippets)]


def _library_for(snippet: Snippet, shards: Sequence[Shard]) -> tuple[str, Path] | None:
    """(module name, built library) holding `snippet`: its shard, or, when that shard
    failed to compile and was rebuilt case by case, its own single-case shard."""
    from benchkit.cpp_batch import _library_path, is_built

    shard = next((s for s in shards if snippet in s.snippets), None)
    alone = _shard_class()("" if shard is None else shard.global_setup, (snippet,))
    for candidate in (shard, alone):
        if candidate is not None and is_built(candidate):
            return candidate.name, _library_path(candidate)
    return None


# -- batch ------------------------------------------------------------------------


def _fixed_environment() -> dict[str, str]:
    """The whole environment of a worker: the same size and contents for every batch,
    whoever starts it (the CLI, asv, a test), so the stack and environ start alike."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "MKL_ENABLE_INSTRUCTIONS": MKL_INSTRUCTIONS,
        # No compile-worker pool forked from inside valgrind for torch.compile cases.
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }
    # Needed to find torch at all in some installs; constant for one installation.
    if os.environ.get("LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    # This checkout first, so the template imports it in any asv environment.
    from benchkit.util import child_env  # the supervisor side only: never run under valgrind

    env["PYTHONPATH"] = child_env()["PYTHONPATH"]
    return env


def _aslr_prefix() -> list[str]:
    """``setarch <arch> -R`` when the kernel lets us turn ASLR off, else nothing."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    prefix = [setarch, platform.machine(), "-R"]
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else []


class _TemplateDied(Exception):
    pass


class _Template:
    """One valgrind'ed template process and the thread reading its protocol lines."""

    def __init__(self, root: Path, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as log_file:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env=env,
                cwd=root,
                start_new_session=True,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float | None) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            raise _TemplateDied(self.tail())
        if not line.startswith(prefix):
            raise _TemplateDied(f"unexpected worker output {line!r}\n{self.tail()}")
        return line[len(prefix) :]

    def send(self, name: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(f"{name}\n".encode())
            self.process.stdin.flush()
        except OSError as e:
            raise _TemplateDied(f"worker stdin closed: {e}\n{self.tail()}") from e

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = self.log.read_text(errors="replace").splitlines()
            return "\n".join(text[-lines:])
        return ""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(sig).name}"
        return f"killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(status)}"


def _log_tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


@dataclasses.dataclass
class _Batch:
    root: Path
    cases: list[Case]
    names: list[str]  # file name of each case (its fingerprint)
    case_timeout: float
    progress: Callable[[str], None]
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
    templates: list[_Template] = dataclasses.field(default_factory=list)
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


def _outcome(batch: _Batch, index: int, status: int | None, pid: int, elapsed: float, note: str) -> CaseCount:
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
            reason = note or (f"worker {_describe_status(status)}" if status is not None else "worker lost")
            log = _log_tail(case_dir / f"{name}.log")
            return CaseCount(key, "failed", error=f"{reason}\n{log}".strip(), seconds=elapsed)
        number, probe = int(fields[1]), int(fields[2])
        dumps = [batch.root / f"cg.{pid}.{i}" for i in measured_dumps(number)]
        missing = [str(d) for d in dumps if not d.exists()]
        if missing:
            return CaseCount(key, "failed", error=f"callgrind wrote no dump {missing}", seconds=elapsed)
        inductor_root = _inductor_root()
        profiles = [standardize(read_function_counts(d), inductor_root) for d in dumps]
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


def _warm_up_fork_loop(template: _Template) -> None:
    """Two rounds of the fork loop that run nothing: from then on its state is the same
    before every case."""
    for _ in range(2):
        template.send(WARM_UP_NAME)
        template.expect(f"started {WARM_UP_NAME} ", TEMPLATE_START_TIMEOUT)
        template.expect(f"finished {WARM_UP_NAME} ", TEMPLATE_START_TIMEOUT)


def _start_template(make_template: Callable[[], _Template]) -> tuple[_Template, dict[str, Any]]:
    """A template that has imported torch and run its fork loop twice (steady state)."""
    for attempt in range(3):
        template = make_template()
        try:
            info = json.loads(template.expect("ready ", TEMPLATE_START_TIMEOUT))
            _warm_up_fork_loop(template)
            return template, info
        except (TimeoutError, _TemplateDied) as e:
            tail = template.tail() if isinstance(e, TimeoutError) else str(e)
            template.close()
            if attempt == 2:
                raise ValgrindUnavailable(f"the valgrind worker does not start:\n{tail}") from e
    raise AssertionError("unreachable")


def _inductor_root() -> Path:
    """Per torch build, each case's torch.compile cache (`TORCHINDUCTOR_CACHE_DIR`)."""
    from benchkit.util import cache_dir, torch_build_id

    return cache_dir("callgrind", "inductor", torch_build_id())


# Written into a case's torch.compile cache once its uncounted first run is done.
PREPARED_MARKER = "benchkit-prepared"


def _prepared(directory: str | None) -> bool:
    return directory is None or (Path(directory) / PREPARED_MARKER).exists()


def _compile_first(batch: _Batch, template: _Template, index: int, spec: dict[str, Any]) -> None:
    """Run a case that may compile once, uncounted, the first time for this torch build.

    A compile under valgrind talks to compiler subprocesses and the file system,
    so the heap it leaves behind, and with it the statement's count, differed by
    up to 0.3% between runs. Loading compiled code from the case's own cache
    does not: so every counted run loads, the first batch of a build included.
    Only setups that mention ``compile`` are run twice.
    """
    if not uses_compile(spec):
        return
    name = batch.names[index]
    template.send(name)
    pid = int(template.expect(f"started {name} ", TEMPLATE_START_TIMEOUT))
    template.expect(f"finished {name} ", batch.case_timeout)
    for path in batch.root.glob(f"cg.{pid}.*"):
        path.unlink(missing_ok=True)
    (batch.root / "cases" / f"{name}.result").unlink(missing_ok=True)
    directory = Path(spec["inductor_dir"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / PREPARED_MARKER).touch()
    batch.progress(f"{batch.cases[index].key}: torch.compile cache prepared; counting it now")


def _run_case(batch: _Batch, template: _Template, index: int) -> _Template | None:
    """Run one case in the template's fork loop and queue it for parsing; returns the
    template, or None when it died (the case then failed)."""
    start = time.monotonic()
    note = ""
    status: int | None = None
    pid = -1
    spec = batch.specs[index] or {}
    alive: _Template | None = template
    try:
        name = batch.names[index]
        if not _prepared(spec.get("inductor_dir")):
            _compile_first(batch, template, index, spec)
        template.send(name)
        pid = int(template.expect(f"started {name} ", TEMPLATE_START_TIMEOUT))
        try:
            status = int(template.expect(f"finished {name} ", batch.case_timeout))
        except TimeoutError:
            note = f"timed out after {batch.case_timeout:.0f}s"
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            status = int(template.expect(f"finished {name} ", 60))
    except (TimeoutError, _TemplateDied) as e:
        note = note or f"the valgrind worker died while running this case:\n{e}"
        if pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        template.close()
        alive = None
    # Parsed by another thread: the template goes on with the next case meanwhile.
    batch.finished.put((index, status, pid, time.monotonic() - start, note))
    return alive


def _run_in_compile_template(
    batch: _Batch, template: _Template, indices: list[int], work: queue.Queue[list[int]]
) -> _Template | None:
    """Fork the compile template from `template`, run the torch.compile cases in it,
    end it. Returns `template`, or None when it died (unrun cases go back in `work`)."""
    began = time.monotonic()
    remaining = list(indices)
    try:
        template.send(COMPILE_TEMPLATE_NAME)
        pid = int(template.expect(f"started {COMPILE_TEMPLATE_NAME} ", TEMPLATE_START_TIMEOUT))
        template.send("go")
        try:
            template.expect("ready compile", TEMPLATE_START_TIMEOUT)
        except (TimeoutError, _TemplateDied) as e:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            error = f"the torch.compile template (importing {', '.join(COMPILE_MODULES)}) failed:\n{e}"
            for index in remaining:
                batch.record(index, CaseCount(batch.cases[index].key, "failed", error=error))
            remaining.clear()
            template.expect(f"finished {COMPILE_TEMPLATE_NAME} ", 60)
            return template
        _warm_up_fork_loop(template)
        batch.template_seconds[COMPILE_TEMPLATE_NAME] = time.monotonic() - began
        batch.progress(f"torch.compile template ready after {time.monotonic() - began:.0f}s")
        while remaining and not batch.stopping.is_set():
            if _run_case(batch, template, remaining.pop(0)) is None:
                break  # the case failed and the template with it
        else:
            template.send(END_OF_TEMPLATE)
            template.expect(f"finished {COMPILE_TEMPLATE_NAME} ", 60)
            return template
    except (TimeoutError, _TemplateDied):
        template.close()
    if remaining:
        work.put(remaining)
    return None


def _drive(
    batch: _Batch, work: queue.Queue[list[int]], make_template: Callable[[], _Template]
) -> dict[str, Any]:
    """Start a template (while the batch is still being prepared), then feed it units
    of work (a case, or the torch.compile cases together) until the queue is empty;
    restart it if it dies."""
    template: _Template | None = None

    def start() -> tuple[_Template, dict[str, Any]]:
        began = time.monotonic()
        started, info = _start_template(make_template)
        with batch.lock:
            batch.templates.append(started)
        batch.progress(f"valgrind worker ready (torch imported) after {time.monotonic() - began:.0f}s")
        return started, info

    try:
        template, info = start()
        while True:
            all_queued = batch.queued_all.is_set()  # before the get: then empty means done
            try:
                unit = work.get(timeout=0.2)
            except queue.Empty:
                if all_queued:
                    return info
                continue
            if batch.stopping.is_set():
                return info
            if template is None:
                template, info = start()
            if uses_compile(batch.specs[unit[0]] or {}):
                template = _run_in_compile_template(batch, template, unit, work)
            else:
                template = _run_case(batch, template, unit[0])
    finally:
        if template is not None:
            template.close()


def _prepare_cases(batch: _Batch, queue_cases: Callable[[list[int]], None]) -> None:
    """Write the per-case spec files and hand the cases to `queue_cases`: all at once
    when every C++ shard is built; else the Python cases first, so the workers count
    them while the C++ shards compile, then the C++ cases."""
    from benchkit.api import Language
    from benchkit.cpp_batch import build_all, is_built

    (batch.root / "cases").mkdir(parents=True, exist_ok=True)
    shards = count_shards(batch.cases)
    is_cpp = [case.timer_args.language is Language.CPP for case in batch.cases]
    to_compile = [i for i, cpp in enumerate(is_cpp) if cpp] if not all(map(is_built, shards)) else []
    first = sorted(set(range(len(batch.cases))) - set(to_compile))
    for index in first:
        _write_spec(batch, index, shards, {})
    queue_cases(first)
    if to_compile:
        began = time.monotonic()
        compile_errors = build_all(shards, progress=batch.progress)
        batch.cpp_compile_seconds = time.monotonic() - began
        for index in to_compile:
            _write_spec(batch, index, shards, compile_errors)
        queue_cases(to_compile)


def _write_spec(
    batch: _Batch, index: int, shards: Sequence[Shard], compile_errors: Mapping[str, str]
) -> None:
    """One case's spec file (its TorchScript artifact built first), or its preset outcome
    (skipped, or failed to compile) and a None spec."""
    from benchkit.api import Language
    from benchkit.cpp_batch import Snippet
    from benchkit.torchscript import TorchScriptUnavailable, ensure_artifact

    case, preset, specs = batch.cases[index], batch.preset, batch.specs
    args = case.timer_args
    specs[index] = None
    if args.torchscript is not None:
        try:
            ensure_artifact(args.torchscript)
        except TorchScriptUnavailable as e:
            preset[index] = CaseCount(case.key, "skipped", error=str(e))
            return
    # Only what the child needs: equal cases get byte-identical specs (and counts).
    spec: dict[str, Any] = {
        "language": args.language.name,
        "num_threads": args.num_threads,
        "warmup": WARMUP,
        "inductor_dir": str(_inductor_root() / case.fingerprint),
    }
    if args.language is Language.CPP:
        snippet = Snippet.of(args)
        found = _library_for(snippet, shards)
        if found is None:
            error = compile_errors.get(snippet.key, "C++ shard was not built")
            preset[index] = CaseCount(case.key, "failed", error=error)
            return
        spec.update(module=found[0], library=str(found[1]), function=_count_function_name(snippet))
    else:
        spec.update(stmt=args.stmt, setup=args.setup)
    specs[index] = spec
    (batch.root / "cases" / f"{case.fingerprint}.json").write_text(json.dumps(spec))


def _claim_batch_dir(runs: Path) -> tuple[Path, int]:
    """A batch folder with the same name in every run (paths end up in argv, in the
    environment and in interned strings of every case), locked for this batch:
    ``batch00`` unless another batch is running."""
    for slot in range(100):
        lock = os.open(runs / f"batch{slot:02d}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        root = runs / f"batch{slot:02d}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        return root, lock
    raise ValgrindUnavailable(f"100 instruction-count batches are already running in {runs}")


def _durations_path() -> Path:
    from benchkit.util import cache_dir

    return cache_dir("callgrind") / "durations.json"


def _save_durations(batch: _Batch) -> None:
    """Remember how long each case took, to schedule the longest first next time."""
    from benchkit.util import atomic_write_json, file_lock

    path = _durations_path()
    # Read-merge-write under a lock: two batches at once must not drop each other's updates.
    with contextlib.suppress(OSError), file_lock(path.with_suffix(".lock")):
        durations = _load_durations()
        durations.update({batch.names[i]: c.seconds for i, c in batch.results.items() if c.seconds})
        durations.update(batch.template_seconds)
        atomic_write_json(path, durations)


def _load_durations() -> dict[str, float]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(_durations_path().read_text())
        if isinstance(data, dict):
            return {str(k): float(v) for k, v in data.items()}
    return {}


def collect(
    cases: Sequence[Case],
    jobs: int | None = None,
    case_timeout: float = DEFAULT_CASE_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    keep_files: bool = False,
) -> BatchResult:
    """Count every case; failures come back as `CaseCount(status="failed")`, never raised.

    Raises `ValgrindUnavailable` when nothing can be counted here at all.
    """
    from benchkit.util import atomic_write_bytes, cache_dir

    progress = progress or (lambda message: print(message, file=sys.stderr, flush=True))
    start = time.monotonic()
    version = valgrind_version()
    import torch

    if not torch._C._valgrind_supported_platform():
        raise ValgrindUnavailable("this torch build has no valgrind support")
    control = build_control_library()
    priming = _priming_copy(control)
    if not priming.exists():
        priming.parent.mkdir(exist_ok=True)
        atomic_write_bytes(priming, control.read_bytes())
    cases = list(cases)
    root, lock = _claim_batch_dir(cache_dir("callgrind", "runs"))
    try:
        batch = _Batch(
            root, cases, [c.fingerprint for c in cases], case_timeout, progress, keep_files=keep_files
        )
        aslr = _aslr_prefix()
        jobs = max(1, min(jobs or os.cpu_count() or 1, len(cases) or 1))
        infos, errors = _run_batch(batch, jobs, _template_command(aslr, root, control), _fixed_environment())
        if errors and not any(infos):
            raise errors[0]
        for index in range(len(cases)):
            if index not in batch.results:
                reason = "; ".join(str(e) for e in errors) or "not run"
                batch.record(index, CaseCount(cases[index].key, "failed", error=reason))
        _save_durations(batch)
        info = next((i for i in infos if i), {})
        metadata = {
            "valgrind": version,
            "cpu_capability_under_valgrind": info.get("cpu_capability"),
            "cpu_capability_native": torch.backends.cpu.get_cpu_capability(),
            "mkl_enable_instructions": MKL_INSTRUCTIONS,
            "aslr": "disabled" if aslr else "enabled",
            "torch": info.get("torch", torch.__version__),
            "torch_git": info.get("torch_git", ""),
            "torch_build_id": _torch_build_id(),
            "python": info.get("python", platform.python_version()),
            "python_executable": sys.executable,
            "host": platform.node(),
            "warmup": WARMUP,
            "repeats": REPEATS,
            "repeats_single_execution": SINGLE_EXECUTION_REPEATS,
            "statistic": "minimum of repeats, per execution",
            "not_counted": {"call_tree_of": TYPE_CACHE_MISS, "functions": LAYOUT_NOISE.pattern},
            "jobs": jobs,
            "preparation_seconds": round(batch.started - start, 1),
            "cpp_compile_seconds": round(batch.cpp_compile_seconds, 1),
        }
        counts = {cases[i].key: batch.results[i] for i in range(len(cases))}
        return BatchResult(counts, metadata, time.monotonic() - start)
    finally:
        if not keep_files:
            shutil.rmtree(root, ignore_errors=True)
        os.close(lock)


def _torch_build_id() -> str:
    from benchkit.util import torch_build_id

    return torch_build_id()


def _template_command(aslr: list[str], root: Path, control: Path) -> list[str]:
    return [
        *aslr,
        shutil.which("valgrind") or "valgrind",
        "--tool=callgrind",
        # Less optimisation of translated code: a child translates everything its
        # statement runs anew (instrumented), which costs more than running it.
        "--vex-iropt-level=1",
        "--instr-atstart=no",
        # CPython's type-attribute cache misses: which (type, name) pairs collide in
        # its method cache depends on where the name strings lie, so any change to the
        # heap (a torch commit, this file) moves them. Nothing inside the miss path
        # (walking the MRO's dicts) is counted; the lookup's own cost still is.
        f"--toggle-collect={TYPE_CACHE_MISS}",
        "--collect-atstart=yes",  # after --toggle-collect, which turns it off
        "--dump-line=no",
        f"--callgrind-out-file={root}/cg.%p",
        f"--log-file={root}/valgrind.%p.log",
        sys.executable,
        str(Path(__file__).resolve()),
        _TEMPLATE_FLAG,
        str(root),
        str(control),
    ]


def _work_units(batch: _Batch, runnable: list[int], durations: Mapping[str, float]) -> list[list[int]]:
    """Cases in units of work, longest first (as in earlier batches), so that the
    workers finish together: one case each, but the torch.compile cases together,
    for the template they share. Which worker runs a unit does not change its counts."""
    compiled = [i for i in runnable if uses_compile(batch.specs[i] or {})]
    units = [[i] for i in runnable if i not in compiled]
    if compiled:
        units.append(compiled)

    def seconds(unit: list[int]) -> float:
        own = sum(durations.get(batch.names[i], 1.0) for i in unit)
        return own + (durations.get(COMPILE_TEMPLATE_NAME, 20.0) if unit is compiled else 0.0)

    return sorted(units, key=lambda unit: -seconds(unit))


def _run_batch(
    batch: _Batch, jobs: int, command: list[str], env: dict[str, str]
) -> tuple[list[dict[str, Any]], list[BaseException]]:
    """Templates start importing torch under valgrind while the cases are prepared;
    then they take cases from one queue, longest first (see `_prepare_cases` for
    when the C++ cases join it), and a parser thread reads the dumps.
    Returns the templates' self-descriptions and worker errors."""
    work: queue.Queue[list[int]] = queue.Queue()
    slots = itertools.count()
    infos: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        log = batch.root / f"worker{next(slots)}.log"
        try:
            infos.append(_drive(batch, work, lambda: _Template(batch.root, command, env, log)))
        except BaseException as e:  # surfaced after the other workers finish
            errors.append(e)

    def parser() -> None:
        while (item := batch.finished.get()) is not None:
            index, status, pid, seconds, note = item
            try:
                count = _outcome(batch, index, status, pid, seconds, note)
            except Exception:  # a dump we cannot read fails its case, not the batch
                count = CaseCount(batch.cases[index].key, "failed", error=traceback.format_exc())
            batch.record(index, count)

    durations = _load_durations()
    queued_any = False

    def queue_cases(indices: list[int]) -> None:
        nonlocal queued_any
        if not queued_any:
            batch.started = time.monotonic()
            queued_any = True
        runnable = [i for i in indices if batch.specs.get(i) is not None]
        for unit in _work_units(batch, runnable, durations):
            work.put(unit)
        for index in indices:
            if index in batch.preset:
                batch.record(index, batch.preset[index])
        if runnable:
            batch.progress(f"counting {len(runnable)} case(s) with {jobs} valgrind worker(s)...")

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    parse_thread = threading.Thread(target=parser)
    for thread in [*threads, parse_thread]:
        thread.start()
    try:
        try:
            _prepare_cases(batch, queue_cases)
        finally:
            batch.queued_all.set()
        for thread in threads:
            thread.join()
    except BaseException:  # stop the valgrind processes too, not just this one
        batch.stopping.set()
        with batch.lock:
            for template in batch.templates:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(template.process.pid, signal.SIGKILL)
        raise
    finally:
        batch.finished.put(None)
        parse_thread.join()
    return infos, errors


# =============================================================================
# asv
# =============================================================================


def suite_timeout(n_cases: int) -> float:
    """asv's limit for the one batch: C++ compile of a cold cache plus a generous
    10 s per case (the standard suite needs about 1 s per case per core)."""
    return 1200.0 + 10.0 * n_cases


class InstructionCountMetric:
    """asv ``track_instructions`` (unit "instructions", per execution) for every case.

    All these benchmarks share one ``setup_cache``: a single batch counts the
    cases this asv command selected (`benchkit.asv_selection`) that have no stored
    count for this torch build yet (`benchkit.count_cache`), so later rounds and
    later selections reuse the counts; it stores the function-level profiles
    beside asv's results (`benchkit.profiles`). ``module`` is the suite module's
    name as asv sees it (for matching ``-b``). Each benchmark only looks its case
    up. Without valgrind the batch reports why and every instruction benchmark
    is skipped; wall-time benchmarks are unaffected.
    """

    method_name = "track_instructions"

    def __init__(self, cases: Sequence[Case], module: str = "instruction_counts") -> None:
        suite = tuple(cases)

        def count_instructions() -> dict[str, Any]:
            return _asv_batch(suite, module)

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
        track_instructions.unit = "instructions"  # type: ignore[attr-defined]
        track_instructions.timeout = 60  # type: ignore[attr-defined]
        return track_instructions


def _asv_batch(cases: Sequence[Case], module: str) -> dict[str, Any]:
    from benchkit import asv_selection, count_cache
    from benchkit.expand import asv_class_name
    from benchkit.util import atomic_write_json

    started = time.monotonic()
    invocation = asv_selection.current_invocation()
    regexes = invocation.regexes if invocation else None
    names = {f"{module}.{asv_class_name(c)}.{InstructionCountMetric.method_name}": c for c in cases}
    chosen = asv_selection.selected(names, regexes)
    wanted = [case for name, case in names.items() if name in chosen]
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
            result = collect(missing, progress=lambda message: print(message, flush=True))
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
    from benchkit.profiles import save_asv_profile

    try:
        path = save_asv_profile(result)
        print(f"profiles saved to {path}", flush=True)
    except Exception as e:  # counts are still valid without their profiles
        print(f"profiles not saved: {e}", file=sys.stderr, flush=True)
    return {"counts": {key: count.summary() for key, count in counts.items()}, "metadata": metadata}


# =============================================================================
# CLI: benchkit counts
# =============================================================================


def counts_json(result: BatchResult) -> dict[str, Any]:
    """``{case key: {"instructions": N, ...}}`` with the batch's CPU capability on each."""
    capability = result.metadata.get("cpu_capability_under_valgrind")
    return {key: {**count.summary(), "cpu_capability": capability} for key, count in result.counts.items()}


def _cmd_counts(args: argparse.Namespace) -> int:
    from benchkit.definitions import load_cases
    from benchkit.errors import UserError
    from benchkit.expand import select
    from benchkit.util import atomic_write_json

    cases = select(load_cases(args.definitions), args.filter)
    if not cases:
        raise UserError(f"no case matches --filter {args.filter!r}")
    try:
        result = collect(cases, jobs=args.jobs, case_timeout=args.case_timeout, keep_files=args.keep_files)
    except ValgrindUnavailable as e:
        raise UserError(str(e)) from None
    failed = [c for c in result.counts.values() if c.status == "failed"]
    meta = result.metadata
    print(
        f"{len(result.counts) - len(failed)}/{len(result.counts)} case(s) counted in {result.seconds:.0f}s "
        f"({meta['valgrind']}, CPU capability under valgrind: {meta['cpu_capability_under_valgrind']}, "
        f"native: {meta['cpu_capability_native']}, ASLR {meta['aslr']})",
        file=sys.stderr,
    )
    width = max(len(k) for k in result.counts)
    for key, count in result.counts.items():
        value = f"{count.instructions:>14,.1f}" if count.status == "ok" else f"{count.status:>14}"
        print(f"{key:<{width}}  {value}")
    if args.json:
        atomic_write_json(args.json, counts_json(result))
    if args.profile:
        from benchkit.profiles import save_profile

        save_profile(args.profile, result)
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "counts",
        help="Callgrind instruction counts of cases (outside asv)",
        description="Count instructions per statement execution under Callgrind, in batches.",
    )
    parser.add_argument(
        "--definitions",
        action="append",
        metavar="PATH",
        help="benchmark definitions module (repeatable; default: BENCHKIT_DEFINITIONS)",
    )
    parser.add_argument("--filter", metavar="REGEX", help="only cases whose key matches")
    parser.add_argument("--json", type=Path, metavar="OUT", help='write {case: {"instructions": N, ...}}')
    parser.add_argument(
        "--profile", type=Path, metavar="OUT", help="also save function-level profiles (.json.gz)"
    )
    parser.add_argument("--jobs", type=int, help="valgrind workers (default: one per core)")
    parser.add_argument(
        "--case-timeout", type=float, default=DEFAULT_CASE_TIMEOUT, help="seconds per case (default 300)"
    )
    parser.add_argument("--keep-files", action="store_true", help="keep callgrind dumps and worker logs")
    parser.set_defaults(func=_cmd_counts)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == _TEMPLATE_FLAG:
    _template_main(Path(sys.argv[2]), sys.argv[3])
