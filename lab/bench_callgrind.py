"""Figures for Callgrind instruction counts (docs/instruction_counts.md).

1. Whole standard suite counted per commit: cold (empty cache: C++ compile and
   TorchScript artifacts included) and warm, against `Timer.collect_callgrind`
   timed side by side on a few of the same cases.
2. A/A spread: the two warm runs are separate full runs; per-case difference.
3. ``--sensitivity``: 1% of work added to one statement (a patched torch wheel
   in a throw-away history) must be flagged by ``asv continuous --factor 1.005``
   and ``benchkit check`` (0.5% threshold for instructions), nothing else.

The machine may be shared: every timing is printed with the load average.

    python -m lab.bench_callgrind [--skip-cold] [--filter REGEX] [--subset N] [--sensitivity]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Any

from benchkit.define.expand import Case
from benchkit.define.loader import load_cases
from benchkit.history.builds.defaults import installed_torch_wheel
from benchkit.measure.callgrind.profiles import profile_path
from lab import REPO_ROOT

# Cases timed with Timer.collect_callgrind (the standard suite's keys).
SUBSET = (
    "Pointwise/Math/add/Tensor-Scalar | Python | Eager | Forward | 1 thread(s)",
    "nn Modules/Linear | Python | Eager | Forward | 1 thread(s)",
    "Pointwise/Math/add/Tensor-Scalar | C++ | Eager | Forward | 1 thread(s)",
)
SENSITIVE_CASE = "nn Modules/ReLU | Python | Eager | Forward | 1 thread(s)"
LOCAL_WHEEL = installed_torch_wheel()  # BENCHKIT_TORCH_WHEEL, or the installed torch as a wheel


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def benchkit(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchkit.cli", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def cpu_seconds() -> float:
    """CPU time of finished child processes (and theirs: valgrind, g++), user + system."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def count_suite(cache: Path, out: Path, pattern: str | None) -> tuple[float, float, dict[str, Any], str]:
    """One `benchkit counts` run in its own process; (seconds, CPU seconds, --json data, load after).

    On a shared machine wall time depends on the others' load; the CPU seconds of the
    whole process tree do not, and CPU seconds / cores bounds the time on an idle machine.
    """
    env = {**os.environ, "BENCHKIT_CACHE_DIR": str(cache)}
    args = ["counts", "--json", str(out), "--profile", "--profile-dir", str(out.with_suffix(""))]
    if pattern:
        args += ["--filter", pattern]
    start, cpu = time.monotonic(), cpu_seconds()
    done = benchkit(*args, env=env)
    seconds, cpu = time.monotonic() - start, cpu_seconds() - cpu
    if done.returncode not in (0, 1):
        raise SystemExit(f"benchkit counts failed:\n{done.stderr[-3000:]}")
    summary = [line for line in done.stderr.splitlines() if "counted in" in line]
    log(f"  {summary[-1] if summary else ''} [{cpu:.0f} CPU s]")
    return seconds, cpu, json.loads(out.read_text()), load()


def compile_seconds(profile: Path) -> float:
    import gzip

    meta = json.loads(gzip.decompress(profile.read_bytes()))["metadata"]
    return float(meta["cpp_compile_seconds"])


_TIMER_SCRIPT = r"""
import json, sys, time
from benchkit.define.api import TimerArgs, Language
from benchkit.measure.cpp.torchscript import ensure_artifact
from torch.utils.benchmark import Timer
args = TimerArgs.from_json(json.loads(sys.argv[1]))
if args.torchscript:
    ensure_artifact(args.torchscript)
lang = "c++" if args.language is Language.CPP else "python"
start = time.monotonic()
timer = Timer(stmt=args.stmt, setup=args.setup, global_setup=args.global_setup,
              num_threads=args.num_threads, language=lang)
stats = timer.collect_callgrind(number=100, collect_baseline=False)
print(json.dumps({"seconds": time.monotonic() - start, "instructions": stats.counts(denoise=True) / 100}))
"""


def collect_callgrind(case: Case, cache: Path) -> dict[str, float]:
    """Timer.collect_callgrind(number=100) on one case, in a fresh process as the upstream worker does."""
    env = {**os.environ, "BENCHKIT_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO_ROOT)}
    cpu = cpu_seconds()
    done = subprocess.run(
        [sys.executable, "-c", _TIMER_SCRIPT, json.dumps(case.timer_args.to_json())],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    if done.returncode:
        raise SystemExit(f"collect_callgrind failed for {case.key}:\n{done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "cpu": cpu_seconds() - cpu}


def spread(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[float, str, float, float]]:
    rows = []
    for key, first in a.items():
        second = b.get(key, {})
        if first["status"] == "ok" and second.get("status") == "ok":
            x, y = first["instructions"], second["instructions"]
            rows.append((abs(y - x) / x, key, x, y))
    return sorted(rows, reverse=True)


def suite_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    cases = load_cases()
    selected = [c for c in cases if not args.filter or re.search(args.filter, c.key)]
    log(f"{len(selected)} case(s) ({sum(c.timer_args.language.name == 'PYTHON' for c in selected)} Python)")
    cache = work / "cache"
    figures: dict[str, Any] = {"cases": len(selected)}
    if not args.skip_cold:
        log(f"cold run (empty cache), load before: {load()}")
        seconds, cpu, _, after = count_suite(cache, work / "cold.json", args.filter)
        figures["cold"] = (seconds, cpu, compile_seconds(profile_path(work / "cold")), after)
    else:
        cache = Path(os.environ.get("BENCHKIT_CACHE_DIR") or Path.home() / ".cache" / "benchkit")
    runs = []
    for name in ("warm-A", "warm-B"):
        log(f"{name} run, load before: {load()}")
        seconds, cpu, data, after = count_suite(cache, work / f"{name}.json", args.filter)
        runs.append(data)
        figures[name] = (seconds, cpu, after)
    figures["spread"] = spread(*runs)
    figures["failed"] = sorted(k for k, v in runs[0].items() if v["status"] != "ok")

    subset = [c for c in cases if c.key in SUBSET][: args.subset]
    timed = []
    for case in subset:
        log(f"Timer.collect_callgrind: {case.key} (load {load()})")
        theirs = collect_callgrind(case, cache)
        ours = runs[0].get(case.key, {}).get("instructions")
        timed.append((case.key, theirs["seconds"], theirs["cpu"], theirs["instructions"], ours, load()))
    figures["timer"] = timed
    return figures


def report_suite(figures: dict[str, Any]) -> None:
    n, cores = figures["cases"], os.cpu_count() or 1
    print(f"\n== Whole suite: {n} cases, {cores} valgrind workers ({cores} cores) ==")
    print(f"{'run':<28} {'wall s':>8} {'CPU s':>8} {'CPU s / cores':>14}   load average after")
    if "cold" in figures:
        seconds, cpu, prep, after = figures["cold"]
        print(f"{'cold (compile included)':<28} {seconds:8.1f} {cpu:8.0f} {cpu / cores:14.1f}   {after}")
        print(f"  C++ compile: {prep:.0f} s wall (while the Python cases were counted)")
    for name in ("warm-A", "warm-B"):
        seconds, cpu, after = figures[name]
        print(f"{name:<28} {seconds:8.1f} {cpu:8.0f} {cpu / cores:14.1f}   {after}")
    warm = min(figures["warm-A"][0], figures["warm-B"][0]) / n
    warm_cpu = min(figures["warm-A"][1], figures["warm-B"][1]) / n
    if figures["timer"]:
        print("\n== Timer.collect_callgrind(number=100), fresh process per case, side by side ==")
        print(f"{'case':<72} {'wall s':>7} {'CPU s':>6} {'Timer instr':>12} {'batch instr':>12}")
        for key, seconds, cpu, theirs, ours, after in figures["timer"]:
            print(f"{key:<72} {seconds:7.1f} {cpu:6.1f} {theirs:12,.1f} {ours or 0:12,.1f}   load {after}")
        mean = statistics.mean(t[1] for t in figures["timer"])
        mean_cpu = statistics.mean(t[2] for t in figures["timer"])
        print(
            f"per case: collect_callgrind {mean:.1f} s wall / {mean_cpu:.1f} CPU s; "
            f"batch (warm) {warm:.2f} s wall / {warm_cpu:.2f} CPU s  ({mean_cpu / warm_cpu:.0f}x less CPU)"
        )
        print(f"whole suite: ~{mean * n / 60:.0f} min via collect_callgrind, {warm * n / 60:.1f} min batched")
    rows = figures["spread"]
    if rows:
        exact = sum(r[0] == 0 for r in rows)
        print(f"\n== A/A: two separate warm runs, {len(rows)} cases counted in both ==")
        over = {limit: sum(r[0] > limit for r in rows) for limit in (1e-4, 1e-3)}
        print(f"identical: {exact}/{len(rows)}; max |difference|: {rows[0][0]:.5%}; "
              f"> 0.01%: {over[1e-4]}; > 0.1%: {over[1e-3]}")  # fmt: skip
        for rel, key, x, y in rows[:8]:
            if rel:
                print(f"  {rel:.5%}  {x:>14,.1f} {y:>14,.1f}  {key}")
    if figures["failed"]:
        print(f"\nfailed cases: {len(figures['failed'])}")
        for key in figures["failed"]:
            print(f"  {key}")


# -- sensitivity ----------------------------------------------------------------------------

_RELU_RETURN = "        return F.relu(input, inplace=self.inplace)\n"
# Straight-line work: a loop would add a fixed cost (range object, iterator) on top.
_RELU_MORE_WORK_LINE = "        _benchkit_extra = 1  # sensitivity experiment: ~1% more work\n"


def _more_work(lines: int) -> str:
    return _RELU_MORE_WORK_LINE * lines


def calibrate(case: Case, cache: Path) -> tuple[int, float, float]:
    """Extra lines in `ReLU.forward` that make ~1% of the case: counted, not guessed.

    Setup swaps in a `ReLU.forward` with the same body as the patched wheel's, with
    0 and 64 extra lines. Their difference is the cost per line; the swap
    itself costs extra (a function defined in setup, globals of another module), which
    the patched wheel does not have, so only the per-line cost sizes the patch.
    Returns (lines, base instructions, expected added instructions).
    """
    from benchkit.callgrind_track import collect
    from benchkit.define.api import TimerArgs
    from benchkit.define.expand import materialize

    def patched(iterations: int) -> TimerArgs:
        body = textwrap.dedent(_more_work(iterations) + _RELU_RETURN)
        forward = (
            "F = torch.nn.functional\ndef _forward(self, input):\n"
            + textwrap.indent(body, "    ")
            + "torch.nn.ReLU.forward = _forward\n"
        )
        return TimerArgs(case.timer_args.stmt, case.timer_args.setup + "\n" + forward)

    definitions = {"base": case.timer_args, "k0": patched(0), "k64": patched(64)}
    os.environ["BENCHKIT_CACHE_DIR"] = str(cache)
    result = collect(materialize(definitions), progress=log)
    value = {k.split(" |")[0]: c.instructions for k, c in result.counts.items()}
    per_iteration = (value["k64"] - value["k0"]) / 64
    iterations = max(1, round(0.01 * value["base"] / per_iteration))
    return iterations, value["base"], iterations * per_iteration


def sensitivity(work: Path, cache: Path) -> None:
    from benchkit.history.builds.build_step import history_project_config
    from benchkit.history.builds.wheels import patch_wheel

    case = next(c for c in load_cases() if c.key == SENSITIVE_CASE)
    iterations, base, expected = calibrate(case, cache)
    print(f"\n== Sensitivity: {SENSITIVE_CASE} ==")
    print(f"base {base:,.1f} instructions; patch: {iterations} extra lines in ReLU.forward "
          f"-> expected +{expected:,.1f} (+{expected / base:.3%})")  # fmt: skip

    project = work / "asv-project"
    (project / "home").mkdir(parents=True, exist_ok=True)
    config = history_project_config(str(REPO_ROOT), str(work / "asv-env"))
    (project / "asv.conf.json").write_text(json.dumps(config, indent=1))
    env = {
        **os.environ,
        "HOME": str(project / "home"),
        "PYTHONPATH": str(REPO_ROOT),
        "BENCHKIT_CACHE_DIR": str(cache),
    }

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        log(f"$ {' '.join(cmd)}   (load {load()})")
        start = time.monotonic()
        done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
        log(f"  exit {done.returncode} after {time.monotonic() - start:.0f} s")
        return done

    with zipfile.ZipFile(LOCAL_WHEEL) as wheel:
        source = wheel.read("torch/nn/modules/activation.py").decode()
    assert source.count(_RELU_RETURN) == 1, "ReLU.forward is not as expected in this torch"
    more_work = source.replace(_RELU_RETURN, _more_work(iterations) + _RELU_RETURN)
    patched = patch_wheel(
        LOCAL_WHEEL, work / "wheel" / LOCAL_WHEEL.name, {"torch/nn/modules/activation.py": more_work.encode()}
    )
    py = sys.executable
    run(py, "-m", "asv", "machine", "--machine", "bench", "--yes")
    for cmd in (
        ("history", "init", "--repo", "history", str(LOCAL_WHEEL)),
        ("history", "add", str(patched), "--repo", "history", "--branch", "more-work",
         "--note", "ReLU.forward does ~1% more work", "--asv-config", "asv.conf.json"),
    ):  # fmt: skip
        done = run(py, "-m", "benchkit.cli", *cmd)
        if done.returncode:
            raise SystemExit(done.stderr)
    cont = run(py, "-m", "asv", "continuous", "main", "more-work", "--factor", "1.005",
               "-b", "track_instructions", "--machine", "bench", "--show-stderr")  # fmt: skip
    # asv prints its comparison as a table: "| + | before | after | ratio | benchmark |"
    changed = re.compile(r"^\|?\s*[+-]\s+\|?.*?(\S+\.track_instructions)")
    flagged = [m.group(1) for m in map(changed.match, cont.stdout.splitlines()) if m]
    print(f"asv continuous --factor 1.005 -b track_instructions: exit {cont.returncode}")
    for line in cont.stdout.splitlines():
        if changed.match(line) or "PERFORMANCE" in line:
            print(f"  {line.strip()}")
    print(f"  benchmarks flagged: {len(flagged)}")
    check = run(py, "-m", "benchkit.cli", "check", "main", "more-work", "--asv-config", "asv.conf.json",
                "--machine", "bench")  # fmt: skip
    print(f"benchkit check main more-work: exit {check.returncode}")
    regressions = (
        check.stdout.split("#### Regressions")[1].split("####")[0]
        if "#### Regressions" in check.stdout
        else ""
    )
    rows = [line for line in regressions.splitlines() if line.startswith("| `")]
    for row in rows:
        print(f"  {row}")
    summary = [line for line in check.stdout.splitlines() if "unchanged" in line.lower()][:2]
    for line in summary:
        print(f"  {line.strip()}")
    diff = run(py, "-m", "benchkit.cli", "diff", "main", "more-work", "--asv-config", "asv.conf.json",
               "--machine", "bench", "--top", "5")  # fmt: skip
    print("benchkit diff main more-work --top 5:")
    print(textwrap.indent(diff.stdout.strip() or diff.stderr.strip(), "  "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-cold", action="store_true", help="no cold run (use the normal cache)")
    parser.add_argument("--filter", help="only cases matching this regex (default: the whole suite)")
    parser.add_argument("--subset", type=int, default=len(SUBSET), help="cases for collect_callgrind")
    parser.add_argument("--sensitivity", action="store_true", help="also run the asv/check experiment")
    parser.add_argument("--only-sensitivity", action="store_true", help="only the asv/check experiment")
    parser.add_argument("--work-dir", type=Path, help="keep files here (default: a temporary folder)")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-callgrind-"))
    work.mkdir(parents=True, exist_ok=True)
    log(f"work dir: {work}")
    if not args.only_sensitivity:
        report_suite(suite_figures(args, work))
    if args.sensitivity or args.only_sensitivity:
        cache = work / "cache" if (work / "cache").exists() else work / "sensitivity-cache"
        sensitivity(work, cache)


if __name__ == "__main__":
    main()
