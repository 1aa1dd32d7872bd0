"""`benchkit export [BUILD ...]`: the builds' figures as PyTorch benchmark-database records
(see `benchkit.report.export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchkit.cli.options import add_damage_option
from benchkit.report import export


def _cmd_export(args: argparse.Namespace) -> int:
    from benchkit.util import atomic_write_json

    ctx = export.load_context(args.asv_config, args.machine, args.env, args.skip_damaged)
    commits = export.resolve_builds(ctx, args.builds)
    folder = args.out / ctx.machine
    for number, commit in enumerate(commits, 1):
        done = export.export_build(ctx, commit)
        path = folder / f"{commit[:12]}.json"
        atomic_write_json(path, list(done.records))
        build = ctx.builds.get(commit)
        torch = f"torch {build.torch_version}" if build and build.torch_version else "build"
        counts = ", ".join(f"{status} {n}" for status, n in done.verdicts)
        verdict = f"verdicts against {done.against[:8]}: {counts}" if done.against else done.no_verdict
        counted = f"{len(done.records)} records, {verdict}"
        print(f"[{number}/{len(commits)}] {torch} ({commit[:8]}): {counted} -> {path}")
        if done.skipped:
            print(f"  {done.skipped} skipped where measured: no number, none written", file=sys.stderr)
        if done.failed:
            print(f"  {len(done.failed)} figure(s) failed: no number, none written:", file=sys.stderr)
            for name in done.failed:
                print(f"    {name}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "export",
        help="write each build's figures as records of PyTorch's benchmark database (HUD)",
        description=(export.__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument(
        "builds", nargs="*", metavar="BUILD",
        help="builds to export: branch, tag or commit of the history (default: every build with results)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("export"),
        help="folder for the records: OUT/MACHINE/COMMIT.json, one JSON list per build (default: ./export)",
    )  # fmt: skip
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument("--machine", help="asv machine name (needed when results hold several machines)")
    parser.add_argument("--env", help="export only this asv environment")
    add_damage_option(parser)
    parser.set_defaults(func=_cmd_export)
