"""Installing torch by hard links to an unpacked copy (`benchkit.history.builds.install`), in a real
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

from benchkit.history.builds.install import link_tree, wheel_requirements

# quiet: bounds the seconds an uninstall and a second install take.
pytestmark = pytest.mark.quiet

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_requirements_keep_their_markers() -> None:
    with zipfile.ZipFile(LOCAL_WHEEL) as wheel:
        requirements = wheel_requirements(wheel)
    assert any(r.startswith("sympy") for r in requirements)
    assert all("Requires-Dist" not in r for r in requirements)
    assert any("extra ==" in r for r in requirements)  # pip evaluates markers: extras are left out


def test_link_tree_replaces_files_and_skips_scripts(tmp_path: Path) -> None:
    tree, site = tmp_path / "tree", tmp_path / "site"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "a.py").write_text("new")
    (tree / "bin").mkdir()
    (tree / "bin" / "tool").write_text("#!/other/python")
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "a.py").write_text("old")
    assert link_tree(tree, site) == 1
    assert (site / "pkg" / "a.py").read_text() == "new"
    assert (site / "pkg" / "a.py").stat().st_ino == (tree / "pkg" / "a.py").stat().st_ino
    assert not (site / "bin").exists()


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
    init = site / "torch" / "__init__.py"
    assert init.stat().st_ino == (tree / "torch" / "__init__.py").stat().st_ino  # a link, not a copy
    record = next(site.glob("torch-*.dist-info/RECORD")).read_text()
    assert not any(line.startswith("../") for line in record.split())

    run("import torch, torchgen, functorch")  # writes __pycache__ folders the RECORD does not list
    began = time.monotonic()
    step("uninstall")
    assert time.monotonic() - began < 5, "file by file from the RECORD, no pip"
    assert not (site / "torch").exists() and not list(site.glob("torch-*.dist-info"))
    assert not (site / "torchgen").exists() and not (site / "functorch").exists()
    assert (site / "sympy").is_dir(), "a dependency is another distribution: it stays"
    assert (tree / "torch" / "__init__.py").is_file(), "uninstalling must not touch the cached tree"

    began = time.monotonic()
    step("install", "--wheel", str(LOCAL_WHEEL))
    again = time.monotonic() - began
    step("verify", "--wheel", str(LOCAL_WHEEL))
    assert run("import torch; print(torch.__version__)").startswith("2.13.0")
    assert again < 8, f"a second install took {again:.1f} s: the unpacked tree was not reused"


def test_missing_requirements_reads_what_is_installed() -> None:
    from benchkit.history.builds.install import missing_requirements

    assert missing_requirements(["numpy>=1", "jinja2"]) == []
    assert missing_requirements(["numpy<1"]) == ["numpy<1"]
    assert missing_requirements(["no-such-package-here"]) == ["no-such-package-here"]
    # Another platform's requirement, or an optional extra's, is not needed here.
    assert missing_requirements(['nvidia-x; platform_system == "Windows"', 'opt; extra == "full"']) == []
    assert missing_requirements(["numpy[extra]"]) == ["numpy[extra]"]  # extras: pip decides
