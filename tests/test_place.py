"""Counts do not depend on the place they are taken in: the checkout's path, the
caller's environment, working directory, HOME and cache folder.

Through real valgrind: `benchkit counts` from two copies of the package, one at a
short path and one at a path of 200+ characters, each with its own empty cache,
HOME and working directory, one with a 20 kB environment variable. With the
launch before the canonical place (the worker started from the checkout, under
the caller's HOME, with the TorchScript artifact's cache path in its setup) the
cases below differed between two such places by about 0.3 %.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from benchkit.measure.callgrind.place import PLACE_PREFIX, PLACES, Place, claim_place

REPO_ROOT = Path(__file__).resolve().parent.parent
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")

# Two small Python cases of the standard suite that moved most with the place before
# (-0.37 % and -0.26 % between a 16- and a 155-character checkout): an eager module,
# and its TorchScript form (whose setup loads an artifact from the cache).
PLACE_SENSITIVE = r"^nn Modules/ReLU \| Python \| (Eager|TorchScript) \| Forward \| 1 thread"


def _count_in(place: Path, padding: int) -> dict[str, Any]:
    """`benchkit counts --json` run by a copy of the package at `place`, with this
    place's own cache, HOME, working directory and environment size."""
    shutil.copytree(REPO_ROOT / "benchkit", place / "benchkit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("cache", "home", "work"):
        (place / name).mkdir()
    # The session's counting place stays (tests/conftest.py): both batches count in it.
    kept = ("BENCHKIT_COUNTING_SLOT",)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHKIT_") or k in kept}
    env.update(
        PYTHONPATH=str(place),
        HOME=str(place / "home"),
        BENCHKIT_CACHE_DIR=str(place / "cache"),
        TORCHINDUCTOR_CACHE_DIR=str(place / "cache" / "inductor"),
    )
    if padding:
        env["BENCHKIT_TEST_PADDING"] = "x" * padding
    out = place / "counts.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "counts", "--filter", PLACE_SENSITIVE, "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=place / "work",
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@needs_valgrind
def test_counts_do_not_depend_on_the_place(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="bk", dir="/tmp"))
    try:
        here = _count_in(short, padding=0)
        there = _count_in(tmp_path / ("place-" * 35), padding=20_000)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert len(here) == 2 and here.keys() == there.keys()
    for key, count in here.items():
        assert count["status"] == "ok", count["error"]
        # Exactly: the same instructions per execution and the same repeats.
        assert (count["instructions"], count["repeats"]) == (
            there[key]["instructions"],
            there[key]["repeats"],
        ), key


def test_worker_site_holds_torch_and_its_requirements_only() -> None:
    """The place's ``site/``: torch, numpy and what they require (with their
    .dist-info), not the rest of the folders they are installed in."""
    import importlib.metadata

    from benchkit.measure.callgrind.place import import_dirs, worker_site
    from benchkit.util import torch_package_dir

    torch_dir = torch_package_dir()
    site = worker_site(torch_dir, import_dirs(torch_dir))
    assert site["torch"].resolve() == torch_dir.resolve()
    assert any(n.startswith("torch-") and n.endswith(".dist-info") for n in site)
    assert "typing_extensions.py" in site  # torch requires it
    assert "pytest" not in site and "_pytest" not in site  # installed here, not required
    assert not any(n.endswith(".pth") or n.startswith("__pycache__") for n in site)
    assert len(site) < len(list(importlib.metadata.distributions())) * 3


def test_a_pinned_place_waits_for_its_holder_instead_of_moving() -> None:
    """BENCHKIT_COUNTING_SLOT: a second batch pinned to a held place waits for it (and says so),
    where an unpinned one takes the next free place."""
    slot = 97  # far above the places batches take first
    holder = claim_place(slot)
    if holder is None:
        pytest.skip(f"{PLACES}/{PLACE_PREFIX}{slot} is not this user's folder")
    heard: list[str] = []
    claimed: list[Place | None] = []
    waiter = threading.Thread(target=lambda: claimed.append(claim_place(slot, heard.append)))
    try:
        waiter.start()
        waiter.join(timeout=2)
        assert waiter.is_alive() and not claimed, "the pinned claim did not wait"
        assert heard == [f"waiting for {holder.root}: another batch counts there (BENCHKIT_COUNTING_SLOT)"]
        unpinned = claim_place()
        assert unpinned is not None and unpinned.root != holder.root
        unpinned.close()
    finally:
        holder.close()
        waiter.join(timeout=10)
    [place] = claimed
    assert place is not None and place.root == holder.root
    place.close()
