"""The main job's verdict: about what this run measured.

A history grows by a build or two a night. Judging its oldest build against its newest
would judge a month of changes at once, and a regression from the first week would fail
every night after it. The main job judges instead:

* each build this run measured against the build before it on the history's main
  branch (its predecessor), with `benchkit check`; a predecessor an earlier job measured is
  measured again beside it, and its wall times are judged by this job's rounds only
  (`benchkit.report.gate.rounds_window`), as the job's `benchkit.report.gate.pair_record` keeps
  for every later reader;
* each of them against a baseline, when one is named (e.g. the last release's tag);
* the history's steps (`benchkit regressions`) that start at one of those builds and last
  more than that build: a level that changed with this run's builds, seen over the whole
  series rather than one pair (a first run of many builds, a backfill).

When the run measured nothing new (every build was finished earlier), the newest build
on main is judged, so that running the job again gives the same verdict. The exit code
is the worst of the pairs' (`benchkit check`'s codes), and 1 when a judged step of the
history made a benchmark slower at one of these builds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.results.read import LoadedResults
from benchkit.report.gate.check import check_config_for, judge_results, metric_judge, selected
from benchkit.report.gate.check_config import CheckConfig
from benchkit.report.gate.check_format import format_change
from benchkit.report.gate.check_status import Status
from benchkit.report.gate.check_types import Verdict
from benchkit.report.steps import changepoints


@dataclasses.dataclass(frozen=True)
class JudgedPair:
    base: str  # full commit hashes
    head: str
    against: str  # "its predecessor" or "the baseline"


def judged_pairs(
    main_commits: Sequence[str], measured: Sequence[str], baseline: str | None = None
) -> list[JudgedPair]:
    """The pairs the job judges (oldest first): each measured build of main against the one
    before it, and against `baseline` (a commit of main) when given."""
    heads = [c for c in main_commits if c in set(measured)] or list(main_commits[-1:])
    pairs: list[JudgedPair] = []
    for head in heads:
        position = main_commits.index(head)
        if position > 0:
            pairs.append(JudgedPair(main_commits[position - 1], head, "its predecessor"))
        predecessor = main_commits[position - 1] if position > 0 else None
        if baseline is not None and baseline not in (head, predecessor):
            pairs.append(JudgedPair(baseline, head, "the baseline"))
    return pairs


@dataclasses.dataclass(frozen=True)
class PairVerdict:
    base_label: str
    head_label: str
    pair: JudgedPair
    verdict: Verdict


@dataclasses.dataclass(frozen=True)
class JobVerdict:
    markdown: str  # every pair's `benchkit check` table, then the history's steps at the judged builds
    exit_code: int
    problems: tuple[str, ...]  # one line each: why the exit code is not 0
    heads: tuple[str, ...]  # the builds judged
    summary: str = ""  # for a terminal: per pair its headline and largest changes (`pair_summary`)
    verdicts: tuple[PairVerdict, ...] = ()  # per pair judged, in the order of `markdown`


TOP_CHANGES = 5  # rows of each pair's largest flagged changes in the terminal summary


def pair_summary(title: str, verdict: Verdict, top: int = TOP_CHANGES) -> str:
    """A pair's verdict in a few lines: its headline, a build-wide change, what was not judged,
    and its largest regressions and improvements (the full table goes to a file)."""
    lines = [title, f"  {verdict.headline}"]
    lines += [f"  {line}" for line in (*verdict.build_wide, *verdict.not_judged)]
    flagged = [c for c in verdict.comparisons if c.status in (Status.REGRESSION, Status.IMPROVEMENT)]
    flagged.sort(key=lambda c: -abs(math.log(c.ratio)) if c.ratio else 0.0)
    for c in flagged[:top]:
        lines.append(f"  {c.status.value:<11} {format_change(c)}  {c.name}")
    if len(flagged) > top:
        lines.append(f"  ... and {len(flagged) - top} more in the full table")
    return "\n".join(lines) + "\n"


def judge_run(
    loaded: LoadedResults,
    conf_path: Path,
    machine: str,
    pairs: Sequence[JudgedPair],
    labels: Mapping[str, str],
    bench: Sequence[str] = (),
) -> JobVerdict:
    """`benchkit check` on every pair, and the history's steps that start at a judged build. A
    pair this job (or an earlier one) measured is judged by its `pair_record`: the rounds the job
    measured interleaved (a predecessor's of this job only), its compile times compared only
    where the job compiled both builds."""
    parts: list[str] = []
    summaries: list[str] = []
    verdicts: list[PairVerdict] = []
    problems: list[str] = []
    code = 0
    config = check_config_for(conf_path)
    for pair in pairs:
        base, head = labels.get(pair.base, pair.base[:12]), labels.get(pair.head, pair.head[:12])
        parts.append(f"\n## {head} against {pair.against} {base}\n")
        try:
            # The gate judges what was selected: other benchmarks' older results are not "missing".
            verdict = judge_results(base, head, loaded, config, machine, bench=bench)
        except UserError as e:
            problems.append(f"could not compare {base} and {head}: {e}")
            code = max(code, 2)
            continue
        parts.append(verdict.markdown)
        verdicts.append(PairVerdict(base, head, pair, verdict))
        summaries.append(pair_summary(f"{head} against {pair.against} {base}:", verdict))
        if verdict.exit_code:
            problems.append(f"benchkit check {base} {head} exited {verdict.exit_code} (see above)")
            code = max(code, verdict.exit_code)
    heads = tuple(dict.fromkeys(p.head for p in pairs))
    steps = _steps_at(loaded, config, machine, heads, bench)
    if steps:
        parts.append(f"\n## The history's steps at {', '.join(labels.get(h, h[:12]) for h in heads)}\n\n")
        parts.append("```\n" + changepoints.format_table(steps) + "```\n")
        slower = [s for s in steps if changepoints.judged(s) and s.change > 0]
        for step in slower:
            problems.append(
                f"benchkit regressions: {step.name} stepped {step.change:+.1%} at "
                f"{labels.get(step.after, step.after[:12])}"
            )
        code = max(code, 1 if slower else 0)
        summaries.append(f"The history's steps at these builds: {len(steps)} ({len(slower)} slower)\n")
    return JobVerdict("".join(parts), code, tuple(problems), heads, "".join(summaries), tuple(verdicts))


def _steps_at(
    loaded: LoadedResults, config: CheckConfig, machine: str, heads: Sequence[str], bench: Sequence[str]
) -> list[changepoints.Step]:
    """The history's steps whose new level starts at one of `heads`."""
    history = [selected(r, bench) for r in loaded.history(machine)]
    if len(history) < 3:
        return []  # a step needs a level on each side; two builds are the pair's verdict alone
    metric_of = metric_judge(loaded.units, config)
    found = changepoints.history_steps(
        history,
        metric_of,
        lambda name: config.rule_for(name, metric_of(name))[1],
        config.thresholds["instructions"],
    )
    # A new level of one build (the newest) is the pair's verdict again, from fewer numbers, and
    # a busy newest build cannot be told from a step yet: the pair judges it by its rounds.
    last = len(history) - 1
    return [s for s in found.steps if s.after in set(heads) and s.position < last]
