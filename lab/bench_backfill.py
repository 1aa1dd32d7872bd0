"""Backfill on a Dask LocalCluster against a sequential `asv run`, the same builds and cases.

Usage: python -m lab.bench_backfill [--builds 6] [--workers 2] [--filter REGEX]

Makes a torch history of BUILDS builds (the local 2.13.0 wheel and patched twins,
each an honest distinct build: ``nn.Linear.forward`` does k extra passes in twin k),
then measures, each from its own empty benchkit cache (so neither reuses the other's
environments or compiled shards):

1. ``benchkit backfill --workers N --filter REGEX`` (instruction counts of the cases
   matching REGEX, every build), per-build seconds from each build's status file;
2. ``asv run -b <the same track_instructions benchmarks> main``: asv's own sequential run.

It prints both, checks the counts agree, and projects 365 builds on N hosts from the
measured per-build time. Fresh HOME; wheels come from a wheelhouse folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit.define.expand import asv_class_name, select
from benchkit.define.loader import load_cases
from benchkit.history.builds.build_step import history_project_config
from benchkit.history.builds.defaults import installed_torch_wheel
from benchkit.history.builds.wheels import patch_wheel_module
from benchkit.history.results.read import load_asv_config, load_result_set
from lab import REPO_ROOT as REPO

LOCAL_WHEEL = installed_torch_wheel()  # BENCHKIT_TORCH_WHEEL, or the installed torch as a wheel


def twin(folder: Path, extra_passes: int) -> Path:
    patch = (
        f"\n\n_benchkit_forward = Linear.forward\n\n\ndef _benchkit_forward_{extra_passes}(self, input):\n"
        f"    for _ in range({extra_passes}):\n        _benchkit_forward(self, input)\n"
        f"    return _benchkit_forward(self, input)\n\n\nLinear.forward = _benchkit_forward_{extra_passes}\n"
    )
    return patch_wheel_module(
        LOCAL_WHEEL, folder / LOCAL_WHEEL.name, "torch/nn/modules/linear.py", lambda text: text + patch
    )


def run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        print(
            f"{' '.join(command[:4])} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return seconds, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--filter", default=r"^(Pointwise|Reduction|nn Modules/Linear)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="benchkit-bench-backfill-"))
    project = scratch / "project"
    project.mkdir()
    builds = [LOCAL_WHEEL] + [twin(scratch / f"twin{k}", k) for k in range(1, args.builds)]
    config = history_project_config(str(REPO), str(scratch / "env"))
    (project / "asv.conf.json").write_text(json.dumps(config, indent=1))
    home = scratch / "home"
    home.mkdir()
    base_env = {
        **os.environ,
        "HOME": str(home),
        "PYTHONPATH": str(REPO),
        "BENCHKIT_WHEELHOUSE": os.pathsep.join(str(w.parent) for w in builds),
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"),
    }
    env = {**base_env, "BENCHKIT_CACHE_DIR": str(scratch / "cache-backfill")}
    benchkit = [sys.executable, "-m", "benchkit.cli"]
    run([*benchkit, "history", "init", "--repo", str(project / "history"), str(builds[0])], project, env)
    for k, wheel in enumerate(builds[1:], 1):
        run(
            [*benchkit, "history", "add", str(wheel), "--asv-config", "asv.conf.json", "--note", f"twin {k}"],
            project,
            env,
        )
    print(
        f"{args.builds} builds, cases matching {args.filter!r}, {args.workers} LocalCluster workers",
        flush=True,
    )

    backfill_s, done = run(
        [*benchkit, "backfill", "--workers", str(args.workers), "--filter", args.filter], project, env
    )
    print(done.stderr[-1500:], flush=True)
    machine = next(p.name for p in (project / "results").iterdir() if p.name.startswith("benchkit-counts-"))
    per_build = []
    for status in sorted((project / "results" / machine / "benchkit-backfill").glob("*.status")):
        seconds = json.loads(status.read_text())["seconds"]
        per_build.append(seconds.get("total", 0.0))
        print(f"  {status.stem[:12]}: " + ", ".join(f"{k} {v:.0f}s" for k, v in sorted(seconds.items())))

    # asv, sequentially, on the same builds: its own cache (no shared environments or shards);
    # the wheels come from the wheelhouse folders, verified by sha256.
    asv_env = {**base_env, "BENCHKIT_CACHE_DIR": str(scratch / "cache-asv")}
    run([sys.executable, "-m", "asv", "machine", "--machine", "sequential", "--yes"], project, asv_env)
    classes = [asv_class_name(case) for case in select(load_cases(None), args.filter)]
    regex = r"instruction_counts\.(" + "|".join(classes) + r")\.track_instructions$"
    asv_s, done = run(
        [sys.executable, "-m", "asv", "run", "--machine", "sequential", "-b", regex, "main"], project, asv_env
    )
    print(done.stdout[-600:], flush=True)
    conf = load_asv_config(project / "asv.conf.json")
    differ = total = 0
    for commit in subprocess.run(
        ["git", "-C", str(project / "history"), "rev-list", "main"], capture_output=True, text=True
    ).stdout.split():
        ours = {n: m.value for (n, _), m in load_result_set(conf, commit, machine).measurements.items()}
        theirs = {
            n: m.value for (n, _), m in load_result_set(conf, commit, "sequential").measurements.items()
        }
        total += len(ours)
        differ += sum(1 for name, value in ours.items() if value is None or theirs.get(name) != value)
    print(f"counts: {total - differ} of {total} identical between backfill and asv run", flush=True)

    n = args.builds
    print(
        f"\nbackfill (LocalCluster, {args.workers} workers): {backfill_s:.0f}s for {n} builds "
        f"({backfill_s / n:.0f}s per build); a build's task: median {statistics.median(per_build):.0f}s"
    )
    print(f"asv run (sequential):                  {asv_s:.0f}s for {n} builds ({asv_s / n:.0f}s per build)")
    # A host's throughput is what the LocalCluster on this one host achieved (its workers
    # share the cores); N hosts of this kind divide the wall time by N.
    per_host = backfill_s / n
    for hosts in (1, 4, 16):
        hours = 365 * per_host / hosts / 3600
        print(f"projection, 365 builds on {hosts:>2} host(s) of this kind: {hours:.1f} h")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
