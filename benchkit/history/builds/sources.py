"""Where a torch wheel comes from: pip's sources (the package index, extra indexes,
find-links folders, pre-releases) and benchkit's wheel store.

A requirement is first *resolved* with ``pip install --dry-run --report`` (pip reads the
index and, where the index offers it, only the wheel's metadata), which names the
exact file and, for most indexes, its sha256. A wheel already in the store under that
sha256 is used as is, so a build is fetched once and outlives an index that drops it
(nightlies expire). Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.builds.wheels import file_sha256, store_wheel, stored_wheel_path, wheel_store


def _log(message: str) -> None:
    print(f"benchkit history: {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class PipSource:
    """pip's options for where to look; empty means pip's own configuration."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    pre: bool = False
    no_index: bool = False
    # PIP_* variables every pip of the command runs with (`indexes.pip_environ`: the indexes
    # that did not answer left out); empty: pip's own configuration.
    environ: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str] | None:
        """The environment for a pip subprocess (None: this process's own)."""
        return {**os.environ, **dict(self.environ)} if self.environ else None

    def args(self) -> list[str]:
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        if self.pre:
            args.append("--pre")
        if self.no_index:
            args.append("--no-index")
        return args

    def describe(self) -> str:
        return " ".join(self.args()) or "pip's configured sources"


PIP_CONFIG = PipSource()  # pip's own configuration


@dataclasses.dataclass(frozen=True)
class Resolved:
    """The one wheel pip picks for a requirement."""

    requirement: str
    version: str
    url: str
    sha256: str | None  # None when the source does not publish it (a plain folder)
    requires_dist: tuple[str, ...] = ()  # the wheel's dependencies, markers included

    @property
    def filename(self) -> str:
        return urllib.parse.unquote(Path(urllib.parse.urlparse(self.url).path).name)

    @property
    def local_path(self) -> Path | None:
        parsed = urllib.parse.urlparse(self.url)
        return Path(urllib.request.url2pathname(parsed.path)) if parsed.scheme == "file" else None


def _pip_tail(output: str, lines: int = 4) -> str:
    kept = [line for line in output.strip().splitlines() if "is currently an experimental" not in line]
    return "\n".join(kept[-lines:])


def resolve(requirement: str, source: PipSource = PIP_CONFIG, python: str = sys.executable) -> Resolved:
    """Which wheel pip would install for `requirement` (no dependencies), without installing it."""
    with tempfile.TemporaryDirectory(prefix="benchkit-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        command = [
            python, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
            "--only-binary=:all:", "--quiet", "--report", str(report), *source.args(), requirement,
        ]  # fmt: skip
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=source.env()
        )
        if done.returncode != 0 or not report.is_file():
            raise UserError(
                f"pip finds no wheel for {requirement} ({source.describe()}):\n{_pip_tail(done.stdout)}"
            )
        data = json.loads(report.read_text())
    installs = data.get("install") or []
    if len(installs) != 1:
        raise UserError(f"pip resolved {requirement} to {len(installs)} packages, expected one torch wheel")
    item = installs[0]
    info = item.get("download_info") or {}
    hashes = (info.get("archive_info") or {}).get("hashes") or {}
    url = info.get("url", "")
    if not url.endswith(".whl"):
        raise UserError(f"pip resolved {requirement} to {url or 'nothing'}, not a wheel")
    metadata = item["metadata"]
    requires = tuple(r for r in metadata.get("requires_dist") or () if isinstance(r, str))
    return Resolved(requirement, metadata["version"], url, hashes.get("sha256"), requires)


def available_versions(source: PipSource = PIP_CONFIG, python: str = sys.executable) -> list[str]:
    """Every torch version pip's sources list, newest first, local labels kept (``2.13.0+cpu``).

    pip's ``index versions`` does not apply pip's constraints; `resolve` does, so a listed
    version may still be refused. Empty when pip lists none.
    """
    command = [python, "-m", "pip", "index", "versions", "torch", *source.args()]
    done = subprocess.run(command, capture_output=True, text=True, env=source.env())
    match = re.search(r"^Available versions: (.*)$", done.stdout, re.M)
    return [v.strip() for v in match.group(1).split(",") if v.strip()] if match else []


def download_size(resolved: Resolved, timeout: float = 5.0) -> int | None:
    """The wheel's size in bytes (a local file's, or what its server says); None: not known."""
    local = resolved.local_path
    if local is not None:
        return local.stat().st_size if local.is_file() else None
    request = urllib.request.Request(resolved.url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
    except (OSError, ValueError):
        return None
    return int(length) if length and length.isdigit() else None


def _download(url: str, dest: Path, source: PipSource, python: str) -> Path:
    command = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest)]
    _log(f"downloading {url}")
    done = subprocess.run(
        [*command, *source.args(), url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=source.env(),
    )
    wheels = sorted(dest.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise UserError(f"cannot download {url}:\n{_pip_tail(done.stdout)}")
    return wheels[0]


@dataclasses.dataclass(frozen=True)
class Fetched:
    path: Path  # in the wheel store
    sha256: str
    resolved: Resolved
    downloaded: bool  # False: it was in the store already, or a local file


def fetch(requirement: str, source: PipSource = PIP_CONFIG, python: str = sys.executable) -> Fetched:
    """The wheel pip picks for `requirement`, kept in the wheel store (fetched only when not there)."""
    return fetch_resolved(resolve(requirement, source, python), source, python)


def fetch_resolved(
    resolved: Resolved, source: PipSource = PIP_CONFIG, python: str = sys.executable
) -> Fetched:
    """The wheel `resolve` named, kept in the wheel store (fetched only when not there)."""
    requirement = resolved.requirement
    if resolved.sha256:
        stored = stored_wheel_path(resolved.sha256, resolved.filename)
        if stored.is_file() and file_sha256(stored) == resolved.sha256:
            _log(f"{requirement}: {resolved.filename} is in the wheel store already (nothing fetched)")
            return Fetched(stored, resolved.sha256, resolved, downloaded=False)
    local = resolved.local_path
    if local is not None:
        sha = file_sha256(local)
        _check_sha(resolved, sha)
        return Fetched(store_wheel(local, sha), sha, resolved, downloaded=False)
    with tempfile.TemporaryDirectory(prefix="benchkit-dl-", dir=wheel_store()) as tmp:
        wheel = _download(resolved.url, Path(tmp), source, python)
        sha = file_sha256(wheel)
        _check_sha(resolved, sha)
        return Fetched(store_wheel(wheel, sha), sha, resolved, downloaded=True)


def _check_sha(resolved: Resolved, sha: str) -> None:
    if resolved.sha256 and sha != resolved.sha256:
        raise UserError(
            f"{resolved.filename} from {resolved.url} has sha256 {sha[:12]}, but its index says "
            f"{resolved.sha256[:12]}"
        )
