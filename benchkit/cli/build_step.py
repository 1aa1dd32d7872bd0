"""asv's build, install-check and uninstall commands for torch (see `benchkit.history.builds.build_step`).

Not a `benchkit` subcommand: asv.conf.json runs ``python -m benchkit.cli.build_step ...``
inside each asv environment, where torch may not be installed yet.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.builds import build_step
from benchkit.history.builds.build_step import execute_plan, plan_build
from benchkit.history.builds.install import install_wheel, prepare_tree, remove_torch
from benchkit.history.builds.wheels import verify_installed
from benchkit.history.lock import check_asv_step
from benchkit.util import atomic_write_json


def _log(message: str) -> None:
    print(f"benchkit-build: {message}", file=sys.stderr, flush=True)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchkit.cli.build_step", description=(build_step.__doc__ or "").split("\n")[0]
    )
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("build", "plan"):
        p = sub.add_parser(
            name, help="obtain the wheel for a commit" if name == "build" else "show the decision"
        )
        p.add_argument("--build-dir", type=Path, required=True)
        p.add_argument("--cache-dir", type=Path, required=True)
        p.add_argument("--commit", required=True)
    install = sub.add_parser("install", help="install this wheel (a .pth line naming its unpacked copy)")
    install.add_argument("--wheel", type=Path, required=True)
    tree = sub.add_parser(
        "tree", help="install this wheel's dependencies and print the folder of its unpacked copy"
    )
    tree.add_argument("--wheel", type=Path, required=True)
    verify = sub.add_parser("verify", help="check the installed torch is exactly this wheel")
    verify.add_argument("--wheel", type=Path, required=True)
    sub.add_parser("uninstall", help="remove torch from this environment completely")
    for action in sub.choices.values():
        action.add_argument(
            "--conf-dir",
            type=Path,
            default=Path.cwd(),
            help="the asv config's folder, whose benchkit job lock is checked (default: here)",
        )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        if args.action != "plan":  # a plan changes nothing
            check_asv_step(args.conf_dir.resolve())
        if args.action in ("build", "plan"):
            plan = plan_build(args.build_dir.resolve(), args.commit, args.cache_dir.resolve())
            _log(plan.describe())
            if args.action == "build":
                execute_plan(plan, args.cache_dir.resolve())
                atomic_write_json(
                    args.cache_dir / "benchkit-plan.json", {"kind": plan.kind, "commit": plan.commit}
                )
        elif args.action == "install":
            install_wheel(args.wheel)
        elif args.action == "tree":
            print(prepare_tree(args.wheel))
        elif args.action == "verify":
            checked = verify_installed(args.wheel)
            _log(f"installed torch matches {args.wheel.name} ({checked} Python files checked)")
        else:
            remove_torch()
    except UserError as e:
        print(f"benchkit-build: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
