"""`benchkit backfill`: instruction counts of many torch builds over a Dask cluster, into asv's results.

asv measures one commit after another on one host. Counts do not depend on
which host measured them, given the same counting fingerprint
(`benchkit.history.results.fingerprint`), so a history of builds can be spread over
every host of a Dask cluster and land in one asv results folder:

* **One task per build** (`benchkit.history.results.backfill_worker.count_build`): the
  wheel, its environment (cached per host), ``benchkit counts`` with profiles.
* **Only hosts of the logical machine run tasks.** A worker plugin computes each
  worker's fingerprint when it joins -- also workers that join later or restart
  after a crash -- and gives a matching worker one unit of a Dask *resource*
  named after the logical machine; every task needs that unit. A worker that
  differs never gets it (its reason is listed) and so never runs a build. One
  unit per worker also means one build per worker at a time: a Callgrind batch
  already uses every core.
* **Faults are the engine's.** A worker that dies mid-build has its task run
  again elsewhere by the scheduler; nothing it half-wrote is read (environments
  are marked complete last; results are written here, by the client, only).
* **Results through asv's own API** (`asv.results.Results`), one file per
  build written atomically, under the logical machine's folder with its
  ``machine.json``; function profiles beside them as ``benchkit-profiles``. A
  build that fails for real is recorded as failed (asv sees failed benchmarks,
  ``benchkit-backfill/<commit>.status`` says why) and the others go on. Builds
  whose results are already complete are skipped.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from benchkit import settings as benchkit_settings
from benchkit.errors import UserError
from benchkit.history.builds.repo import HistoryRepo
from benchkit.history.results.backfill_worker import count_build
from benchkit.history.results.fingerprint import counting_fingerprint, differences, machine_name
from benchkit.measure.callgrind.profiles import PROFILE_DIR, SUFFIX
from benchkit.names import BenchmarkName, Metric
from benchkit.util import atomic_path, atomic_write_bytes, atomic_write_text, cache_dir

STATUS_DIR = "benchkit-backfill"
_DISCOVERY = "benchkit-discovery"  # the machine asv is told it runs on while it only discovers


def _say(message: str) -> None:
    print(f"backfill: {message}", file=sys.stderr, flush=True)


class FingerprintGate(WorkerPlugin):
    """On every worker that joins: grant the logical machine's resource if the worker's
    fingerprint matches, otherwise keep the reason (`refusal`)."""

    name = "benchkit-fingerprint-gate"

    def __init__(self, expected: Mapping[str, str], resource: str) -> None:
        self.expected = dict(expected)
        self.resource = resource

    async def setup(self, worker: Any) -> None:
        try:
            mismatch = differences(self.expected, counting_fingerprint())
        except Exception as e:  # no valgrind, unreadable /proc...: not this machine
            mismatch = [f"no fingerprint ({e})"]
        worker.benchkit_refusal = "; ".join(mismatch)
        if not mismatch:
            await worker.set_resources(**{self.resource: 1})


def _refusal(dask_worker: Any) -> str | None:
    return getattr(dask_worker, "benchkit_refusal", None)


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the counts go: the asv results folder, the logical machine and the benchmarks."""

    results_dir: Path
    machine: str
    env_name: str
    fingerprint: Mapping[str, str]
    benchmarks: Mapping[str, Mapping[str, Any]]  # case key -> asv's benchmark entry

    def result_path(self, commit: str) -> Path:
        from asv.results import get_filename

        return self.results_dir / get_filename(self.machine, commit, self.env_name)

    def is_complete(self, commit: str) -> bool:
        """Every benchmark has a number of its current version for this commit."""
        path = self.result_path(commit)
        if not path.exists():
            return False
        from asv.results import Results

        try:
            results = Results.load(str(path), self.machine)
        except Exception as e:  # damaged: said by path and reason, then counted again
            _say(f"damaged results file {path}: {e}; this build is counted again")
            return False
        recorded = set(results.get_all_result_keys())
        for bench in self.benchmarks.values():
            name = bench["name"]
            if name not in recorded or results.benchmark_version.get(name) != bench["version"]:
                return False
            value = results.get_result_value(name, [])[0]
            if value is None or value != value:  # failed or skipped
                return False
        return True


def instruction_benchmarks(
    conf: Any, conf_dir: Path, case_keys: Mapping[str, str], config: benchkit_settings.Settings | None = None
) -> dict[str, dict[str, Any]]:
    """asv's entries (name, version, params) of the ``track_instructions`` benchmarks of
    these cases (case key -> asv class name), discovering benchmarks when asv has not yet
    (with ``config``, this process's settings by default: the definitions among them)."""
    from asv import util as asv_util
    from asv.benchmarks import Benchmarks

    def load() -> dict[str, Any]:
        try:
            return dict(Benchmarks.load(conf))
        except asv_util.UserError:
            return {}

    wanted = {key: str(BenchmarkName.build(Metric.INSTRUCTIONS, cls)) for key, cls in case_keys.items()}
    known = load()
    if not all(name in known for name in wanted.values()):
        _say("discovering asv's benchmarks (asv run --python=same --bench just-discover)")
        with tempfile.TemporaryDirectory(prefix="benchkit-asv-home-") as home:
            # asv insists on a machine description even to discover; give it one of its own
            # instead of touching the user's ~/.asv-machine.json.
            fields = dict.fromkeys(("os", "arch", "cpu", "num_cpu", "ram"), "")
            machines = {_DISCOVERY: {"machine": _DISCOVERY, **fields}, "version": 1}
            Path(home, ".asv-machine.json").write_text(json.dumps(machines))
            # the cache as this process sees it: HOME changes for asv
            config = dataclasses.replace(config or benchkit_settings.current(), cache_dir=cache_dir())
            env = {**benchkit_settings.child_environ(config), "HOME": home}
            done = subprocess.run(
                ["asv", "run", "--python=same", "--bench", "just-discover", "--machine", _DISCOVERY],
                cwd=conf_dir, env=env, capture_output=True, text=True,
            )  # fmt: skip
        stray = Path(conf.results_dir) / _DISCOVERY
        if stray.is_dir() and {p.name for p in stray.iterdir()} <= {"machine.json"}:
            shutil.rmtree(stray)  # asv's note of the stand-in machine; it ran nothing
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            raise UserError(f"asv could not discover the benchmarks in {conf_dir}:\n{output}")
        known = load()
    missing = sorted(name for name in wanted.values() if name not in known)
    if missing:
        raise UserError(f"asv does not know {len(missing)} benchmark(s), e.g. {missing[0]}")
    return {key: known[name] for key, name in wanted.items()}


def write_machine(target: Target, capability: str | None = None) -> None:
    """The logical machine's ``machine.json``: asv's fields plus what counts depend on."""
    path = target.results_dir / target.machine / "machine.json"
    data: dict[str, Any] = {}
    if path.exists():
        data = json.loads(path.read_text())
    fp = target.fingerprint
    data.update(
        machine=target.machine,
        os=f"{fp['libc']}, {fp['valgrind']}",
        arch=fp["arch"],
        cpu=f"emulated by {fp['valgrind']} (AVX2: {fp['cpu_avx2']})",
        num_cpu="",
        ram="",
        version=1,
        benchkit_counting_fingerprint=dict(fp),
    )
    if capability and not data.get("cpu_capability_under_valgrind"):
        data["cpu_capability_under_valgrind"] = capability
    atomic_write_text(path, json.dumps(data, indent=4, sort_keys=True) + "\n")


def recorded_capability(target: Target) -> str | None:
    path = target.results_dir / target.machine / "machine.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"damaged asv machine file {path}: {e}") from None
    return data.get("cpu_capability_under_valgrind") if isinstance(data, dict) else None


def save_outcome(target: Target, commit: str, date_ms: int, outcome: Mapping[str, Any]) -> tuple[int, int]:
    """One build's counts into asv's results (atomically) and its profile beside them.
    Returns (benchmarks with a number, benchmarks failed)."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    fp = target.fingerprint
    python = ".".join(fp["python"].split(".")[:2])
    params = {"machine": target.machine, "arch": fp["arch"], "python": python}
    results = Results(params, {}, commit, date_ms, python, target.env_name, {})
    counts = outcome.get("counts", {})
    started = dt.datetime.now(dt.UTC)
    numbers = failures = 0
    for key, bench in target.benchmarks.items():
        entry = counts.get(key) or {}
        ok = entry.get("status") == "ok"
        value = float(entry["instructions"]) if ok else None
        reason = "" if ok else (entry.get("error") or outcome.get("reason") or "not counted")
        numbers, failures = numbers + ok, failures + (not ok)
        result = BenchmarkResult(
            result=[value], samples=[None], number=[None], errcode=0 if ok else 1, stderr=reason, profile=None
        )
        results.add_result(
            bench, result, started_at=started, duration=outcome.get("seconds", {}).get("count")
        )
    target.results_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".backfill-", dir=target.results_dir) as tmp:
        results.save(tmp)
        written = Path(tmp) / target.machine / target.result_path(commit).name
        with atomic_path(target.result_path(commit)) as final:
            os.replace(written, final)
    status = {key: outcome.get(key) for key in ("status", "reason", "host", "seconds", "summary")}
    status_path = target.results_dir / target.machine / STATUS_DIR / f"{commit}.status"
    atomic_write_text(status_path, json.dumps(status, indent=1, sort_keys=True) + "\n")
    profile = outcome.get("profile_gz")
    if profile:
        document = json.loads(gzip.decompress(profile))
        document.update(commit=commit, env_name=target.env_name, machine=target.machine)
        data = gzip.compress(json.dumps(document, separators=(",", ":")).encode(), compresslevel=6, mtime=0)
        profile_path = (
            target.results_dir / target.machine / PROFILE_DIR / f"{commit}-{target.env_name}{SUFFIX}"
        )
        atomic_write_bytes(profile_path, data)
    return numbers, failures


@dataclasses.dataclass
class Summary:
    done: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    skipped: list[str] = dataclasses.field(default_factory=list)
    refused_workers: dict[str, str] = dataclasses.field(default_factory=dict)
    seconds: dict[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


def run_backfill(
    client: Any,
    repo: HistoryRepo,
    commits: Sequence[str],
    target: Target,
    *,
    case_filter: str | None = None,
    definitions: Sequence[str] = (),
    settings: Mapping[str, str] | None = None,
    wait_for_workers: float = 60.0,
    on_progress: Callable[[str], None] = _say,
) -> Summary:
    """Count every build in `commits` not yet complete in `target`, on the client's cluster."""
    from distributed import as_completed

    started = time.monotonic()
    summary = Summary()
    todo = [c for c in commits if not target.is_complete(c)]
    summary.skipped = [c for c in commits if c not in todo]
    if summary.skipped:
        on_progress(f"{len(summary.skipped)} build(s) already complete, skipped")
    write_machine(target)
    if not todo:
        return summary
    resource = target.machine
    client.register_plugin(FingerprintGate(target.fingerprint, resource))
    accepted = _wait_for_accepted(client, resource, wait_for_workers, summary)
    on_progress(
        f"{len(accepted)} worker(s) of logical machine {target.machine}; {len(todo)} build(s) to count"
    )
    dates = {c: int(repo.git("log", "-1", "--format=%ct", c)) * 1000 for c in todo}
    futures = {}
    for commit in todo:
        future = client.submit(
            count_build, repo.record(commit).to_json(), commit, dict(target.fingerprint), case_filter,
            list(definitions), dict(settings or {}), key=f"benchkit-count-{commit}", resources={resource: 1},
            pure=False,
        )  # fmt: skip
        futures[future] = commit
    for future in as_completed(list(futures)):
        commit = futures[future]
        try:
            outcome = future.result()
        except Exception as e:  # the engine gave up (e.g. workers killed again and again)
            outcome = {"status": "failed", "reason": f"{type(e).__name__}: {e}", "counts": {}}
        capability = next((v.get("cpu_capability") for v in outcome.get("counts", {}).values()), None)
        known = recorded_capability(target)
        if capability and known and capability != known:
            outcome = {**outcome, "status": "failed", "counts": {},
                       "reason": f"CPU capability under valgrind {capability!r} on {outcome.get('host')}, "
                                 f"logical machine has {known!r}: not merged"}  # fmt: skip
        elif capability:
            write_machine(target, capability)
        numbers, failures = save_outcome(target, commit, dates[commit], outcome)
        if outcome["status"] == "ok":
            summary.done.append(commit)
        else:
            summary.failed[commit] = outcome.get("reason", "")
        summary.seconds[commit] = outcome.get("seconds", {})
        # A worker holds one unit of the logical machine's resource: one build at a time each,
        # the rest of what the scheduler assigned it waits in its queue.
        running = sum(1 for tasks in client.processing().values() if tasks)
        finished = len(summary.done) + len(summary.failed)
        queued = max(0, len(todo) - finished - running)
        seconds = outcome.get("seconds", {}).get("total")
        on_progress(
            f"[{finished}/{len(todo)} done, {running} running, {queued} queued, "
            f"{len(summary.failed)} failed] {commit[:12]}: {outcome['status']} on {outcome.get('host', '?')}"
            + (f" in {seconds:.0f}s" if seconds else "")
            + f" ({numbers} counted, {failures} failed)"
            + (f": {outcome.get('reason', '').splitlines()[0]}" if outcome["status"] != "ok" else "")
        )
    summary.elapsed = time.monotonic() - started
    return summary


def _wait_for_accepted(client: Any, resource: str, timeout: float, summary: Summary) -> list[str]:
    """Workers holding the logical machine's resource; refusals recorded in `summary`."""
    deadline = time.monotonic() + timeout
    while True:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        accepted = [addr for addr, info in workers.items() if info.get("resources", {}).get(resource)]
        refusals = {addr: why for addr, why in client.run(_refusal).items() if why}
        summary.refused_workers = refusals
        undecided = [addr for addr in workers if addr not in accepted and addr not in refusals]
        if (accepted and not undecided) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for addr, why in refusals.items():
        _say(f"worker {addr} refused: {why}")
    if not accepted:
        raise UserError(
            "no worker can count for this logical machine"
            + (": " + "; ".join(f"{a}: {w}" for a, w in refusals.items()) if refusals else " (no workers)")
        )
    return accepted


def expected_fingerprint(client: Any) -> dict[str, str]:
    """The logical machine: this host's fingerprint, or -- without valgrind here -- the
    one most workers share."""
    try:
        return counting_fingerprint()
    except Exception:
        found = client.run(counting_fingerprint)
        if not found:
            raise UserError("no valgrind on this host and no workers to take a fingerprint from") from None
        votes = collections.Counter(json.dumps(fp, sort_keys=True) for fp in found.values())
        return json.loads(votes.most_common(1)[0][0])


def make_target(
    conf: Any,
    conf_dir: Path,
    case_keys: Mapping[str, str],
    fingerprint: Mapping[str, str],
    config: benchkit_settings.Settings | None = None,
) -> Target:
    machine = machine_name(fingerprint)
    python = ".".join(fingerprint["python"].split(".")[:2])
    return Target(
        results_dir=Path(conf.results_dir),
        machine=machine,
        env_name=f"benchkit-counts-py{python}",
        fingerprint=dict(fingerprint),
        benchmarks=instruction_benchmarks(conf, conf_dir, case_keys, config),
    )


def parse_commits(repo: HistoryRepo, revisions: Sequence[str]) -> list[str]:
    """Commits of the torch history, oldest first: ranges (``A..B``) and single revisions."""
    commits: list[str] = []
    for revision in revisions or ["main"]:
        if ".." in revision or re.fullmatch(r"[\w./-]+\^!", revision):
            found = repo.commits(revision)
        elif revision in repo.branches():
            found = repo.commits(revision)
        else:
            found = [repo.git("rev-parse", "--verify", f"{revision}^{{commit}}")]
        commits += [c for c in found if c not in commits]
    if not commits:
        raise UserError(f"no commits in {', '.join(revisions)}")
    return commits
