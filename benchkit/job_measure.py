"""The main job's measuring step (`benchkit.mainjob`, step 3): asv over the builds the job has
not finished, the wall-time rounds that open verdicts get, the judged builds' operator
replicates, and the ledger of finished builds.

The step hands the job a `Measured`: what it measured, the pairs the verdict judges, the rounds
each re-measured build held before (`benchkit.report.gate.rounds_window`) and asv's exit code.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import names, operator_rounds, rounds_policy, settings, settings_record, wall_rounds
from benchkit.asv_runs import Progress, asv_run_args, asv_run_settings, run_asv
from benchkit.errors import UserError
from benchkit.history.builds.sources import PIP_CONFIG, PipSource
from benchkit.history.ledger import Ledger
from benchkit.history.results.read import read_results, set_aside_damaged
from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

if TYPE_CHECKING:
    from benchkit.report.job_verdict import JudgedPair
    from benchkit.rounds_policy import RoundsPlan, TopUp

# (build, (benchmark, environment)) -> rounds it held before this job measured it again
Held = dict[str, dict[tuple[str, str], int]]


@dataclasses.dataclass(frozen=True)
class MeasureRequest:
    """What the measuring step works on: the job's request, its history and machine."""

    conf_path: Path
    conf: Any  # asv's config, read once by the job
    machine: str
    asked_machine: str | None  # --machine as given (asv's own default when None)
    main_commits: tuple[str, ...]
    baseline: str | None  # a commit of main
    plan: RoundsPlan
    bench: tuple[str, ...]  # asv's -b regexes
    rerun: bool
    source: PipSource


@dataclasses.dataclass(frozen=True)
class Measured:
    todo: tuple[str, ...]  # the builds this job measured
    pairs: tuple[JudgedPair, ...]  # what the verdict judges
    run_code: int  # asv's highest exit code
    env: Mapping[str, str]  # the environment of this job's asv commands


def record_settings(
    results_dir: Path, machine: str, commits: Sequence[str], record: settings_record.RunRecord
) -> list[Path]:
    """Write ``record`` beside each of asv's result files of these commits (one per environment)."""
    written = []
    for commit in commits:
        for result in sorted((results_dir / machine).glob(f"{commit[:8]}-*.json")):
            env_name = result.stem[len(commit[:8]) + 1 :]
            path = settings_record.record_path(results_dir, machine, commit, env_name)
            settings_record.write_record(path, record, commit, env_name)
            written.append(path)
    return written


def _selects_any(infos: Mapping[str, object], regexes: Sequence[str]) -> bool:
    """Whether asv's ``-b`` `regexes` select a benchmark of benchmarks.json (True without one)."""
    return not infos or any(re.search(regex, name) for name in infos for regex in regexes)


def _asv_over(commits: Sequence[str], regexes: Sequence[str], machine: str | None, append: bool,
              conf_path: Path, env: Mapping[str, str]) -> int:  # fmt: skip
    """One ``asv run`` over `commits` (a hash file); a killed run fails the job."""
    with tempfile.TemporaryDirectory(prefix="benchkit-main-") as scratch:
        hashfile = Path(scratch) / "commits.txt"
        hashfile.write_text("".join(f"{c}\n" for c in commits))
        code = run_asv(
            asv_run_args(f"HASHFILE:{hashfile}", regexes, machine, append), conf_path, False, dict(env)
        )
    if code < 0:
        raise UserError(f"asv run was killed (signal {-code}); run `benchkit main` again to resume")
    return code


def add_rounds(
    conf_path: Path,
    results_dir: Path,
    machine: str,
    top_up: TopUp,
    added: Mapping[str, int],
    source: PipSource = PIP_CONFIG,
    progress: Progress | None = None,
    bench: Sequence[str] = (),
) -> int:
    """More interleaved rounds of `top_up`'s wall times on its builds (`added`: rounds per
    benchmark, `rounds_policy.rounds_to_add`), appended to the samples they have: round ``i``
    measures every wall time that gets more than ``i`` rounds, each build in one process
    (`benchkit.wall_rounds`; `bench`: the job's asv selection, whose C++ shards the rounds
    load). 2 when a wall time failed, else 0."""
    from asv.config import Config

    progress = progress or Progress()
    chosen = {name: added[name] for name in top_up.benchmarks if added.get(name, 0) >= 1}
    if not chosen:
        return 0
    conf = Config.load(str(conf_path))
    for rounds in sorted(set(chosen.values()), reverse=True):
        got = [name for name, n in chosen.items() if n == rounds]
        progress.note(
            f"{len(got)} wall time(s) still open: {rounds} more rounds on "
            f"{len(top_up.commits)} build(s) ({', '.join(c[:8] for c in top_up.commits)})"
        )
    run_settings = asv_run_settings(settings.current(), machine, results_dir, max(chosen.values()), bench)
    env = {**settings.child_environ(run_settings), **dict(source.environ)}
    started = time.monotonic()
    failed = wall_rounds.measure(
        conf, conf_path, machine, top_up.commits, bench, lambda name: chosen.get(name, 0), env, progress
    )
    progress.note(f"the added rounds took {time.monotonic() - started:.0f} s")
    return 2 if failed else 0


def _operator_replicates(
    req: MeasureRequest, pairs: Sequence[JudgedPair], progress: Progress
) -> tuple[Held, int]:
    """The judged builds' operator timings again, interleaved (`benchkit.operator_rounds`): the
    replicates each held before (which the verdict leaves out) and the exit code (2: some figure
    failed); nothing when the selection has no operator timing."""
    from benchkit.report.gate import rounds_window

    commits = list(dict.fromkeys(c for p in pairs for c in (p.base, p.head)))
    before = read_results(req.conf)
    modules = operator_rounds.timed_modules(before, req.machine, commits)
    if not modules or not _selects_any(before.infos, operator_rounds.replicate_regexes(req.bench, modules)):
        return {}, 0
    held = rounds_window.held_rounds(before, req.machine, commits, keep=rounds_window.is_replicate_timing)
    code = operator_rounds.add_operator_rounds(
        req.conf, req.conf_path, req.machine, commits, req.bench, req.source, progress, modules=modules
    )
    return held, code


def describe_plan(plan: RoundsPlan) -> str:
    mode = (
        f"wall time in {plan.first} interleaved rounds (processes) of {SAMPLES_PER_ROUND} samples per build"
    )
    if plan.adds:
        mode += f", up to {plan.cap} where a verdict is open"
        if plan.moved_cap != plan.cap:
            mode += f" ({plan.moved_cap} where its case's instruction count moved)"
        if plan.budget:
            mode += f" (within what {plan.budget} fixed rounds would cost)"
    return mode


def _ledger(req: MeasureRequest) -> Ledger:
    # The cap names the plan; the moved cap is how the budget is shared (a history measured
    # before it existed stays finished).
    plan = req.plan
    rounds_key = f"rounds={plan.first}x{SAMPLES_PER_ROUND}" + (f"..{plan.cap}" if plan.adds else "")
    return Ledger(req.conf_path, [req.machine, rounds_key, *req.bench])


def _to_measure(req: MeasureRequest, ledger: Ledger, progress: Progress) -> list[str]:
    """The builds of main this job measures: those the ledger has not finished (a finished build
    whose results were lost or damaged since is measured again)."""
    from benchkit.report import run_summary

    done = set() if req.rerun else ledger.finished()
    if done:
        expected = run_summary.Expected(req.machine, req.bench, req.plan.first * SAMPLES_PER_ROUND)
        still = set(run_summary.complete_builds(req.conf, expected, sorted(done)))
        if still != done:
            ledger.forget(sorted(done - still))
            progress.note(
                f"{len(done - still)} build(s) recorded as finished lack numbers now: measured again"
            )
        done = still
    todo = [c for c in req.main_commits if c not in done]
    progress.step(
        3, f"asv run over {len(todo)} of {len(req.main_commits)} torch build(s), {describe_plan(req.plan)}"
    )
    if len(todo) < len(req.main_commits):
        finished = len(req.main_commits) - len(todo)
        progress.note(f"{finished} build(s) finished by an earlier run (--rerun measures again)")
    return todo


def _main_runs(
    req: MeasureRequest, todo: Sequence[str], pairs: Sequence[JudgedPair], config: settings.Settings,
    env: Mapping[str, str], progress: Progress,
) -> tuple[Held, int]:  # fmt: skip
    """asv over the new builds for everything but wall time; then the wall-time rounds of the
    new builds and of the predecessors (and a baseline) an earlier job measured, interleaved
    (`benchkit.wall_rounds`), so that the verdict compares rounds of one time window
    (`rounds_window`). The rounds each build held before, and the highest exit code."""
    from benchkit.report.gate import rounds_window

    results_dir = Path(req.conf.results_dir)
    earlier = list(dict.fromkeys(p.base for p in pairs if p.base not in todo))
    walls = names.Metric.WALL_TIME
    others = names.metric_regexes(req.bench, walls, keep=False)
    before = read_results(req.conf)
    # The new builds' wall times are measured from scratch (what an interrupted job left of
    # them is replaced); an earlier build's rounds of this job follow those it held.
    held = rounds_window.held_rounds(before, req.machine, earlier) if earlier else {}
    code = 0
    if _selects_any(before.infos, others):  # True before asv has discovered the suite
        own = asv_run_settings(config, req.machine, results_dir, req.plan.first, others)
        run_env = {**settings.child_environ(own), **dict(req.source.environ)}
        code = _asv_over(todo, others, req.asked_machine, False, req.conf_path, run_env)
        if not before.infos and not _selects_any(read_results(req.conf).infos, others):
            code = 0  # asv only discovered the suite: the selection holds wall times alone
    if earlier:
        progress.note(
            f"wall times of {', '.join(c[:8] for c in earlier)} (measured by an earlier job) "
            "measured again beside the new builds: the verdict compares this job's rounds"
        )
    failed = wall_rounds.measure(
        req.conf, req.conf_path, req.machine, [*earlier, *todo], req.bench,
        lambda _name: req.plan.first, env, progress, replace=todo,
    )  # fmt: skip
    return held, max(code, 2 if failed else 0)


def _open_wall_times(
    req: MeasureRequest, pairs: Sequence[JudgedPair], held: Held, progress: Progress
) -> tuple[TopUp | None, dict[str, int], int]:
    """The wall times whose verdict the first look left open, the rounds each gets, and the
    rounds the builds reach."""
    from benchkit.report.gate import check, rounds_look, rounds_window

    plan = req.plan
    if not (plan.adds and pairs):
        return None, {}, plan.highest
    top_up = rounds_look.open_wall_times(
        rounds_window.this_jobs_rounds(read_results(req.conf), req.machine, held),
        req.machine,
        [(p.base, p.head) for p in pairs],
        plan,
        check.check_config_for(req.conf_path).thresholds["instructions"],
    )
    added_rounds = rounds_policy.rounds_to_add(top_up, plan)
    reached = plan.first + max(added_rounds.values(), default=plan.highest - plan.first)
    progress.note(top_up.describe())
    if plan.budget and added_rounds:
        each = sorted({plan.first + n for n in added_rounds.values()}, reverse=True)
        progress.note(
            f"{len(top_up.benchmarks)} of {top_up.looked} wall times open "
            f"({len(top_up.moved)} whose instruction count moved, served first within what "
            f"{plan.budget} fixed rounds of all {top_up.looked} would cost; the others ride along "
            f"in their processes): {' and '.join(map(str, each))} rounds"
        )
    return top_up, added_rounds, reached


def _record_pairs(req: MeasureRequest, pairs: Sequence[JudgedPair], todo: Sequence[str], held: Held) -> None:
    """How each pair was measured, for every later reader of the results (`pair_record`): the
    rounds this job measured of its builds, interleaved."""
    from benchkit.report.gate import pair_record

    loaded = read_results(req.conf)
    for pair in pairs:
        record = pair_record.pair_record_of(
            loaded, req.machine, pair.base, pair.head, held, base_from_earlier_job=pair.base not in todo
        )
        pair_record.write_pair_record(Path(req.conf.results_dir), record)


def measure(req: MeasureRequest, progress: Progress) -> Measured:
    """Step 3 of the job: measure what is not finished, then record what finished."""
    from benchkit.report import job_verdict, run_summary

    ledger = _ledger(req)
    todo = _to_measure(req, ledger, progress)
    main = list(req.main_commits)
    pairs = job_verdict.judged_pairs(main, todo, req.baseline) if len(main) >= 2 else []
    # A judged build's operator replicates come from the operator rounds: its main run only compiles.
    config = operator_rounds.main_run_settings(settings.current()) if pairs else settings.current()
    # asv tells its benchmark processes neither the machine and results folder (where profiles
    # go) nor the -b selection (what setup_cache measures): the job says them.
    results_dir = Path(req.conf.results_dir)
    run_settings = asv_run_settings(config, req.machine, results_dir, req.plan.first, req.bench)
    # pip in asv's environment builds leaves out the indexes that did not answer, too.
    env = {**settings.child_environ(run_settings), **dict(req.source.environ)}
    if not todo:
        return Measured((), tuple(pairs), 0, env)
    for found in set_aside_damaged(req.conf, req.machine, todo):
        progress.note(f"damaged results file {found.describe()}: set aside as *.damaged, measured again")
    held, code = _main_runs(req, todo, pairs, config, env, progress)
    top_up, added_rounds, reached = _open_wall_times(req, pairs, held, progress)
    record = settings_record.RunRecord.of(
        run_settings, req.machine, req.plan.first, SAMPLES_PER_ROUND, reached
    )
    record_settings(results_dir, req.machine, todo, record)
    if top_up is not None:
        added = add_rounds(
            req.conf_path, results_dir, req.machine, top_up, added_rounds, req.source, progress, req.bench
        )
        code = max(code, added)
    if pairs:
        replicated, ops_code = _operator_replicates(req, pairs, progress)
        code = max(code, ops_code)
        held = {c: {**held.get(c, {}), **replicated.get(c, {})} for c in {*held, *replicated}}
    _record_pairs(req, pairs, todo, held)
    # Finished: every selected benchmark has a number, every wall time all its rounds' samples.
    expected = run_summary.Expected(req.machine, req.bench, req.plan.first * SAMPLES_PER_ROUND)
    complete = run_summary.complete_builds(req.conf, expected, todo)
    ledger.record(complete)
    if len(complete) < len(todo):
        progress.note(
            f"{len(todo) - len(complete)} build(s) lack numbers; the next `benchkit main` measures them again"
        )
    return Measured(tuple(todo), tuple(pairs), code, env)
