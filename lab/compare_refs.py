"""The main job at two commits of benchkit, from fresh clones: same numbers, same site?

Usage::

    python -m lab.compare_refs run --ref REF --label LABEL [--select REGEX]
    python -m lab.compare_refs report --before LABEL --after LABEL

``run`` clones this repository at REF and runs the clone's ``lab/fresh_main_job.sh -b REGEX``
(``scripts/fresh_main_job.sh`` in commits before lab/) from that clone (its own virtual
environment, empty ``HOME`` and caches), keeping the work folder under ``--out``/LABEL.
``report`` compares two such runs and writes ``lab/reports/counts-aa.md`` when both ran the
same commit (an A/A: how far the counts move between two fresh clones), else
``lab/reports/counts-before-after.md``:

* the instruction counts of every build, benchmark by benchmark (equal, within the
  documented layout noise of 0.01 %, beyond);
* the site of the *same* results published by each commit's code (the before run's
  results and torch history, published once with each clone's ``benchkit publish``
  into fresh folders): files identical, differing, only on one side.
"""

from __future__ import annotations

import argparse
import datetime
import filecmp
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import REPO_ROOT as REPO
from lab import REPORTS, command_line, shown_path

AA_DOC = REPORTS / "counts-aa.md"  # both runs of one commit
DOC = REPORTS / "counts-before-after.md"  # runs of two commits
SELECTION = (
    "Pointwise_Math_add_Tensor_Scalar_(PYTHON|CPP)_EAGER_FORWARD_t1|nn_Modules_(Linear|ReLU)_"
    "|aten_relu_default"
)
REPEAT_NOISE = 1e-4  # a count repeated in one place (docs/instruction_counts.md)
LAYOUT_NOISE = 1e-3  # a case the change did not touch, moved by the heap's layout (same doc)
# Files of the site that asv publish writes itself (benchkit's pages are the rest).
ASV_FILES = {
    "info.json", "info.json.js", "regressions.json", "regressions.json.js", "index.json",
    "regressions.xml",  # asv's feed: its <updated> is the publish time
}  # fmt: skip


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def fresh_main_job(source: Path) -> Path:
    """The fresh-state main job of a clone: lab/ holds it, scripts/ did before lab/ existed."""
    moved = source / "lab" / "fresh_main_job.sh"
    return moved if moved.is_file() else source / "scripts" / "fresh_main_job.sh"


def shown_command(meta: dict[str, str]) -> str:
    """A run's command as the report shows it: its script relative to the run's clone, other
    paths of the machine as `lab.shown_path` names them."""
    clone = f"source-{meta['label']}/"
    words = []
    for word in shlex.split(meta["command"]):
        if os.path.isabs(word):
            words.append(word.split(clone, 1)[1] if clone in word else shown_path(word))
        else:
            words.append(shlex.quote(word))
    return " ".join(words)


def cmd_run(args: argparse.Namespace) -> None:
    where = args.out / args.label
    if where.exists():
        shutil.rmtree(where)
    source = args.out / f"source-{args.label}"
    if source.exists():
        shutil.rmtree(source)
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(source)], check=True)
    subprocess.run(["git", "-C", str(source), "checkout", "--quiet", args.ref], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHKIT_")}
    env["BENCHKIT_FRESH_DIR"] = str(where)
    command = ["bash", str(fresh_main_job(source)), "-b", args.select]
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    (args.out / f"{args.label}.log").write_text(done.stdout + done.stderr)
    meta = {
        "label": args.label,
        "commit": _git("rev-parse", "HEAD", cwd=source),
        "exit": done.returncode,
        "seconds": round(seconds, 1),
        "date": datetime.date.today().isoformat(),
        "command": shlex.join(command[1:]),
    }
    (args.out / f"{args.label}.json").write_text(json.dumps(meta, indent=1))
    print(f"{args.label}: exit {done.returncode} in {seconds:.0f} s; log {args.out / (args.label + '.log')}")


def _project(out: Path, label: str) -> Path:
    return out / label / "benchkit"


def _counts(project: Path) -> dict[tuple[str, str], float]:
    """(results file, benchmark) -> instructions, for every measured count."""
    found: dict[tuple[str, str], float] = {}
    for path in sorted((project / ".asv" / "results").glob("*/*-*.json")):
        data = json.loads(path.read_text())
        column = data["result_columns"].index("result")
        for name, row in data["results"].items():
            if not name.endswith(".track_instructions"):
                continue
            values = row[column] or []
            if len(values) == 1 and isinstance(values[0], (int, float)) and not math.isnan(values[0]):
                found[(path.name, name)] = float(values[0])
    return found


def _publish(out: Path, before: str, label: str) -> Path:
    """The before run's results and history published by `label`'s code into a fresh folder."""
    project = _project(out, before)
    html = out / f"site-{label}"
    if html.exists():
        shutil.rmtree(html)
    venv_python = out / label / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHKIT_")}
    env.update(
        HOME=str(out / before / "home"),
        BENCHKIT_CACHE_DIR=str(out / before / "cache"),
        PYTHONPATH=str(_project(out, label)),
    )
    done = subprocess.run(
        # -P: the code on PYTHONPATH (label's), not the checkout of the project in the cwd (before's)
        [str(venv_python), "-P", "-m", "benchkit.cli", "publish", "--html-dir", str(html)],
        cwd=project, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"publish with {label}'s code failed:\n{done.stderr[-3000:]}")
    return html


def _site_diff(a: Path, b: Path) -> tuple[int, list[str], list[str], list[str]]:
    files_a = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    both = sorted(files_a & files_b)
    differ = [f for f in both if not filecmp.cmp(a / f, b / f, shallow=False)]
    return len(both) - len(differ), differ, sorted(files_a - files_b), sorted(files_b - files_a)


def cmd_report(args: argparse.Namespace) -> None:
    labels = (args.before, args.after)
    meta = {label: json.loads((args.out / f"{label}.json").read_text()) for label in labels}
    counts = {label: _counts(_project(args.out, label)) for label in meta}
    before, after = counts[args.before], counts[args.after]
    common = sorted(before.keys() & after.keys())
    ratios = {key: after[key] / before[key] - 1 for key in common if before[key]}
    equal = sum(before[k] == after[k] for k in common)
    within = sum(abs(r) <= REPEAT_NOISE for r in ratios.values())
    within_layout = sum(abs(r) <= LAYOUT_NOISE for r in ratios.values())
    largest = max(ratios.items(), key=lambda kv: abs(kv[1]), default=None)
    same, differ, only_before, only_after = _site_diff(
        _publish(args.out, args.before, args.before), _publish(args.out, args.before, args.after)
    )
    lines = [
        "# The main job before and after a change of benchkit's code",
        "",
        f"Generated by `{command_line('compare_refs', sys.argv[1:])}` "
        f"on {datetime.date.today().isoformat()}. Each run is its commit's `fresh_main_job.sh` from a fresh "
        "clone (empty `HOME` and caches) on one selection; the site is the before run's results and history "
        "published once by each commit's `benchkit publish`.",
        "",
        "## Runs",
        "",
        "| run | commit | exit | seconds | date | command |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {m['label']} | {m['commit'][:10]} | {m['exit']} | {m['seconds']} | {m['date']} "
            f"| `{shown_command(m)}` |"
            for m in meta.values()
        ),
        "",
        "## Instruction counts",
        "",
        "| counts (build × benchmark) | equal | within 0.01 % | within 0.1 % | beyond | only one side "
        "| largest difference |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(common)} | {equal} | {within} | {within_layout} | {len(ratios) - within_layout} "
        f"| {len(before.keys() ^ after.keys())} "
        f"| {'-' if largest is None else f'{100 * largest[1]:+.4f} % (`{largest[0][1]}`)'} |",
        "",
        "## Site",
        "",
        "| files identical | differing | only before | only after |",
        "| --- | --- | --- | --- |",
        f"| {same} | {len(differ)} | {len(only_before)} | {len(only_after)} |",
        "",
    ]
    for title, names in (("Differing", differ), ("Only before", only_before), ("Only after", only_after)):
        if names:
            by_asv = " (written by asv publish)"
            shown = [f"- `{n}`" + (by_asv if Path(n).name in ASV_FILES else "") for n in names]
            lines += [f"{title}:", "", *shown[:40], ""]
    doc = args.doc or (AA_DOC if meta[args.before]["commit"] == meta[args.after]["commit"] else DOC)
    doc.write_text("\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "benchkit-compare-refs")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--ref", default="HEAD")
    run.add_argument("--label", required=True)
    run.add_argument("--select", default=SELECTION)
    report = sub.add_parser("report")
    report.add_argument("--before", required=True)
    report.add_argument("--after", required=True)
    report.add_argument(
        "--doc",
        type=lambda p: Path(p).resolve(),
        help=f"where the report goes (default {AA_DOC.name} for two runs of one commit, else {DOC.name})",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    {"run": cmd_run, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    main()
