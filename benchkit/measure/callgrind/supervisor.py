"""Counting a batch of cases: templates under valgrind take cases from one queue,
longest first; a parser thread reads their dumps; failures come back as data.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import settings
from benchkit.measure.callgrind.batch import Batch, bytecode_root, inductor_root, outcome
from benchkit.measure.callgrind.child import (
    COMPILE_MODULES,
    COMPILE_TEMPLATE_NAME,
    END_OF_TEMPLATE,
    uses_compile,
)
from benchkit.measure.callgrind.control import build_control_library, priming_copy
from benchkit.measure.callgrind.durations import load_durations, save_durations
from benchkit.measure.callgrind.metadata import batch_metadata
from benchkit.measure.callgrind.place import (
    PLACE_PREFIX,
    PLACES,
    claim_place,
    counted_artifact,
    import_dirs,
    worker_site,
)
from benchkit.measure.callgrind.policy import (
    DEFAULT_CASE_TIMEOUT,
    TEMPLATE_START_TIMEOUT,
    WARMUP,
)
from benchkit.measure.callgrind.results import BatchResult, CaseCount, ValgrindUnavailable, valgrind_version
from benchkit.measure.callgrind.template import (
    Template,
    TemplateDied,
    aslr_prefix,
    fixed_environment,
    start_template,
    template_command,
    warm_up_fork_loop,
)
from benchkit.util import atomic_write_bytes, cache_dir, torch_package_dir

if TYPE_CHECKING:
    from benchkit.define.expand import Case
    from benchkit.measure.cpp.shards import CppSuite


# Written into a case's torch.compile cache once its uncounted first run is done.
PREPARED_MARKER = "benchkit-prepared"


def _prepared(directory: str | None) -> bool:
    return directory is None or (Path(directory) / PREPARED_MARKER).exists()


def _compile_first(batch: Batch, template: Template, index: int, spec: dict[str, Any]) -> None:
    """Run a case that may compile once, uncounted, the first time for this torch build.

    A compile under valgrind talks to compiler subprocesses and the file system,
    so the heap it leaves behind, and with it the statement's count, differs
    between runs. Loading compiled code from the case's own cache
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


def _run_case(batch: Batch, template: Template, index: int) -> Template | None:
    """Run one case in the template's fork loop and queue it for parsing; returns the
    template, or None when it died (the case then failed)."""
    start = time.monotonic()
    note = ""
    status: int | None = None
    pid = -1
    spec = batch.specs[index] or {}
    alive: Template | None = template
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
    except (TimeoutError, TemplateDied) as e:
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
    batch: Batch, template: Template, indices: list[int], work: queue.Queue[list[int]]
) -> Template | None:
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
        except (TimeoutError, TemplateDied) as e:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            error = f"the torch.compile template (importing {', '.join(COMPILE_MODULES)}) failed:\n{e}"
            for index in remaining:
                batch.record(index, CaseCount(batch.cases[index].key, "failed", error=error))
            remaining.clear()
            template.expect(f"finished {COMPILE_TEMPLATE_NAME} ", 60)
            return template
        warm_up_fork_loop(template)
        batch.template_seconds[COMPILE_TEMPLATE_NAME] = time.monotonic() - began
        batch.progress(f"torch.compile template ready after {time.monotonic() - began:.0f}s")
        while remaining and not batch.stopping.is_set():
            if _run_case(batch, template, remaining.pop(0)) is None:
                break  # the case failed and the template with it
        else:
            template.send(END_OF_TEMPLATE)
            template.expect(f"finished {COMPILE_TEMPLATE_NAME} ", 60)
            return template
    except (TimeoutError, TemplateDied):
        template.close()
    if remaining:
        work.put(remaining)
    return None


def _drive(
    batch: Batch, work: queue.Queue[list[int]], make_template: Callable[[], Template]
) -> dict[str, Any]:
    """Start a template (while the batch is still being prepared), then feed it units
    of work (a case, or the torch.compile cases together) until the queue is empty;
    restart it if it dies."""
    template: Template | None = None

    def start() -> tuple[Template, dict[str, Any]]:
        began = time.monotonic()
        started, info = start_template(make_template)
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


def _prepare_cases(batch: Batch, queue_cases: Callable[[list[int]], None]) -> None:
    """Write the per-case spec files and hand the cases to `queue_cases`: all at once
    when every C++ shard is built (e.g. by the wall-time stage, which shares them);
    else the Python cases first, so the workers count them while the C++ shards
    compile, then the C++ cases."""
    from benchkit.define.api import Language
    from benchkit.measure.cpp.shards import build_all, is_built
    from benchkit.measure.cpp.torchscript import ensure_artifacts

    (batch.root / "cases").mkdir(parents=True, exist_ok=True)
    # All missing TorchScript artifacts in one scripting process.
    models = [case.timer_args.torchscript for case in batch.cases]
    unavailable = ensure_artifacts([model for model in models if model is not None])
    cpp = [case.timer_args for case in batch.cases if case.timer_args.language is Language.CPP]
    shards = batch.cpp_suite.shards_holding(cpp)
    is_cpp = [case.timer_args.language is Language.CPP for case in batch.cases]
    to_compile = [i for i, cpp in enumerate(is_cpp) if cpp] if not all(map(is_built, shards)) else []
    first = sorted(set(range(len(batch.cases))) - set(to_compile))
    for index in first:
        _write_spec(batch, index, {}, unavailable)
    queue_cases(first)
    if to_compile:
        began = time.monotonic()
        compile_errors = build_all(shards, progress=batch.progress)
        batch.cpp_compile_seconds = time.monotonic() - began
        for index in to_compile:
            _write_spec(batch, index, compile_errors, unavailable)
        queue_cases(to_compile)


def _write_spec(
    batch: Batch, index: int, compile_errors: Mapping[str, str], unavailable: Mapping[str, str]
) -> None:
    """One case's spec file, or its preset outcome (skipped: its TorchScript artifact is
    `unavailable`, or failed to compile) and a None spec."""
    from benchkit.define.api import Language
    from benchkit.measure.cpp.shards import Snippet

    case, preset, specs = batch.cases[index], batch.preset, batch.specs
    args = case.timer_args
    specs[index] = None
    if args.torchscript is not None and args.torchscript.path in unavailable:
        preset[index] = CaseCount(case.key, "skipped", error=unavailable[args.torchscript.path])
        return
    # Only what the child needs: equal cases get byte-identical specs (and counts).
    spec: dict[str, Any] = {
        "language": args.language.name,
        "num_threads": args.num_threads,
        "warmup": WARMUP,
        "inductor_dir": str(batch.place.link(inductor_root(), "inductor") / case.fingerprint),
    }
    if args.language is Language.CPP:
        snippet = Snippet.of(args)
        found = batch.cpp_suite.built_library(args)
        if found is None:
            error = compile_errors.get(snippet.key, "C++ shard was not built")
            preset[index] = CaseCount(case.key, "failed", error=error)
            return
        library = batch.place.link(found[1], "files", found[1].name)
        spec.update(module=found[0], library=str(library), function=snippet.count_function_name)
    else:
        setup = args.setup
        if args.torchscript is not None:
            setup = setup.replace(args.torchscript.path, counted_artifact(args.torchscript.path))
        spec.update(stmt=args.stmt, setup=setup)
    if args.torchscript is not None:
        # Loaded by a path relative to the worker's working directory, the place.
        batch.place.link(Path(args.torchscript.path), counted_artifact(args.torchscript.path))
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


def _control_library() -> tuple[Path, Path]:
    """The control extension the workers load, and its priming copy; `ValgrindUnavailable`
    where this torch cannot run under valgrind."""
    import torch

    if not torch._C._valgrind_supported_platform():
        raise ValgrindUnavailable("this torch build has no valgrind support")
    control = build_control_library()
    priming = priming_copy(control)
    if not priming.exists():
        priming.parent.mkdir(exist_ok=True)
        atomic_write_bytes(priming, control.read_bytes())
    return control, priming


def _prepare_place(place: Any, root: Path, control: Path, priming: Path) -> Path:
    """The counting place made ready for this batch: torch's site, the caches, and the worker's
    names for the control extension and its priming copy (the extension's name there)."""
    torch_dir = torch_package_dir()
    site = worker_site(torch_dir, import_dirs(torch_dir))
    place.prepare(root, inductor_root(), site, bytecode_root())
    control_here = place.hard_link(control, "files", control.name)
    place.hard_link(priming, "files", priming.parent.name, priming.name)
    return control_here


def collect(
    cases: Sequence[Case],
    jobs: int | None = None,
    case_timeout: float = DEFAULT_CASE_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    keep_files: bool = False,
    cpp_suite: CppSuite | None = None,
) -> BatchResult:
    """Count every case; failures come back as `CaseCount(status="failed")`, never raised.

    C++ cases run the counting functions of `cpp_suite`'s shards (by default a layout
    of these cases alone); pass the suite the wall-time stage uses to share its compiles.

    Raises `ValgrindUnavailable` when nothing can be counted here at all.
    """

    progress = progress or (lambda message: print(message, file=sys.stderr, flush=True))
    start = time.monotonic()
    version = valgrind_version()
    control, priming = _control_library()
    cases = list(cases)
    place = claim_place(settings.current().measure.counting_slot, progress)
    if place is None:
        raise ValgrindUnavailable(f"no free {PLACES}/{PLACE_PREFIX}NN folder of this user to count in")
    try:
        root, lock = _claim_batch_dir(cache_dir("callgrind", "runs"))
    except BaseException:
        place.close()
        raise
    bytecode: threading.Thread | None = None
    try:
        control_here = _prepare_place(place, root, control, priming)
        # Natively, before any worker starts: the bytecode every worker reads at its start.
        # It compiles on one core while the batch is prepared (specs, C++ shards).
        failed_note = "compiling the worker's bytecode failed (it compiles its own)"
        bytecode = place.compile_bytecode_aside(
            fixed_environment(place),
            ("benchkit.measure.callgrind.child", "torch", *COMPILE_MODULES),
            lambda failed: progress(f"{failed_note}: {failed}"),
        )
        if cpp_suite is None:
            from benchkit.measure.cpp.shards import CppSuite

            cpp_suite = CppSuite([c.timer_args for c in cases])
        batch = Batch(
            root,
            cases,
            [c.fingerprint for c in cases],
            case_timeout,
            progress,
            cpp_suite,
            place,
            keep_files=keep_files,
        )
        aslr = aslr_prefix()
        jobs = max(1, min(jobs or os.cpu_count() or 1, len(cases) or 1))
        infos, errors = _run_batch(
            batch, jobs, template_command(aslr, place, control_here), fixed_environment(place), bytecode.join
        )
        if errors and not any(infos):
            raise errors[0]
        _record_unrun(batch, cases, errors)
        info = next((i for i in infos if i), {})
        metadata = batch_metadata(version, info, aslr, place, jobs) | {
            "preparation_seconds": round(batch.started - start, 1),
            "cpp_compile_seconds": round(batch.cpp_compile_seconds, 1),
        }
        counts = {cases[i].key: batch.results[i] for i in range(len(cases))}
        return BatchResult(counts, metadata, time.monotonic() - start)
    finally:
        if bytecode is not None:  # its compiler writes into the place until it ends
            bytecode.join()
        if not keep_files:
            shutil.rmtree(root, ignore_errors=True)
        os.close(lock)
        place.close()


def _record_unrun(batch: Batch, cases: Sequence[Case], errors: Sequence[BaseException]) -> None:
    """Every case the workers left without a result is a failed count (never a missing one),
    and the durations of those that ran are kept for the next batch's order."""
    for index in range(len(cases)):
        if index not in batch.results:
            reason = "; ".join(str(e) for e in errors) or "not run"
            batch.record(index, CaseCount(cases[index].key, "failed", error=reason))
    seconds = {batch.names[i]: c.seconds for i, c in batch.results.items() if c.seconds}
    save_durations({**seconds, **batch.template_seconds})


def _work_units(batch: Batch, runnable: list[int], durations: Mapping[str, float]) -> list[list[int]]:
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
    batch: Batch, jobs: int, command: list[str], env: dict[str, str], ready: Callable[[], None]
) -> tuple[list[dict[str, Any]], list[BaseException]]:
    """Templates start importing torch under valgrind (once `ready` returns) while the cases are prepared;
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
            ready()
            infos.append(_drive(batch, work, lambda: Template(batch.place.root, command, env, log)))
        except BaseException as e:  # surfaced after the other workers finish
            errors.append(e)

    def parser() -> None:
        while (item := batch.finished.get()) is not None:
            index, status, pid, seconds, note = item
            try:
                count = outcome(batch, index, status, pid, seconds, note)
            except Exception:  # a dump we cannot read fails its case, not the batch
                count = CaseCount(batch.cases[index].key, "failed", error=traceback.format_exc())
            batch.record(index, count)

    durations = load_durations()
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
