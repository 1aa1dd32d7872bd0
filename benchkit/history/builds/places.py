"""Where `benchkit main` measures a build's wall-time rounds without installing it: each asv
environment's interpreter, with the build's unpacked tree (`benchkit.history.builds.install`)
on its path (`benchkit.measure.walltime.batch.BuildPlace`).

A build's wheel comes from its history commit's build record (`benchkit.history.builds.repo`),
or, for a history of PyTorch source commits, from the wheel asv built into its build cache.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.history.builds.build_step import resolve_record_wheel
from benchkit.history.builds.repo import HistoryRepo, repo_from_asv_config
from benchkit.history.builds.wheels import read_wheel_info
from benchkit.measure.walltime.batch import BuildPlace
from benchkit.util import REPO_ROOT


def environments(conf: Any, conf_path: Path, ensure: Callable[[], None]) -> list[tuple[str, Path]]:
    """(name, python) of every environment of asv's config; `ensure` (``asv setup``) is called
    once when one does not exist yet."""
    from asv import environment

    def found() -> list[tuple[str, Path | None]]:
        pythons: list[tuple[str, Path | None]] = []
        for env in environment.get_environments(conf, None):
            try:
                pythons.append((env.name, Path(env.find_executable("python"))))
            except OSError:
                pythons.append((env.name, None))
        return pythons

    envs = found()
    if any(python is None for _, python in envs):
        ensure()
        envs = found()
    missing = [name for name, python in envs if python is None]
    if missing:
        raise UserError(f"asv environment(s) {', '.join(missing)} of {conf_path} could not be set up")
    return [(name, python) for name, python in envs if python is not None]


def wheel_of(conf: Any, conf_path: Path, commit: str, env_path: Path) -> Path:
    """The torch wheel of history commit `commit`: its build record's, else asv's built one."""
    repo = HistoryRepo(repo_from_asv_config(conf_path))
    record_error = ""
    try:
        record = repo.record(commit)
        return resolve_record_wheel(record, f"history commit {commit[:12]} ({record.torch_version})")
    except UserError as e:
        record_error = str(e)
    built = sorted((env_path / "asv-build-cache" / commit).glob("torch-*.whl"))
    if built:
        return built[0]
    raise UserError(f"no torch wheel for commit {commit[:12]}: {record_error}")


def place_of(
    conf: Any, conf_path: Path, commit: str, env_name: str, python: Path, environ: Mapping[str, str]
) -> BuildPlace:
    """Build `commit` ready to run in environment `env_name`: its dependencies installed there
    (as asv's install does) and its unpacked tree."""
    wheel = wheel_of(conf, conf_path, commit, python.parent.parent)
    command = [str(python), "-m", "benchkit.cli.build_step", "tree", "--wheel", str(wheel),
               "--conf-dir", str(conf_path.parent.resolve())]  # fmt: skip
    env = {**environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    if done.returncode != 0 or not done.stdout.strip():
        raise UserError(
            f"preparing {wheel.name} in asv environment {env_name}: {done.stderr.strip()[-1500:]}"
        )
    tree = Path(done.stdout.strip().splitlines()[-1])
    return BuildPlace(commit, env_name, str(python), tree, read_wheel_info(wheel).git_version)


def places_of(
    conf: Any, conf_path: Path, commits: Sequence[str], environ: Mapping[str, str], ensure: Callable[[], None]
) -> dict[str, list[BuildPlace]]:
    """Every commit's place in every environment: environment name -> places in `commits`' order."""
    return {
        name: [place_of(conf, conf_path, commit, name, python, environ) for commit in commits]
        for name, python in environments(conf, conf_path, ensure)
    }
