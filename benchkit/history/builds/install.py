"""Installing a torch wheel into an asv environment by hard links to an unpacked copy.

asv installs a commit's torch into the environment before every round that measures it:
with ``--interleave-rounds`` a build is installed again in each round, after the other
builds of the run. ``pip install`` of a torch wheel unzips ~20,000 files and byte-compiles
them, seconds of work for each install. Here the wheel is unpacked and byte-compiled
once (``pip install --no-deps --target``) into benchkit's cache, keyed by the wheel's
RECORD (a hash of every file) and the Python version, and each install hard-links that
tree into site-packages (copies across file systems) in about a second. pip installs the
wheel's dependencies when one is missing (with asv's rounds a build is installed a dozen
times, and pip's start-up alone is a second), and the linked tree holds the distribution
(``*.dist-info``, with the RECORD that uninstalling reads).

Hard-linked files are shared by every environment that installed the build: nothing
writes into an installed torch (``__pycache__`` files are new files of the environment's
own folders), and uninstalling unlinks only the environment's names.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.builds.wheels import dist_info_member
from benchkit.util import cache_dir, content_key

# Unpacked trees kept (an unpacked torch build is large): the builds of one run and a few more.
TREES_KEPT = 4
_NOT_LINKED = {"bin"}  # console scripts pip wrote for the unpacking interpreter
_PIP = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]


def _log(message: str) -> None:
    print(f"benchkit-build: {message}", file=sys.stderr, flush=True)


def wheel_requirements(wheel: zipfile.ZipFile) -> list[str]:
    """The wheel's ``Requires-Dist`` entries, markers included (pip evaluates them)."""
    metadata_name = dist_info_member(wheel, "METADATA")
    if metadata_name is None:
        raise UserError(f"{wheel.filename} has no .dist-info/METADATA")
    lines = wheel.read(metadata_name).decode().split("\n\n", 1)[0].splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]


def tree_key(wheel: zipfile.ZipFile) -> str:
    """The wheel's content (its RECORD hashes every file) and this Python's version."""
    record = dist_info_member(wheel, "RECORD")
    if record is None:
        raise UserError(f"{wheel.filename} has no .dist-info/RECORD")
    return content_key(wheel.read(record).decode(), sys.version)


def unpacked_tree(wheel_path: Path) -> Path:
    """The wheel unpacked and byte-compiled for this Python (made once, renamed into place whole)."""
    with zipfile.ZipFile(wheel_path) as wheel:
        key = tree_key(wheel)
    trees = cache_dir("torch-trees")
    tree = trees / key
    if tree.is_dir():
        with contextlib.suppress(OSError):
            os.utime(tree)  # recently used: kept by the pruning below
        return tree
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="unpack-", dir=trees) as scratch:
        target = Path(scratch) / "tree"
        command = [*_PIP, "--no-deps", "--no-warn-script-location", "--target", str(target), str(wheel_path)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise UserError(f"unpacking {wheel_path.name} failed: {done.stderr.strip()[-2000:]}")
        with contextlib.suppress(OSError):  # another install made it meanwhile: use theirs
            os.rename(target, tree)
    _log(f"unpacked {wheel_path.name} into the cache in {time.monotonic() - started:.0f} s")
    _prune(trees, keep=tree)
    return tree


def _prune(trees: Path, keep: Path) -> None:
    others = [d for d in trees.iterdir() if d.is_dir() and d != keep and not d.name.startswith("unpack-")]
    others.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    for stale in others[TREES_KEPT - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)


def _link(source: str, dest: str) -> None:
    """Hard-link `source` to `dest`, replacing it; a copy across file systems."""
    try:
        os.link(source, dest)
    except FileExistsError:
        os.unlink(dest)
        _link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def link_tree(tree: Path, site: Path) -> int:
    """Hard-link (or copy) every file of `tree` into `site`, replacing what is there. Returns the count.

    Plain string paths and one system call per file: a torch tree has ~15,000 files, and this
    runs in every asv round."""
    linked = 0
    for folder, dirs, files in os.walk(tree):
        relative = os.path.relpath(folder, tree)
        if relative == ".":
            dirs[:] = [d for d in dirs if d not in _NOT_LINKED]
        target = os.path.normpath(os.path.join(site, relative))
        os.makedirs(target, exist_ok=True)
        for name in files:
            _link(os.path.join(folder, name), os.path.join(target, name))
        linked += len(files)
    return linked


def _drop_script_entries(site: Path, tree: Path) -> None:
    """Drop the RECORD rows of files outside site-packages (the console scripts, ``../../bin/...``),
    which were not linked: `pip uninstall` then finds every file the RECORD lists."""
    for record in site.glob("*.dist-info/RECORD"):
        if not (tree / record.relative_to(site)).exists():
            continue
        rows = [row for row in csv.reader(io.StringIO(record.read_text())) if row]
        kept = [row for row in rows if not row[0].startswith("../")]
        if len(kept) != len(rows):
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(kept)
            record.unlink()  # a hard link to the cache's copy: write a file of our own
            record.write_text(out.getvalue())


def missing_requirements(requirements: list[str]) -> list[str]:
    """The requirements this environment does not satisfy yet; all of them when it cannot tell
    (no `packaging` to read them, extras): pip then decides, as always."""
    from importlib.metadata import distributions

    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name
    except ImportError:
        return list(requirements)
    installed: dict[str, str] = {}  # one pass over site-packages, not one per requirement
    for dist in distributions():
        name = dist.metadata["Name"]
        if name:
            installed.setdefault(canonicalize_name(name), dist.version)
    missing = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            missing.append(text)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue  # another platform's, or an optional extra's
        version = installed.get(canonicalize_name(requirement.name))
        if (
            version is None
            or requirement.extras
            or not requirement.specifier.contains(version, prereleases=True)
        ):
            missing.append(text)
    return missing


def install_wheel(wheel_path: Path) -> None:
    """Install the wheel into this interpreter's environment: dependencies with pip (when one
    is missing), the wheel's own files by hard links to its unpacked tree."""
    started = time.monotonic()
    with zipfile.ZipFile(wheel_path) as wheel:
        requirements = missing_requirements(wheel_requirements(wheel))
    # The first install of a build both fetches its dependencies (gigabytes for a CUDA build,
    # mostly waiting on the network and the disk) and unpacks the wheel into the cache
    # (mostly CPU): side by side they take the longer of the two instead of the sum.
    with ThreadPoolExecutor(1) as pool:
        unpacking = pool.submit(unpacked_tree, wheel_path)
        if requirements:
            done = subprocess.run([*_PIP, *requirements], capture_output=True, text=True)
            if done.returncode != 0:
                error = done.stderr.strip()[-2000:]
                raise UserError(f"installing {wheel_path.name}'s dependencies failed: {error}")
        tree = unpacking.result()
    site = Path(sysconfig.get_paths()["purelib"])
    linked = link_tree(tree, site)
    _drop_script_entries(site, tree)
    _log(f"installed {wheel_path.name}: {linked} files linked in {time.monotonic() - started:.1f} s")
