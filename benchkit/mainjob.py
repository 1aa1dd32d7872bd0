"""`benchkit main`: the whole job, from nothing to a published site.

1. build the torch history (this machine's default builds: the local CPU wheel
   and ``torch==2.14.1`` from the package index when it can be fetched);
2. make sure asv knows this machine (non-interactively);
3. run the suite with asv on every commit of the history, skipping commits that
   already have results -- an interrupted job resumes where it stopped;
4. publish the site into ``html/``;
5. print what changed between the oldest and newest torch (`benchkit check`)
   and where the site is.

Quick mode (the default) is *not* ``asv run --quick``: that takes a single
sample with ``number=1``, which records first-call effects and gives asv's
statistics nothing to work with, so such history could not gate anything. Quick
mode keeps asv's calibration (each sample runs the statement often enough to
fill asv's sample time) but takes 2-3 samples in each of two rounds
(``-a rounds=2 -a repeat=(2,3,1.0)``), and asv interleaves the rounds across
commits (round 1 of every torch, then round 2 of every torch). Interleaving costs
one more torch install per commit but spreads each commit's samples over two
time windows, so a load change on a shared machine cannot masquerade as a
difference between torch versions. ``--full`` uses the suite's own settings
(asv's default: two interleaved rounds of up to 5 samples).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchkit import history
from benchkit.errors import UserError

QUICK_ATTRIBUTES = ("rounds=2", "repeat=(2,3,1.0)")
STEPS = 5


class _Progress:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def step(self, number: int, text: str) -> None:
        elapsed = time.monotonic() - self.start
        print(f"\n==> [{number}/{STEPS}] {text}  (+{elapsed:.0f} s)", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        print(f"    {text}", file=sys.stderr, flush=True)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


def _asv(args: Sequence[str], conf_path: Path, check: bool = True) -> int:
    """Run asv on the config, its output streamed to the terminal (asv prints its own progress)."""
    command = [sys.executable, "-m", "asv", *args, "--config", str(conf_path)]
    print("    $ " + " ".join(["asv", *args]), file=sys.stderr, flush=True)
    code = subprocess.run(command, cwd=conf_path.parent).returncode
    if check and code != 0:
        raise UserError(f"`asv {' '.join(args)}` failed with exit code {code}")
    return code


def ensure_machine(conf_path: Path, machine: str | None) -> None:
    """asv asks interactively about an unknown machine; answer with its defaults once."""
    from asv import util as asv_util
    from asv.machine import Machine, MachineCollection

    name = machine or Machine.get_unique_machine_name()
    try:
        MachineCollection.load(name)
        return
    except asv_util.UserError:
        pass
    _asv(["machine", "--yes", *(["--machine", machine] if machine else [])], conf_path)


def asv_run_args(full: bool, rerun: bool, bench: Sequence[str], machine: str | None) -> list[str]:
    args = ["run", "ALL", "--record-samples", "--show-stderr", "--interleave-rounds"]
    if not rerun:
        args.append("--skip-existing-commits")
    if not full:
        for attribute in QUICK_ATTRIBUTES:
            args += ["-a", attribute]
    for regex in bench:
        args += ["--bench", regex]
    if machine:
        args += ["--machine", machine]
    return args


def publish(conf_path: Path) -> Path:
    """`benchkit.site.publish` (asv's site plus benchkit's pages) when installed, else `asv publish`."""
    try:
        from benchkit import site
    except ModuleNotFoundError as e:
        if e.name != "benchkit.site":
            raise
    else:
        return Path(site.publish(conf_path))
    _asv(["publish"], conf_path)
    from asv import util as asv_util

    html_dir = asv_util.load_json(str(conf_path), js_comments=True).get("html_dir", "html")
    return conf_path.parent / html_dir


def run_main_job(
    conf_path: Path,
    builds: Sequence[str] | None = None,
    include_index: bool = True,
    full: bool = False,
    rerun: bool = False,
    bench: Sequence[str] = (),
    machine: str | None = None,
) -> int:
    from benchkit import check

    conf_path = conf_path.resolve()
    if not conf_path.is_file():
        raise UserError(f"asv config {conf_path} not found (run `benchkit main` in the benchkit checkout)")
    progress = _Progress()

    progress.step(1, "torch history: one git commit per torch build")
    repo = history.HistoryRepo(history.repo_from_asv_config(conf_path))
    if builds:
        history.init_history(repo, builds)
    else:
        history.init_history(
            repo, history.default_builds(include_index), optional=[history.DEFAULT_INDEX_REQUIREMENT]
        )
    rows = history.history_rows(repo)
    for row in rows:
        if row[0] == history.MAIN_BRANCH:
            progress.note(f"{row[1]}  torch {row[3]}  built {row[2]}  git_version {row[4]}")
    main_commits = repo.commits(history.MAIN_BRANCH)

    progress.step(2, "asv machine description")
    ensure_machine(conf_path, machine)

    mode = "full" if full else "quick (2 interleaved rounds of 2-3 samples per benchmark)"
    progress.step(3, f"asv run over {len(main_commits)} torch build(s), {mode}; finished commits are skipped")
    run_code = _asv(asv_run_args(full, rerun, bench, machine), conf_path, check=False)
    if run_code != 0:
        progress.note(
            f"asv run exited {run_code} (some benchmarks or builds failed; they are recorded as failed)"
        )

    progress.step(4, "publishing the site")
    # Any other `asv run` on these results (e.g. `-b REGEX` or another suite selection) rewrites
    # benchmarks.json, and asv publish draws graphs only for what it lists: rediscover first.
    _asv(["run", "--python=same", "--bench", "just-discover"], conf_path, check=False)
    html_dir = publish(conf_path)

    progress.step(5, "what changed between the torch builds")
    if len(main_commits) >= 2:
        tags = repo.tags_by_commit()
        first, last = (tags.get(c, [c[:12]])[0] for c in (main_commits[0], main_commits[-1]))
        try:
            verdict = check.run_check(first, last, asv_config=conf_path, machine=machine)
            sys.stdout.write(verdict.markdown)
        except UserError as e:
            progress.note(f"could not compare {first} and {last}: {e}")
    else:
        progress.note("the history has a single build: nothing to compare")

    minutes = progress.elapsed / 60
    print(
        f"\nbenchkit main finished in {minutes:.1f} min. Site: {html_dir / 'index.html'}\n"
        f"View it with `asv preview` (from {conf_path.parent}) or any static file server.",
        file=sys.stderr,
    )
    return 0


def _cmd_main(args: argparse.Namespace) -> int:
    if shutil.which("git") is None:
        raise UserError("git is needed for the torch history and asv; install it first")
    try:
        return run_main_job(
            args.asv_config,
            builds=args.build,
            include_index=not args.no_index,
            full=args.full,
            rerun=args.rerun,
            bench=args.bench,
            machine=args.machine,
        )
    except KeyboardInterrupt:
        print(
            "benchkit main: interrupted. Run it again to resume; commits with results are kept.",
            file=sys.stderr,
        )
        return 130


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "main",
        help="the whole job: torch history -> asv run on every build -> html/ -> what changed",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--full", action="store_true", help="the suite's own repeats and rounds (slower)")
    parser.add_argument(
        "--rerun", action="store_true", help="measure commits that already have results again"
    )
    parser.add_argument(
        "--build",
        action="append",
        metavar="WHEEL",
        help="torch builds for the history instead of the defaults (repeatable: wheel file or requirement)",
    )
    parser.add_argument(
        "--no-index",
        action="store_true",
        help=f"leave {history.DEFAULT_INDEX_REQUIREMENT} out of the defaults",
    )
    parser.add_argument(
        "--bench", "-b", action="append", default=[], help="only benchmarks matching this regex"
    )
    parser.add_argument("--machine", help="asv machine name (default: this host's)")
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.set_defaults(func=_cmd_main)
