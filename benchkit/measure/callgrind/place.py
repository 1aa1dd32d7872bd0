"""The canonical launch: the counted process sees the same paths, environment and
command line wherever benchkit runs.

Counts repeat exactly in one place, but every string the worker holds shapes its
heap and dicts: the checkout's path (in ``sys.path`` and the file names of the
modules it imports), where torch and the standard library are installed (a
virtualenv, pyenv, a CI runner's tool cache), the cache folder (in argv, in the
TorchScript setups, in the torch.compile cache path), ``HOME``, the caller's
environment and working directory. Moving any of them moved small cases by
tenths of a percent. So a batch runs in a *place* of its own with a fixed name,
``/tmp/benchkit-counting-NN`` (NN is ``00`` unless other batches run at once):

* ``code/`` -- a copy of the few modules the worker imports, under their package
  names, with empty package ``__init__`` files;
* ``py`` -> the interpreter's installation prefix (``PYTHONHOME``);
* ``site/`` -- hard links to torch, numpy and the distributions they require (their
  packages, modules and ``.dist-info`` folders), nothing else of the folders
  they are installed in: the worker runs ``py/bin/pythonX.Y -S`` with
  ``PYTHONPATH=code:site``, so the standard library, torch and benchkit are
  imported under the same names everywhere, no ``.pth`` file (e.g. an editable
  install's) runs, and what torch's import lists and reads (the folder's
  entries; every distribution's metadata, scanned for entry points) is the same
  whether torch lives in a full site-packages or in a virtualenv's;
* ``run`` -> this batch's folder (specs, logs, dumps), ``files/`` -- the control
  extension (hard links: see `Place.hard_link`) and links to the C++ shards,
  ``torchscript/`` -> the artifacts (loaded by a path relative to the working
  directory, which is the place), ``inductor`` -> the torch.compile caches;
* ``pyc`` -> the bytecode of every module the worker imports at start
  (``PYTHONPYCACHEPREFIX``), compiled from the place's paths with hash-checked
  headers before the batch (`Place.compile_bytecode`): an installation's own
  ``.pyc`` files hold the path they were compiled at and their source's mtime,
  and unmarshalling them allocated differently for a virtualenv's torch than
  for the same torch installed elsewhere;
* ``home/`` and ``tmp/``: an empty ``HOME`` and ``TMPDIR`` for every batch.

Nothing here is a correction of counts: the worker is simply started the same way.
Standard library and benchkit's settings only (the supervisor imports it before torch).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.machinery
import importlib.metadata
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from benchkit.settings import COUNTING_PLACES

# A fixed folder every Linux host has; not TMPDIR, whose value differs by place.
PLACES = "/tmp"
PLACE_PREFIX = "benchkit-counting-"
LOCK = ".lock"
TORCHSCRIPT = "torchscript"
# The worker's modules, by their path in the package (the rest of benchkit stays out).
WORKER_MODULES = (
    "measure/stmt_loop.py",
    "measure/callgrind/child.py",
    "measure/callgrind/control.py",
    "measure/callgrind/policy.py",
)
WORKER_PACKAGES = ("", "measure", "measure/callgrind")
# The distributions the worker may import, with those they require (not extras).
WORKER_DISTRIBUTIONS = ("torch", "numpy")
SITE = "site"
SITE_STAMP = "site.json"
BYTECODE = "pyc"
# Run by the place's Python (natively, before the batch): import the modules, then
# write a hash-checked .pyc (valid for any mtime) for each one whose cache is missing
# or stale. Its code objects hold the place's paths, as the worker's imports would.
_COMPILE = """
import importlib, importlib.util, os, py_compile, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
header = importlib.util.MAGIC_NUMBER + (3).to_bytes(4, "little")  # hash-based, checked
for module in list(sys.modules.values()):
    source = getattr(module, "__file__", None)
    if not source or not source.endswith(".py") or not os.path.isabs(source):  # torch.ops's
        continue
    cached = importlib.util.cache_from_source(source)
    try:
        with open(source, "rb") as f, open(cached, "rb") as c:
            if c.read(16) == header + importlib.util.source_hash(f.read()):
                continue
    except OSError:
        pass
    py_compile.compile(source, cfile=cached, doraise=False,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
"""


def counted_artifact(path: str) -> str:
    """The path a counted setup loads a TorchScript artifact from: relative to the
    place (the worker's working directory), so the same in every place and slot."""
    return f"{TORCHSCRIPT}/{Path(path).name}"


class Place:
    """One claimed ``/tmp/benchkit-counting-NN`` folder, locked while a batch runs."""

    def __init__(self, root: Path, lock: int) -> None:
        self.root = root
        self._lock = lock

    @property
    def run(self) -> Path:
        return self.root / "run"

    def link(self, target: Path, *parts: str) -> Path:
        """The place's name for `target` (a symlink at `parts`, made on first use)."""
        path = self.root.joinpath(*parts)
        if not path.is_symlink():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(Path(target).resolve())
        return path

    def hard_link(self, target: Path, *parts: str) -> Path:
        """The place's own name for the file `target` (a hard link at `parts`; a copy across
        file systems). A loaded library's real path shows in the process's mappings
        (`/proc/self/maps`): through a symbolic link the torch.compile cases' counts moved
        with the length of benchkit's cache folder."""
        path = self.root.joinpath(*parts)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(target, path)
            except OSError:
                shutil.copy2(target, path)
        return path

    def prepare(self, batch_root: Path, inductor_root: Path, site: dict[str, Path], bytecode: Path) -> None:
        """Fill the place; `site` is `worker_site`'s (name in ``site/`` -> target),
        `bytecode` a folder kept for this torch build and counting code."""
        _clear(self.root)
        package = Path(__file__).resolve().parents[2]  # benchkit/
        code = self.root / "code" / "benchkit"
        for sub in WORKER_PACKAGES:
            (code / sub).mkdir(parents=True, exist_ok=True)
            (code / sub / "__init__.py").write_text("")
        for module in WORKER_MODULES:
            shutil.copyfile(package / module, code / module)
        for name in ("home", "tmp", TORCHSCRIPT, "files"):
            (self.root / name).mkdir()
        self.link(batch_root, "run")
        self.link(inductor_root, "inductor")
        self.link(Path(sys.base_prefix), "py")
        bytecode.mkdir(parents=True, exist_ok=True)
        self.link(bytecode, BYTECODE)
        self._fill_site(site)

    def python(self) -> list[str]:
        """The worker's interpreter and its flags: the installation's own binary, under
        the place's ``py`` (``sys.executable`` may be a virtualenv's link to it)."""
        real = Path(sys.executable).resolve()
        base = Path(sys.base_prefix).resolve()
        flags = ["-S", *(["-P"] if sys.version_info >= (3, 11) else [])]  # -P: no cwd in sys.path
        if base in real.parents:
            return [str(self.root / "py" / real.relative_to(base)), *flags]
        return [str(real), *flags]  # an unusual layout: the binary's own path

    def environment(self) -> dict[str, str]:
        """Where the worker finds Python, torch and its own code, and where it may write."""
        return {
            "HOME": str(self.root / "home"),
            "TMPDIR": str(self.root / "tmp"),
            "USER": "benchkit",
            "LOGNAME": "benchkit",
            "PYTHONHOME": str(self.root / "py"),
            "PYTHONPATH": os.pathsep.join([str(self.root / "code"), str(self.root / SITE)]),
            "PYTHONPYCACHEPREFIX": str(self.root / BYTECODE),
        }

    def _fill_site(self, site: dict[str, Path]) -> None:
        """``site/`` as a tree of real folders and hard links (kept while `site` is the
        same): torch reads ``/proc/self/maps`` and resolves its own path while it is
        imported, and both show a file's real path, which a symbolic link would leave
        the installation's. Symbolic links where hard links cannot be made (another
        file system, another user's files)."""
        root, stamp = self.root / SITE, self.root / SITE_STAMP
        wanted = json.dumps({name: _identity(target) for name, target in site.items()}, sort_keys=True)
        if root.is_dir() and stamp.exists() and stamp.read_text() == wanted:
            return
        stamp.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        try:
            for name, target in site.items():
                _hard_link_tree(target.resolve(), root / name)
        except OSError:
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            for name, target in site.items():
                (root / name).symlink_to(target.resolve())
        stamp.write_text(wanted)

    def compile_bytecode(self, env: dict[str, str], modules: Sequence[str]) -> str:
        """Make sure ``pyc`` holds the bytecode of `modules` and all they import (the
        worker then reads the same bytecode everywhere; modules it imports later are
        compiled from source alike). Returns the error output, empty on success."""
        # Done before for this place's name, these modules and this site: nothing to do
        # (the folder is kept per torch build, Python and counting code).
        stamp = self.root / BYTECODE / f".complete-{self.root.name}"
        site = self.root / SITE_STAMP
        wanted = "\n".join([*modules, site.read_text() if site.exists() else ""])
        if stamp.exists() and stamp.read_text() == wanted:
            return ""
        env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}  # only the explicit hash-checked files
        command = [*self.python(), "-c", _COMPILE, *modules]
        try:
            done = subprocess.run(
                command, env=env, cwd=self.root, capture_output=True, text=True, timeout=900
            )
        except (OSError, subprocess.SubprocessError) as e:
            return str(e)
        if done.returncode != 0:
            return done.stderr[-2000:]
        stamp.write_text(wanted)
        return ""

    def compile_bytecode_aside(
        self, env: dict[str, str], modules: Sequence[str], on_failure: Callable[[str], None]
    ) -> threading.Thread:
        """`compile_bytecode` on a thread of its own (started), so the batch is prepared
        meanwhile; workers join it before they start."""

        def run() -> None:
            failed = self.compile_bytecode(env, modules)
            if failed:
                on_failure(failed)

        thread = threading.Thread(target=run, name="benchkit-bytecode", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        with contextlib.suppress(OSError):
            _clear(self.root)
        os.close(self._lock)


def _identity(target: Path) -> str:
    info = target.stat()
    return f"{target.resolve()} {info.st_ino} {info.st_mtime_ns}"


def _hard_link_tree(source: Path, destination: Path) -> None:
    """`source` (a folder or a file) at `destination`: folders made anew, in sorted
    order (a small folder lists its entries in the order they were made), files hard
    linked, bytecode caches left out (the worker reads ``pyc``)."""
    if not source.is_dir():
        os.link(source, destination)
        return
    destination.mkdir()
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), destination / entry.name)
        elif entry.is_dir():
            _hard_link_tree(Path(entry.path), destination / entry.name)
        else:
            os.link(entry.path, destination / entry.name)


def _clear(root: Path) -> None:
    for entry in root.iterdir():
        if entry.name in (LOCK, SITE, SITE_STAMP):  # the site tree is kept while it is the same
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def claim_place(slot: int | None = None, waiting: Callable[[str], None] | None = None) -> Place | None:
    """The first free ``/tmp/benchkit-counting-NN`` of this user, locked; None when there is
    none (another user's folders, an unwritable /tmp). With `slot`, that place only: the
    batch waits while another holds it (`waiting` hears why once), so every batch that
    pins it counts in the same place and their counts agree exactly."""
    if slot is not None:
        return _lock_place(slot, wait=True, waiting=waiting)
    for number in range(COUNTING_PLACES):
        place = _lock_place(number, wait=False)
        if place is not None:
            return place
    return None


def _lock_place(slot: int, wait: bool, waiting: Callable[[str], None] | None = None) -> Place | None:
    root = Path(PLACES) / f"{PLACE_PREFIX}{slot:02d}"
    with contextlib.suppress(FileExistsError, OSError):
        root.mkdir(mode=0o700)
    try:
        info = os.lstat(root)
    except OSError:
        return None
    # Only a real folder of ours: never follow a link someone else put in /tmp.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return None
    try:
        lock = os.open(root / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        if not wait:
            os.close(lock)
            return None
        if waiting is not None:
            waiting(f"waiting for {root}: another batch counts there (BENCHKIT_COUNTING_SLOT)")
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if its holder dies
    return Place(root, lock)


def import_dirs(torch_dir: Path | None) -> list[Path]:
    """The folders the worker imports installed packages from, in ``sys.path`` order:
    the site folders and the one holding torch (the checkout is never one of them)."""
    found: list[Path] = []
    site_names = ("site-packages", "dist-packages")
    wanted = [Path(p) for p in sys.path if p and Path(p).name in site_names]
    if torch_dir is not None:
        wanted.insert(0, torch_dir.parent)
    for folder in wanted:
        if folder.is_dir() and folder.resolve() not in {f.resolve() for f in found}:
            found.append(folder)
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def worker_site(torch_dir: Path | None, folders: Sequence[Path]) -> dict[str, Path]:
    """The entries of the place's ``site/`` (name -> target): for torch, numpy and the
    distributions they require, found in `folders` (first on the path wins, as for
    imports), each top-level package or module their RECORD lists and the
    ``.dist-info`` folder. torch's import scans every distribution's metadata for
    entry points and lists the folders it imports from: a whole site-packages
    (hundreds of other distributions) left a heap that moved small cases by a few
    instructions against a virtualenv holding torch alone."""
    found: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions(path=[str(f) for f in folders]):
        found.setdefault(_normal(dist.metadata["Name"] or ""), dist)
    site: dict[str, Path] = {}
    done: set[str] = set()
    todo = list(WORKER_DISTRIBUTIONS)
    while todo:
        name = _normal(todo.pop(0))
        if name in done or name not in found:
            continue
        done.add(name)
        dist = found[name]
        for requirement in dist.requires or []:
            if "extra" not in requirement.partition(";")[2]:  # optional extras stay out
                todo.append(re.match(r"[A-Za-z0-9._-]+", requirement).group())  # type: ignore[union-attr]
        for file in dist.files or []:
            parts = file.parts
            # Scripts in bin/; bytecode, which the worker reads from ``pyc`` only.
            if not parts or parts[0] in ("..", "__pycache__"):
                continue
            target = Path(str(dist.locate_file(parts[0])))
            # Folders (packages, numpy.libs, the .dist-info) and modules: not a .pth file
            # (never run here) nor an installer's marker file, which differ by installer.
            if len(parts) > 1 or parts[0].endswith(tuple(importlib.machinery.all_suffixes())):
                site.setdefault(parts[0], target)
        info = getattr(dist, "_path", None)  # the .dist-info folder (also without a RECORD)
        if isinstance(info, Path):
            site.setdefault(info.name, info)
    if torch_dir is not None:  # an editable or source build's torch, outside any RECORD
        site.setdefault("torch", torch_dir)
    # Only entries that exist (a RECORD may list files removed since).
    return {name: target for name, target in sorted(site.items()) if os.path.lexists(target)}
