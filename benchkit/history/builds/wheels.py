"""torch wheels: what a wheel holds (version, git commit), where benchkit keeps them
(a content-addressed store, wheelhouses, the package index), and checking that an
installed torch is exactly a wheel's files. Standard library only (runs before torch exists).
"""

from __future__ import annotations

import ast
import base64
import contextlib
import csv
import dataclasses
import datetime as dt
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from benchkit import settings
from benchkit.errors import UserError
from benchkit.settings import HistorySettings, Var
from benchkit.util import atomic_path, cache_dir

WHEELHOUSE_ENV = Var.WHEELHOUSE.value


def _log(message: str) -> None:
    print(f"benchkit-build: {message}", file=sys.stderr, flush=True)


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
    build_date = dt.datetime(*entry.date_time, tzinfo=dt.UTC)
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


def link_or_copy(source: Path, target: Path) -> Path:
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


def wheelhouses(history: HistorySettings | None = None) -> list[Path]:
    """The wheelhouse folders of the settings (this process's by default); each must exist."""
    folders = list((history or settings.current().history).wheelhouses)
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


def site_folders() -> list[Path]:
    """This interpreter's site-packages folders (pure and platform-specific, once each)."""
    paths = sysconfig.get_paths()
    return sorted({Path(paths["purelib"]), Path(paths["platlib"])})


def _imported_from() -> list[Path]:
    """The folder ``import torch`` would load torch from here (found, not imported), if any."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return site_folders()
    return [Path(spec.origin).resolve().parent.parent]


def dist_info_member(wheel: zipfile.ZipFile, name: str) -> str | None:
    """The archive path of ``<dist>.dist-info/<name>`` (e.g. ``RECORD``, ``METADATA``), if present."""
    return next((n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")), None)


def _record_hashes(wheel: zipfile.ZipFile) -> dict[str, str]:
    record_name = dist_info_member(wheel, "RECORD")
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
    installed file, in the folder ``import torch`` finds first (or `site_dirs`), so
    a half-replaced install, or a torch installed elsewhere that shadows this one,
    cannot be measured by mistake. Returns the number of files checked.
    """
    site_dirs = list(site_dirs) if site_dirs is not None else _imported_from()
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


# ------------------------------------------------------------- patched wheels


def patch_wheel(source: Path, dest: Path, files: Mapping[str, bytes]) -> Path:
    """Copy a wheel with some files replaced (or added), keeping its RECORD truthful.

    Lets a Python-level change to torch be measured without a source build --
    and gives tests an honest injected regression: a real torch build whose code
    does more work. Uses the `zip` tool when present (it copies untouched members
    without recompressing them), else rewrites the archive with zipfile.
    """
    with zipfile.ZipFile(source) as wheel:
        record_name = dist_info_member(wheel, "RECORD")
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


def patch_wheel_module(source: Path, dest: Path, member: str, edit: Callable[[str], str]) -> Path:
    """Copy a wheel with one Python file rewritten by `edit` (its text in, new text out)."""
    with zipfile.ZipFile(source) as wheel:
        text = wheel.read(member).decode()
    dest.parent.mkdir(parents=True, exist_ok=True)
    return patch_wheel(source, dest, {member: edit(text).encode()})
