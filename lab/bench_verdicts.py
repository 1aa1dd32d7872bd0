"""How right are `benchkit check`'s verdicts on this machine? False positives on A/A pairs
and detection of injected slowdowns, against `asv compare --factor 1.1` on the same results.

    python -m lab.bench_verdicts --smoke   # 2 builds, 2 benchmarks
    python -m lab.bench_verdicts           # 30 min here

Builds a wheel history in a work folder: the local torch wheel added `--aa` times to
``main`` (``benchkit history add --allow-duplicate``: identical builds, so every pair of
them is an A/A pair), and `--per-size` builds per ``--sizes`` entry, each on its own
branch, whose ``nn.Linear.forward`` runs a calibrated empty loop first (``patch_wheel``):
a real torch build that is slower by about that many percent on the ``Linear`` case, and
executes more instructions. Twelve control cases (ReLU and simple tensor ops) stay
untouched. All these builds are measured in one asv run with the arguments `benchkit main`
uses (`benchkit.asv_runs.asv_run_args`: the suite's 12 interleaved wall-time rounds, in a
shuffled build order); then `--cross` more identical builds in a second run (A/A pairs
across two runs), and one identical build under busy loops on every core (an environment
shift). Every pair is judged with `benchkit check` (in process) and with
``asv compare --factor 1.1``, and the script prints per metric:

* false-positive rate: benchmarks flagged (regression or improvement) per A/A pair, for
  pairs within one run and across two runs;
* detection: whether the slowed case was flagged as a regression, per injected size, with
  the size asv measured (median over the trials of Linear's ratio);
* benchkit's other verdicts (can't tell, insufficient data) and environment shifts.

Run it alone on the machine, e.g. under ``flock`` on a lock that every measurement takes, so
that it never overlaps another one (it takes no lock itself, so a lock held around it cannot
deadlock it). Results land in
``--workdir`` (``summary.json`` and asv's results), which must not exist yet.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import time
import timeit
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit.asv_runs import asv_run_args
from benchkit.history.builds.build_step import history_project_config
from benchkit.history.builds.defaults import installed_torch_wheel
from benchkit.history.builds.wheels import patch_wheel_module
from benchkit.history.results.read import load_asv_config, read_results
from benchkit.report.gate import check
from benchkit.util import atomic_write_json
from lab import REPO_ROOT, command_line
from lab.verdict_designs import judge_designs, mean_rounds, parse_design, slow_round_share


@functools.cache
def torch_wheel() -> Path:
    """BENCHKIT_TORCH_WHEEL, or the installed torch as a wheel (made on first use)."""
    return installed_torch_wheel()


MACHINE = "verdicts"
COUNT_MOVED = 1.05  # instruction counts of an A/A head raised by this, for the corroborated alpha
BUSY = "busy-aa"
LINEAR_FILE = "torch/nn/modules/linear.py"
LINEAR_RETURN = "        return F.linear(input, self.weight, self.bias)\n"
SETUP = "model = torch.nn.Linear(4, 2)\nx = torch.ones(8, 4)"
CONTROLS = {  # untouched by the patch: the environment's witnesses
    "ReLU": ("y = model(x)", "model = torch.nn.ReLU()\nx = torch.ones(8, 4)"),
    "add": ("y = x + x", "x = torch.ones(8, 4)"),
    "mul": ("y = x * 2", "x = torch.ones(8, 4)"),
    "sum": ("y = x.sum()", "x = torch.ones(8, 4)"),
    "ones": ("y = torch.ones(8, 4)", "pass"),
    "view": ("y = x.view(-1)", "x = torch.ones(8, 4)"),
    "cat": ("y = torch.cat([x, x])", "x = torch.ones(8, 4)"),
    "matmul": ("y = x @ w", "x = torch.ones(8, 4)\nw = torch.ones(4, 4)"),
    "relu_fn": ("y = torch.relu(x)", "x = torch.ones(8, 4)"),
    "clone": ("y = x.clone()", "x = torch.ones(8, 4)"),
    "index": ("y = x[1]", "x = torch.ones(8, 4)"),
    "sigmoid": ("y = torch.sigmoid(x)", "x = torch.ones(8, 4)"),
}


@dataclass(frozen=True)
class Plan:
    aa_builds: int
    sizes: tuple[float, ...]  # injected slowdowns, percent
    controls: tuple[str, ...]
    per_size: int = 1  # slowed builds per size
    cross: int = 0  # identical builds measured in a second asv run
    busy: bool = False  # one more identical build, measured while busy loops run on every core
    rounds: int | None = None  # wall-time rounds (None: the suite's)
    designs: tuple[str, ...] = ()  # round designs judged on the same measurements (verdict_designs)
    bench: str = r"^instruction_counts\.verdicts_"  # asv -b
    block_rounds: int | None = None  # rounds a build per asv run without interleaving (None: interleaved)


def definitions(plan: Plan) -> str:
    cases = {"Linear": ("y = model(x)", SETUP), **{c: CONTROLS[c] for c in plan.controls}}
    lines = ["from benchkit.define.api import TimerArgs", "", "BENCHMARKS = {", '    "verdicts": {']
    lines += [
        f"        {name!r}: TimerArgs({stmt!r}, setup={setup!r})," for name, (stmt, setup) in cases.items()
    ]
    return "\n".join([*lines, "    }", "}", ""])


def calibrate(sizes: tuple[float, ...]) -> dict[float, int]:
    """Loop counts that add `size` % to `model(x)`, timed here with the installed torch
    (the same 2.13.0 wheel): cost of the statement, and of `for _ in range(k): pass`."""
    import torch

    model, x = torch.nn.Linear(4, 2), torch.ones(8, 4)
    stmt = min(timeit.repeat(lambda: model(x), number=2000, repeat=7)) / 2000

    def loop(k: int) -> float:
        code = f"for _ in range({k}): pass"
        return min(timeit.repeat(code, number=2000, repeat=7)) / 2000

    base, per = loop(0), (loop(400) - loop(0)) / 400
    print(
        f"calibration: model(x) {stmt * 1e6:.2f} us, loop {base * 1e9:.0f} ns + {per * 1e9:.1f} ns/iteration"
    )
    return {s: max(0, round((stmt * s / 100 - base) / per)) for s in sizes}


def slowed_wheel(folder: Path, size: float, loops: int) -> Path:
    def slow_down(source: str) -> str:
        assert source.count(LINEAR_RETURN) == 1, "Linear.forward changed shape: update LINEAR_RETURN"
        loop = f"        for _ in range({loops}):  # benchkit: +{size:g}%\n            pass\n"
        return source.replace(LINEAR_RETURN, loop + LINEAR_RETURN)

    return patch_wheel_module(torch_wheel(), folder / torch_wheel().name, LINEAR_FILE, slow_down)


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = root / "asv.conf.json"
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "BENCHKIT_STANDARD": "0",
                    "BENCHKIT_DEFINITIONS": str(root / "verdict_definitions.py")}  # fmt: skip

    def run(self, *args: str, check_ok: bool = True) -> subprocess.CompletedProcess[str]:
        print("$", " ".join(args), flush=True)
        proc = subprocess.run(args, cwd=self.root, env=self.env, capture_output=True, text=True, check=False)
        if check_ok and proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def benchkit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "benchkit.cli", *args)

    def asv(self, *args: str, check_ok: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "asv", *args, check_ok=check_ok)

    def git(self, *args: str) -> str:
        return self.run("git", "-C", str(self.root / "history"), *args).stdout.strip()


@dataclass(frozen=True)
class Builds:
    main: list[str]  # identical builds, measured in the first run
    slowed: dict[float, list[str]]  # size -> builds, measured in the first run
    later: list[str]  # identical builds, measured in a second run
    busy: str | None  # identical build, measured under busy loops


def _add(project: Project, wheel: Path, branch: str, note: str) -> str:
    """A build on a branch of its own. The branch name goes into the commit's note: builds of
    the same wheel, parent and note would otherwise be one commit, which asv measures again
    under each name (more rounds for that commit, and repeated rather than separate trials)."""
    project.benchkit("history", "add", str(wheel), "--allow-duplicate", "--branch", branch, "--tag", branch,
                     "--note", f"{note} [{branch}]", "--asv-config", str(project.config))  # fmt: skip
    return project.git("rev-parse", branch)


def setup(root: Path, plan: Plan) -> tuple[Project, Builds]:
    project = Project(root)
    (root / "verdict_definitions.py").write_text(definitions(plan))
    config = history_project_config(str(REPO_ROOT), "env")
    project.config.write_text(json.dumps(config, indent=1))
    project.asv("machine", "--machine", MACHINE, "--yes")
    loops = calibrate(plan.sizes)
    identical = torch_wheel()
    project.benchkit("history", "init", "--repo", str(root / "history"), str(identical))
    for i in range(1, plan.aa_builds):
        project.benchkit("history", "add", str(identical), "--allow-duplicate", "--tag", f"aa-{i}",
                         "--asv-config", str(project.config))  # fmt: skip
    slowed: dict[float, list[str]] = {}
    for size in plan.sizes:
        wheel = slowed_wheel(root / "wheels" / f"slow{size:g}", size, loops[size])
        note = f"Linear.forward +{size:g}% ({loops[size]} empty loop iterations)"
        slowed[size] = [_add(project, wheel, f"slow-{size:g}pct-{k}", note) for k in range(plan.per_size)]
    second_run, busy_note = "identical build, second run", "identical build, measured on a busy machine"
    later = [_add(project, identical, f"aa-later-{k}", second_run) for k in range(plan.cross)]
    busy = _add(project, identical, BUSY, busy_note) if plan.busy else None
    main = project.git("rev-list", "--reverse", "--first-parent", "main").split()
    every = [*main, *(c for commits in slowed.values() for c in commits), *later, *([busy] if busy else [])]
    if len(set(every)) != len(every):
        raise SystemExit(f"bench_verdicts: {len(every)} builds are only {len(set(every))} commits")
    return project, Builds(main, slowed, later, busy)


def block_sizes(rounds: int, block: int) -> list[int]:
    """`rounds` split into the fewest blocks of at most `block` rounds, as even as they come
    (the larger first): 40 in blocks of 8 is [8] * 5, 18 is [6, 6, 6], 5 is [5]."""
    if rounds <= 0:
        return []
    count = -(-rounds // max(block, 1))
    return [rounds // count + (1 if i < rounds % count else 0) for i in range(count)]


def _asv_run(project: Project, commits: list[str], plan: Plan) -> None:
    """`asv run` over `commits` with the arguments `benchkit main` passes: one interleaved run,
    or with `plan.block_rounds` the rounds in blocks as the main job adds rounds (one run per
    block without interleaving, the builds' order reversed from block to block)."""
    blocks = (
        block_sizes(plan.rounds, plan.block_rounds) if plan.rounds and plan.block_rounds else [plan.rounds]
    )
    for index, block in enumerate(blocks):
        hashfile = project.root / f"commits-{len(list(project.root.glob('commits-*.txt')))}.txt"
        hashfile.write_text("".join(f"{c}\n" for c in (commits if index % 2 == 0 else commits[::-1])))
        if block:
            project.env["BENCHKIT_WALL_ROUNDS"] = str(block)
        project.asv(
            *asv_run_args(
                f"HASHFILE:{hashfile}",
                [plan.bench],
                MACHINE,
                append=index > 0,
                interleave=not plan.block_rounds,
            )
        )


def measure(project: Project, builds: Builds, plan: Plan) -> None:
    """The identical and the slowed builds in one interleaved asv run, as `benchkit main`
    measures a history, in a shuffled order (no build always right after another); then
    the second run, and the busy build."""
    first = [*builds.main, *(c for commits in builds.slowed.values() for c in commits)]
    random.Random(17).shuffle(first)
    _asv_run(project, first, plan)
    if builds.later:
        _asv_run(project, builds.later, plan)
    if builds.busy:
        # The environment shift: a busy loop on every core for the whole run of this build.
        loops = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)
        ]
        try:
            _asv_run(project, [builds.busy], plan)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()


def asv_compare_marks(project: Project, base: str, head: str) -> dict[str, str]:
    """benchmark -> asv compare's mark ('+' slower, '-' faster, ' ' same, 'x'/'!'/'*' other)."""
    out = project.asv("compare", "--factor", "1.1", "--machine", MACHINE, base, head, check_ok=False).stdout
    marks = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in ("+", "-", "", "x", "!", "*"):
            marks[cells[4]] = cells[0] or " "
    return marks


def judge(project: Project, base: str, head: str) -> dict[str, Any]:
    verdict = check.run_check(base, head, asv_config=project.config, machine=MACHINE)
    marks = asv_compare_marks(project, base, head)
    rows = {}
    for c in verdict.comparisons:
        rows[c.name] = {"metric": c.metric, "benchkit": c.status, "asv": marks.get(c.name, "?"),
                        "ratio": c.ratio, "mdc": c.mdc}  # fmt: skip
    return {
        "base": base,
        "head": head,
        "exit": verdict.exit_code,
        "shifts": list(verdict.shifts),
        "rows": rows,
    }


def _flagged_benchkit(status: str) -> bool:
    return status in ("regression", "improvement")


def _rate(flagged: int, total: int) -> str:
    return f"{flagged}/{total} ({flagged / total:.1%})" if total else "n/a"


def _false_positives(pairs: list[dict[str, Any]], metric: str, method: str) -> str:
    rows = [r for p in pairs for r in p["rows"].values() if r["metric"] == metric]
    if method == "benchkit":
        return _rate(sum(_flagged_benchkit(r["benchkit"]) for r in rows), len(rows))
    return _rate(sum(r["asv"] in "+-" for r in rows), len(rows))


def _linear(pairs: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    return [
        r for p in pairs for n, r in p["rows"].items() if r["metric"] == metric and ".verdicts_Linear_" in n
    ]


def report(pairs: list[dict[str, Any]], sizes: tuple[float, ...]) -> str:
    within = [p for p in pairs if p["kind"] == "aa"]
    across = [p for p in pairs if p["kind"] == "aa-cross"]
    lines = []
    metrics = sorted({r["metric"] for p in pairs for r in p["rows"].values()})
    methods = [("benchkit", "benchkit check")]
    if any("asv" in r for p in pairs for r in p["rows"].values()):
        methods.append(("asv", "asv compare --factor 1.1"))
    for metric in metrics:
        lines.append(f"== {metric}")
        for method, label in methods:
            detect = []
            for size in sizes:
                hit = _linear([p for p in pairs if p["kind"] == size], metric)
                seen = [
                    (r["benchkit"] == "regression") if method == "benchkit" else r["asv"] == "+" for r in hit
                ]
                missed = Counter(r["benchkit"] for r, found in zip(hit, seen, strict=True) if not found)
                how = ", ".join(f"{n} {status}" for status, n in sorted(missed.items()))
                # How the gate judged what it missed: "can't tell" owns up to the noise, "unchanged" does not.
                shown = f" (missed: {how})" if method == "benchkit" and how else ""
                detect.append(f"{size:g}%: {sum(seen)}/{len(seen)}{shown}")
            fp = _false_positives(within, metric, method)
            cross = f", across two runs {_false_positives(across, metric, method)}" if across else ""
            lines.append(
                f"  {label:26} false positives per A/A pair within a run {fp}{cross}; "
                f"detected {', '.join(detect)}"
            )
        measured = []
        for size in sizes:
            rows = _linear([p for p in pairs if p["kind"] == size], metric)
            ratios = sorted(r["ratio"] for r in rows if r["ratio"])
            mdcs = sorted(r["mdc"] for r in rows if r["mdc"] is not None)
            if ratios:
                text = f"{size:g}%: x{statistics.median(ratios):.3f}"
                measured.append(text + (f" (MDC median {statistics.median(mdcs):.1%})" if mdcs else ""))
        lines.append("  Linear as measured (median ratio over the trials): " + ", ".join(measured))
        others: dict[str, int] = {}
        for p in pairs:
            for r in p["rows"].values():
                if r["metric"] == metric and not _flagged_benchkit(r["benchkit"]):
                    others[r["benchkit"]] = others.get(r["benchkit"], 0) + 1
        lines.append(
            "  benchkit's other verdicts: " + ", ".join(f"{n} {s}" for s, n in sorted(others.items()))
        )
    shifts = sorted({shift for p in pairs if p["kind"] != "busy" for shift in p["shifts"]})
    lines += [f"environment shift reported: {shift}" for shift in shifts]
    return "\n".join(lines) + "\n"


def busy_report(busy: dict[str, Any]) -> str:
    wall = [r for r in busy["rows"].values() if r["metric"] == "wall_time"]
    ratios = sorted(r["ratio"] for r in wall if r["ratio"] is not None)
    return (
        f"== environment shift: an identical build measured with busy loops on every core\n"
        f"  wall-time ratios {ratios[0]:.2f}..{ratios[-1]:.2f}; benchkit check exit {busy['exit']}; "
        f"wall-time regressions {sum(r['benchkit'] == 'regression' for r in wall)} of {len(wall)}, "
        f"asv compare --factor 1.1 flags {sum(r['asv'] == '+' for r in wall)}\n"
        + "".join(f"  reported: {shift}\n" for shift in busy["shifts"])
    )


def existing_builds(project: Project, plan: Plan) -> Builds:
    def tip(branch: str) -> str:
        return project.git("rev-parse", branch)

    return Builds(
        project.git("rev-list", "--reverse", "--first-parent", "main").split(),
        {size: [tip(f"slow-{size:g}pct-{k}") for k in range(plan.per_size)] for size in plan.sizes},
        [tip(f"aa-later-{k}") for k in range(plan.cross)],
        tip(BUSY) if plan.busy else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / ".benchkit" / "bench-verdicts")
    parser.add_argument("--aa", type=int, default=6, help="identical builds on main (A/A pairs: aa - 1)")
    parser.add_argument("--sizes", default="1,2,5,10", help="injected slowdowns in percent")
    parser.add_argument("--per-size", type=int, default=3, help="slowed builds per size")
    parser.add_argument("--cross", type=int, default=2, help="identical builds measured in a second run")
    parser.add_argument("--rounds", type=int, help="wall-time rounds per build (default: the suite's; "
                        "with --designs the most any design measures)")  # fmt: skip
    parser.add_argument("--block-rounds", type=int, help="measure the rounds in blocks of this many "
                        "a build, one asv run each without interleaving, as the main job adds "
                        "rounds")  # fmt: skip
    parser.add_argument("--designs", default="",
                        help="round designs judged on the same measurements, e.g. 'fixed 12,adaptive' "
                        "(lab/verdict_designs.py)")  # fmt: skip
    parser.add_argument("--no-busy", action="store_true", help="leave out the build under busy loops")
    parser.add_argument("--smoke", action="store_true", help="2 builds (original, +10%%), 2 benchmarks")
    parser.add_argument("--judge-only", action="store_true", help="judge the results in --workdir again")
    parser.add_argument("--markdown", type=Path, help="also write the report there, with this command")
    args = parser.parse_args(argv)
    designs = tuple(d.strip() for d in args.designs.split(",") if d.strip())
    needed = max((parse_design(d).highest for d in designs), default=0)
    if designs and args.rounds is not None and args.rounds < needed:
        raise SystemExit(f"--rounds {args.rounds}: the designs judge up to {needed} rounds a build")
    if args.smoke:
        plan = Plan(
            1, (10.0,), (), rounds=args.rounds or needed or 7, designs=designs, block_rounds=args.block_rounds
        )
    else:
        sizes = tuple(float(s) for s in args.sizes.split(","))
        rounds = args.rounds or needed or None
        plan = Plan(
            args.aa, sizes, tuple(CONTROLS), args.per_size, args.cross, not args.no_busy, rounds, designs,
            block_rounds=args.block_rounds,
        )  # fmt: skip
    if plan.block_rounds and not plan.rounds:
        raise SystemExit("--block-rounds needs --rounds (or --designs)")
    if args.judge_only:
        project = Project(args.workdir)
        builds = existing_builds(project, plan)
    elif args.workdir.exists():
        raise SystemExit(f"{args.workdir} exists: choose a new --workdir")
    else:
        started = time.monotonic()
        project, builds = setup(args.workdir, plan)
        measure(project, builds, plan)
        print(f"measured in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    # Every A/A pair of identical builds, every slowed build against every identical one of
    # its run, every later build against every first-run one: one trial each (they share
    # measurements, so they are not independent trials).
    main_builds = builds.main
    pairs = [
        {**judge(project, base, head), "kind": "aa"}
        for i, base in enumerate(main_builds)
        for head in main_builds[i + 1 :]
    ]
    pairs += [
        {**judge(project, base, head), "kind": size}
        for size, heads in builds.slowed.items()
        for head in heads
        for base in main_builds
    ]
    pairs += [
        {**judge(project, base, head), "kind": "aa-cross"} for head in builds.later for base in main_builds
    ]
    text = report(pairs, plan.sizes)
    if plan.designs:
        loaded = read_results(load_asv_config(project.config))
        trials = [(p["base"], p["head"], p["kind"]) for p in pairs]
        config = check.check_config_for(project.config)
        by_design = judge_designs(loaded, MACHINE, config, trials, plan.designs)
        shares = slow_round_share(loaded, MACHINE)
        text += (
            "rounds (processes) at least 1.3x slower than their build's fast level, per wall time: "
            + ", ".join(f"{name.split('_')[1]} {share:.0%}" for name, share in shares.items())
            + "\n"
        )
        for design, judged in by_design.items():
            text += f"=== design {design}: {mean_rounds(judged):.2f} rounds per wall time and build\n"
            text += report(judged, plan.sizes)
        # Identical builds as if the code had changed everywhere (every count of the head 5 %
        # up) and the time had not: the corroborated alpha's false alarms on real rounds.
        aa = [t for t in trials if t[2] == "aa"]
        moved = judge_designs(loaded, MACHINE, config, aa, plan.designs, count_factor=COUNT_MOVED)
        text += f"=== A/A pairs judged with every instruction count of the head ×{COUNT_MOVED:g}\n"
        for design, judged in moved.items():
            text += f"  {design:22} wall-time flags {_false_positives(judged, 'wall_time', 'benchkit')}\n"
    if builds.busy:
        busy = {**judge(project, main_builds[0], builds.busy), "kind": "busy"}
        text += busy_report(busy)
        pairs.append(busy)
    sys.stdout.write(text)
    atomic_write_json(args.workdir / "summary.json", {"plan": plan.__dict__, "pairs": pairs, "report": text})
    if args.markdown:
        command = command_line("bench_verdicts", argv if argv is not None else sys.argv[1:])
        judged = ", judging what the same command without `--judge-only` measured" if args.judge_only else ""
        args.markdown.write_text(
            "# What benchkit check finds: A/A pairs and injected slowdowns, per round design\n\n"
            f"Generated on {time.strftime('%Y-%m-%d', time.gmtime())} by `{command}` on this project's "
            f"2-core development machine (see lab/reports/verdicts-how-measured.md){judged}.\n\n"
            f"```text\n{text}```\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
