"""The torch installed in this Python, as a build the history can hold.

When no source pip knows holds the installed torch's wheel, the installed files
are packed back into one: exactly the files its ``RECORD`` lists (each checked
against the recorded sha256, so an edited install is refused), in a fixed order
with fixed zip metadata, so the same install gives the same wheel bytes.
Standard library only (torch is not imported).
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import datetime as dt
import hashlib
import importlib.metadata
import io
import os
import zipfile
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.builds.flavour import CPU, Flavour, of_version_file
from benchkit.history.builds.wheels import _literal_assignments
from benchkit.util import atomic_path, cache_dir, content_key

# Files the installer writes, not the wheel.
_INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


@dataclasses.dataclass(frozen=True)
class InstalledTorch:
    version: str
    git_version: str
    site: Path  # the folder holding torch/ and its dist-info
    dist_info: Path
    flavour: Flavour = CPU

    @property
    def public_version(self) -> str:
        return self.version.split("+")[0]


def installed_torch() -> InstalledTorch | None:
    """The torch distribution of this Python, read from its files (None when not installed)."""
    try:
        dist = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    version_py = Path(str(dist.locate_file("torch/version.py")))
    if not version_py.is_file():
        return None
    values = _literal_assignments(version_py.read_text(), str(version_py))
    git_version = values.get("git_version")
    dist_info = Path(str(dist._path))  # type: ignore[attr-defined]
    return InstalledTorch(
        dist.version,
        git_version if isinstance(git_version, str) else "unknown",
        version_py.parents[1],
        dist_info,
        of_version_file(values.get("cuda"), values.get("hip")),
    )


def _urlsafe(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _wheel_tag(dist_info: Path) -> str:
    for line in (dist_info / "WHEEL").read_text().splitlines():
        if line.startswith("Tag:"):
            return line.split(":", 1)[1].strip()
    raise UserError(f"{dist_info / 'WHEEL'} names no Tag: cannot name a wheel for the installed torch")


def repack_installed(torch: InstalledTorch) -> Path:
    """A wheel of the installed torch's own files, kept in benchkit's cache (made once per install)."""
    record_path = torch.dist_info / "RECORD"
    if not record_path.is_file():
        raise UserError(f"the installed torch has no {record_path}: cannot tell its files")
    record = record_path.read_text()
    tag = _wheel_tag(torch.dist_info)
    target = cache_dir("installed-wheels", content_key(record, tag)) / f"torch-{torch.version}-{tag}.whl"
    if target.is_file():
        return target
    rows = [row for row in csv.reader(io.StringIO(record)) if row]
    info_name = torch.dist_info.name
    kept = [
        row for row in rows
        if len(row) >= 2 and row[1].startswith("sha256=") and not row[0].startswith(("/", ".."))
        and not (row[0].startswith(info_name + "/") and row[0].split("/")[-1] in _INSTALLER_FILES)
    ]  # fmt: skip
    kept.sort(key=lambda row: (row[0].startswith(info_name + "/"), row[0]))
    # The wheel is dated by torch/version.py's file time (pip writes it at install time).
    stamp = dt.datetime.fromtimestamp((torch.site / "torch/version.py").stat().st_mtime, dt.UTC)
    date_time = (max(stamp.year, 1980), stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second)
    new_record = io.StringIO()
    writer = csv.writer(new_record, lineterminator="\n")
    with atomic_path(target) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for name, expected, *_ in kept:
            path = torch.site / name
            try:
                data = path.read_bytes()
            except OSError as e:
                raise UserError(f"the installed torch lacks {path} ({e.strerror}); reinstall it") from None
            digest = _urlsafe(hashlib.sha256(data).digest())
            if digest != expected:
                raise UserError(
                    f"the installed torch's {path} differs from its RECORD (edited after install?); "
                    "reinstall torch or pass a wheel"
                )
            entry = zipfile.ZipInfo(name, date_time)
            entry.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(entry, data, compresslevel=1)
            writer.writerow([name, digest, str(len(data))])
        writer.writerow([f"{info_name}/RECORD", "", ""])
        entry = zipfile.ZipInfo(f"{info_name}/RECORD", date_time)
        entry.external_attr = 0o644 << 16
        out.writestr(entry, new_record.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    return target
