"""Where the main job's time goes: benchkit's five steps and asv's own records of every build.

    python -m lab.profile_main_job run --ref HEAD --label now
    python -m lab.profile_main_job run --ref OLD --ref NEW --repeat 2
    python -m lab.profile_main_job run --ref OLD --ref NEW --twin torch==2.14.1
    python -m lab.profile_main_job table [--last N]

``run`` runs the README's main job (`lab/fresh_main_job.sh`: a fresh clone of REF, its own
virtual environment, empty HOME, BENCHKIT_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR) and reads
its log and asv's result files into one profile:

* benchkit's steps, from the job's progress lines (``==> [n/5] ... (+s)``), and install.sh;
* per torch build, asv's records: the environment build (``<build>``), each ``setup_cache``
  (the Callgrind batch of the instruction counts, the operator timings' setup), and the sum
  of the ``duration`` asv records for every benchmark of a metric (all its rounds);
* asv's own time: the run step less everything asv recorded (process starts, discovery,
  switching builds between rounds);
* from the times asv's progress lines arrived (``run`` stamps each line of the job's output):
  step 3 cut into switching builds between rounds (asv's ``For torch commit ...`` to its
  ``Benchmarking``: uninstalling, installing and checking torch), each ``setup_cache`` in every
  round (``Setting up ... ok`` after the line before it: the first round's C++ compile and
  Callgrind batch included, which asv's records keep for the last round only), and running the
  benchmarks (forks, preparation, samples, asv's records).

``--twin REQUIREMENT`` then adds that build to the fresh job's history again (``benchkit history add
--allow-duplicate``) and profiles ``benchkit main`` once more, in the same folder and caches: what
one more build costs. Several ``--ref`` run alternately (A, B, A, B with ``--repeat 2``), so that
the machine's drift reaches both alike. Each profile is added to ``lab/reports/main-job-profile.json``
(every profile ever made); ``run`` ends by writing ``lab/reports/main-job-profile.md``, the table of
the profiles it made side by side, and ``table`` writes it again from the newest ``--last N`` profiles
(default 2).
Extra arguments after ``--`` go to ``benchkit main`` (e.g. ``-- -b Linear``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchkit.names import BenchmarkName, RunGroup
from lab import REPO_ROOT, REPORTS, shown_path

PROFILES = REPORTS / "main-job-profile.json"
TABLE = REPORTS / "main-job-profile.md"
LAST = 2  # profiles `table` shows by default: the newest comparison of two runs
STEP = re.compile(r"^==> \[(\d)/5\] (.*?)\s+\(\+(\d+) s\)$")
DONE = re.compile(r"^fresh-state main job: exit status (\d+), (\d+) s \(install included\)$")
WALL_PHASE = "wall time: benchmarks' own durations"
WALL_OTHER = "wall time's other rounds (each one's last round's duration × its rounds − 1)"
WALL_ROUNDS = "wall-time rounds measured (benchmark × round, not seconds)"
ADDED = "&nbsp;&nbsp;of which the added rounds (the second asv run)"
STEP_NAMES = {1: "1 torch history", 2: "2 asv machine", 3: "3 asv run", 4: "4 publish", 5: "5 verdict"}


def steps_of(log: str) -> dict[str, float]:
    """Seconds per step of the main job (and of install.sh, when fresh_main_job.sh ran it)."""
    starts: dict[int, int] = {}
    total = exit_status = None
    for line in log.splitlines():
        step = STEP.match(line.strip())
        if step:
            starts[int(step.group(1))] = int(step.group(3))
        done = DONE.match(line.strip())
        if done:
            exit_status, total = int(done.group(1)), int(done.group(2))
    job_end = re.search(r"benchkit main finished (?:with .*? )?in ([\d.]+) min(?: \((\d+) s\))?", log)
    if 1 not in starts or job_end is None:
        raise SystemExit("the log holds no finished main job (no step lines or no 'finished' line)")
    # seconds where the job says them; an older job says tenths of minutes only
    job_seconds = float(job_end.group(2)) if job_end.group(2) else float(job_end.group(1)) * 60
    found: dict[str, float] = {"install.sh": float(total) - job_seconds if total is not None else 0.0}
    ordered = sorted(starts)
    for i, number in enumerate(ordered):
        end = starts[ordered[i + 1]] if i + 1 < len(ordered) else job_seconds
        found[STEP_NAMES[number]] = max(0.0, float(end - starts[number]))
    found["total (install included)"] = float(total) if total is not None else job_seconds
    found["exit status"] = float(exit_status or 0)
    return found


SETUP_CACHES = {  # asv's setup_cache keys name the module that holds the setup_cache
    "measure.callgrind.metric": "Callgrind batch (setup_cache)",
    "measure.walltime.timing": "wall-time cases' setup (setup_cache)",
    "operators": "operator timings, CPU (setup_cache)",
    "operators_cuda": "operator timings, CUDA (setup_cache)",
}


def _setup_cache_name(key: str) -> str:
    module = key[len("<setup_cache ") : -1].split(":")[0]
    return SETUP_CACHES.get(module, f"setup_cache of {module}")


def asv_records(
    results_dir: Path, since: float = 0.0, batch: bool = False, commits: set[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per torch build (results file) written since `since` (a time.time()), of `commits` (their
    first 8 digits) when given: asv's durations by phase and by metric. `batch`: benchkit
    measured the wall times (their durations hold every round; no other rounds to add)."""
    from asv.results import Results

    builds: dict[str, dict[str, Any]] = {}
    for machine_dir in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        for path in sorted(machine_dir.glob("*-*.json")):
            if path.stat().st_mtime < since or (commits is not None and path.stem[:8] not in commits):
                continue  # measured by an earlier job (a predecessor this job only re-timed)
            result = Results.load(str(path), machine_name=machine_dir.name)
            phases: dict[str, float] = defaultdict(float)
            counts: dict[str, int] = defaultdict(int)
            rounds = _wall_rounds(path)
            for key, seconds in result.duration.items():
                if key == "<build>":
                    phases["environment build (asv's `<build>`)"] += seconds
                elif key.startswith("<setup_cache"):
                    phases[_setup_cache_name(key)] += seconds
                elif seconds is not None:
                    group = f"{BenchmarkName.parse(key).run_group}: benchmarks' own durations"
                    # asv keeps a benchmark's duration of its last round (see `table`)
                    phases[group] += seconds
                    counts[group] += 1
                    if group == WALL_PHASE and key in rounds:  # its other rounds, by its own count
                        phases[WALL_OTHER] += 0.0 if batch else seconds * (rounds[key] - 1)
                        phases[WALL_ROUNDS] += rounds[key]
            builds[path.stem] = {"phases": dict(phases), "benchmarks": dict(counts)}
    return builds


def _wall_rounds(path: Path) -> dict[str, int]:
    """Rounds each wall time of a results file holds (its samples / 3): the main job gives
    open verdicts more rounds than the others."""
    from benchkit.measure.walltime.timing import SAMPLES_PER_ROUND

    data = json.loads(path.read_text())
    column = data["result_columns"].index("samples")
    out = {}
    for name, row in data["results"].items():
        samples = row[column] if len(row) > column else None
        if BenchmarkName.parse(name).run_group is RunGroup.WALL_TIME and samples and samples[0]:
            out[name] = len(samples[0]) // SAMPLES_PER_ROUND
    return out


ROUND_LINE = re.compile(r"· For \S+ commit ")
BENCHMARKING_LINE = re.compile(r"·· Benchmarking ")
SETUP_LINE = re.compile(r"··· Setting up (\S+?)(?::\d+)?\s+(?:ok|failed)\s*$")
LOG_SWITCH = "switching builds between rounds (uninstall, install, check; first installs included)"
LOG_BEFORE = "before the first round (environments, discovery, first builds)"
LOG_RUNNING = "running the benchmarks (forks, preparation, samples, asv's records)"
LOG_ROUNDS = "rounds of a build (switches counted)"


def log_phases(timeline: list[tuple[float, str]]) -> dict[str, float]:
    """Step 3 cut by the times asv's lines arrived: seconds switching builds, per
    ``setup_cache`` (every round), running benchmarks, and before the first round."""
    phases: dict[str, float] = defaultdict(float)
    inside = False
    state, state_start, previous = LOG_BEFORE, 0.0, 0.0
    for seconds, line in timeline:
        text = line.strip()
        step = STEP.match(text)
        if step or text.startswith("benchkit main finished"):
            if inside:  # step 3 ends: close what was going on
                phases[state] += seconds - state_start
            inside = bool(step) and step.group(1) == "3"
            state, state_start, previous = LOG_BEFORE, seconds, seconds
            continue
        if not inside:
            continue
        if ROUND_LINE.search(text):
            phases[state] += seconds - state_start
            state, state_start = LOG_SWITCH, seconds
            phases[LOG_ROUNDS] += 1
        elif BENCHMARKING_LINE.search(text) and state == LOG_SWITCH:
            phases[state] += seconds - state_start
            state, state_start = LOG_RUNNING, seconds
        elif (setup := SETUP_LINE.search(text)) and state == LOG_RUNNING:
            name = SETUP_CACHES.get(setup.group(1), f"setup_cache of {setup.group(1)}")
            phases[f"{name}, every round"] += seconds - previous
            phases[LOG_RUNNING] -= seconds - previous
        previous = seconds
    return dict(phases)


BATCH_ROUNDS = "wall-time rounds measured by benchkit (a process per build and round)"
BATCH_SAMPLED = "of which inside timed samples"
BATCH_PREPARED = "builds prepared for benchkit's wall-time rounds (trees, C++ compile)"
BATCH_REPLICATES = "operator replicates measured by benchkit (a process per build and replicate)"
# asv's records of the operator timings hold, after benchkit's replicates, each benchmark's
# share of the replicates' seconds: the job's line counts them instead
OPERATOR_PHASE = f"{RunGroup.OPERATOR_TIMINGS}: benchmarks' own durations"


def batch_phases(log: str) -> dict[str, float]:
    """Seconds of the wall-time rounds benchkit measures itself, from the job's lines (empty
    for a job whose wall times asv measured)."""
    taken = re.findall(r"the wall-time rounds took (\d+) s, (\d+) s of it in timed samples", log)
    prepared = re.findall(r"build\(s\) prepared for the wall-time rounds in (\d+) s", log)
    replicates = re.findall(r"the operator replicates took (\d+) s", log)
    found = {BATCH_REPLICATES: float(sum(map(int, replicates)))} if replicates else {}
    if not taken:
        return found
    return {
        BATCH_ROUNDS: float(sum(int(t) for t, _ in taken)),
        BATCH_SAMPLED: float(sum(int(s) for _, s in taken)),
        BATCH_PREPARED: float(sum(map(int, prepared))),
        **found,
    }


def profile_of(
    label: str,
    commit: str,
    main_args: list[str],
    log: str,
    results: Path,
    since: float,
    timeline: list[tuple[float, str]] | None = None,
) -> dict[str, Any]:
    steps = steps_of(log)
    batch = batch_phases(log)
    # the builds asv ran in this job: a predecessor that benchkit only re-timed keeps the
    # records of the job that measured it
    ran = set(re.findall(r"· For \S+ commit ([0-9a-f]{8})", log))
    builds = asv_records(results, since, BATCH_ROUNDS in batch, ran or None)
    # not asv's records; benchkit's own wall-time rounds are counted by their log lines
    derived = (
        WALL_OTHER,
        WALL_ROUNDS,
        *((WALL_PHASE,) if BATCH_ROUNDS in batch else ()),
        *((OPERATOR_PHASE,) if BATCH_REPLICATES in batch else ()),
    )
    recorded = sum(v for b in builds.values() for k, v in b["phases"].items() if k not in derived)
    recorded += sum(seconds for name, seconds in batch.items() if name != BATCH_SAMPLED)
    rounds = re.search(r"wall time in (\d+) interleaved rounds", log)
    added = re.search(r"the added rounds took (\d+) s", log)
    if added:  # the main job's second asv run, for the wall times its first look left open
        steps[ADDED] = float(added.group(1))
    return {
        "label": label,
        "commit": commit,
        # when the job started (`since`), else now
        "date": (dt.datetime.fromtimestamp(since, dt.UTC) if since else dt.datetime.now(dt.UTC)).strftime(
            "%Y-%m-%d %H:%M UTC"
        ),
        "main_args": main_args,
        "steps": steps,
        "builds": builds,
        "asv_unrecorded": steps.get(STEP_NAMES[3], 0.0) - recorded,
        "wall_rounds": int(rounds.group(1)) if rounds else None,
        "log_phases": log_phases(timeline) if timeline else {},
        "batch": batch,
    }


def _stamped(command: list[str], env: dict[str, str], cwd: Path) -> tuple[list[tuple[float, str]], int]:
    """Run `command`; each line of its output (stdout and stderr) with the seconds it arrived."""
    started = time.monotonic()
    timeline: list[tuple[float, str]] = []
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as job:
        assert job.stdout is not None
        for line in job.stdout:
            timeline.append((time.monotonic() - started, line))
    return timeline, job.returncode


def _profile_of_run(
    label: str, commit: str, main_args: list[str], timeline: list[tuple[float, str]], results: Path,
    began: float, log_path: Path,
) -> dict[str, Any]:  # fmt: skip
    log = "".join(line for _, line in timeline)
    log_path.write_text("".join(f"[{seconds:8.1f}] {line}" for seconds, line in timeline))
    try:
        return profile_of(label, commit, main_args, log, results, began, timeline)
    except SystemExit:
        sys.stderr.write(log[-4000:])
        raise


def fresh_main_job(source: Path) -> Path:
    """The fresh-state main job of a clone: lab/ holds it, scripts/ did before lab/ existed."""
    moved = source / "lab" / "fresh_main_job.sh"
    return moved if moved.is_file() else source / "scripts" / "fresh_main_job.sh"


def run_once(
    ref: str, label: str, main_args: list[str], keep: Path | None = None, twin: str | None = None
) -> list[dict[str, Any]]:
    """The main job from a fresh clone of `ref`; with `twin` (a requirement such as
    ``torch==2.14.1``), then that build added to its history again and the job run once more:
    the cost of one more build."""
    commit = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="benchkit-profile-") as tmp:
        source = Path(tmp) / "source"
        subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(source)], check=True)
        subprocess.run(["git", "-C", str(source), "checkout", "-q", commit], check=True)
        work = keep if keep is not None else Path(tmp) / "fresh"
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHKIT_")}
        env["BENCHKIT_FRESH_DIR"] = str(work)
        print(f"profile: {label} = {ref} ({commit[:10]}): the main job from a fresh clone ...", flush=True)
        began = time.time()
        timeline, _ = _stamped(["bash", str(fresh_main_job(source)), *main_args], env, source)
        results = work / "benchkit" / ".asv" / "results"
        profiles = [_profile_of_run(label, commit, main_args, timeline, results, began, work / "main.log")]
        if twin is None:
            return profiles
        # the fresh job's own environment and caches (lab/fresh_main_job.sh)
        env.update(
            HOME=str(work / "home"),
            BENCHKIT_CACHE_DIR=str(work / "cache"),
            TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"),
            PATH=f"{work / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        )
        env.pop("BENCHKIT_FRESH_DIR")
        env.pop("PYTHONPATH", None)
        add = ["benchkit", "history", "add", twin, "--allow-duplicate", "--note", "profile: a twin"]
        subprocess.run(add, cwd=work / "benchkit", env=env, check=True)
        print(f"profile: {label}: {twin} added again; the main job once more ...", flush=True)
        began = time.time()
        timeline, status = _stamped(["benchkit", "main", *main_args], env, work / "benchkit")
        twin_label = f"{label}: a third build ({twin} again) added"
        profile = _profile_of_run(twin_label, commit, main_args, timeline, results, began, work / "twin.log")
        profile["steps"]["exit status"] = float(status)  # no install.sh around this job
        return [*profiles, profile]


def _load() -> list[dict[str, Any]]:
    return json.loads(PROFILES.read_text()) if PROFILES.is_file() else []


def table(profiles: list[dict[str, Any]]) -> str:
    """The profiles side by side, one column each, in the order given."""
    if not profiles:
        return "no profiles yet\n"
    heads = [f"{p['label']} `{p['commit'][:8]}`" for p in profiles]
    rows: list[tuple[str, list[str]]] = []
    step_names = ["install.sh", *STEP_NAMES.values()]
    if any(ADDED in p["steps"] for p in profiles):
        step_names.insert(step_names.index(STEP_NAMES[3]) + 1, ADDED)
    for name in step_names:
        rows.append((f"**{name}**", [f"{max(0.0, p['steps'].get(name, 0)):.0f}" for p in profiles]))
        if name == STEP_NAMES[3]:
            phases = sorted({ph for p in profiles for b in p["builds"].values() for ph in b["phases"]})
            for phase in phases:
                cells = []
                for p in profiles:
                    total = sum(b["phases"].get(phase, 0.0) for b in p["builds"].values())
                    n = sum(b["benchmarks"].get(phase, 0) for b in p["builds"].values())
                    cells.append(f"{total:.0f}" + (f" ({n} benchmarks)" if n else ""))
                rows.append((f"&nbsp;&nbsp;{phase}, all builds", cells))
            # asv keeps a benchmark's duration of its last round only (each interleaved round
            # replaces it): the wall time's other rounds are in what asv did not record. Older
            # profiles lack the per-benchmark count: there the job's one rounds figure.
            others = [(p.get("wall_rounds") or 1) - 1 for p in profiles]
            walls = [sum(b["phases"].get(WALL_PHASE, 0.0) for b in p["builds"].values()) for p in profiles]
            counted = [
                sum(b["phases"].get(WALL_OTHER, 0.0) for b in p["builds"].values())
                if any(WALL_OTHER in b["phases"] for b in p["builds"].values())
                else w * n
                for p, w, n in zip(profiles, walls, others, strict=True)
            ]
            for name in (BATCH_ROUNDS, BATCH_SAMPLED, BATCH_PREPARED, BATCH_REPLICATES):
                if any(p.get("batch") for p in profiles):
                    found = [p.get("batch", {}) for p in profiles]
                    cells = [f"{b[name]:.0f}" if name in b else "–" for b in found]
                    if name == BATCH_SAMPLED:
                        cells = [
                            f"{b[name]:.0f} ({b[name] / b[BATCH_ROUNDS]:.0%})" if b.get(BATCH_ROUNDS) else c
                            for b, c in zip(found, cells, strict=True)
                        ]
                    rows.append((f"&nbsp;&nbsp;{'&nbsp;&nbsp;' * (name == BATCH_SAMPLED)}{name}", cells))
            if not any(WALL_OTHER in ph for ph in phases):
                rows.append(
                    (
                        "&nbsp;&nbsp;wall time's other rounds (its last round's durations × rounds − 1)",
                        [f"{c:.0f} ({n} rounds)" for c, n in zip(counted, others, strict=True)],
                    )
                )
            batched = [BATCH_ROUNDS in p.get("batch", {}) for p in profiles]
            counted = [0.0 if b else c for b, c in zip(batched, counted, strict=True)]
            rows.append(("&nbsp;&nbsp;asv's own time (process starts, installs between rounds, discovery)",
                         [f"{p['asv_unrecorded'] - c:.0f}"
                          for p, c in zip(profiles, counted, strict=True)]))  # fmt: skip
            cut = sorted({name for p in profiles for name in p.get("log_phases", {}) if name != LOG_ROUNDS})
            for name in cut:
                found = [p.get("log_phases", {}) for p in profiles]
                cells = [f"{phases[name]:.0f}" if name in phases else "–" for phases in found]
                rows.append((f"&nbsp;&nbsp;from asv's progress lines: {name}", cells))
            if cut:
                rows.append(
                    (
                        f"&nbsp;&nbsp;from asv's progress lines: {LOG_ROUNDS}",
                        [f"{p.get('log_phases', {}).get(LOG_ROUNDS, 0):.0f}" for p in profiles],
                    )
                )
    rows.append(
        ("**total, install included**", [f"{p['steps']['total (install included)']:.0f}" for p in profiles])
    )
    rows.append(("builds measured", [str(len(p["builds"])) for p in profiles]))
    rows.append(("exit status", [f"{p['steps'].get('exit status', 0):.0f}" for p in profiles]))
    lines = [
        "# Where the main job's time goes",
        "",
        "Seconds per phase of `benchkit main` from a fresh clone with empty caches, on this project's",
        "2-core development machine. Made by `python -m lab.profile_main_job run --ref REF ...`",
        f"(alternating refs); this file by `python -m lab.profile_main_job table --last {len(profiles)}`",
        "from every profile kept in main-job-profile.json beside it. asv's rows are",
        "its own records (`<build>`, `setup_cache`, each benchmark's `duration`), summed over builds;",
        "asv keeps a benchmark's `duration` of its last round only, so the wall time's other rounds",
        "are that round's durations times the other rounds, and asv's own time the rest of step 3.",
        "Where benchkit measures the wall-time rounds and the operator replicates itself, their rows",
        "come from the job's lines and asv's records of them are left out of asv's own time, as are",
        "the records of a predecessor asv did not run in that job.",
        "The rows `from asv's progress lines` cut step 3 by the times asv's lines arrived (profiles",
        "made since the job's output is stamped; `–` for older ones): they hold every round.",
        "",
        "| phase (seconds) | " + " | ".join(heads) + " |",
        "|---|" + "---:|" * len(heads),
        *(f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows),
        "",
        "Runs: "
        + "; ".join(
            f"{h}: {p['date']}, `benchkit main {' '.join(p['main_args'])}`"
            for h, p in zip(heads, profiles, strict=True)
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="profile the main job from fresh clones of refs, alternating")
    run.add_argument("--ref", action="append", required=True, help="a commit of this checkout (repeatable)")
    run.add_argument("--label", action="append", help="a name per --ref (default: the ref)")
    run.add_argument("--repeat", type=int, default=1, help="rounds of the refs (A, B, A, B...)")
    run.add_argument(
        "--keep", type=Path, help="work in this folder and keep it (clone, venv, results, html/)"
    )
    run.add_argument(
        "--twin",
        metavar="REQUIREMENT",
        help="then add this build (e.g. torch==2.14.1) to the job's history again, and profile the job again",
    )
    read = sub.add_parser("read", help="add the profile of a main job run by hand: its log and results")
    read.add_argument("--log", type=Path, required=True, help="the job's output (stdout and stderr)")
    read.add_argument("--results", type=Path, required=True, help="the asv results folder it wrote into")
    read.add_argument("--since", type=float, default=0.0, help="only results files written after (epoch s)")
    read.add_argument("--label", required=True)
    read.add_argument("--commit", required=True, help="the benchkit commit that ran")
    read.add_argument("--exit-status", type=int, required=True, help="what the job exited with")
    shown = sub.add_parser("table", help=f"write {shown_path(TABLE)} from the newest profiles")
    shown.add_argument(
        "--last", type=int, default=LAST, help=f"how many of the newest profiles (default {LAST})"
    )
    args, main_args = parser.parse_known_args()
    main_args = [a for a in main_args if a != "--"]
    last = LAST
    if args.command == "run":
        labels = args.label or args.ref
        if len(labels) != len(args.ref):
            parser.error("give one --label per --ref")
        made = 0
        for _ in range(args.repeat):
            for ref, label in zip(args.ref, labels, strict=True):
                for profile in run_once(ref, label, main_args, args.keep, args.twin):
                    profiles = [*_load(), profile]
                    made += 1
                    PROFILES.write_text(json.dumps(profiles, indent=1) + "\n")
                    TABLE.write_text(table(profiles[-made:]))
                    total = profile["steps"]["total (install included)"]
                    print(f"profile: {profile['label']}: {total:.0f} s", flush=True)
        last = made
    if args.command == "read":
        profile = profile_of(args.label, args.commit, [], args.log.read_text(), args.results, args.since)
        profile["steps"]["exit status"] = float(args.exit_status)
        PROFILES.write_text(json.dumps([*_load(), profile], indent=1) + "\n")
    if args.command == "table":
        if args.last < 1:
            parser.error("--last must be at least 1")
        last = args.last
    TABLE.write_text(table(_load()[-last:]))
    print(f"wrote {shown_path(TABLE)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
