"""How often `benchkit regressions` finds a known step in a history, and how often it makes one
up: a seed sweep over labelled histories.

    python -m lab.bench_changepoints [--seeds 100] [--before main]

Each history is 30 builds written with asv's own Results API (`lab/histories.py`,
`stepped_history`): per case a wall time as `benchkit main` records it (12 rounds x 3 samples;
log-normal noise: 1 % per build's run, 1.5 % per round, 0.5 % per sample) and a flat
instruction count. The first case's wall time steps by the configured size at a build drawn
between 3 and 27 (at least three builds on each side); the others stay flat. Suites of 3 and
of 15 cases; with and without a busy build (every wall time x1.6 at one interior build drawn at
random); a shared machine's histories, where 30 % of the rounds fall into another tenant's
bursts (x1.3-2.0 slower); step sizes 2, 3, 5 and 10 %; and the issue's case, +10 % at build
20, with and without bursts. Each history
goes through the user's command, ``benchkit regressions --json OUT`` (the command line's
`main`, in process), and its JSON is scored:

* found: a step of the stepping wall time (not an outlier row) within one build of the truth;
* false steps: steps of the flat wall times, per 1,000 flat benchmark-histories (outlier
  rows, one build away and back, are counted apart), steps of the instruction counts, and
  further steps of the stepping wall time more than one build away;
* at the busy build: steps of the flat wall times at it or the build after it (a step of the
  stepping wall time is scored as found or not above, wherever it lands), and whether
  `regressions` left the busy build out as disturbed.

``--before REF`` runs the same sweep on the benchkit package of another commit of this
repository (``git archive REF``, into a temporary folder) for a side-by-side table; the two
sweeps run at once, one process each. The
tables go to ``--out`` (default lab/reports/changepoints-power.md) with the command.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab import REPO_ROOT, REPORTS, command_line

SIZES = (0.02, 0.03, 0.05, 0.10)
SUITES = (3, 15)
BUILDS = 30
EDGE = 3  # builds at least on each side of a step
ISSUE_CASE = (20, 0.10)  # the issue's history: +10 % from build 20 on
MAX_LISTED = 12  # missed steps whose builds the table lists
BURSTS = 0.3  # share of the rounds in another tenant's bursts, for the shared-machine histories


def _configs(seeds: int) -> Iterator[dict[str, Any]]:
    def config(kind: str, walls: int, busy: bool, bursts: float, size: float, seed: int) -> dict[str, Any]:
        return {"kind": kind, "walls": walls, "busy": busy, "bursts": bursts, "size": size, "seed": seed}

    for walls in SUITES:
        for busy, bursts in ((False, 0.0), (True, 0.0), (False, BURSTS)):
            for size in SIZES:
                for seed in range(seeds):
                    yield config("varied", walls, busy, bursts, size, seed)
        for bursts in (0.0, BURSTS):
            for seed in range(seeds):
                yield config("issue", walls, False, bursts, ISSUE_CASE[1], seed)


def _score(config: dict[str, Any], workdir: Path, regressions: Any) -> dict[str, Any]:
    from lab.histories import commit_hash, stepped_history

    key = "{kind}-{walls}-{busy}-{size}-{seed}".format(**config)
    if config["bursts"]:
        key += "-bursts{bursts}".format(**config)
    rng = random.Random(zlib.crc32(key.encode()))
    position = ISSUE_CASE[0] if config["kind"] == "issue" else rng.randint(EDGE, BUILDS - EDGE)
    busy = rng.randint(1, BUILDS - 2) if config["busy"] else None
    root = workdir / key
    root.mkdir()
    history = stepped_history(
        root,
        config["walls"],
        rng.randrange(2**32),
        (position, 1 + config["size"]),
        busy,
        BUILDS,
        config["bursts"],
    )
    out = root / "steps.json"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = regressions(["regressions", "--asv-config", str(history.project.config), "--json", str(out)])
    if rc != 0:
        raise SystemExit(f"benchkit regressions exited {rc} on {root}")
    data = json.loads(out.read_text())
    shutil.rmtree(root)
    steps = [s for s in data["steps"] if s["label"] != "outlier"]
    walls = [s for s in steps if s["metric"] == "wall_time"]
    true = [s for s in walls if s["name"] == history.stepped and abs(s["position"] - position) <= 1]
    # The stepping benchmark's own steps, placed right or not, are scored above.
    near = () if busy is None else (busy, busy + 1)
    near_busy = [s for s in walls if s["name"] in history.flat and s["position"] in near]
    outliers = [s for s in data["steps"] if s["label"] == "outlier" and s["name"] in history.flat]
    return {
        **config,
        "position": position,
        "busy_at": busy,
        "found": bool(true),
        "judged": any(s["judged"] for s in true),
        "extra": sum(1 for s in walls if s["name"] == history.stepped and s not in true),
        "flat": len(history.flat),
        "flat_false": sum(1 for s in walls if s["name"] in history.flat),
        "flat_outliers": len(outliers),
        "count_false": sum(1 for s in steps if s["metric"] == "instructions"),
        "busy_false": len(near_busy),
        "busy_left_out": busy is not None
        and commit_hash(busy) in {b["commit"] for b in data["shifted_builds"]},
    }


def _worker(code: Path, seeds: int, results: Path) -> None:
    import benchkit
    from benchkit.cli import main as benchkit_main

    # `_start_worker` runs this process in `code`, so that the benchkit it sweeps is that one
    if Path(benchkit.__file__).resolve().parent != (code / "benchkit").resolve():
        raise SystemExit(f"the sweep of {code} imported benchkit from {benchkit.__file__}")

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-changepoints-") as tmp:
        for config in _configs(seeds):
            rows.append(_score(config, Path(tmp), benchkit_main))
    results.write_text(json.dumps(rows))


def _start_worker(code: Path, seeds: int, results: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "lab.bench_changepoints",
        "--worker",
        str(code),
        "--seeds",
        str(seeds),
        "--results",
        str(results),
    ]
    # The worker's folder comes first on its path (python -m), so it imports the benchkit of
    # `code`; lab comes from this checkout.
    path = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.Popen(command, env=env, cwd=code)


def _per_1000(count: int, total: int) -> str:
    return f"{1000 * count / total:.2f} ({count} in {total:,})" if total else "n/a"


def _table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| suite | busy build | rounds in bursts | step | histories | found (±1 build) | of those judged "
        "| missed: step at build "
        "| further steps of the stepping benchmark | false steps per 1,000 flat benchmark-histories "
        "| outlier rows on flat benchmarks | instruction-count steps | steps at the busy build "
        "| busy build left out |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    lines = []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["kind"], row["walls"], row["busy"], row["bursts"], row["size"]), []).append(
            row
        )
    for (kind, walls, busy, bursts, size), group in groups.items():
        n = len(group)
        found = sum(r["found"] for r in group)
        busy_rows = [r for r in group if r["busy_at"] is not None]
        where = "at build 20" if kind == "issue" else f"builds {EDGE}-{BUILDS - EDGE}"
        missed = sorted(r["position"] for r in group if not r["found"])
        listed = ", ".join(map(str, missed)) if len(missed) <= MAX_LISTED else f"{len(missed)}, all along"
        left_out = sum(r["busy_left_out"] for r in busy_rows)
        left_out = f"{left_out} of {len(busy_rows)}" if busy_rows else "-"
        lines.append(
            f"| {walls} wall times | {'yes' if busy else 'no'} | {bursts:.0%} | +{size:.0%} {where} | {n} "
            f"| {found} ({100 * found / n:.1f} %) | {sum(r['judged'] for r in group)} "
            f"| {listed or '-'} | {sum(r['extra'] for r in group)} "
            f"| {_per_1000(sum(r['flat_false'] for r in group), sum(r['flat'] for r in group))} "
            f"| {sum(r['flat_outliers'] for r in group)} | {sum(r['count_false'] for r in group)} "
            f"| {sum(r['busy_false'] for r in group) if busy_rows else '-'} "
            f"| {left_out} |"
        )
    return head + "\n".join(lines) + "\n"


def _summary(rows: list[dict[str, Any]]) -> str:
    lines = []
    for bursts in sorted({r["bursts"] for r in rows}):
        part = [r for r in rows if r["bursts"] == bursts]
        big = [r for r in part if r["size"] >= 0.05]
        issue = [r for r in part if r["kind"] == "issue"]
        busy = [r for r in part if r["busy_at"] is not None]
        found = sum(r["found"] for r in big)
        missed = [str(r["position"]) for r in big if not r["found"]]
        where = ", ".join(missed) if len(missed) <= MAX_LISTED else "all along the history"
        flat = sum(r["flat"] for r in part)
        false = sum(r["flat_false"] for r in part)
        lines.append(f"{bursts:.0%} of the rounds in bursts:\n")
        lines.append(
            f"- steps of 5 % and more (positions drawn, and the issue's case) found within ±1 build: "
            f"{found} of {len(big)} ({100 * found / len(big):.1f} %); the missed ones stepped at builds "
            f"{where or '-'} of {BUILDS}\n"
            f"- the issue's +10 % at build 20 found: {sum(r['found'] for r in issue)} of {len(issue)} seeds\n"
            f"- false steps on flat wall times: {_per_1000(false, flat)} per 1,000 flat benchmark-histories\n"
        )
        if busy:
            at_busy = sum(r["busy_false"] for r in busy)
            lines.append(f"- steps at a busy build: {at_busy} in {len(busy)} histories with one\n")
        lines.append("\n")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100, help="histories per configuration (default 100)")
    parser.add_argument("--before", metavar="REF", help="also run the benchkit of this commit (e.g. main)")
    parser.add_argument("--out", type=Path, default=REPORTS / "changepoints-power.md")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.seeds, args.results)
        return 0
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "benchkit"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-changepoints-") as tmp:
        if args.before:
            before = Path(tmp) / "before"
            before.mkdir()
            commit = subprocess.run(
                ["git", "rev-parse", "--short", args.before], cwd=REPO_ROOT, capture_output=True, text=True,
                check=True,
            ).stdout.strip()  # fmt: skip
            archive = subprocess.run(
                ["git", "archive", args.before, "benchkit"], cwd=REPO_ROOT, capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
            runs.append((f"before: {args.before} ({commit})", before))
        runs.append((f"this checkout ({head}{', with changes' if dirty.stdout else ''})", REPO_ROOT))
        # One process per sweep, side by side: each is single-threaded, and the histories are
        # the same for both (seeded by configuration), so the two use both cores.
        print(f"sweeping {', '.join(label for label, _ in runs)} ...", file=sys.stderr, flush=True)
        results = [Path(tmp) / f"rows-{k}.json" for k in range(len(runs))]
        workers = [_start_worker(code, args.seeds, out) for (_, code), out in zip(runs, results, strict=True)]
        if any([worker.wait() != 0 for worker in workers]):  # every worker waited for
            raise SystemExit("a sweep failed: its error is above")
        sections = []
        for (label, _), out in zip(runs, results, strict=True):
            rows = json.loads(out.read_text())
            sections.append(f"## {label}\n\n{_summary(rows)}\n{_table(rows)}")
    command = command_line("bench_changepoints", sys.argv[1:])
    text = (
        "# Change points: steps found and false steps over labelled histories\n\n"
        f"Generated by `{command}` (see the script's docstring for the histories and the "
        f"scoring). {args.seeds} seeds per configuration; a step's build is drawn between {EDGE} and "
        f"{BUILDS - EDGE} of {BUILDS} (the 'missed' column lists where each missed step was, up to "
        f"{MAX_LISTED}).\n\n" + "\n".join(sections)
    )
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
