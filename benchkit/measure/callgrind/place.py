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
* ``py`` -> the interpreter's installation prefix (``PYTHONHOME``), ``site0``,
  ``site1``... -> the folders torch and its dependencies are imported from: the
  worker runs ``py/bin/pythonX.Y -S`` with ``PYTHONPATH=code:site0:...``, so the
  standard library, torch and benchkit are imported under the same names
  everywhere (and no ``.pth`` file, e.g. an editable install's, runs);
* ``run`` -> this batch's folder (specs, logs, dumps), ``files/`` -> the control
  extension and the C++ shards, ``torchscript/`` -> the artifacts (loaded by a
  path relative to the working directory, which is the place), ``inductor`` ->
  the torch.compile caches;
* ``home/`` and ``tmp/``: an empty ``HOME`` and ``TMPDIR`` for every batch.

Nothing here is a correction of counts: the worker is simply started the same way.
Standard library only (the supervisor imports it before torch).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

# A fixed folder every Linux host has; not TMPDIR, whose value differs by place.
PLACES = "/tmp"
PLACE_PREFIX = "benchkit-counting-"
SLOTS = 100
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


def counted_artifact(path: str) -> str:
    """The path a counted setup loads a TorchScript artifact from: relative to the
    place (the worker's working directory), so the same in every place and slot."""
    return f"{TORCHSCRIPT}/{Path(path).name}"


class Place:
    """One claimed ``/tmp/benchkit-counting-NN`` folder, locked while a batch runs."""

    def __init__(self, root: Path, lock: int) -> None:
        self.root = root
        self._lock = lock
        self._import_dirs = 0

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

    def prepare(self, batch_root: Path, inductor_root: Path, import_dirs: Sequence[Path]) -> None:
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
        for number, folder in enumerate(import_dirs):
            self.link(folder, f"site{number}")
        self._import_dirs = len(import_dirs)

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
        sites = [str(self.root / f"site{n}") for n in range(self._import_dirs)]
        return {
            "HOME": str(self.root / "home"),
            "TMPDIR": str(self.root / "tmp"),
            "USER": "benchkit",
            "LOGNAME": "benchkit",
            "PYTHONHOME": str(self.root / "py"),
            "PYTHONPATH": os.pathsep.join([str(self.root / "code"), *sites]),
        }

    def close(self) -> None:
        with contextlib.suppress(OSError):
            _clear(self.root)
        os.close(self._lock)


def _clear(root: Path) -> None:
    for entry in root.iterdir():
        if entry.name == LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def claim_place() -> Place | None:
    """The first free ``/tmp/benchkit-counting-NN`` of this user, locked; None when
    there is none (another user's folders, an unwritable /tmp)."""
    for slot in range(SLOTS):
        root = Path(PLACES) / f"{PLACE_PREFIX}{slot:02d}"
        with contextlib.suppress(FileExistsError, OSError):
            root.mkdir(mode=0o700)
        try:
            info = os.lstat(root)
        except OSError:
            continue
        # Only a real folder of ours: never follow a link someone else put in /tmp.
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        try:
            lock = os.open(root / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        return Place(root, lock)
    return None


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
