"""One wall-time round of one build: a process that measures every case it is given, in turn.

Run by `benchkit.measure.walltime.batch` in a build's asv environment, its torch found through
``PYTHONPATH`` (the build's unpacked tree, `benchkit.history.builds.install`), as

    python -m benchkit.measure.walltime.batch_child REQUEST.json RESULTS.jsonl

The request names the cases (their keys), the job's asv selection (which decides the C++
shards' layout), the samples per case and, optionally, each case's block size. Each case is
prepared, calibrated to a block of `ROUND_BLOCK_SECONDS` (or given its block size, found by the
build's first round) and timed `samples` times with the code asv's ``time_wall`` uses
(`benchkit.measure.walltime.timing`), so a round here measures what an asv round measures,
without a process per case.

One JSON line per case is appended to RESULTS and flushed before the next case starts: when
a case kills the process, the parent knows which one did (the first without a line) and goes
on with the rest in a new process. The first line names the torch this process imported.
With ``"then": {"keys": [...], "cores": [...]}`` (a round side by side, the process pinned to one
core), the process writes a `WAITING` line after its cases, waits for `GO` on stdin, then measures
those cases of several threads on all the given cores (`benchkit.measure.walltime.batch`).
With ``"action": "build"`` the process only compiles the C++ shards and scripts the TorchScript
models of the cases, so that no round pays for them, and says whether the rounds may skip
inductor's ISA probe (`benchkit.measure.vec_isa`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

# Outcomes of a case in a round (`benchkit.measure.walltime.batch.CaseStatus` reads them).
OK, SKIPPED, FAILED = "ok", "skipped", "failed"
# A round side by side: the line written once the cases of its own core are done, and the word on
# stdin that lets the process go on with its cases of several threads, the machine its own.
WAITING, GO = "waiting", "go"


def _cases(keys: Sequence[str], regexes: Sequence[str] | None) -> tuple[dict[str, Any], Any]:
    """The definitions' cases by key (those asked for) and the C++ shards of the job's asv
    selection `regexes` (the layout asv's ``time_wall`` and the Callgrind batch derive from it)."""
    from benchkit.define.api import Language
    from benchkit.define.expand import asv_class_name
    from benchkit.expand import load_cases
    from benchkit.measure.cpp.shards import CppSuite, Snippet
    from benchkit.measure.selection import cpp_layout_keys
    from benchkit.names import CASES_MODULE

    cases = load_cases()
    by_key = {case.key: case for case in cases}
    missing = [key for key in keys if key not in by_key]
    if missing:
        raise SystemExit(f"batch_child: unknown case key(s): {', '.join(missing[:5])}")
    key_of_class = {
        f"{CASES_MODULE}.{asv_class_name(case)}": Snippet.of(case.timer_args).key
        for case in cases
        if case.timer_args.language is Language.CPP
    }
    suite = CppSuite([case.timer_args for case in cases])
    return by_key, suite.for_keys(cpp_layout_keys(key_of_class, regexes))


def _measure_case(case: Any, cpp_suite: Any, samples: int, block: int | None) -> dict[str, Any]:
    """One case here: its samples (seconds per execution), its block size (executions per
    sample: `block` where given, else calibrated here), the seconds the case took in all and
    those inside its timed blocks."""
    from benchkit.define.api import Language
    from benchkit.measure.walltime.timing import ROUND_BLOCK_SECONDS, CaseSkipped, prepare

    args = case.timer_args
    began = time.perf_counter()
    try:
        prepared = prepare(args, case.key, cpp_suite if args.language is Language.CPP else None)
        if block:
            prepared.use_block(block)
        else:
            prepared.calibrate(ROUND_BLOCK_SECONDS)
        block = prepared.block_size
        blocks = [prepared.run_block(block) for _ in range(samples)]
    except CaseSkipped as e:
        return {"status": SKIPPED, "error": str(e)}
    except Exception:
        return {"status": FAILED, "error": traceback.format_exc(limit=8)}
    seconds = time.perf_counter() - began
    return {
        "status": OK,
        "samples": [t / block for t in blocks],
        "block": block,
        "seconds": seconds,
        "sampled": sum(blocks),
    }


def _build(
    by_key: dict[str, Any], keys: Sequence[str], cpp_suite: Any, write: Callable[[dict], None]
) -> None:
    """Compile the C++ shards and script the TorchScript models these cases need."""
    from benchkit.define.api import Language
    from benchkit.measure import vec_isa
    from benchkit.measure.cpp.shards import build_all
    from benchkit.measure.cpp.torchscript import ensure_artifacts

    chosen = [by_key[key].timer_args for key in keys]
    ensure_artifacts([args.torchscript for args in chosen if args.torchscript is not None])
    shards = cpp_suite.shards_holding([args for args in chosen if args.language is Language.CPP])
    errors = build_all(shards, progress=lambda m: print(m, file=sys.stderr, flush=True)) if shards else {}
    write({"built": len(shards), "errors": errors, "skip_isa_probe": vec_isa.probe_skippable()})


def _writer(out: TextIO) -> Callable[[dict], None]:
    def write(line: dict) -> None:
        out.write(json.dumps(line) + "\n")
        out.flush()

    return write


def main(argv: Sequence[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    keys: list[str] = request["keys"]
    import torch

    with open(argv[1], "a") as out:
        write = _writer(out)
        write({"torch": torch.__version__, "git_version": torch.version.git_version, "file": torch.__file__})
        then = request.get("then") or {}
        by_key, cpp_suite = _cases([*keys, *then.get("keys", ())], request.get("regexes"))
        if request.get("action") == "build":
            _build(by_key, keys, cpp_suite, write)
            return 0
        samples, blocks = int(request["samples"]), request.get("blocks") or {}
        for key in keys:
            write({"key": key, **_measure_case(by_key[key], cpp_suite, samples, blocks.get(key))})
        if then:
            write({WAITING: True})
            if sys.stdin.readline().strip() != GO:
                return 0  # the parent gave up on this round
            os.sched_setaffinity(0, then["cores"])  # the threads a case starts from here inherit it
            for key in then["keys"]:
                write({"key": key, **_measure_case(by_key[key], cpp_suite, samples, blocks.get(key))})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
