"""How right are `benchkit check`'s verdicts on this machine? False positives on A/A pairs
and detection of injected slowdowns, against `asv compare --factor 1.1` on the same results.

    flock /tmp/benchkit-heavy.lock python3 scripts/bench_verdicts.py --smoke   # 2 builds, 2 benchmarks
    flock /tmp/benchkit-heavy.lock python3 scripts/bench_verdicts.py           # 6 A/A builds, 1/2/5/10 %

Builds a wheel history in a work folder: the local torch wheel added `--aa` times to
``main`` (``benchkit history add --allow-duplicate``: identical builds, so every pair of
them is an A/A pair), and one wheel per ``--sizes`` entry, on its own branch, whose
``nn.Linear.forward`` runs a calibrated empty loop first (``patch_wheel``): a real torch
build that is slower by about that many percent on the ``Linear`` case, and executes more
instructions. Control cases (ReLU and simple tensor ops) stay untouched. Runs asv with
``--record-samples -a rounds=2`` on a ``-b`` selection of these cases, then judges
(first main build, every other build) with `benchkit check` (in process) and with
``asv compare --factor 1.1``, and prints per metric:

* false-positive rate: benchmarks flagged (regression or improvement) per A/A pair;
* detection: whether the slowed case was flagged as a regression, per injected size;
* benchkit's other verdicts (can't tell, insufficient data) and environment shifts.

Asv takes a virtualenv and a torch install per build (about a minute each on two cores)
plus the measurements; the full run takes an hour or more. Run it under the heavy-work
lock so it never overlaps other measurements (it takes no lock itself, so the lock held
by ``flock`` around it cannot deadlock it). Results land in ``--workdir``
(``summary.json`` and asv's results), which must not exist yet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from benchkit.history.build_step import history_project_config  # noqa: E402
from benchkit.history.wheels import patch_wheel_module  # noqa: E402
from benchkit.mainjob import QUICK_ATTRIBUTES  # noqa: E402
from benchkit.report import check  # noqa: E402
from benchkit.util import atomic_write_json  # noqa: E402

WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
MACHINE = "verdicts"
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
    asv_args: tuple[str, ...]
    busy: bool = False  # one more identical build, measured while busy loops run on every core


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

    return patch_wheel_module(WHEEL, folder / WHEEL.name, LINEAR_FILE, slow_down)


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


def setup(root: Path, plan: Plan) -> tuple[Project, list[str], dict[float, str]]:
    project = Project(root)
    (root / "verdict_definitions.py").write_text(definitions(plan))
    config = history_project_config(str(REPO_ROOT), "env")
    project.config.write_text(json.dumps(config, indent=1))
    project.asv("machine", "--machine", MACHINE, "--yes")
    loops = calibrate(plan.sizes)
    project.benchkit("history", "init", "--repo", str(root / "history"), str(WHEEL))
    for i in range(1, plan.aa_builds):
        project.benchkit("history", "add", str(WHEEL), "--allow-duplicate", "--tag", f"aa-{i}",
                         "--asv-config", str(project.config))  # fmt: skip
    slowed = {}
    for size in plan.sizes:
        wheel = slowed_wheel(root / "wheels" / f"slow{size:g}", size, loops[size])
        branch = f"slow-{size:g}pct"
        project.benchkit("history", "add", str(wheel), "--branch", branch, "--tag", branch,
                         "--note", f"Linear.forward +{size:g}% ({loops[size]} empty loop iterations)",
                         "--asv-config", str(project.config))  # fmt: skip
        slowed[size] = project.git("rev-parse", branch)
    if plan.busy:
        project.benchkit("history", "add", str(WHEEL), "--allow-duplicate", "--branch", BUSY, "--tag", BUSY,
                         "--note", "identical build, measured on a busy machine", "--asv-config",
                         str(project.config))  # fmt: skip
    main = project.git("rev-list", "--reverse", "--first-parent", "main").split()
    return project, main, slowed


def measure(project: Project, main: list[str], slowed: dict[float, str], plan: Plan) -> None:
    common = [
        "-b",
        r"^instruction_counts\.verdicts_",
        "--machine",
        MACHINE,
        "--record-samples",
        *plan.asv_args,
    ]
    project.asv("run", "ALL", *common)
    for commit in slowed.values():
        project.asv("run", f"{commit}^!", *common)
    if plan.busy:
        # The environment shift: a busy loop on every core for the whole run of this build.
        loops = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)
        ]
        try:
            project.asv("run", f"{project.git('rev-parse', BUSY)}^!", *common)
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


def report(pairs: list[dict[str, Any]], sizes: tuple[float, ...]) -> str:
    aa = [p for p in pairs if p["size"] is None]
    lines = []
    metrics = sorted({r["metric"] for p in pairs for r in p["rows"].values()})
    for metric in metrics:
        lines.append(f"== {metric}")
        for method in ("benchkit", "asv"):
            flagged = total = 0
            for p in aa:
                for r in p["rows"].values():
                    if r["metric"] == metric:
                        total += 1
                        flagged += (
                            _flagged_benchkit(r["benchkit"]) if method == "benchkit" else r["asv"] in "+-"
                        )
            fp = f"{flagged}/{total} ({flagged / total:.1%})" if total else "n/a (no A/A pair)"
            detect = []
            for size in sizes:
                hit = [
                    r
                    for p in pairs
                    if p["size"] == size
                    for name, r in p["rows"].items()
                    if r["metric"] == metric and ".verdicts_Linear_" in name
                ]
                seen = [
                    (r["benchkit"] == "regression") if method == "benchkit" else r["asv"] == "+" for r in hit
                ]
                detect.append(f"{size:g}%: {sum(seen)}/{len(seen)}")
            label = "benchkit check" if method == "benchkit" else "asv compare --factor 1.1"
            lines.append(f"  {label:26} false positives per A/A pair {fp:22} detected {', '.join(detect)}")
        others: dict[str, int] = {}
        for p in pairs:
            for r in p["rows"].values():
                if r["metric"] == metric and not _flagged_benchkit(r["benchkit"]):
                    others[r["benchkit"]] = others.get(r["benchkit"], 0) + 1
        lines.append(
            "  benchkit's other verdicts: " + ", ".join(f"{n} {s}" for s, n in sorted(others.items()))
        )
    for p in pairs:
        for shift in p["shifts"]:
            lines.append(f"{p['base'][:8]} -> {p['head'][:8]}: {shift}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / ".benchkit" / "bench-verdicts")
    parser.add_argument("--aa", type=int, default=6, help="identical builds on main (A/A pairs: aa - 1)")
    parser.add_argument("--sizes", default="1,2,5,10", help="injected slowdowns in percent")
    parser.add_argument("--smoke", action="store_true", help="2 builds (original, +10%%), 2 benchmarks")
    parser.add_argument("--judge-only", action="store_true", help="judge the results in --workdir again")
    args = parser.parse_args(argv)
    if args.smoke:
        plan = Plan(1, (10.0,), (), ("-a", "rounds=2", "-a", "repeat=(5,10,2.0)"))
    else:
        sizes = tuple(float(s) for s in args.sizes.split(","))
        # What `benchkit main` records by default (quick mode), so the rates are the users'.
        quick = tuple(a for q in QUICK_ATTRIBUTES for a in ("-a", q))
        plan = Plan(args.aa, sizes, tuple(CONTROLS), quick, busy=True)
    if args.judge_only:
        project = Project(args.workdir)
        main_commits = project.git("rev-list", "--reverse", "--first-parent", "main").split()
        slowed = {size: project.git("rev-parse", f"slow-{size:g}pct") for size in plan.sizes}
    elif args.workdir.exists():
        raise SystemExit(f"{args.workdir} exists: choose a new --workdir")
    else:
        project, main_commits, slowed = setup(args.workdir, plan)
        measure(project, main_commits, slowed, plan)
    # Every A/A pair of identical builds, and every slowed build against every A/A build:
    # one trial each (they share measurements, so they are not independent trials).
    pairs = [
        {**judge(project, base, head), "size": None}
        for i, base in enumerate(main_commits)
        for head in main_commits[i + 1 :]
    ]
    pairs += [
        {**judge(project, base, head), "size": size} for size, head in slowed.items() for base in main_commits
    ]
    text = report(pairs, plan.sizes)
    if plan.busy:
        busy = judge(project, main_commits[0], project.git("rev-parse", BUSY))
        wall = [r for r in busy["rows"].values() if r["metric"] == "wall_time"]
        ratios = sorted(r["ratio"] for r in wall if r["ratio"] is not None)
        text += (
            f"== environment shift: an identical build measured with busy loops on every core\n"
            f"  wall-time ratios {ratios[0]:.2f}..{ratios[-1]:.2f}; benchkit check exit {busy['exit']}; "
            f"wall-time regressions {sum(r['benchkit'] == 'regression' for r in wall)} of {len(wall)}, "
            f"asv compare --factor 1.1 flags {sum(r['asv'] == '+' for r in wall)}\n"
            + "".join(f"  reported: {shift}\n" for shift in busy["shifts"])
        )
        pairs.append({**busy, "size": "busy"})
    sys.stdout.write(text)
    atomic_write_json(args.workdir / "summary.json", {"plan": plan.__dict__, "pairs": pairs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
