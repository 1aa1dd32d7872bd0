"""The worker that runs under valgrind: a template process imports torch once, then
forks one child per case, which measures its statement in dumped regions.

valgrind starts it as ``python -m benchkit.measure.callgrind.child ROOT CONTROL``.
It imports only the standard library, torch and the standard-library-only modules
`policy`, `control` and `benchkit.measure.stmt_loop`.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import itertools
import json
import os
import platform
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from benchkit.measure.callgrind.control import CONTROL_MODULE, load_extension, priming_copy
from benchkit.measure.callgrind.policy import (
    REPEATS,
    SINGLE_EXECUTION_REPEATS,
    choose_number,
    repeats_after_probe,
)
from benchkit.measure.stmt_loop import compile_statement_loop


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
    module = load_extension(spec["module"], spec["library"])
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
# What every torch.compile case imports in its setup (a slow import under valgrind).
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
        # Setup's Python-level randomness (and libraries', e.g. temp names); in the compile
        # template also dynamo's names (`_draw_uuid4_from_random`).
        random.seed(0)

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


def _draw_uuid4_from_random() -> None:
    """Make `uuid.uuid4` draw from Python's `random` (seeded in each child) instead of the OS.

    dynamo names each compiled function with a uuid4 and keeps that name in the caller's
    globals, read on every call; with a new name in every run, a torch.compile case's count
    differed between identical runs. Done in the compile template only, where dynamo has
    imported `uuid` already: the other cases' children allocate nothing new.
    """
    import uuid

    def seeded_uuid4() -> uuid.UUID:
        return uuid.UUID(int=random.getrandbits(128), version=4)

    uuid.uuid4 = seeded_uuid4


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
        load_extension(CONTROL_MODULE, str(priming_copy(Path(control_library))))


def template_main(root: Path, control_library: str) -> None:
    """Import torch uninstrumented, then fork one child per case index read from stdin.

    Protocol on stdout (one line each): ``ready <json>``, then per case name read
    from stdin ``started <name> <pid>`` and ``finished <name> <wait status>``. The
    loop does the same work for every case, so every child starts from the same state.
    """
    import torch

    # Children's gc.collect() need not walk the objects of the torch import.
    gc.collect()
    gc.freeze()
    ctl = load_extension(CONTROL_MODULE, control_library)
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
        _draw_uuid4_from_random()
        gc.collect()
        gc.freeze()
        os.write(1, b"ready compile\n")
        _fork_loop(root, ctl, torch, probe_prefix, nested=True)
    except BaseException:
        traceback.print_exc()  # into the worker's log
        status = 1
    os._exit(status)


if __name__ == "__main__":
    template_main(Path(sys.argv[1]), sys.argv[2])
