"""Installing a torch wheel into an asv environment by pointing it at an unpacked copy.

asv installs a commit's torch into the environment before every round that measures it:
with ``--interleave-rounds`` a build is installed again in each round, after the other
builds of the run. ``pip install`` of a torch wheel unzips ~15,000 files and byte-compiles
them, seconds of work for each install; even hard-linking them in and unlinking them again
costs a second or two per round. Here the wheel is unpacked and byte-compiled once
(``pip install --no-deps --target``) into benchkit's cache, keyed by the wheel's RECORD (a
hash of every file) and the Python version, and installing it writes one file: a ``.pth``
file in site-packages naming that folder, which Python's start-up adds to ``sys.path`` (the
distribution's ``*.dist-info`` is in it, so ``importlib.metadata`` and pip see torch as
installed). Uninstalling removes that file. pip installs the wheel's dependencies when one is
missing (with asv's rounds a build is installed a dozen times, and pip's start-up alone is a
second).

An unpacked tree is shared by every environment that points at it and nothing writes into
it, so it is never changed, only pruned: a tree used in the last `TREE_GRACE_SECONDS` is
kept, whatever the count.
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
from benchkit.history.builds.wheels import dist_info_member, site_folders
from benchkit.util import cache_dir, content_key

# Unpacked trees kept (an unpacked torch build is large): the builds of one run and a few more,
# and any tree an environment may still point at (installs touch their tree every round).
TREES_KEPT = 4
TREE_GRACE_SECONDS = 6 * 3600
# The file in site-packages that names the installed build's tree.
POINTER_FILE = "benchkit-torch.pth"
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
        # Console scripts pip wrote for the unpacking interpreter: no environment runs them,
        # and a folder on sys.path should hold packages only.
        shutil.rmtree(target / "bin", ignore_errors=True)
        with contextlib.suppress(OSError):  # another install made it meanwhile: use theirs
            os.rename(target, tree)
    _log(f"unpacked {wheel_path.name} into the cache in {time.monotonic() - started:.0f} s")
    _prune(trees, keep=tree)
    return tree


def _prune(trees: Path, keep: Path) -> None:
    others = [d for d in trees.iterdir() if d.is_dir() and d != keep and not d.name.startswith("unpack-")]
    others.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    recent = time.time() - TREE_GRACE_SECONDS
    for stale in others[TREES_KEPT - 1 :]:
        if stale.stat().st_mtime < recent:
            shutil.rmtree(stale, ignore_errors=True)


def pointer_file(site: Path) -> Path:
    return site / POINTER_FILE


def point_at(tree: Path, site: Path) -> None:
    """Make `site`'s Python import torch from `tree`: one ``.pth`` line, written whole."""
    pointer = pointer_file(site)
    scratch = pointer.with_name(f".{POINTER_FILE}.{os.getpid()}")
    scratch.write_text(f"{tree}\n")
    os.replace(scratch, pointer)


def _unlink_recorded(site: Path) -> bool:
    """Remove an installed torch file by file from its RECORD, as `pip uninstall` would, without
    pip's start-up and checks (a second per asv round). Only for an install whose every file
    lies inside `site` (an older benchkit's linked installs); False leaves the job to pip."""
    infos = list(site.glob("torch-*.dist-info"))
    if len(infos) != 1 or not (infos[0] / "RECORD").is_file():
        return False
    rows = [row for row in csv.reader(io.StringIO((infos[0] / "RECORD").read_text())) if row]
    if not rows or any(row[0].startswith(("/", "..")) for row in rows):
        return False
    folders: set[tuple[str, ...]] = set()
    for row in rows:
        (site / row[0]).unlink(missing_ok=True)
        parts = tuple(row[0].split("/"))
        folders.update(parts[:i] for i in range(1, len(parts)))
    for parts in sorted(folders, key=len, reverse=True):
        folder = site.joinpath(*parts)
        shutil.rmtree(folder / "__pycache__", ignore_errors=True)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: another package's files stay
    return True


def remove_torch(python: str = sys.executable) -> None:
    """Uninstall torch and remove whatever was left behind (caches, stray files): benchkit's
    pointer to an unpacked build (`benchkit.history.builds.install`), and a torch installed
    into site-packages itself (by pip, or by an older benchkit's links)."""
    for site in site_folders():
        pointer_file(site).unlink(missing_ok=True)
    if not all(_unlink_recorded(site) for site in site_folders() if any(site.glob("torch-*.dist-info"))):
        subprocess.run([python, "-m", "pip", "uninstall", "-y", "torch"], stdout=subprocess.DEVNULL)
    for site in site_folders():
        for leftover in [site / "torch", *site.glob("torch-*.dist-info")]:
            if leftover.exists():
                _log(f"removing leftover {leftover}")
                shutil.rmtree(leftover, ignore_errors=True)


def missing_requirements(requirements: list[str]) -> list[str]:
    """The requirements this environment does not satisfy yet; all of them when it cannot tell
    (no `packaging` to read them): pip then decides, as always. A requirement with extras
    (a CUDA build's ``cuda-toolkit[cublas,...]``) is satisfied when its distribution is and
    so is every requirement its installed metadata lists for those extras."""
    from importlib.metadata import distributions

    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name
    except ImportError:
        return list(requirements)
    installed: dict[str, tuple[str, list[str]]] = {}  # one pass over site-packages
    for dist in distributions():
        name = dist.metadata["Name"]
        if name:
            installed.setdefault(canonicalize_name(name), (dist.version, dist.requires or []))

    def satisfied(text: str, extra: str, seen: set[str]) -> bool:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            return False
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            return True  # another platform's, or an extra nobody asked for
        found = installed.get(canonicalize_name(requirement.name))
        if found is None or not requirement.specifier.contains(found[0], prereleases=True):
            return False
        for wanted in sorted(requirement.extras):
            key = f"{canonicalize_name(requirement.name)}[{wanted}]"
            if key in seen:
                continue
            seen.add(key)
            extra_requirements = [r for r in found[1] if "extra" in r.partition(";")[2]]
            if not all(satisfied(r, wanted, seen) for r in extra_requirements):
                return False
        return True

    return [text for text in requirements if not satisfied(text, "", set())]


def prepare_tree(wheel_path: Path) -> Path:
    """The wheel's dependencies installed here (those missing) and its unpacked tree: what
    importing this build needs besides a path to the tree."""
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
        return unpacking.result()


def install_wheel(wheel_path: Path) -> None:
    """Install the wheel into this interpreter's environment: dependencies with pip (when one
    is missing), the wheel itself as a pointer to its unpacked tree."""
    started = time.monotonic()
    tree = prepare_tree(wheel_path)
    point_at(tree, Path(sysconfig.get_paths()["purelib"]))
    _log(f"installed {wheel_path.name} (its unpacked copy {tree.name}) in {time.monotonic() - started:.1f} s")
