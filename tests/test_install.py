"""Installing torch as a pointer to an unpacked copy (`benchkit.history.builds.install`), in a real
virtual environment with the local torch wheel: importable, verified, uninstalled whole, fast again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from support.wheels import LOCAL_WHEEL

from benchkit.history.builds.install import POINTER_FILE, point_at, wheel_requirements

# quiet: bounds the seconds an uninstall and a second install take.
pytestmark = pytest.mark.quiet

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_requirements_keep_their_markers() -> None:
    with zipfile.ZipFile(LOCAL_WHEEL) as wheel:
        requirements = wheel_requirements(wheel)
    assert any(r.startswith("sympy") for r in requirements)
    assert all("Requires-Dist" not in r for r in requirements)
    assert any("extra ==" in r for r in requirements)  # pip evaluates markers: extras are left out


def test_the_pointer_is_one_line_naming_the_tree(tmp_path: Path) -> None:
    tree, site = tmp_path / "tree", tmp_path / "site"
    site.mkdir()
    point_at(tree, site)
    point_at(tree, site)  # replaced whole, never appended to
    assert (site / POINTER_FILE).read_text() == f"{tree}\n"
    assert sorted(p.name for p in site.iterdir()) == [POINTER_FILE], "no scratch file is left"


@pytest.mark.slow
def test_install_uninstall_and_install_again_in_a_real_environment(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {**os.environ, "BENCHKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)

    def step(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([python, "-m", "benchkit.cli.build_step", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    def run(code: str) -> str:
        done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    step("install", "--wheel", str(LOCAL_WHEEL))
    step("verify", "--wheel", str(LOCAL_WHEEL))
    assert run("import torch; print((torch.ones(2) + 1).sum().item())") == "4.0"
    site = Path(run("import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    [tree] = (tmp_path / "cache" / "torch-trees").iterdir()
    assert run("import torch; print(torch.__file__)") == str(tree / "torch" / "__init__.py")
    assert run("import importlib.metadata as m; print(m.version('torch'))").startswith("2.13.0")
    assert not (site / "torch").exists(), "nothing of torch is copied or linked into the environment"
    assert not (tree / "bin").exists(), "console scripts for the unpacking interpreter are dropped"

    run("import torch, torchgen, functorch")
    began = time.monotonic()
    step("uninstall")
    assert time.monotonic() - began < 5
    assert not (site / POINTER_FILE).exists()
    assert run("import importlib.util as u; print(u.find_spec('torch'))") == "None"
    assert (site / "sympy").is_dir(), "a dependency is another distribution: it stays"
    assert (tree / "torch" / "__init__.py").is_file(), "uninstalling must not touch the cached tree"
    with pytest.raises(AssertionError, match="no torch installed"):
        step("verify", "--wheel", str(LOCAL_WHEEL))

    began = time.monotonic()
    step("install", "--wheel", str(LOCAL_WHEEL))
    again = time.monotonic() - began
    step("verify", "--wheel", str(LOCAL_WHEEL))
    assert run("import torch; print(torch.__version__)").startswith("2.13.0")
    assert again < 3, f"a second install took {again:.1f} s: the unpacked tree was not reused"

    # A torch pip installed into site-packages itself (or an older benchkit's links) shadows the
    # pointer: verify refuses to measure it, and uninstalling removes it too.
    shadow = site / "torch"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "version.py").write_text("__version__ = 'other'\n")
    with pytest.raises(AssertionError, match="differs from"):
        step("verify", "--wheel", str(LOCAL_WHEEL))
    step("uninstall")
    assert not shadow.exists()


def test_missing_requirements_reads_what_is_installed() -> None:
    from benchkit.history.builds.install import missing_requirements

    assert missing_requirements(["numpy>=1", "jinja2"]) == []
    assert missing_requirements(["numpy<1"]) == ["numpy<1"]
    assert missing_requirements(["no-such-package-here"]) == ["no-such-package-here"]
    # Another platform's requirement, or an optional extra's, is not needed here.
    assert missing_requirements(['nvidia-x; platform_system == "Windows"', 'opt; extra == "full"']) == []


def test_extras_are_satisfied_by_what_their_requirements_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CUDA build requires ``cuda-toolkit[cublas,...]``: once installed, pip is not run again."""
    from benchkit.history.builds.install import missing_requirements

    info = tmp_path / "fakepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n"
        'Requires-Dist: numpy; extra == "fast"\n'
        'Requires-Dist: no-such-package-here; extra == "slow"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert missing_requirements(["fakepkg[fast]>=1"]) == []
    assert missing_requirements(["fakepkg[fast,slow]"]) == ["fakepkg[fast,slow]"]
    assert missing_requirements(["fakepkg[fast]>=2"]) == ["fakepkg[fast]>=2"]


def test_pruning_keeps_the_newest_trees_and_any_used_lately(tmp_path: Path) -> None:
    """An environment may still point at a tree: only old trees beyond the newest few go."""
    from benchkit.history.builds import install

    trees = tmp_path / "trees"
    now = time.time()
    hours = {"kept": 0, "h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "day3": 72, "day4": 96}
    for name, age in hours.items():
        (trees / name).mkdir(parents=True)
        os.utime(trees / name, (now - age * 3600, now - age * 3600))
    assert install.TREES_KEPT < 6 and install.TREE_GRACE_SECONDS == 6 * 3600
    install._prune(trees, keep=trees / "kept")
    # more than TREES_KEPT trees are recent: all of them stay, the old ones go
    assert sorted(p.name for p in trees.iterdir()) == ["h1", "h2", "h3", "h4", "h5", "kept"]
    for name in ("h1", "h2", "h3", "h4", "h5"):
        os.utime(trees / name, (now - 86400, now - 86400))
    install._prune(trees, keep=trees / "kept")
    assert len(list(trees.iterdir())) == install.TREES_KEPT  # now the count alone decides
