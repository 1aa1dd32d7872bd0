"""asv's build step for torch: turn the checked-out commit into one torch wheel.

asv checks out a commit of the configured ``repo`` into ``{build_dir}`` and runs
``build_command``; the install step (`benchkit.history.builds.install`) installs the single wheel it finds
in ``{build_cache_dir}``. Two kinds of ``repo`` are supported by one build step:

* a *wheel history* (``benchkit history init``): every commit holds a
  ``benchkit-build.json`` naming one wheel by file name and sha256. The wheel
  comes from benchkit's wheel cache, a ``BENCHKIT_WHEELHOUSE`` folder, or -- for
  builds recorded as a requirement such as ``torch==2.14.1`` -- the package index.
* a *PyTorch source checkout*: a wheel in a ``BENCHKIT_WHEELHOUSE`` folder whose
  ``torch.version.git_version`` equals the commit is used as is (building
  PyTorch takes hours; CI and developers usually have the wheel already);
  otherwise the checkout is built with ``pip wheel --no-build-isolation``.

asv runs it in its environment as ``python -m benchkit.cli.build_step build|verify|uninstall``
(see `asv_build_settings`). This module imports only the standard library and
benchkit helpers that never import torch, because it runs before torch exists there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchkit import settings
from benchkit.errors import UserError
from benchkit.history.builds.wheels import (
    WHEELHOUSE_ENV,
    download_requirement,
    file_sha256,
    find_wheel_by_git_version,
    link_or_copy,
    read_wheel_info,
    store_wheel,
    stored_wheel_path,
    wheel_store,
    wheelhouses,
)

BUILD_FILE = "benchkit-build.json"
BUILD_FILE_FORMAT = 1
SOURCE_BUILD_ENV = settings.Var.SOURCE_BUILD.value  # "0" forbids building torch from source

# Settings that decide what a PyTorch source build produces; echoed in the build log.
_SOURCE_FLAG_PREFIXES = ("USE_", "BUILD_", "CMAKE_", "TORCH_", "MAX_JOBS", "DEBUG", "REL_WITH_DEB_INFO")
_COMPILER_LAUNCHER_VARS = (
    "CMAKE_C_COMPILER_LAUNCHER",
    "CMAKE_CXX_COMPILER_LAUNCHER",
    "CMAKE_CUDA_COMPILER_LAUNCHER",
)


def _log(message: str) -> None:
    print(f"benchkit-build: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------- build records


@dataclasses.dataclass(frozen=True)
class BuildRecord:
    """One commit of a wheel history: which torch build it stands for.

    Only portable facts are recorded (no local paths), so the same sequence of
    builds gives the same commit hashes on every machine and their results merge.
    """

    torch_version: str
    git_version: str
    build_date: str  # ISO 8601, UTC
    wheel_filename: str
    wheel_sha256: str
    wheel_size: int
    requirement: str | None = None  # e.g. "torch==2.14.1": fetchable from the package index
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"format": BUILD_FILE_FORMAT, **dataclasses.asdict(self)}
        return {k: v for k, v in data.items() if v is not None}

    @classmethod
    def from_json(cls, data: object, where: str) -> BuildRecord:
        if not isinstance(data, dict) or data.get("format") != BUILD_FILE_FORMAT:
            raise UserError(f"{where}: not a benchkit build record of format {BUILD_FILE_FORMAT}")
        fields = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in fields})
        except TypeError as e:
            raise UserError(f"{where}: incomplete build record ({e})") from None

    @classmethod
    def load(cls, path: Path) -> BuildRecord:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UserError(f"{path}: cannot read build record ({e})") from None
        return cls.from_json(data, str(path))


def resolve_record_wheel(
    record: BuildRecord, where: str, history: settings.HistorySettings | None = None
) -> Path:
    """Find the exact wheel a build record names (verified by sha256), fetching it if possible."""
    stored = stored_wheel_path(record.wheel_sha256, record.wheel_filename)
    if stored.is_file():
        if file_sha256(stored) == record.wheel_sha256:
            return stored
        _log(f"{where}: the stored {stored} does not match its sha256 (damaged?); fetching it again")
        stored.unlink()
    for folder in wheelhouses(history):
        candidate = folder / record.wheel_filename
        if candidate.is_file() and file_sha256(candidate) == record.wheel_sha256:
            return store_wheel(candidate, record.wheel_sha256)
    if record.requirement:
        with tempfile.TemporaryDirectory(prefix="benchkit-dl-", dir=wheel_store()) as tmp:
            downloaded = download_requirement(record.requirement, Path(tmp))
            sha = file_sha256(downloaded)
            if sha != record.wheel_sha256:
                raise UserError(
                    f"{where}: the package index now serves {downloaded.name} (sha256 {sha[:12]}) for "
                    f"{record.requirement}, not the recorded {record.wheel_filename} "
                    f"(sha256 {record.wheel_sha256[:12]})"
                )
            return store_wheel(downloaded, sha)
    raise UserError(
        f"{where}: wheel {record.wheel_filename} (sha256 {record.wheel_sha256[:12]}) is neither in the "
        f"benchkit wheel cache ({wheel_store()}) nor in a {WHEELHOUSE_ENV} folder; run "
        f"`benchkit history add /path/to/{record.wheel_filename}` on this machine or put its folder "
        f"in {WHEELHOUSE_ENV}"
    )


# ----------------------------------------------------------------------- planning


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """What the build step will do for one commit (decided without side effects)."""

    kind: str  # "history-wheel" | "wheelhouse" | "source"
    commit: str
    reason: str
    wheel: Path | None = None  # for the two wheel kinds
    record: BuildRecord | None = None  # for history-wheel
    command: tuple[str, ...] = ()  # for source
    env: tuple[tuple[str, str], ...] = ()  # variables the source build adds to the environment
    prerequisites: tuple[str, ...] = ()  # pip install command run before a source build

    def describe(self) -> str:
        lines = [f"commit {self.commit[:12]}: {self.kind} ({self.reason})"]
        if self.wheel:
            lines.append(f"  wheel: {self.wheel}")
        if self.prerequisites:
            lines.append(f"  prerequisites: {' '.join(self.prerequisites)}")
        if self.command:
            lines.append(f"  command: {' '.join(self.command)}")
        lines += [f"  {key}={value}" for key, value in self.env]
        return "\n".join(lines)


def is_torch_source(build_dir: Path) -> bool:
    return (build_dir / "setup.py").is_file() and (build_dir / "torch" / "__init__.py").is_file()


def compiler_launcher_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Route compilers through sccache or ccache when present and the user chose none.

    A compiler cache makes rebuilding neighbouring commits minutes instead of hours.
    PyTorch's setup passes CMAKE_* variables on to CMake.
    """
    if any(var in environ for var in _COMPILER_LAUNCHER_VARS):
        return {}
    path = environ.get("PATH")
    launcher = shutil.which("sccache", path=path) or shutil.which("ccache", path=path)
    return dict.fromkeys(_COMPILER_LAUNCHER_VARS, launcher) if launcher else {}


def source_build_plan(
    build_dir: Path, commit: str, cache_dir_: Path, environ: Mapping[str, str]
) -> BuildPlan:
    added: dict[str, str] = {}
    if "MAX_JOBS" not in environ:
        added["MAX_JOBS"] = str(os.cpu_count() or 1)
    added.update(compiler_launcher_env(environ))
    requirements = next(
        (
            build_dir / name
            for name in ("requirements-build.txt", "requirements.txt")
            if (build_dir / name).is_file()
        ),
        None,
    )
    prerequisites = (
        ("python", "-m", "pip", "install", "-r", str(requirements)) if requirements is not None else ()
    )
    command = (
        "python", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
        "--wheel-dir", str(cache_dir_), str(build_dir),
    )  # fmt: skip
    flags = {k: v for k, v in environ.items() if k.startswith(_SOURCE_FLAG_PREFIXES)}
    flags.update(added)
    return BuildPlan(
        kind="source",
        commit=commit,
        reason="no wheel with this git_version in the wheelhouse; building from source",
        command=command,
        env=tuple(sorted(flags.items())),
        prerequisites=prerequisites,
    )


def plan_build(
    build_dir: Path, commit: str, cache_dir_: Path, environ: Mapping[str, str] | None = None
) -> BuildPlan:
    """Decide how to obtain the torch wheel for `commit` checked out in `build_dir` (``environ``:
    the build's environment, this process's by default; benchkit's settings are read from it)."""
    environ = os.environ if environ is None else environ
    history = settings.read(environ).history
    record_path = build_dir / BUILD_FILE
    if record_path.is_file():
        record = BuildRecord.load(record_path)
        where = f"history commit {commit[:12]} ({record.torch_version})"
        wheel = resolve_record_wheel(record, where, history)
        return BuildPlan(
            "history-wheel", commit, f"wheel history entry {record.torch_version}", wheel, record
        )
    if not is_torch_source(build_dir):
        raise UserError(
            f"commit {commit[:12]}: nothing to build -- {build_dir} has no {BUILD_FILE} (a wheel history "
            "commit, see `benchkit history`) and is not a PyTorch source checkout (setup.py and torch/)"
        )
    folders = wheelhouses(history)
    # then benchkit's wheel store: every wheel a history ever recorded, and earlier source builds
    found = find_wheel_by_git_version(
        [*folders, *sorted(p for p in wheel_store().iterdir() if p.is_dir())], commit
    )
    if found is not None:
        return BuildPlan(
            "wheelhouse", commit, f"prebuilt wheel {found.version} matches git_version", found.path
        )
    if not history.source_build:
        searched = ", ".join(map(str, folders)) or f"no wheelhouse ({WHEELHOUSE_ENV} is unset)"
        raise UserError(
            f"commit {commit[:12]}: no torch wheel with this git_version in {searched}, and source "
            f"builds are disabled ({SOURCE_BUILD_ENV}=0)"
        )
    return source_build_plan(build_dir, commit, cache_dir_, environ)


# ---------------------------------------------------------------------- execution


def _run_logged(command: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> None:
    _log("running " + " ".join(command))
    result = subprocess.run(list(command), env=dict(env), cwd=cwd)
    if result.returncode != 0:
        raise UserError(f"`{' '.join(command)}` failed with exit code {result.returncode}")


def execute_plan(plan: BuildPlan, cache_dir_: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Carry out `plan`; returns the single wheel left in asv's build cache folder."""
    environ = dict(os.environ if environ is None else environ)
    cache_dir_.mkdir(parents=True, exist_ok=True)
    for stale in cache_dir_.glob("*.whl"):
        stale.unlink()  # asv's {wheel_file} needs exactly one wheel here
    if plan.wheel is not None:
        target = link_or_copy(plan.wheel, cache_dir_ / plan.wheel.name)
        _log(f"commit {plan.commit[:12]}: using {plan.wheel}")
        return target
    env = {**environ, **dict(plan.env)}
    start = time.monotonic()
    if plan.prerequisites:
        _run_logged(plan.prerequisites, env)
    _run_logged(plan.command, env)
    built = sorted(cache_dir_.glob("torch-*.whl"))
    if len(built) != 1:
        raise UserError(f"source build of {plan.commit[:12]} left {len(built)} torch wheels in {cache_dir_}")
    info = read_wheel_info(built[0])
    _log(f"built {info.filename} (git_version {info.git_version[:12]}) in {time.monotonic() - start:.0f} s")
    folders = wheelhouses(settings.read(environ).history)
    if folders:  # keep source builds: other environments and machines can reuse them
        kept = link_or_copy(built[0], folders[0] / built[0].name)
        _log(f"kept a copy in wheelhouse {kept}")
    stored = store_wheel(built[0], file_sha256(built[0]))  # found by git_version next time
    _log(f"kept in the wheel store: {stored}")
    return built[0]


# -------------------------------------------------------------- install checking


# -------------------------------------------------------------- asv integration


# The asv plugin that records a new runner's machine when nobody can answer asv's questions.
ASV_PLUGIN = ".benchkit.history.asv_machine"


def asv_build_settings(
    benchkit_root: str = "{conf_dir}", install_timeout: int = 4 * 3600
) -> dict[str, object]:
    """The asv.conf.json keys that route builds through this module.

    `benchkit_root` is the folder holding the ``benchkit`` package; asv's
    ``{conf_dir}`` placeholder works when asv.conf.json sits in the benchkit checkout.
    ``in-dir`` makes that folder the working directory, so ``python -m`` imports
    this checkout's benchkit in the asv environment (asv drops PYTHONPATH there).
    The install timeout covers a source build of PyTorch (hours, not asv's 10 minutes).
    """
    step = f"in-dir={benchkit_root} python -m benchkit.cli.build_step"
    here = "--conf-dir {conf_dir}"  # whose job lock the step checks (`benchkit.history.lock`)
    return {
        "install_timeout": install_timeout,
        "build_command": [
            f"{step} build {here} --build-dir {{build_dir}} --cache-dir {{build_cache_dir}} "
            "--commit {commit}"
        ],
        "install_command": [
            f"{step} install {here} --wheel {{wheel_file}}",
            f"{step} verify {here} --wheel {{wheel_file}}",
        ],
        "uninstall_command": [f"{step} uninstall {here}"],
    }


# asv publish's own regression search, which benchkit's Regressions page replaces (asv's view
# of it is out of the site's bar): null for every benchmark skips it, about 40 % of asv's
# publish on a long history (lab/bench_publish.py).
ASV_PUBLISH_SETTINGS: dict[str, object] = {"regressions_first_commits": {".*": None}}


def history_project_config(benchkit_root: str, env_dir: str, history: str = "history") -> dict[str, object]:
    """asv.conf.json for a torch history in the folder beside it (`history`), measured by the
    benchkit checkout at `benchkit_root`: the repository's own asv.conf.json, with paths
    to place it anywhere (tests, scripts, other projects)."""
    return {
        "version": 1,
        "project": "torch",
        "repo": history,
        "branches": ["main"],
        "environment_type": "virtualenv",
        "matrix": {"req": {"numpy": "", "tqdm": ""}},  # what the suite imports besides torch
        "benchmark_dir": f"{benchkit_root}/benchmarks",
        "env_dir": env_dir,
        "results_dir": "results",
        "html_dir": "html",
        "launch_method": "forkserver",
        # asv imports it from the config's folder or the installed benchkit: every asv
        # command of this config needs benchkit importable by asv's python.
        "plugins": [ASV_PLUGIN],
        **ASV_PUBLISH_SETTINGS,
        **asv_build_settings(benchkit_root),
    }
