"""How much `benchkit publish` adds to `asv publish` on a long, wide history.

Writes a synthetic history (default 100 commits x 300 benchmarks: instruction
counts, wall times with samples, and parameterized operator tracks) into a
temporary asv project -- a real benchkit torch-history repository and results
written with asv's own Results API -- then times ``asv publish`` as benchkit configures it
(without asv's own regression search, `ASV_PUBLISH_SETTINGS`), ``asv publish`` with asv's
defaults, and ``benchkit publish`` on it, alternating, and prints the medians and the ratio.
Target: benchkit's pages add at most 50% to asv's own publish time.

    python -m lab.bench_publish [--commits 100] [--benchmarks 300] [--repeat 3] [--keep DIR]

It then prints the size of each page a user opens (the site's top-level pages and the largest
why page) and how long headless Chromium takes to load each of the largest from disk (the
page's own navigation timing: from navigation start to its load event).

The generator is lab/synthetic.py (the site tests use it with a few commits).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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
from lab.synthetic import MACHINE, make_project

LOADED_PAGES = 6  # the largest pages whose load time is measured


@dataclasses.dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # user + system of the command and everything it waited for (asv's worker pool)


def _timed(command: list[str], cwd: Path) -> Timing:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(elapsed, cpu)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--benchmarks", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternating")
    parser.add_argument("--keep", type=Path, help="build the project here and keep it (default: a temp dir)")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="benchkit-publish-bench-"))
    try:
        started = time.perf_counter()
        print(
            f"writing {args.commits} commits x {args.benchmarks} benchmarks into {root} ...", file=sys.stderr
        )
        conf = make_project(root, args.commits, args.benchmarks)
        print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        asv_cmd = [sys.executable, "-m", "asv", "publish", "--config", str(conf)]
        bk_cmd = [sys.executable, "-m", "benchkit.cli", "publish", "--asv-config", str(conf)]
        searching = _with_asvs_regression_search(conf)
        search_cmd = [sys.executable, "-m", "asv", "publish", "--config", str(searching)]
        asv_runs: list[Timing] = []
        bk_runs: list[Timing] = []
        search_runs: list[Timing] = []
        for i in range(args.repeat):
            search_runs.append(_timed(search_cmd, root))
            asv_runs.append(_timed(asv_cmd, root))
            bk_runs.append(_timed(bk_cmd, REPO_ROOT))
            print(f"  run {i + 1}: asv publish with its regression search {search_runs[-1].wall_s:.2f} s, "
                  f"without {asv_runs[-1].wall_s:.2f} s, benchkit publish {bk_runs[-1].wall_s:.2f} s",
                  file=sys.stderr)  # fmt: skip
        asv_s = statistics.median(t.wall_s for t in asv_runs)
        bk_s = statistics.median(t.wall_s for t in bk_runs)
        asv_cpu = statistics.median(t.cpu_s for t in asv_runs)
        bk_cpu = statistics.median(t.cpu_s for t in bk_runs)
        pages = sorted(p.name for p in (root / "html").glob("*.html"))
        why = len(list((root / "html" / "why").glob("*.html")))
        added = (bk_s - asv_s) / asv_s
        sizes = _page_sizes(root / "html")
        largest = sizes[:LOADED_PAGES]
        loads = _load_times([p for _, p in largest])
        print(f"history: {args.commits} commits x {args.benchmarks} benchmarks (machine {MACHINE})")
        print(f"pages: {', '.join(pages)}; why pages: {why}")
        print(_summary("asv publish with asv's regression search (asv's default)", search_runs))
        print(_summary("asv publish as benchkit configures it", asv_runs))
        print(_summary("benchkit publish", bk_runs))
        cpu_added = (bk_cpu - asv_cpu) / asv_cpu
        print(f"CPU:  benchkit/asv = {bk_cpu / asv_cpu:.2f}: our pages cost {cpu_added * 100:.0f}% of asv's "
              "CPU time (they run beside asv, so wall time grows less)")  # fmt: skip
        print(f"wall: benchkit/asv = {bk_s / asv_s:.2f}: our pages add {added * 100:.0f}% (target <= 50%)")
        print(f"pages a user opens: {len(sizes)}, {sum(n for n, _ in sizes) / 2**20:.1f} MiB in all")
        for (size, page), load in zip(largest, loads, strict=True):
            shown = page.relative_to(root / "html")
            print(f"  {size / 2**20:6.2f} MiB  loads in {load:5.2f} s  {shown}")
        return 0 if added <= 0.5 else 1
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
