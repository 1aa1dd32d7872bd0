"""Instruction counts taken in two places, and by `benchkit counts` vs `benchkit backfill`.

Usage::

    python -m lab.bench_place_counts counts --ref REF --label LABEL     # two clones, whole suite
    python -m lab.bench_place_counts backfill --ref REF --label LABEL   # a LocalCluster worker
    python -m lab.bench_place_counts report                             # the markdown file

``counts`` clones this repository twice at REF (a short path and one of 150+
characters) and runs ``benchkit counts --json`` from each clone, one after the
other, each with empty caches (``BENCHKIT_CACHE_DIR``, ``HOME``,
``TORCHINDUCTOR_CACHE_DIR`` in fresh temporary folders), its own working
directory, and environments of very different sizes (the long place adds a 20 kB
variable). ``backfill`` makes a one-build history of the installed torch (its
wheel) and runs ``benchkit backfill --workers 1`` on the cases of ``--filter``
from a third clone, started from another folder, then ``benchkit counts`` on the
same selection from that clone (a filter lays out the C++ shards from the selected
cases alone, so the whole suite's counts differ from a selection's). Results go to ``--out`` as JSON;
``report`` compares them and writes ``lab/reports/place-independent-counts.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lab import REPO_ROOT as REPO
from lab import REPORTS, command_line, shown_path

DOC = REPORTS / "place-independent-counts.md"
BACKFILL_FILTER = r"^(Pointwise|Reduction|nn Modules/Linear)"
LONG_NAME = "a-rather-long-folder-name-so-that-every-path-under-it-is-longer-" * 2


def _clone(ref: str, where: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "checkout", "--quiet", ref], check=True)
    return where


def _place_env(clone: Path, scratch: Path, padding: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHKIT_")}
    for name in ("cache", "home", "inductor"):
        (scratch / name).mkdir(parents=True, exist_ok=True)
    env.update(
        PYTHONPATH=str(clone),
        HOME=str(scratch / "home"),
        BENCHKIT_CACHE_DIR=str(scratch / "cache"),
        TORCHINDUCTOR_CACHE_DIR=str(scratch / "inductor"),
    )
    if padding:
        env["BENCHKIT_PLACE_PADDING"] = "x" * padding
    return env


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        print(f"{shlex.join(command)} exited {done.returncode}\n{done.stderr[-3000:]}", flush=True)
    return seconds


def cmd_counts(args: argparse.Namespace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bkp-"))
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", args.ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    places = {
        "short": (_clone(commit, Path(tempfile.mkdtemp(prefix="p", dir="/tmp")) / "b"), 0),
        "long": (_clone(commit, scratch / LONG_NAME / "benchkit"), 20_000),
    }
    for place, (clone, padding) in places.items():
        work = scratch / f"work-{place}"
        env = _place_env(clone, work, padding)
        out = work / "counts.json"
        command = [sys.executable, "-m", "benchkit.cli", "counts", "--json", str(out), *args.extra]
        print(f"{args.label} {place}: {clone} ({len(str(clone))} chars)", flush=True)
        seconds = _run(command, work, env)
        record = {
            "label": args.label,
            "place": place,
            "commit": commit,
            "clone": str(clone),
            "environment_bytes": sum(len(k) + len(v) + 2 for k, v in env.items()),
            "seconds": round(seconds, 1),
            "command": shlex.join(command),
            "date": datetime.date.today().isoformat(),
            "counts": json.loads(out.read_text()) if out.exists() else {},
        }
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.label}-{place}.json").write_text(json.dumps(record, indent=1))
        print(f"  {seconds:.0f} s, {len(record['counts'])} cases", flush=True)


def cmd_backfill(args: argparse.Namespace) -> None:
    from benchkit.define.expand import asv_class_name, select
    from benchkit.define.loader import load_cases
    from benchkit.history.builds.build_step import history_project_config
    from benchkit.history.builds.defaults import installed_torch_wheel
    from benchkit.history.results.read import load_asv_config, load_result_set

    scratch = Path(tempfile.mkdtemp(prefix="bkp-backfill-"))
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", args.ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    clone = _clone(commit, scratch / "clone")
    wheel = installed_torch_wheel()
    project = scratch / "elsewhere" / "project"
    project.mkdir(parents=True)
    (project / "asv.conf.json").write_text(
        json.dumps(history_project_config(str(clone), str(scratch / "env")), indent=1)
    )
    env = _place_env(clone, scratch / "state", 0)
    env["BENCHKIT_WHEELHOUSE"] = str(wheel.parent)
    benchkit = [sys.executable, "-m", "benchkit.cli"]
    _run([*benchkit, "history", "init", "--repo", str(project / "history"), str(wheel)], project, env)
    command = [*benchkit, "backfill", "--workers", "1", "--filter", args.filter]
    seconds = _run(command, project, env)
    conf = load_asv_config(project / "asv.conf.json")
    machine = next(p.name for p in (project / "results").iterdir() if p.name.startswith("benchkit-counts-"))
    head = subprocess.run(
        ["git", "-C", str(project / "history"), "rev-parse", "main"], capture_output=True, text=True
    ).stdout.strip()
    values = {n: m.value for (n, _), m in load_result_set(conf, head, machine).measurements.items()}
    by_class = {asv_class_name(c): c.key for c in select(load_cases(None), args.filter)}
    counts = {}
    for name, value in values.items():
        key = by_class.get(name.split(".")[1]) if "." in name else None
        if key is not None and name.endswith("track_instructions"):
            counts[key] = {"instructions": value, "status": "ok" if value is not None else "failed"}
    record = {
        "label": args.label,
        "place": "backfill",
        "commit": commit,
        "clone": str(clone),
        "seconds": round(seconds, 1),
        "command": shlex.join(command),
        "filter": args.filter,
        "date": datetime.date.today().isoformat(),
        "counts": counts,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.label}-backfill.json").write_text(json.dumps(record, indent=1))
    print(f"{args.label} backfill: {seconds:.0f} s, {len(counts)} cases", flush=True)
    # The same selection by `benchkit counts`: with a filter the C++ shards hold the
    # selected cases alone, another library than the whole suite's, so only a count of
    # the same selection tells the routes apart.
    work = scratch / "counts-filtered"
    env = _place_env(clone, work, 0)
    out = work / "counts.json"
    command = [sys.executable, "-m", "benchkit.cli", "counts", "--json", str(out), "--filter", args.filter]
    seconds = _run(command, work, env)
    record.update(place="filtered", seconds=round(seconds, 1), command=shlex.join(command))
    record["counts"] = json.loads(out.read_text()) if out.exists() else {}
    (args.out / f"{args.label}-filtered.json").write_text(json.dumps(record, indent=1))


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Cases counted in both: equal, within 0.01 %, beyond 0.1 %, and the largest difference."""
    diffs = []
    for key, entry in a.items():
        other = b.get(key, {})
        x, y = entry.get("instructions"), other.get("instructions")
        if x and y:
            diffs.append((abs(y - x) / x * 100, key, x, y))
    diffs.sort(reverse=True)
    return {
        "cases": len(diffs),
        "equal": sum(1 for d in diffs if d[0] == 0),
        "within_0.01": sum(1 for d in diffs if d[0] <= 0.01),
        "beyond_0.1": sum(1 for d in diffs if d[0] > 0.1),
        "largest": diffs[0] if diffs else None,
    }


def _row(name: str, result: dict[str, Any]) -> str:
    largest = result["largest"]
    key = largest[1].replace("|", "\\|") if largest else ""  # a cell of a markdown table
    worst = f"{largest[0]:.3f} % (`{key}`: {largest[2]:,.1f} vs {largest[3]:,.1f})" if largest else "-"
    return (
        f"| {name} | {result['cases']} | {result['equal']} | {result['within_0.01']} "
        f"| {result['beyond_0.1']} | {worst} |"
    )


def shown_command(command: str) -> str:
    """A run's command as the report shows it: ``python`` for the interpreter's path, and the
    temporary folders it wrote into as `lab.shown_path` names them."""
    words = shlex.split(command)
    if words and os.path.isabs(words[0]) and Path(words[0]).name.startswith("python"):
        words[0] = "python"
    return " ".join(shown_path(w) if os.path.isabs(w) else shlex.quote(w) for w in words)


def cmd_report(args: argparse.Namespace) -> None:
    records = {p.stem: json.loads(p.read_text()) for p in sorted(args.out.glob("*.json"))}
    command = command_line("bench_place_counts", sys.argv[1:])
    lines = [
        "# Instruction counts taken in different places",
        "",
        f"Generated by `{command}` on {datetime.date.today().isoformat()}"
        " from the runs listed below (torch, valgrind and Python the same for every run; "
        "each run from empty caches).",
        "",
        "## Runs",
        "",
        "| run | commit | clone path (chars) | environment (bytes) | wall seconds | date | command |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in records.items():
        lines.append(
            f"| {name} | {r['commit'][:10]} | {len(r['clone'])} | {r.get('environment_bytes', '-')} "
            f"| {r['seconds']} | {r['date']} | `{shown_command(r['command'])}` |"
        )
    lines += [
        "",
        "## Agreement",
        "",
        "| comparison | cases | equal | within 0.01 % | beyond 0.1 % | largest difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label in ("before", "after"):
        short, long = records.get(f"{label}-short"), records.get(f"{label}-long")
        if short and long:
            lines.append(_row(f"{label}: short vs long clone", compare(short["counts"], long["counts"])))
        backfill, filtered = records.get(f"{label}-backfill"), records.get(f"{label}-filtered")
        if filtered and backfill:
            result = compare(filtered["counts"], backfill["counts"])
            lines.append(_row(f"{label}: `counts --filter` vs `backfill` (same selection)", result))
        if short and backfill:
            subset = {k: v for k, v in short["counts"].items() if k in backfill["counts"]}
            result = compare(subset, backfill["counts"])
            lines.append(_row(f"{label}: `counts` (short clone) vs `backfill`", result))
    lines += [
        "",
        "## Cost",
        "",
        "Wall seconds of whole-suite `benchkit counts` runs from empty caches (`counts --label before`, "
        "`before2`, ... are repeats of the same code; run the labels one after another, alternating "
        "the code, on an otherwise idle machine: its speed drifts over an hour by more than the "
        "difference measured here, so compare means of several runs, not single runs).",
        "",
        "| code | runs | seconds of each run | mean s |",
        "| --- | --- | --- | --- |",
    ]
    means = {}
    for code in ("before", "after"):
        runs = [r["seconds"] for name, r in records.items() if re.fullmatch(rf"{code}\d*-(short|long)", name)]
        if runs:
            means[code] = statistics.fmean(runs)
            lines.append(f"| {code} | {len(runs)} | {', '.join(map(str, runs))} | {means[code]:.1f} |")
    if len(means) == 2:
        lines += ["", f"after / before: {100 * (means['after'] / means['before'] - 1):+.1f} % (means)"]
    DOC.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-place-counts")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("counts", "backfill"):
        p = sub.add_parser(name)
        p.add_argument("--ref", default="HEAD")
        p.add_argument("--label", required=True)
        if name == "backfill":
            p.add_argument("--filter", default=BACKFILL_FILTER)
        else:
            p.add_argument("extra", nargs="*", help="more arguments for benchkit counts")
    sub.add_parser("report")
    args = parser.parse_args()
    {"counts": cmd_counts, "backfill": cmd_backfill, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    main()
