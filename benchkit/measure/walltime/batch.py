"""Wall-time rounds as `benchkit main` measures them: one process per build and round that
measures every selected case in turn, the builds alternating round by round, or side by side
on a core each (`benchkit.measure.side_by_side`; cases of several threads then wait until
every build's process is done with the others, and run one build after the other, each on
every core, in the same processes).

asv's ``time_wall`` is a process per case and round, and a build switch (uninstall, install)
before every round: most of such a round prepares rather than measures (lab/reports/batch-rounds.md:
28 % of a per-case round is samples, 59 % of a batch round). Here each build keeps its own
interpreter: its asv environment, with the build's unpacked tree first on ``PYTHONPATH``
(`benchkit.history.builds.install`), so switching builds is choosing a path. A round of a
build is one `benchkit.measure.walltime.batch_child` process; a case that kills it costs that
case, and the round goes on in a new process with the cases after it.

What a round measures is a `CaseRound` per case; `benchkit.history.results.rounds_writer`
writes them into asv's results as asv's own rounds would be written.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.measure import side_by_side, vec_isa
from benchkit.measure.walltime import batch_child
from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND
from benchkit.util import REPO_ROOT

# A case that has not finished after this many seconds is stopped and recorded as failed
# (asv's ``time_wall`` timeouts: 120 s for a Python case, 600 s for a C++ one).
CASE_TIMEOUT_SECONDS = 600.0
# How often a round side by side looks whether its processes reached the barrier.
BARRIER_POLL_SECONDS = 0.05
# Compiling C++ shards and scripting TorchScript models before the rounds (a cold compile of
# the whole suite's shards on two cores takes about a minute).
BUILD_TIMEOUT_SECONDS = 3600.0


class CaseStatus(enum.Enum):
    OK = batch_child.OK
    SKIPPED = batch_child.SKIPPED  # this build cannot run the case (e.g. no TorchScript)
    FAILED = batch_child.FAILED


@dataclasses.dataclass(frozen=True)
class CaseRound:
    """One case in one round of one build: its samples (seconds per execution) or why none."""

    status: CaseStatus
    samples: tuple[float, ...] = ()
    error: str = ""
    seconds: float = 0.0  # the case's part of the round: preparing, calibrating, sampling
    sampled: float = 0.0  # of which inside the timed blocks
    block: int = 0  # executions per sample (0: none measured)


@dataclasses.dataclass(frozen=True)
class BuildPlace:
    """Where a build's rounds run: an environment's interpreter and the build's unpacked tree."""

    commit: str
    env_name: str
    python: str
    tree: Path
    git_version: str  # what the child's torch must report
    # inductor may skip its ISA probe in this build's rounds (`benchkit.measure.vec_isa`):
    # found by `prepare_build`
    skip_isa_probe: bool = False

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        path = os.pathsep.join([str(self.tree), str(REPO_ROOT)])
        environ = {**base, "PYTHONPATH": path, "PYTHONNOUSERSITE": "1"}
        if self.skip_isa_probe:
            environ[vec_isa.ENV] = "1"
        return environ

    def check_torch(self, header: Mapping[str, Any]) -> None:
        """Refuse what a measuring process measured unless it imported this build's torch
        (`header`: its ``torch`` version, ``git_version`` and ``file``)."""
        found = str(header.get("file", ""))
        if header.get("git_version") != self.git_version or not found.startswith(str(self.tree)):
            raise UserError(
                f"build {self.commit[:8]}: the measuring process imported torch {header.get('torch')} from "
                f"{found}, not the build's tree {self.tree} (git_version {self.git_version[:12]})"
            )


@dataclasses.dataclass
class _Child:
    """One measuring process and the lines it has written so far."""

    process: subprocess.Popen[bytes]
    results: Path
    log: Path
    lines: list[dict] = dataclasses.field(default_factory=list)
    size: int = 0  # of the results file when `lines` were read

    def read(self) -> list[dict]:
        # polled while the processes measure: parse again only when the file grew
        size = self.results.stat().st_size if self.results.exists() else 0
        if size == self.size:
            return self.lines
        self.size = size
        text = self.results.read_text() if self.results.exists() else ""
        complete = text[: text.rfind("\n") + 1]  # a line cut off by a crash is not read
        self.lines = [json.loads(line) for line in complete.splitlines() if line]
        return self.lines

    def log_tail(self, chars: int = 1500) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-chars:].strip()

    @property
    def waiting(self) -> bool:
        """Whether it waits for the word to measure its cases of several threads."""
        return bool(self.lines) and batch_child.WAITING in self.lines[-1]


def _start(
    place: BuildPlace, request: dict, scratch: Path, environ: Mapping[str, str], core: int | None = None
) -> _Child:
    index = len(list(scratch.glob("request-*.json")))
    request_path = scratch / f"request-{index}.json"
    request_path.write_text(json.dumps(request))
    results, log = scratch / f"results-{index}.jsonl", scratch / f"log-{index}.txt"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [place.python, "-m", "benchkit.measure.walltime.batch_child", str(request_path), str(results)],
            stdin=subprocess.PIPE if request.get("then") else subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=place.environ(environ),
            cwd=REPO_ROOT,
        )
    if core is not None:
        side_by_side.pin(process.pid, core)
    return _Child(process, results, log)


def _wait(child: _Child, timeout: float) -> bool:
    """Wait until `child` exits; False when it wrote nothing new for `timeout` seconds (then
    it is killed)."""
    seen = 0
    while True:
        try:
            child.process.wait(timeout=timeout)
            child.read()
            return True
        except subprocess.TimeoutExpired:
            if len(child.read()) == seen:
                child.process.kill()
                child.process.wait()
                return False
            seen = len(child.lines)


def run_round(
    place: BuildPlace, keys: Sequence[str], regexes: Sequence[str] | None, environ: Mapping[str, str],
    case_timeout: float = CASE_TIMEOUT_SECONDS, blocks: Mapping[str, int] | None = None,
    core: int | None = None,
) -> dict[str, CaseRound]:  # fmt: skip
    """One round of `keys` on one build: every case's `CaseRound`, timed in `blocks` (executions
    per sample, by key) where given, else calibrated; on `core` alone when given. A process
    that dies or hangs costs the case it was measuring (recorded as failed, with the process's
    last words); the cases after it go on in a new process."""
    found: dict[str, CaseRound] = {}
    left = list(keys)
    given = {key: blocks[key] for key in keys if key in blocks} if blocks else {}
    with tempfile.TemporaryDirectory(prefix="benchkit-round-") as tmp:
        while left:
            request = {"keys": left, "regexes": regexes, "samples": SAMPLES_PER_ROUND, "blocks": given}
            child = _start(place, request, Path(tmp), environ, core)
            finished = _wait(child, case_timeout)
            found.update(_measured(place, child))
            left = _after_stop(place, child, finished, case_timeout, left, found)
    return found


def _measured(place: BuildPlace, child: _Child) -> dict[str, CaseRound]:
    """The cases a stopped (or waiting) process measured, once it is known to run `place`'s torch."""
    if not child.lines:
        why = child.log_tail() or f"exit code {child.process.returncode}"
        raise UserError(f"build {place.commit[:8]}: the wall-time process did not start: {why}")
    place.check_torch(child.lines[0])
    return {
        line["key"]: CaseRound(
            CaseStatus(line["status"]),
            tuple(float(s) for s in line.get("samples", ())),
            line.get("error", ""),
            line.get("seconds", 0.0),
            line.get("sampled", 0.0),
            line.get("block", 0),
        )
        for line in child.lines[1:]
        if "key" in line
    }


def _after_stop(
    place: BuildPlace, child: _Child, finished: bool, case_timeout: float, keys: Sequence[str],
    found: dict[str, CaseRound],
) -> list[str]:  # fmt: skip
    """The cases of `keys` still to measure after `child` stopped: a process that died or hung
    costs the first case it had not finished (recorded in `found` as failed, with its last
    words); one that exited cleanly before its last case is an error."""
    left = [key for key in keys if key not in found]
    if not left:
        return []
    if finished and child.process.returncode == 0:
        raise UserError(f"build {place.commit[:8]}: the wall-time process stopped early: {child.log_tail()}")
    why = (
        f"no result after {case_timeout:.0f} s"
        if not finished
        else f"the measuring process died (exit code {child.process.returncode})"
    )
    found[left[0]] = CaseRound(CaseStatus.FAILED, error=f"{why}\n{child.log_tail()}".strip())
    return left[1:]


def _wait_at_barrier(child: _Child, timeout: float) -> bool:
    """Wait until `child` waits for its word (`batch_child.WAITING`) or exits; False when it
    wrote nothing new for `timeout` seconds (then it is killed)."""
    seen, news = 0, time.monotonic()
    while True:
        exited = child.process.poll() is not None
        if len(child.read()) != seen:
            seen, news = len(child.lines), time.monotonic()
        if exited or child.waiting:
            return True
        if time.monotonic() - news > timeout:
            child.process.kill()
            child.process.wait()
            return False
        time.sleep(BARRIER_POLL_SECONDS)


def side_by_side_round(
    order: Sequence[BuildPlace], shared: Sequence[str], alone: Sequence[str], core_of: Mapping[str, int],
    regexes: Sequence[str] | None, environ: Mapping[str, str], blocks: Mapping[str, Mapping[str, int]],
    case_timeout: float = CASE_TIMEOUT_SECONDS,
) -> dict[str, dict[str, CaseRound]]:  # fmt: skip
    """One round of every build of `order` at once, each build's process pinned to its core
    (`core_of`, by commit): `shared` there, side by side; then, one build after the other in
    the same processes, `alone` (cases of several threads) on every core of the lanes. Per
    commit, every case's `CaseRound`; a case that kills or hangs a process fails as in
    `run_round`, and that build's cases after it go on in a new process, alone."""
    everything = [*shared, *alone]
    every_core = list(side_by_side.usable_cores())  # the job's cores
    found: dict[str, dict[str, CaseRound]] = {}
    with tempfile.TemporaryDirectory(prefix="benchkit-round-") as tmp:
        children = []
        for place in order:
            scratch = Path(tmp) / place.commit
            scratch.mkdir()
            given = {key: blocks[place.commit][key] for key in everything if key in blocks[place.commit]}
            request: dict[str, Any] = {"keys": list(shared), "regexes": regexes, "blocks": given}
            request["samples"] = SAMPLES_PER_ROUND
            if alone:
                request["then"] = {"keys": list(alone), "cores": every_core}
            children.append(_start(place, request, scratch, environ, core_of[place.commit]))
        reached = [_wait_at_barrier(child, case_timeout) for child in children]
        for place, child, finished in zip(order, children, reached, strict=True):
            if finished and child.waiting:
                _go(child)
                finished = _wait(child, case_timeout)
            elif child.process.stdin is not None:
                child.process.stdin.close()
            found[place.commit] = _measured(place, child)
            left = _after_stop(place, child, finished, case_timeout, everything, found[place.commit])
            if left:  # the rest of a build whose process died or hung: in a process of their own
                rest = run_round(place, left, regexes, environ, case_timeout, blocks[place.commit])
                found[place.commit].update(rest)
    return found


def _go(child: _Child) -> None:
    assert child.process.stdin is not None
    try:
        child.process.stdin.write(f"{batch_child.GO}\n".encode())
        child.process.stdin.close()
    except BrokenPipeError:  # it died at the barrier: its outcome says so
        pass


@dataclasses.dataclass(frozen=True)
class PreparedBuild:
    """A build ready for its rounds (`place`, with what its preparation found) and its C++
    snippets that failed to compile ({snippet key: compile error})."""

    place: BuildPlace
    errors: dict[str, str]


def prepare_build(
    place: BuildPlace, keys: Sequence[str], regexes: Sequence[str] | None, environ: Mapping[str, str]
) -> PreparedBuild:
    """Compile the C++ shards and script the TorchScript models `keys` need on this build, and
    settle inductor's ISA probe for it (`benchkit.measure.vec_isa`), before any round."""
    with tempfile.TemporaryDirectory(prefix="benchkit-round-") as tmp:
        child = _start(place, {"keys": list(keys), "regexes": regexes, "action": "build"}, Path(tmp), environ)
        if not _wait(child, BUILD_TIMEOUT_SECONDS) or len(child.lines) < 2:
            raise UserError(
                f"build {place.commit[:8]}: preparing the wall-time cases failed: {child.log_tail()}"
            )
        place.check_torch(child.lines[0])
        built = child.lines[1]
        ready = dataclasses.replace(place, skip_isa_probe=bool(built.get("skip_isa_probe")))
        return PreparedBuild(ready, dict(built.get("errors", {})))


def round_order(places: Sequence[BuildPlace], index: int) -> list[BuildPlace]:
    """The builds of round `index` (from 0): in the order given, every other round reversed, so
    that no build is always measured first after another (A B, B A, A B, ...)."""
    return list(places) if index % 2 == 0 else list(places)[::-1]


RoundsOfBuild = dict[str, list[dict[str, CaseRound]]]  # commit -> its rounds, each key -> CaseRound


@dataclasses.dataclass(frozen=True)
class RoundsTaken:
    """What a set of rounds measured (`rounds`) and what it cost: seconds from the first
    process's start to the last one's end, and the seconds inside timed blocks per core in use
    (a sample taken while another build's process sampled beside it counts half)."""

    rounds: RoundsOfBuild
    seconds: float
    sampled: float
    side_by_side: bool = False

    def describe(self) -> str:
        share = self.sampled / self.seconds if self.seconds else 0.0
        how = "; the builds side by side, one core each" if self.side_by_side else ""
        return f"{self.seconds:.0f} s, {self.sampled:.0f} s of it in timed samples ({share:.0%}{how})"


def _sampled(found: Mapping[str, CaseRound]) -> float:
    return sum(r.sampled for r in found.values())


def interleaved_rounds(
    places: Sequence[BuildPlace],
    keys_of_round: Callable[[int], Sequence[str]],
    rounds: int,
    regexes: Sequence[str] | None,
    environ: Mapping[str, str],
    note: Callable[[str], None] = lambda _: None,
    alone: Collection[str] = (),
) -> RoundsTaken:
    """`rounds` rounds of every build, interleaved (`round_order`); round `i` measures
    `keys_of_round(i)` on each build.

    Where the machine has a core per build (`benchkit.measure.side_by_side`), a round's
    processes run at once, each build on its own core, for every case but those in `alone`
    (cases of several threads): those follow, one build after the other, the machine theirs.

    A case is calibrated in its first round on each build; that build's later rounds time it
    in the same block size. So every build's rounds are alike (the first of each calibrates),
    and no later round spends its time choosing a number it already knows."""
    lanes = side_by_side.lanes(environ, len(places))
    measured: RoundsOfBuild = {place.commit: [] for place in places}
    blocks: dict[str, dict[str, int]] = {place.commit: {} for place in places}
    began, sampled = time.monotonic(), 0.0
    for index in range(rounds):
        keys = list(keys_of_round(index))
        order = round_order(places, index)
        shared = [key for key in keys if key not in alone] if lanes is not None else []
        started = time.monotonic()
        if shared and lanes is not None:
            several = [key for key in keys if key in alone]
            core_of = {place.commit: lanes.core_of(index, build) for build, place in enumerate(places)}
            found = side_by_side_round(order, shared, several, core_of, regexes, environ, blocks)
            for outcome in found.values():
                sampled += sum(outcome[key].sampled for key in shared if key in outcome) / len(order)
                sampled += sum(outcome[key].sampled for key in several if key in outcome)
        else:
            found = {}
            for place in order:
                found[place.commit] = run_round(place, keys, regexes, environ, blocks=blocks[place.commit])
                sampled += _sampled(found[place.commit])
        for place in order:
            measured[place.commit].append(found[place.commit])
            for key, outcome in found[place.commit].items():
                if outcome.block and outcome.status is CaseStatus.OK:
                    blocks[place.commit].setdefault(key, outcome.block)
        together = f", {len(shared)} of them side by side" if shared else ""
        note(
            f"wall-time round {index + 1}/{rounds}: {len(keys)} case(s) on {len(places)} build(s){together} "
            f"in {time.monotonic() - started:.1f} s"
        )
    return RoundsTaken(measured, time.monotonic() - began, sampled, lanes is not None)
