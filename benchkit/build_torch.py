"""asv's build step for torch: turn the checked-out commit into one torch wheel.

asv checks out a commit of the configured ``repo`` into ``{build_dir}`` and runs
``build_command``; the install step then pip-installs the single wheel it finds
in ``{build_cache_dir}``. Two kinds of ``repo`` are supported by one build step:

* a *wheel history* (``benchkit history init``): every commit holds a
  ``benchkit-build.json`` naming one wheel by file name and sha256. The wheel
  comes from benchkit's wheel cache, a ``BENCHKIT_WHEELHOUSE`` folder, or -- for
  builds recorded as a requirement such as ``torch==2.14.1`` -- the package index.
* a *PyTorch source checkout*: a wheel in a ``BENCHKIT_WHEELHOUSE`` folder whose
  ``torch.version.git_version`` equals the commit is used as is (building
  PyTorch takes hours; CI and developers usually have the wheel already);
  otherwise the checkout is built with ``pip wheel --no-build-isolation``.

Run inside asv's environment as ``python -m benchkit.build_torch build|verify|uninstall``
(see `asv_build_settings`). This module imports only the standard library and
benchkit helpers that never import torch, because it runs before torch exists there.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import csv
import dataclasses
import datetime as dt
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from benchkit.errors import UserError
from benchkit.util import atomic_path, atomic_write_json, cache_dir

BUILD_FILE = "benchkit-build.json"
BUILD_FILE_FORMAT = 1
WHEELHOUSE_ENV = "BENCHKIT_WHEELHOUSE"
SOURCE_BUILD_ENV = "BENCHKIT_SOURCE_BUILD"  # "0" forbids building torch from source

# Settings that decide what a PyTorch source build produces; echoed in the build log.
_SOURCE_FLAG_PREFIXES = ("USE_", "BUILD_", "CMAKE_", "TORCH_", "MAX_JOBS", "DEBUG", "REL_WITH_DEB_INFO")
_COMPILER_LAUNCHER_VARS = (
    "CMAKE_C_COMPILER_LAUNCHER",
    "CMAKE_CXX_COMPILER_LAUNCHER",
    "CMAKE_CUDA_COMPILER_LAUNCHER",
)


def _log(message: str) -> None:
    print(f"benchkit-build: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- wheels


@dataclasses.dataclass(frozen=True)
class WheelInfo:
    """What a torch wheel says about itself, read from the zip without installing it."""

    path: Path
    version: str
    git_version: str
    cuda: str | None
    build_date: dt.datetime  # from the zip entry of torch/version.py, generated at build time

    @property
    def filename(self) -> str:
        return self.path.name


def _literal_assignments(source: str, where: str) -> dict[str, object]:
    """Module-level ``NAME = <literal>`` assignments of a Python file, without running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise UserError(f"{where}: cannot parse torch/version.py ({e.msg})") from None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            with contextlib.suppress(ValueError):
                values[target.id] = ast.literal_eval(value)
    return values


def read_wheel_info(path: str | os.PathLike[str]) -> WheelInfo:
    """Read version, upstream commit and build date of a torch wheel.

    Raises `UserError` naming the file when it is missing, not a zip, or not torch.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"wheel {path}: no such file")
    if not zipfile.is_zipfile(path):
        raise UserError(f"{path} is not a wheel (not a zip archive)")
    with zipfile.ZipFile(path) as wheel:
        try:
            entry = wheel.getinfo("torch/version.py")
        except KeyError:
            dist = sorted({n.split("/")[0] for n in wheel.namelist() if ".dist-info/" in n})
            found = f" (it contains {', '.join(dist)})" if dist else ""
            raise UserError(f"{path} is not a torch wheel: it has no torch/version.py{found}") from None
        source = wheel.read(entry).decode("utf-8", "replace")
    values = _literal_assignments(source, str(path))
    version, git_version = values.get("__version__"), values.get("git_version")
    if not isinstance(version, str) or not isinstance(git_version, str):
        raise UserError(f"{path}: torch/version.py lacks __version__ or git_version")
    cuda = values.get("cuda")
    build_date = dt.datetime(*entry.date_time, tzinfo=dt.timezone.utc)
    return WheelInfo(path, version, git_version, cuda if isinstance(cuda, str) else None, build_date)


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_store() -> Path:
    """Content-addressed wheel cache shared by history commands and every asv environment."""
    return cache_dir("wheels")


def stored_wheel_path(sha256: str, filename: str) -> Path:
    return wheel_store() / sha256[:32] / filename


def _link_or_copy(source: Path, target: Path) -> Path:
    """Hard-link (wheels are large; the store and asv's envs usually share a disk), else copy."""
    if target.exists():
        return target
    with atomic_path(target) as tmp:
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
    return target


def store_wheel(path: Path, sha256: str) -> Path:
    """Copy a wheel into the store (idempotent) and return its stored path.

    A copy, not a hard link: the user's own file may be rewritten in place later,
    and a link would silently change the stored build with it.
    """
    target = stored_wheel_path(sha256, path.name)
    if not target.exists():
        with atomic_path(target) as tmp:
            shutil.copyfile(path, tmp)
    return target


def wheelhouses(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Folders named by BENCHKIT_WHEELHOUSE (os.pathsep-separated); each must exist."""
    environ = os.environ if environ is None else environ
    folders = [Path(p).expanduser() for p in environ.get(WHEELHOUSE_ENV, "").split(os.pathsep) if p]
    for folder in folders:
        if not folder.is_dir():
            raise UserError(f"wheelhouse {folder} (from {WHEELHOUSE_ENV}) does not exist or is not a folder")
    return folders


def _torch_wheels(folders: Iterable[Path]) -> Iterator[Path]:
    for folder in folders:
        yield from sorted(folder.glob("torch-*.whl"))


def find_wheel_by_git_version(folders: Sequence[Path], commit: str) -> WheelInfo | None:
    """The first torch wheel in `folders` built from upstream commit `commit`."""
    commit = commit.lower()
    for candidate in _torch_wheels(folders):
        try:
            info = read_wheel_info(candidate)
        except UserError as e:
            _log(f"skipping {candidate}: {e}")
            continue
        if info.git_version.lower() == commit or (len(commit) >= 7 and info.git_version.startswith(commit)):
            return info
    return None


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


def download_requirement(requirement: str, dest: Path, python: str = sys.executable) -> Path:
    """Fetch the wheel (without dependencies) that pip picks for `requirement` with `python`."""
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    _log(f"downloading {requirement} with pip (no dependencies)")
    command = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest)]
    result = subprocess.run(
        [*command, requirement], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if result.returncode != 0:
        tail = "\n".join(result.stdout.strip().splitlines()[-5:])
        raise UserError(f"cannot download {requirement} from the package index:\n{tail}")
    new = sorted(set(dest.glob("*.whl")) - before) or sorted(dest.glob("torch-*.whl"))
    if not new:
        raise UserError(f"pip downloaded no wheel for {requirement} into {dest}")
    return new[0]


def resolve_record_wheel(record: BuildRecord, where: str, environ: Mapping[str, str] | None = None) -> Path:
    """Find the exact wheel a build record names (verified by sha256), fetching it if possible."""
    stored = stored_wheel_path(record.wheel_sha256, record.wheel_filename)
    if stored.is_file():
        if file_sha256(stored) == record.wheel_sha256:
            return stored
        _log(f"{where}: the stored {stored} does not match its sha256 (damaged?); fetching it again")
        stored.unlink()
    for folder in wheelhouses(environ):
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
    """Decide how to obtain the torch wheel for `commit` checked out in `build_dir`."""
    environ = os.environ if environ is None else environ
    record_path = build_dir / BUILD_FILE
    if record_path.is_file():
        record = BuildRecord.load(record_path)
        where = f"history commit {commit[:12]} ({record.torch_version})"
        wheel = resolve_record_wheel(record, where, environ)
        return BuildPlan(
            "history-wheel", commit, f"wheel history entry {record.torch_version}", wheel, record
        )
    if not is_torch_source(build_dir):
        raise UserError(
            f"commit {commit[:12]}: nothing to build -- {build_dir} has no {BUILD_FILE} (a wheel history "
            "commit, see `benchkit history`) and is not a PyTorch source checkout (setup.py and torch/)"
        )
    folders = wheelhouses(environ)
    found = find_wheel_by_git_version(folders, commit)
    if found is not None:
        return BuildPlan(
            "wheelhouse", commit, f"prebuilt wheel {found.version} matches git_version", found.path
        )
    if environ.get(SOURCE_BUILD_ENV, "1") == "0":
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
        target = _link_or_copy(plan.wheel, cache_dir_ / plan.wheel.name)
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
    folders = wheelhouses(environ)
    if folders:  # keep source builds: other environments and machines can reuse them
        kept = _link_or_copy(built[0], folders[0] / built[0].name)
        _log(f"kept a copy in wheelhouse {kept}")
    return built[0]


# -------------------------------------------------------------- install checking


def _site_packages() -> list[Path]:
    paths = sysconfig.get_paths()
    return sorted({Path(paths["purelib"]), Path(paths["platlib"])})


def _record_hashes(wheel: zipfile.ZipFile) -> dict[str, str]:
    record_name = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record_name is None:
        return {}
    rows = csv.reader(io.StringIO(wheel.read(record_name).decode()))
    return {row[0]: row[1] for row in rows if len(row) >= 2 and row[1].startswith("sha256=")}


def _urlsafe_sha256(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def verify_installed(wheel_path: Path, site_dirs: Sequence[Path] | None = None) -> int:
    """Check that the torch on sys.path is exactly `wheel_path`'s Python code.

    Compares every ``torch/**.py`` file the wheel's RECORD lists with the
    installed file, so a half-replaced install of an older commit cannot be
    measured by mistake. Returns the number of files checked.
    """
    site_dirs = list(site_dirs) if site_dirs is not None else _site_packages()
    root = next((d for d in site_dirs if (d / "torch" / "version.py").is_file()), None)
    if root is None:
        raise UserError(
            f"no torch installed in {', '.join(map(str, site_dirs))} after installing {wheel_path}"
        )
    with zipfile.ZipFile(wheel_path) as wheel:
        hashes = {
            n: h for n, h in _record_hashes(wheel).items() if n.startswith("torch/") and n.endswith(".py")
        }
        if not hashes:  # a wheel without RECORD: compare version.py alone
            hashes = {"torch/version.py": None}  # type: ignore[dict-item]
            expected_version = wheel.read("torch/version.py")
            if (root / "torch/version.py").read_bytes() != expected_version:
                raise UserError(f"installed torch in {root} is not {wheel_path.name}")
            return 1
    mismatched = [name for name, digest in hashes.items() if not (root / name).is_file()
                  or _urlsafe_sha256(root / name) != digest]  # fmt: skip
    if mismatched:
        shown = ", ".join(mismatched[:3]) + (
            f" and {len(mismatched) - 3} more" if len(mismatched) > 3 else ""
        )
        raise UserError(f"installed torch in {root} differs from {wheel_path.name}: {shown}")
    return len(hashes)


def remove_torch(python: str = sys.executable) -> None:
    """Uninstall torch and remove whatever pip left behind (caches, stray files)."""
    subprocess.run([python, "-m", "pip", "uninstall", "-y", "torch"], stdout=subprocess.DEVNULL)
    for site in _site_packages():
        for leftover in [site / "torch", *site.glob("torch-*.dist-info")]:
            if leftover.exists():
                _log(f"removing leftover {leftover}")
                shutil.rmtree(leftover, ignore_errors=True)


# ------------------------------------------------------------- patched wheels


def patch_wheel(source: Path, dest: Path, files: Mapping[str, bytes]) -> Path:
    """Copy a wheel with some files replaced (or added), keeping its RECORD truthful.

    Lets a Python-level change to torch be measured without a source build --
    and gives tests an honest injected regression: a real torch build whose code
    does more work. Uses the `zip` tool when present (it copies untouched members
    without recompressing them), else rewrites the archive with zipfile.
    """
    with zipfile.ZipFile(source) as wheel:
        record_name = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
        record_text = wheel.read(record_name).decode() if record_name else ""
    rows = [row for row in csv.reader(io.StringIO(record_text)) if row and row[0] not in files]
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append([name, f"sha256={digest}", str(len(data))])
    new_record = io.StringIO()
    csv.writer(new_record, lineterminator="\n").writerows(rows)
    replaced = dict(files)
    if record_name:
        replaced[record_name] = new_record.getvalue().encode()
    with atomic_path(dest) as tmp:
        zip_tool = shutil.which("zip")
        if zip_tool:
            shutil.copyfile(source, tmp)
            with tempfile.TemporaryDirectory(prefix="benchkit-patch-") as staging:
                for name, data in replaced.items():
                    (Path(staging) / name).parent.mkdir(parents=True, exist_ok=True)
                    (Path(staging) / name).write_bytes(data)
                subprocess.run([zip_tool, "-q", "-X", str(tmp), *replaced], cwd=staging, check=True)
        else:
            with (
                zipfile.ZipFile(source) as src,
                zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out,
            ):
                for item in src.infolist():
                    if item.filename not in replaced:
                        out.writestr(item, src.read(item))
                for name, data in replaced.items():
                    out.writestr(name, data)
    return dest


# -------------------------------------------------------------- asv integration


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
    step = f"in-dir={benchkit_root} python -m benchkit.build_torch"
    return {
        "install_timeout": install_timeout,
        "build_command": [
            f"{step} build --build-dir {{build_dir}} --cache-dir {{build_cache_dir}} --commit {{commit}}"
        ],
        "install_command": [
            "in-dir={env_dir} python -m pip install {wheel_file}",
            f"{step} verify --wheel {{wheel_file}}",
        ],
        "uninstall_command": [f"{step} uninstall"],
    }


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchkit.build_torch", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("build", "plan"):
        p = sub.add_parser(
            name, help="obtain the wheel for a commit" if name == "build" else "show the decision"
        )
        p.add_argument("--build-dir", type=Path, required=True)
        p.add_argument("--cache-dir", type=Path, required=True)
        p.add_argument("--commit", required=True)
    verify = sub.add_parser("verify", help="check the installed torch is exactly this wheel")
    verify.add_argument("--wheel", type=Path, required=True)
    sub.add_parser("uninstall", help="remove torch from this environment completely")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        if args.action in ("build", "plan"):
            plan = plan_build(args.build_dir.resolve(), args.commit, args.cache_dir.resolve())
            _log(plan.describe())
            if args.action == "build":
                execute_plan(plan, args.cache_dir.resolve())
                atomic_write_json(
                    args.cache_dir / "benchkit-plan.json", {"kind": plan.kind, "commit": plan.commit}
                )
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
