"""How long `benchkit publish` takes on a long, wide history, beside `asv publish`.

Writes a synthetic history (default 100 commits x 300 benchmarks: instruction
counts, wall times with samples, and parameterized operator tracks) into a
temporary asv project -- a real benchkit torch-history repository and results
written with asv's own Results API -- then times ``asv publish`` as benchkit configures it
(without asv's own regression search, `ASV_PUBLISH_SETTINGS`), ``asv publish`` with asv's
defaults, and ``benchkit publish`` on it, alternating, and prints the medians and the ratio,
with asv's publish split by the steps it prints as it starts each (no profiler in the run).
``benchkit publish`` writes asv's part of the site itself, from its own one read of the
results (`benchkit.report.site.asv_site`), beside its pages: ``asv publish`` is timed as the
reference of what asv's own command costs. Then one more build joins the history
(`lab.synthetic.add_build`, the nightly's case) and ``benchkit publish`` is timed once more.
Targets (issue 57): a full publish of 1,000 x 1,400 in 60 s, after one more build 10 s.

    python -m lab.bench_publish [--commits 100] [--benchmarks 300] [--repeat 3] [--keep DIR]
    python -m lab.bench_publish --size 300x700 --size 1000x1400 --repeat 1 --no-asv-search \
        --phases --markdown lab/reports/publish-scale.md

It then prints the size of each page a user opens (the site's top-level pages and the largest
why page) and how long headless Chromium takes to load each of the largest from disk (the
page's own navigation timing: from navigation start to its load event).

With several ``--size COMMITSxBENCHMARKS`` the histories are measured one after another in one
run and summed up in one table (``--markdown`` writes it); ``--phases`` adds where benchkit's
own pages spend their time (reading the results, judging every pair, the regressions page's
steps, rendering the rest), measured in this process after the timed runs.

The generator is lab/synthetic.py (the site tests use it with a few commits).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit.history.builds.build_step import ASV_PUBLISH_SETTINGS
from lab import REPO_ROOT
from lab.synthetic import MACHINE, add_build, make_project

LOADED_PAGES = 6  # the largest pages whose load time is measured
# asv publish's progress lines: "[ 44.44%] · Detecting steps"
ASV_STEP = re.compile(r"^\[\s*[\d.]+%\] · (?P<step>\S.*?)\s*$")
# asv publish's steps, grouped as the table names them; "Generating output for X" is its pages.
ASV_STEP_GROUPS = {
    "Loading machine info": "read results",
    "Getting params, commits, tags and branches": "read results",
    "Loading results": "read results",
    "Detecting steps": "step detection",
    "Generating graphs": "graph files",
    "Writing index": "index",
}


@dataclasses.dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # user + system of the command and everything it waited for (asv's worker pool)
    steps: tuple[tuple[str, float], ...] = ()  # asv publish's own steps: (name, seconds)


def _timed(command: list[str], cwd: Path) -> Timing:
    """Wall and CPU seconds of `command`, and the seconds between the progress lines asv prints
    as it starts each step (read as they come, unbuffered: no profiler slows the run)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    output, marks = [], []
    for line in proc.stdout:
        output.append(line)
        if found := ASV_STEP.match(line):
            marks.append((found["step"], time.perf_counter()))
    proc.wait()
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{''.join(output)[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ends = [at for _, at in marks[1:]] + [started + elapsed] * bool(marks)
    steps = tuple((step, end - at) for (step, at), end in zip(marks, ends, strict=True))
    return Timing(elapsed, cpu, steps)


def _summary(label: str, runs: list[Timing]) -> str:
    wall = statistics.median(t.wall_s for t in runs)
    cpu = statistics.median(t.cpu_s for t in runs)
    listed = ", ".join(f"{t.wall_s:.2f}" for t in runs)
    return f"{label}: median wall {wall:6.2f} s (runs: {listed}), median CPU {cpu:6.2f} s"


def _with_asvs_regression_search(conf: Path) -> Path:
    """A copy of `conf` beside it without benchkit's `ASV_PUBLISH_SETTINGS`: asv's defaults."""
    settings = json.loads(conf.read_text())
    for key in ASV_PUBLISH_SETTINGS:
        settings.pop(key, None)
    copy = conf.with_name("asv.search.conf.json")
    copy.write_text(json.dumps(settings, indent=1))
    return copy


def _page_sizes(html: Path) -> list[tuple[int, Path]]:
    """Every page a user opens, largest first: the top-level pages and the why pages."""
    pages = [*html.glob("*.html"), *html.glob("why/*.html")]
    return sorted(((p.stat().st_size, p) for p in pages), reverse=True)


def _load_times(pages: list[Path]) -> list[float]:
    """Seconds from navigation start to the load event of each page, opened from disk."""
    from lab.browser import Browser

    browser = Browser()
    try:
        times = []
        for page in pages:
            browser.open(page.as_uri())
            timing = "performance.getEntriesByType('navigation')[0].loadEventEnd / 1000"
            times.append(float(browser.evaluate(timing)))
        return times
    finally:
        browser.close()


@dataclasses.dataclass(frozen=True)
class SizeFigures:
    commits: int
    benchmarks: int
    asv_search: list[Timing]
    asv: list[Timing]
    benchkit: list[Timing]
    after_one_build: Timing
    sizes: list[tuple[int, Path]]
    loads: list[float]
    why_pages: int
    phases: list[tuple[str, float]]

    def asv_steps(self) -> str:
        """asv publish's steps (as benchkit configures it), medians over the runs, in groups."""
        groups: dict[str, list[float]] = {}
        for run in self.asv:
            seconds: dict[str, float] = {}
            for step, s in run.steps:
                pages = step.startswith("Generating output")
                group = ASV_STEP_GROUPS.get(step, "its pages" if pages else step)
                seconds[group] = seconds.get(group, 0.0) + s
            for group, s in seconds.items():
                groups.setdefault(group, []).append(s)
        return ", ".join(f"{g} {statistics.median(s):.1f}" for g, s in groups.items()) or "–"

    def row(self) -> list[str]:
        def median(runs: list[Timing]) -> str:
            return f"{statistics.median(t.wall_s for t in runs):.1f}" if runs else "–"

        largest, load = (self.sizes[0][0], max(self.loads)) if self.sizes else (0, 0.0)
        phases = ", ".join(f"{name} {seconds:.1f}" for name, seconds in self.phases) or "–"
        return [
            f"{self.commits} × {self.benchmarks}",
            median(self.asv_search),
            median(self.asv),
            self.asv_steps(),
            median(self.benchkit),
            f"{self.after_one_build.wall_s:.1f}",
            phases,
            f"{len(self.sizes)} ({self.why_pages} why)",
            f"{largest / 2**20:.2f}",
            f"{load:.2f}",
        ]


TABLE_HEAD = (
    "history (commits × benchmarks)",
    "asv publish, asv's defaults (s)",
    "asv publish as benchkit configures it (s)",
    "asv publish by its own steps (s)",
    "benchkit publish (s)",
    "benchkit publish after one more build (s)",
    "benchkit's pages by phase, one process after the runs (s)",
    "pages a user opens",
    "largest page (MiB)",
    "slowest load of the largest pages (s)",
)


def _page_phases(conf: Path) -> list[tuple[str, float]]:
    """Seconds of each part of benchkit's pages, one after another in this process."""
    from benchkit.report.site import data, pages, render

    laps: list[tuple[str, float]] = []
    started = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal started
        now = time.perf_counter()
        laps.append((name, now - started))
        started = now

    site = data.load_site_data(conf)
    lap("read")
    pairs = data.pair_changes(site)
    lap("judge pairs")
    steps = pages.regression_sections(site)
    lap("steps")
    saved = render.pair_changes, render.regression_sections
    render.pair_changes, render.regression_sections = (lambda _: pairs), (lambda _: steps)
    try:
        render.render_pages(site)
    finally:
        render.pair_changes, render.regression_sections = saved
    lap("render")
    return laps


def measure_size(root: Path, commits: int, benchmarks: int, args: argparse.Namespace) -> SizeFigures:
    started = time.perf_counter()
    print(f"writing {commits} commits x {benchmarks} benchmarks into {root} ...", file=sys.stderr)
    conf = make_project(root, commits, benchmarks)
    print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    asv_cmd = [sys.executable, "-m", "asv", "publish", "--config", str(conf)]
    bk_cmd = [sys.executable, "-m", "benchkit.cli", "publish", "--asv-config", str(conf)]
    search_cmd = [sys.executable, "-m", "asv", "publish", "--config", str(_with_asvs_regression_search(conf))]
    asv_runs: list[Timing] = []
    bk_runs: list[Timing] = []
    search_runs: list[Timing] = []
    for i in range(args.repeat):
        if args.asv_search:
            search_runs.append(_timed(search_cmd, root))
        asv_runs.append(_timed(asv_cmd, root))
        bk_runs.append(_timed(bk_cmd, REPO_ROOT))
        searched = f"with its regression search {search_runs[-1].wall_s:.2f} s, " if search_runs else ""
        print(f"  run {i + 1}: asv publish {searched}as benchkit configures it {asv_runs[-1].wall_s:.2f} s, "
              f"benchkit publish {bk_runs[-1].wall_s:.2f} s", file=sys.stderr)  # fmt: skip
    sizes = _page_sizes(root / "html")
    loads = _load_times([p for _, p in sizes[:LOADED_PAGES]])
    phases = _page_phases(conf) if args.phases else []
    why = len(list((root / "html" / "why").glob("*.html")))
    add_build(conf)
    after = _timed(bk_cmd, REPO_ROOT)
    print(f"  one more build: benchkit publish {after.wall_s:.2f} s", file=sys.stderr)
    figures = SizeFigures(
        commits, benchmarks, search_runs, asv_runs, bk_runs, after, sizes, loads, why, phases
    )
    _print_size(root, figures)
    return figures


def _print_size(root: Path, f: SizeFigures) -> None:
    pages = sorted(p.name for p in (root / "html").glob("*.html"))
    print(f"history: {f.commits} commits x {f.benchmarks} benchmarks (machine {MACHINE})")
    print(f"pages: {len(pages)} top-level, {f.why_pages} why pages")
    if f.asv_search:
        print(_summary("asv publish with asv's regression search (asv's default)", f.asv_search))
    print(_summary("asv publish as benchkit configures it", f.asv))
    print(_summary("benchkit publish", f.benchkit))
    asv_s = statistics.median(t.wall_s for t in f.asv)
    bk_s = statistics.median(t.wall_s for t in f.benchkit)
    asv_cpu = statistics.median(t.cpu_s for t in f.asv)
    bk_cpu = statistics.median(t.cpu_s for t in f.benchkit)
    cpu_added, wall_added = (bk_cpu - asv_cpu) / asv_cpu, (bk_s - asv_s) / asv_s
    print(f"CPU:  benchkit/asv = {bk_cpu / asv_cpu:.2f}: the whole site costs {cpu_added * 100:+.0f}% "
          "against asv's own publish")  # fmt: skip
    print(f"wall: benchkit/asv = {bk_s / asv_s:.2f}: {wall_added * 100:+.0f}% against asv's own publish")
    if f.phases:
        print("benchkit's pages alone: " + ", ".join(f"{n} {s:.1f} s" for n, s in f.phases))
    print(f"pages a user opens: {len(f.sizes)}, {sum(n for n, _ in f.sizes) / 2**20:.1f} MiB in all")
    for (size, page), load in zip(f.sizes, f.loads, strict=False):
        print(f"  {size / 2**20:6.2f} MiB  loads in {load:5.2f} s  {page.relative_to(root / 'html')}")
    print(f"after one more build: benchkit publish {f.after_one_build.wall_s:.2f} s "
          "(not incremental: the whole site is made again)")  # fmt: skip


def _markdown(figures: list[SizeFigures], command: str) -> str:
    lines = [
        "# `benchkit publish` on long, wide histories",
        "",
        f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, this project's",
        "2-core development machine. Synthetic histories (lab/synthetic.py: instruction counts with",
        "profiles, wall times with samples, parameterized operator tracks); medians of the runs.",
        "benchkit publish writes asv's part of the site itself, from its own one read of the",
        "results, beside its pages; asv publish is timed as the reference. Publishing is not",
        "incremental: a history that gained one build (lab.synthetic.add_build) is published",
        "whole again. asv publish by its own steps:",
        "the seconds between the progress lines asv prints as it starts each (read results: its",
        "machine files, commits and every results file, which asv reads twice, the second time into",
        "its graphs' data; step detection: asv's own, for its list and regressions views, which runs",
        "even with its regression report off; its pages: its grid, list and regressions views).",
        "",
        "| " + " | ".join(TABLE_HEAD) + " |",
        "|" + "---|" * len(TABLE_HEAD),
    ]
    lines += ["| " + " | ".join(f.row()) + " |" for f in figures]
    return "\n".join(lines) + "\n"


def _size(text: str) -> tuple[int, int]:
    commits, _, benchmarks = text.partition("x")
    if not (commits.isdigit() and benchmarks.isdigit()):
        raise argparse.ArgumentTypeError(f"--size {text!r}: COMMITSxBENCHMARKS, e.g. 300x700")
    return int(commits), int(benchmarks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--benchmarks", type=int, default=300)
    parser.add_argument("--size", type=_size, action="append", help="COMMITSxBENCHMARKS (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternating")
    parser.add_argument("--no-asv-search", dest="asv_search", action="store_false",
                        help="leave out asv publish with asv's own regression search")  # fmt: skip
    parser.add_argument("--phases", action="store_true", help="time the parts of benchkit's pages")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    parser.add_argument(
        "--keep", type=Path, help="build the projects here and keep them (default: a temp dir)"
    )
    args = parser.parse_args()

    sizes = args.size or [(args.commits, args.benchmarks)]
    base = args.keep or Path(tempfile.mkdtemp(prefix="benchkit-publish-bench-"))
    figures = []
    try:
        for commits, benchmarks in sizes:
            root = base / f"{commits}x{benchmarks}" if len(sizes) > 1 else base
            figures.append(measure_size(root, commits, benchmarks, args))
            if args.keep is None:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.markdown:
        command = "python -m lab.bench_publish " + " ".join(sys.argv[1:])
        args.markdown.write_text(_markdown(figures, command))
    bk = [statistics.median(t.wall_s for t in f.benchkit) for f in figures]
    asv = [statistics.median(t.wall_s for t in f.asv) for f in figures]
    return 0 if all(b <= a for b, a in zip(bk, asv, strict=True)) else 1  # the site in asv's time


if __name__ == "__main__":
    sys.exit(main())
