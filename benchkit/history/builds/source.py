"""`benchkit main` inside a PyTorch source checkout: the checkout is the repository asv
measures, and its results stay apart from the wheel history's.

The asv config is written into benchkit's own folder (``.asv/source/<name>-<key>/``,
keyed by the checkout's path), never into the checkout: ``repo`` is the checkout, the
suite is benchkit's, and environments, results and site live beside the config. asv's
build step then finds a wheel whose ``torch.version.git_version`` is the commit (in a
``BENCHKIT_WHEELHOUSE`` folder or benchkit's wheel store) or builds one.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.builds.build_step import history_project_config, is_torch_source
from benchkit.util import atomic_write_text, content_key


def torch_checkout(start: Path) -> Path | None:
    """The PyTorch source checkout holding `start` (its git top level), if it is one."""
    done = subprocess.run(
        ["git", "-C", str(start), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if done.returncode != 0:
        return None
    top = Path(done.stdout.strip())
    return top if is_torch_source(top) else None


def head_commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"{checkout}: git rev-parse HEAD failed: {done.stderr.strip()}")
    return done.stdout.strip()


def current_branch(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "symbolic-ref", "--short", "-q", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "HEAD"


def benchkit_root() -> Path:
    """The benchkit checkout this code runs from (its benchmarks/ is the suite asv runs)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "benchmarks" / "instruction_counts.py").is_file():
        raise UserError(f"benchkit's suite is not beside the package ({root}/benchmarks): install benchkit "
                        "from its checkout (`pip install -e .`) to measure a PyTorch checkout")  # fmt: skip
    return root


def source_project(checkout: Path) -> Path:
    """Write (or refresh) the asv config measuring `checkout`; returns its path."""
    checkout = checkout.resolve()
    root = benchkit_root()
    folder = root / ".asv" / "source" / f"{checkout.name}-{content_key(str(checkout), length=8)}"
    config = history_project_config(str(root), str(folder / "env"), history=str(checkout))
    config["branches"] = [current_branch(checkout)]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "asv.conf.json"
    atomic_write_text(path, json.dumps(config, indent=1) + "\n")
    return path
