"""`benchkit main`: the whole job, from nothing to a published site.

1. build the torch history (this machine's default builds, `benchkit.history.builds.defaults`:
   the installed torch and the newest newer release pip finds, each named with where it
   came from);
2. make sure asv knows this machine (non-interactively);
3. run the suite with asv on every commit of the history that this job has not
   finished yet (a ledger records finished commits; an interrupted job measures
   its unfinished commits again from scratch, so a resumed job ends with the same
   rounds and samples as an uninterrupted one; where wall times are appended beside a
   predecessor, rounds an interrupted job left stay in the file and the verdict leaves
   them out, `benchkit.report.rounds_window`);
4. publish the site into ``html/``;
5. print what was measured per torch build and metric (measured / failed /
   skipped / missing), what changed with the builds this run measured (each against
   its predecessor on main, and a ``--baseline``; the history's steps at them:
   `benchkit.report.job_verdict`) and where the site is. The job exits 1 when a build lacks
   numbers (a failed ``setup_cache``, failed or missing benchmarks) or the gate
   finds newly failing or vanished benchmarks or a regression, 2 when the gate
   cannot compare a whole metric; the site is published either way.

Wall time: every ``time_wall`` first runs in 8 asv rounds of 3 samples per build, and asv
interleaves the rounds across commits (round 8 of every torch build, then round 7 of every
build, ...). Each round is a fresh process, so a build's wall time is independent draws of what
varies between processes (memory layout, the machine's load at that minute), and a slow drift of
the machine reaches every build alike instead of landing between two of them. The gate compares
two builds' fast levels round by round (`benchkit.stats.fast_level_test`). After the first look
(`benchkit.report.rounds_look`), the wall times whose verdict against their predecessor (or the
baseline) is still open get more rounds on both builds in a second interleaved
``asv run --append-samples``; the others are decided and cost nothing more (`benchkit.stats.first_look`:
the rule, and why the gate's false-alarm rate stays within its alpha). The open ones share a
budget: no more benchmark processes per build than 12 fixed rounds of every judged wall time
would have run, and at most 24 rounds each; those whose case's instruction count moved are
served first, up to 48 rounds (`benchkit.report.rounds_look.rounds_to_add`).
``--rounds N`` measures every wall time in N rounds and adds none; ``--max-rounds M`` gives
every open one M rounds, without the budget. A predecessor an earlier job measured gets its
wall times measured again in this job's interleaved run of wall times, and the verdict judges
it by this job's rounds (`benchkit.report.rounds_window`). What the gate finds this way is measured in
docs/verdicts.md.
This is *not* ``asv run --quick`` (one sample with ``number=1``: nothing a gate can use).
Instruction counts and operator timings run in the last two rounds (asv's default); the
last reuses what the one before measured.

The job hands its settings (rounds, machine, results folder, the ``-b`` selection with an
id of the asv command) to asv's benchmark processes through the environment
(`benchkit.settings.child_environ`), and records what shaped each build's numbers beside
asv's results (`benchkit.settings_record.RunRecord`), which the summary and the gate read back.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import operator_rounds, settings, settings_record
from benchkit.asv_runs import Progress, asv_run_args, asv_run_settings, run_asv
from benchkit.errors import UserError
from benchkit.history.builds import repo as history
from benchkit.history.builds import source as source_checkout
from benchkit.history.builds.defaults import command_source, pick_default_builds
from benchkit.history.builds.sources import PIP_CONFIG, PipSource
from benchkit.history.ledger import Ledger
from benchkit.history.lock import job_lock
from benchkit.history.results.read import (
    DamagedFile,
    LoadedResults,
    load_asv_config,
    read_results,
    set_aside_damaged,
)
from benchkit.measure.walltime.timing import FIRST_LOOK_ROUNDS, SAMPLES_PER_ROUND
from benchkit.util import atomic_write_json, atomic_write_text

VERDICT_FILE = "verdict.md"  # in the site's folder: every pair's full `benchkit check` table

if TYPE_CHECKING:
    from benchkit.report.job_verdict import JudgedPair
    from benchkit.report.rounds_look import RoundsPlan, TopUp


def ensure_machine(conf_path: Path, machine: str | None) -> str:
    """asv asks interactively about an unknown machine; answer with its defaults once.

    asv prints its whole questionnaire; one line says what was recorded instead.
    Returns the machine's name.
    """
    from asv import util as asv_util
    from asv.machine import Machine, MachineCollection

    name = machine or Machine.get_unique_machine_name()
    try:
        MachineCollection.load(name)
        return name
    except asv_util.UserError:
        pass
    command = [sys.executable, "-m", "asv", "machine", "--yes", "--machine", name, "--config", str(conf_path)]
    done = subprocess.run(command, cwd=conf_path.parent, capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"`asv machine --yes` failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    info = MachineCollection.load(name)
    print(
        f"    asv machine {name!r} recorded in ~/.asv-machine.json: {info.get('cpu', '?')}, "
        f"{info.get('num_cpu', '?')} CPUs, {info.get('os', '?')}",
        file=sys.stderr,
    )
    return name


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


def _baseline_commit(
    baseline: str | None, main_commits: Sequence[str], tags: dict[str, list[str]]
) -> str | None:
    """The commit of main a ``--baseline`` tag or commit (prefix) names; an error names the choices."""
    if baseline is None:
        return None
    found = [c for c in main_commits if baseline in tags.get(c, []) or c.startswith(baseline)]
    if len(found) != 1:
        known = ", ".join(t for c in main_commits for t in tags.get(c, [])) or "none"
        raise UserError(
            f"--baseline {baseline!r} names {len(found)} builds of main (tags of main: {known}); "
            "give a tag or a commit of `benchkit history list`"
        )
    return found[0]


def add_rounds(
    conf_path: Path,
    results_dir: Path,
    machine: str,
    top_up: TopUp,
    added: Mapping[str, int],
    source: PipSource = PIP_CONFIG,
    progress: Progress | None = None,
) -> int:
    """More interleaved rounds of `top_up`'s wall times on its builds (`added`: rounds per
    benchmark, `rounds_look.rounds_to_add`), appended to the samples they have (every other
    number kept): one ``asv run`` per number of rounds, the most first. Every round of every
    build is a fresh forkserver: rounds forked from one server in a block, one build after the
    other, are not independent draws (scripts/bench_verdicts.py --block-rounds measures their
    false alarms). asv's highest exit code (0 when there is nothing)."""
    progress = progress or Progress()
    groups: dict[int, list[str]] = {}
    for name in top_up.benchmarks:
        if added.get(name, 0) >= 1:
            groups.setdefault(added[name], []).append(name)
    code = 0
    for rounds, names in sorted(groups.items(), reverse=True):
        progress.note(
            f"{len(names)} wall time(s) still open: {rounds} more rounds on "
            f"{len(top_up.commits)} build(s) ({', '.join(c[:8] for c in top_up.commits)})"
        )
        regexes = ["^" + re.escape(name) + "$" for name in names]
        run_settings = asv_run_settings(settings.current(), machine, results_dir, rounds, regexes)
        env = {**settings.child_environ(run_settings), **dict(source.environ)}
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="benchkit-main-") as scratch:
            hashfile = Path(scratch) / "commits.txt"
            hashfile.write_text("".join(f"{c}\n" for c in top_up.commits))
            run_code = run_asv(
                asv_run_args(f"HASHFILE:{hashfile}", regexes, machine, append=True), conf_path, False, env
            )
        progress.note(f"the added rounds took {time.monotonic() - started:.0f} s")
        if run_code < 0:
            raise UserError(f"asv run was killed (signal {-run_code}); run `benchkit main` again to resume")
        code = max(code, run_code)
    return code


def _operator_replicates(
    conf_path: Path,
    conf: Any,
    machine: str,
    pairs: Sequence[JudgedPair],
    bench: Sequence[str],
    source: PipSource,
    progress: Progress,
) -> tuple[dict[str, dict[tuple[str, str], int]], int]:
    """The judged builds' operator timings again, interleaved (`benchkit.operator_rounds`): the
    replicates each held before (which the verdict leaves out) and asv's exit code; nothing
    when the selection has no operator timing."""
    from benchkit.report import rounds_window

    commits = list(dict.fromkeys(c for p in pairs for c in (p.base, p.head)))
    before = read_results(conf)
    modules = operator_rounds.timed_modules(before, machine, commits)
    if not modules or not _selects_any(before.infos, operator_rounds.replicate_regexes(bench, modules)):
        return {}, 0
    held = rounds_window.held_rounds(before, machine, commits, keep=rounds_window.is_replicate_timing)
    code = operator_rounds.add_operator_rounds(
        conf_path, Path(conf.results_dir), machine, commits, bench, source, progress, modules=modules
    )
    if code < 0:
        raise UserError(f"asv run was killed (signal {-code}); run `benchkit main` again to resume")
    return held, code


def publish(conf_path: Path, skip_damaged: bool = False, loaded: LoadedResults | None = None) -> Path:
    """asv's site plus benchkit's pages (`benchkit.report.site.publish`)."""
    from benchkit.report.site.publish import publish as publish_site

    return Path(publish_site(conf_path, skip_damaged=skip_damaged, loaded=loaded))


def run_main_job(
    conf_path: Path,
    builds: Sequence[str] | None = None,
    include_index: bool = True,
    rounds: int | None = None,
    max_rounds: int | None = None,
    rerun: bool = False,
    bench: Sequence[str] = (),
    machine: str | None = None,
    source: PipSource = PIP_CONFIG,
    checkout: Path | None = None,
    wait: bool = True,
    skip_damaged: bool = False,
    baseline: str | None = None,
) -> int:
    """The job, holding the checkout's lock (a second job waits, or refuses without `wait`).
    `baseline`: a tag or commit of main every measured build is also judged against.
    `rounds`: every wall time's rounds, none added (default: a first look of
    `FIRST_LOOK_ROUNDS`); `max_rounds`: the rounds open verdicts get (default:
    `RoundsPlan.default`; `rounds` when that is given)."""
    conf_path = conf_path.resolve()
    if not conf_path.is_file():
        raise UserError(f"asv config {conf_path} not found (run `benchkit main` in the benchkit checkout)")
    with job_lock(conf_path, wait):
        from benchkit.report.rounds_look import RoundsPlan

        first = rounds or FIRST_LOOK_ROUNDS
        if max_rounds is None and rounds is None:
            plan = RoundsPlan.default()
        else:  # --max-rounds M: every open one M; --rounds N alone: N, none added
            plan = RoundsPlan.unbudgeted(first, max_rounds or first)
        return _run_main_job(
            conf_path, builds, include_index, plan, rerun, bench, machine, skip_damaged,
            source, checkout, baseline,
        )  # fmt: skip


def _run_main_job(
    conf_path: Path,
    builds: Sequence[str] | None,
    include_index: bool,
    plan: RoundsPlan,
    rerun: bool,
    bench: Sequence[str],
    machine: str | None,
    skip_damaged: bool,
    source: PipSource,
    checkout: Path | None,
    baseline: str | None,
) -> int:
    from benchkit import names
    from benchkit.report import check, job_verdict, rounds_look, rounds_window, run_summary
    from benchkit.report.check_json import verdict_json

    progress = Progress()
    conf = load_asv_config(conf_path)  # read once: every step below is handed this
    if bench:  # any name a user sees for a case (its readable key too) -> asv's names
        from benchkit.define.expand import asv_bench_regexes
        from benchkit.define.loader import load_cases

        bench = asv_bench_regexes(bench, load_cases())

    if checkout is not None:
        progress.step(1, f"PyTorch source checkout {checkout}: its checked-out commit")
        main_commits = [source_checkout.head_commit(checkout)]
        tags: dict[str, list[str]] = {}
        progress.note(
            f"{main_commits[0][:12]}: a wheel with this git_version (BENCHKIT_WHEELHOUSE, the wheel store) "
            f"or a source build; results in {conf_path.parent}"
        )
    else:
        progress.step(1, "torch history: one git commit per torch build")
        repo = history.HistoryRepo(Path(conf.repo).resolve())
        source = command_source(source, for_default_builds=not builds)
        if builds:
            history.init_history(repo, builds, source=source)
        else:
            picks = pick_default_builds(include_index, source)
            history.init_history_records(repo, [pick.record for pick in picks])
            for pick in picks:
                progress.note(f"torch {pick.record.torch_version}: {pick.how}")
        tags = repo.tags_by_commit()
        for row in history.history_rows(repo):
            if row.branch == history.MAIN_BRANCH:
                built = f"built {row.built}  git_version {row.git_version}"
                progress.note(f"{row.commit}  torch {row.torch}  {built}")
        main_commits = repo.commits(history.MAIN_BRANCH)

    baseline_commit = _baseline_commit(baseline, main_commits, tags)  # a wrong name fails before measuring
    progress.step(2, "asv machine description")
    machine_name = ensure_machine(conf_path, machine)

    rounds = plan.first
    mode = f"wall time in {rounds} interleaved rounds (processes) of {SAMPLES_PER_ROUND} samples per build"
    if plan.adds:
        mode += f", up to {plan.cap} where a verdict is open"
        if plan.moved_cap != plan.cap:
            mode += f" ({plan.moved_cap} where its case's instruction count moved)"
        if plan.budget:
            mode += f" (within what {plan.budget} fixed rounds would cost)"
    # The cap names the plan; the moved cap is how the budget is shared (a history measured
    # before it existed stays finished).
    rounds_key = f"rounds={rounds}x{SAMPLES_PER_ROUND}" + (f"..{plan.cap}" if plan.adds else "")
    ledger = Ledger(conf_path, [machine_name, rounds_key, *bench])
    expected = run_summary.Expected(machine_name, tuple(bench), rounds * SAMPLES_PER_ROUND)
    done = set() if rerun else ledger.finished()
    if done:  # a finished build whose results were lost or damaged since is measured again
        still = set(run_summary.complete_builds(conf, expected, sorted(done)))
        if still != done:
            ledger.forget(sorted(done - still))
            lost = len(done - still)
            progress.note(f"{lost} build(s) recorded as finished lack numbers now: measured again")
        done = still
    todo = [c for c in main_commits if c not in done]
    progress.step(3, f"asv run over {len(todo)} of {len(main_commits)} torch build(s), {mode}")
    if len(todo) < len(main_commits):
        finished = len(main_commits) - len(todo)
        progress.note(f"{finished} build(s) finished by an earlier run (--rerun measures again)")
    # asv tells its benchmark processes neither the machine and results folder (where profiles
    # go) nor the -b selection (what setup_cache measures): the job says them.
    pairs = job_verdict.judged_pairs(main_commits, todo, baseline_commit) if len(main_commits) >= 2 else []
    # A judged build's operator replicates come from the operator rounds: its main run only compiles.
    config = operator_rounds.main_run_settings(settings.current()) if pairs else settings.current()
    run_settings = asv_run_settings(config, machine_name, Path(conf.results_dir), rounds, bench)
    # pip in asv's environment builds leaves out the indexes that did not answer, too.
    env = {**settings.child_environ(run_settings), **dict(source.environ)}
    run_code = 0
    for found in set_aside_damaged(conf, machine_name, todo):
        progress.note(f"damaged results file {found.describe()}: set aside as *.damaged, measured again")
    # Predecessors (and a baseline) an earlier job measured: their wall times again, beside the
    # new builds', so that the verdict compares rounds of one time window (`rounds_window`).
    earlier = list(dict.fromkeys(p.base for p in pairs if p.base not in todo)) if todo else []
    held: dict[str, dict[tuple[str, str], int]] = {}
    runs = [(todo, bench, False)]
    if earlier:
        before = read_results(conf)
        # The new builds too: an interrupted job may have left rounds of theirs that run 2 appends to.
        held = rounds_window.held_rounds(before, machine_name, [*earlier, *todo])
        runs = [
            (todo, names.metric_regexes(bench, names.Metric.WALL_TIME, keep=False), False),
            ([*earlier, *todo], names.metric_regexes(bench, names.Metric.WALL_TIME, keep=True), True),
        ]
        # asv fails a run that selects nothing: leave out one that benchmarks.json says would.
        runs = [run for run in runs if _selects_any(before.infos, run[1])]
        progress.note(
            f"wall times of {', '.join(c[:8] for c in earlier)} (measured by an earlier job) "
            "measured again beside the new builds: the verdict compares this job's rounds"
        )
    if todo:
        for commits, regexes, append in runs:
            # Each asv command its own selection and id (what its setup_cache measures and shares).
            run_env = env
            if regexes is not bench:
                own = asv_run_settings(config, machine_name, Path(conf.results_dir), rounds, regexes)
                run_env = {**settings.child_environ(own), **dict(source.environ)}
            with tempfile.TemporaryDirectory(prefix="benchkit-main-") as scratch:
                hashfile = Path(scratch) / "commits.txt"
                hashfile.write_text("".join(f"{c}\n" for c in commits))
                args = asv_run_args(f"HASHFILE:{hashfile}", regexes, machine, append)
                code = run_asv(args, conf_path, False, run_env)
            if code < 0:
                raise UserError(f"asv run was killed (signal {-code}); run `benchkit main` again to resume")
            run_code = max(run_code, code)
        top_up = None
        added_rounds: dict[str, int] = {}
        reached = plan.highest
        if plan.adds and pairs:
            top_up = rounds_look.open_wall_times(
                rounds_window.this_jobs_rounds(read_results(conf), machine_name, held),
                machine_name,
                [(p.base, p.head) for p in pairs],
                plan,
                check.check_config_for(conf_path).thresholds["instructions"],
            )
            added_rounds = rounds_look.rounds_to_add(top_up, plan)
            reached = rounds + max(added_rounds.values(), default=plan.highest - rounds)
            progress.note(top_up.describe())
            if plan.budget and added_rounds:
                each = sorted({rounds + n for n in added_rounds.values()}, reverse=True)
                progress.note(
                    f"{len(top_up.benchmarks)} of {top_up.looked} wall times open "
                    f"({len(top_up.moved)} whose instruction count moved, served first): "
                    f"{' and '.join(map(str, each))} rounds keep them within what {plan.budget} "
                    f"fixed rounds of all {top_up.looked} would cost"
                )
        record = settings_record.RunRecord.of(run_settings, machine_name, rounds, SAMPLES_PER_ROUND, reached)
        record_settings(Path(conf.results_dir), machine_name, todo, record)
        if top_up is not None:
            added = add_rounds(
                conf_path, Path(conf.results_dir), machine_name, top_up, added_rounds, source, progress
            )
            run_code = max(run_code, added)
        if pairs:
            replicated, ops_code = _operator_replicates(
                conf_path, conf, machine_name, pairs, bench, source, progress
            )
            run_code = max(run_code, ops_code)
            held = {c: {**held.get(c, {}), **replicated.get(c, {})} for c in {*held, *replicated}}
        # Finished: every selected benchmark has a number, every wall time all its rounds' samples.
        complete = run_summary.complete_builds(conf, expected, todo)
        ledger.record(complete)
        if len(complete) < len(todo):
            progress.note(
                f"{len(todo) - len(complete)} build(s) lack numbers; the next `benchkit main` "
                "measures them again"
            )

    progress.step(4, "publishing the site")
    # Any other `asv run` on these results (e.g. `-b REGEX` or another suite selection) rewrites
    # benchmarks.json, and asv publish draws graphs only for what it lists: rediscover first,
    # with the run's rounds, so that benchmarks.json says what was run.
    run_asv(["run", "--python=same", "--bench", "just-discover"], conf_path, False, env)
    # Read once; the site, the summary and the gate all report on this same reading.
    damaged: list[DamagedFile] | None = [] if skip_damaged else None
    loaded = read_results(conf, damaged)
    html_dir = publish(conf_path, skip_damaged, loaded)

    progress.step(5, "what was measured, and what changed with the builds of this run")
    labels = [(c, (tags.get(c) or [c[:12]])[0]) for c in main_commits]
    summary = run_summary.summarize(loaded, machine_name, labels, bench)
    print(summary.table, file=sys.stderr)
    if summary.measured_with:
        print("measured with (recorded beside asv's results):", file=sys.stderr)
        print("".join(f"  {line}\n" for line in summary.measured_with), end="", file=sys.stderr)
    problems = summary.problems
    if run_code and not problems:  # not a failed benchmark: e.g. it could not save its results
        problems.append(f"asv run exited {run_code} (see its output above)")
    code = 1 if problems else 0
    if pairs:
        # The verdict is about this run's builds: each against its predecessor (and a baseline).
        # With builds measured, every pair's wall times came from one interleaved run of this job.
        verdict = job_verdict.judge_run(
            loaded, conf_path, machine_name, pairs, dict(labels), bench, held, bool(todo), todo
        )
        # The terminal gets each pair's headline and largest changes; the full tables a file.
        table = Path(html_dir) / VERDICT_FILE
        atomic_write_text(table, verdict.markdown)
        atomic_write_json(table.with_suffix(".json"), [verdict_json(v, b, h) for b, h, v in verdict.verdicts])
        sys.stdout.write(verdict.summary + f"\nEvery figure's verdict: {table} (and as JSON beside it)\n")
        problems.extend(verdict.problems)
        code = max(code, verdict.exit_code)
    else:
        progress.note("the history has a single build: nothing to compare")

    for found in damaged or ():
        problems.append(f"--skip-damaged: left out {found.describe()}")
        code = max(code, 1)
    took = f"{progress.elapsed / 60:.1f} min ({progress.elapsed:.0f} s)"
    where = (
        f"Site: {html_dir / 'index.html'}\n"
        f"View it with `asv preview` (from {conf_path.parent}) or any static file server."
    )
    if problems:
        listed = "".join(f"\n  - {problem}" for problem in problems)
        outcome = f"finished with {len(problems)} problem(s) in {took}:{listed}"
    else:
        outcome = f"finished in {took}: every build measured."
    print(f"\nbenchkit main {outcome}\n{where}", file=sys.stderr)
    return code
