"""`benchkit main`: the whole job, from nothing to a published site.

1. build the torch history (this machine's default builds, `benchkit.history.builds.defaults`:
   the installed torch and the newest newer release pip finds, each named with where it
   came from);
2. make sure asv knows this machine (non-interactively);
3. run the suite with asv (`benchkit.job_measure`) on every commit of the history that this
   job has not finished yet (a ledger records finished commits; an interrupted job measures
   its unfinished commits again from scratch, so a resumed job ends with the same
   rounds and samples as an uninterrupted one; where wall times are appended beside a
   predecessor, rounds an interrupted job left stay in the file and the verdict leaves
   them out, `benchkit.report.gate.rounds_window`);
4. publish the site into ``html/``;
5. print what was measured per torch build and metric (measured / failed /
   skipped / missing), what changed with the builds this run measured (each against
   its predecessor on main, and a ``--baseline``; the history's steps at them:
   `benchkit.report.job_verdict`) and where the site is. The job exits 1 when a build lacks
   numbers (a failed ``setup_cache``, failed or missing benchmarks) or the gate
   finds newly failing or vanished benchmarks or a regression, 2 when the gate
   cannot compare a whole metric; the site is published either way.

Wall time: every ``time_wall`` first gets 8 rounds of 3 samples per build, which the job
measures itself (`benchkit.wall_rounds`: a round of a build is one process for all its cases),
the builds alternating round by round. Each round is a fresh process, so a build's wall time
is independent draws of what varies between processes (memory layout, the machine's load at
that minute), and a slow drift of the machine reaches every build alike instead of landing
between two of them. The gate compares two builds' fast levels round by round
(`benchkit.stats.fast_level_test`). After the first look (`benchkit.report.gate.rounds_look`),
the wall times whose verdict against their predecessor (or the baseline) is still open get more
rounds on both builds, interleaved and appended; the others are decided and cost nothing more.
The rounds policy (`benchkit.rounds_policy`) holds the rule, why the gate's false-alarm rate stays within its
alpha, and the budget: those whose case's instruction count moved are served first, up to 48
rounds, within what 12 fixed rounds of every judged wall time would have run; the other open
ones get what is left or ride along in those rounds' processes, at most 24 rounds each.
``--rounds N`` measures every wall time in N rounds and adds none; ``--max-rounds M`` gives
every open one M rounds, without the budget. A predecessor an earlier job measured gets its
wall times measured again in this job's interleaved rounds, and the verdict judges
it by this job's rounds (`benchkit.report.gate.rounds_window`). What the gate finds this way is measured in
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

import dataclasses
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import job_measure
from benchkit.asv_runs import Progress, run_asv
from benchkit.errors import UserError
from benchkit.history.builds import repo as history
from benchkit.history.builds import source as source_checkout
from benchkit.history.builds.defaults import command_source, pick_default_builds
from benchkit.history.builds.sources import PIP_CONFIG, PipSource
from benchkit.history.lock import job_lock
from benchkit.history.results.read import (
    DamagedFile,
    LoadedResults,
    load_asv_config,
    read_results,
)
from benchkit.rounds_policy import FIRST_LOOK_ROUNDS
from benchkit.util import atomic_write_json, atomic_write_text

VERDICT_FILE = "verdict.md"  # in the site's folder: every pair's full `benchkit check` table

if TYPE_CHECKING:
    from benchkit.report.job_verdict import JobVerdict
    from benchkit.rounds_policy import RoundsPlan


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


def _baseline_commit(
    baseline: str | None, main_commits: Sequence[str], tags: Mapping[str, list[str]]
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
        from benchkit.rounds_policy import RoundsPlan

        first = rounds or FIRST_LOOK_ROUNDS
        if max_rounds is None and rounds is None:
            plan = RoundsPlan.default()
        else:  # --max-rounds M: every open one M; --rounds N alone: N, none added
            plan = RoundsPlan.unbudgeted(first, max_rounds or first)
        request = JobRequest(
            conf_path, builds, include_index, plan, rerun, tuple(bench), machine, skip_damaged, source,
            checkout, baseline,
        )  # fmt: skip
        return _run_main_job(request)


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """What `benchkit main` was asked (`run_main_job`'s arguments, the rounds made a plan)."""

    conf_path: Path
    builds: Sequence[str] | None
    include_index: bool
    plan: RoundsPlan
    rerun: bool
    bench: tuple[str, ...]
    machine: str | None
    skip_damaged: bool
    source: PipSource
    checkout: Path | None
    baseline: str | None


@dataclasses.dataclass(frozen=True)
class JobHistory:
    """The builds of the history's main line, oldest first, and their tags."""

    main_commits: tuple[str, ...]
    tags: Mapping[str, list[str]]
    source: PipSource  # pip's sources, as the history step found them answering


@dataclasses.dataclass(frozen=True)
class Published:
    loaded: LoadedResults  # the results, read once for the site, the summary and the verdict
    html_dir: Path
    damaged: tuple[DamagedFile, ...]  # files --skip-damaged left out


def _run_main_job(req: JobRequest) -> int:
    progress = Progress()
    conf = load_asv_config(req.conf_path)  # read once: every step below is handed this
    req = dataclasses.replace(req, bench=_asv_names(req.bench))
    found = _history(req, conf, progress)
    baseline = _baseline_commit(req.baseline, found.main_commits, found.tags)  # fails before measuring
    progress.step(2, "asv machine description")
    machine = ensure_machine(req.conf_path, req.machine)
    measured = job_measure.measure(
        job_measure.MeasureRequest(
            req.conf_path, conf, machine, req.machine, found.main_commits, baseline, req.plan, req.bench,
            req.rerun, found.source,
        ),
        progress,
    )  # fmt: skip
    published = _publish(req, conf, measured, progress)
    problems, code = _report(req, found, machine, measured, published, progress)
    _finish(req, published, problems, progress)
    return max(code, 1 if published.damaged else 0)  # a left-out file is a problem too


def _asv_names(bench: Sequence[str]) -> tuple[str, ...]:
    """asv's regexes for any name a user sees for a case (its readable key too)."""
    if not bench:
        return ()
    from benchkit.define.expand import asv_bench_regexes
    from benchkit.define.loader import load_cases

    return tuple(asv_bench_regexes(bench, load_cases()))


def _history(req: JobRequest, conf: Any, progress: Progress) -> JobHistory:
    """Step 1: the torch history (or a PyTorch checkout's commit)."""
    if req.checkout is not None:
        progress.step(1, f"PyTorch source checkout {req.checkout}: its checked-out commit")
        commit = source_checkout.head_commit(req.checkout)
        progress.note(
            f"{commit[:12]}: a wheel with this git_version (BENCHKIT_WHEELHOUSE, the wheel store) "
            f"or a source build; results in {req.conf_path.parent}"
        )
        return JobHistory((commit,), {}, req.source)
    progress.step(1, "torch history: one git commit per torch build")
    repo = history.HistoryRepo(Path(conf.repo).resolve())
    source = command_source(req.source, for_default_builds=not req.builds)
    if req.builds:
        history.init_history(repo, req.builds, source=source)
    else:
        picks = pick_default_builds(req.include_index, source)
        history.init_history_records(repo, [pick.record for pick in picks])
        for pick in picks:
            progress.note(f"torch {pick.record.torch_version}: {pick.how}")
    for row in history.history_rows(repo):
        if row.branch == history.MAIN_BRANCH:
            built = f"built {row.built}  git_version {row.git_version}"
            progress.note(f"{row.commit}  torch {row.torch}  {built}")
    return JobHistory(tuple(repo.commits(history.MAIN_BRANCH)), repo.tags_by_commit(), source)


def _publish(req: JobRequest, conf: Any, measured: job_measure.Measured, progress: Progress) -> Published:
    """Step 4: the site, from the results read once."""
    progress.step(4, "publishing the site")
    # Any other `asv run` on these results (e.g. `-b REGEX` or another suite selection) rewrites
    # benchmarks.json, and asv publish draws graphs only for what it lists: rediscover first,
    # with the run's rounds, so that benchmarks.json says what was run.
    run_asv(["run", "--python=same", "--bench", "just-discover"], req.conf_path, False, dict(measured.env))
    damaged: list[DamagedFile] | None = [] if req.skip_damaged else None
    loaded = read_results(conf, damaged)
    html_dir = publish(req.conf_path, req.skip_damaged, loaded)
    return Published(loaded, html_dir, tuple(damaged or ()))


def _report(
    req: JobRequest, found: JobHistory, machine: str, measured: job_measure.Measured, published: Published,
    progress: Progress,
) -> tuple[list[str], int]:  # fmt: skip
    """Step 5: what was measured per build and metric, and the verdict on this run's builds:
    the problems and the exit code."""
    from benchkit.report import job_verdict, run_summary

    progress.step(5, "what was measured, and what changed with the builds of this run")
    labels = [(c, (found.tags.get(c) or [c[:12]])[0]) for c in found.main_commits]
    summary = run_summary.summarize(published.loaded, machine, labels, req.bench)
    print(summary.table, file=sys.stderr)
    if summary.measured_with:
        print("measured with (recorded beside asv's results):", file=sys.stderr)
        print("".join(f"  {line}\n" for line in summary.measured_with), end="", file=sys.stderr)
    problems = list(summary.problems)
    if measured.run_code and not problems:  # not a failed benchmark: e.g. it could not save its results
        problems.append(f"asv run exited {measured.run_code} (see its output above)")
    code = 1 if problems else 0
    if not measured.pairs:
        progress.note("the history has a single build: nothing to compare")
        return problems, code
    # The verdict is about this run's builds: each against its predecessor (and a baseline).
    verdict = job_verdict.judge_run(
        published.loaded, req.conf_path, machine, measured.pairs, dict(labels), req.bench
    )
    _write_verdict(verdict, published.html_dir, machine)
    problems.extend(verdict.problems)
    return problems, max(code, verdict.exit_code)


def _write_verdict(verdict: JobVerdict, html_dir: Path, machine: str) -> None:
    """The terminal gets each pair's headline and largest changes; the full tables a file, with
    the why pages of the wall times whose instruction count moved."""
    from benchkit.report.gate.check_json import verdict_json

    table = html_dir / VERDICT_FILE
    atomic_write_text(table, verdict.markdown + _count_links_markdown(verdict, html_dir, machine))
    pairs = [verdict_json(v.verdict, v.base_label, v.head_label) for v in verdict.verdicts]
    atomic_write_json(table.with_suffix(".json"), pairs)
    sys.stdout.write(verdict.summary + f"\nEvery figure's verdict: {table} (and as JSON beside it)\n")


def _count_links_markdown(verdict: JobVerdict, html_dir: Path, machine: str) -> str:
    """Per pair, each wall time whose case's instruction count moved, linked to that count's
    why page (what the build runs differently there); "" when there is none."""
    from benchkit.report.gate.check_format import format_change
    from benchkit.report.site.count_links import count_links

    lines = []
    for judged in verdict.verdicts:
        pair = judged.pair
        for link in count_links(judged.verdict.comparisons, machine, pair.base, pair.head, html_dir):
            wall = link.wall
            lines.append(
                f"| {judged.head_label} against {judged.base_label} | `{wall.name}` | {wall.status.value} "
                f"| {format_change(wall)} | {link.count.status.value} | [where?]({link.path}) |"
            )
    if not lines:
        return ""
    header = (
        "\n## Wall times whose instruction count moved\n\n"
        "The count's why page says which functions run more or less often there.\n\n"
        "| pair | wall time | verdict | change | its count | why |\n|---|---|---|---|---|---|\n"
    )
    return header + "\n".join(lines) + "\n"


def _finish(req: JobRequest, published: Published, problems: list[str], progress: Progress) -> None:
    """The job's last lines: its problems, how long it took, where the site is."""
    problems = [*problems, *(f"--skip-damaged: left out {found.describe()}" for found in published.damaged)]
    took = f"{progress.elapsed / 60:.1f} min ({progress.elapsed:.0f} s)"
    where = (
        f"Site: {published.html_dir / 'index.html'}\n"
        f"View it with `asv preview` (from {req.conf_path.parent}) or any static file server."
    )
    if problems:
        listed = "".join(f"\n  - {problem}" for problem in problems)
        outcome = f"finished with {len(problems)} problem(s) in {took}:{listed}"
    else:
        outcome = f"finished in {took}: every build measured."
    print(f"\nbenchkit main {outcome}\n{where}", file=sys.stderr)
