"""The default builds compare two builds whatever pip's sources hold: real pip over a folder of
small torch-shaped wheels, and an installed torch made by unpacking one of them.

Each state of pip's sources: a newer release of the installed torch's flavour, only older
ones, only another flavour, nothing else (an index that does not answer: test_index_probe.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.wheels import make_fake_torch_wheel

from benchkit.history.builds.flavour import CPU, Accelerator, Flavour, of_label, of_requirements

REPO_ROOT = Path(__file__).resolve().parent.parent
CUDA13 = ("nvidia-cudnn-cu13==9.1; platform_system == 'Linux'", "cuda-toolkit[cudart]==13.0.3")
CUDA12 = ("nvidia-cuda-runtime-cu12==12.1.105; platform_system == 'Linux'",)


def _wheels(folder: Path, *specs: tuple[str, str | None, tuple[str, ...]]) -> Path:
    for number, (version, cuda, requires) in enumerate(specs):
        make_fake_torch_wheel(
            folder, git_version=f"{number + 1}" * 40, version=version, cuda=cuda, requires=requires
        )
    return folder


def _install(site: Path, wheel: Path) -> None:
    """An installed torch: the wheel unpacked where Python looks (what pip would write)."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)


def _pick(tmp_path: Path, installed: Path | None, folder: Path) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    if installed is not None:
        _install(site, installed)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        BENCHKIT_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=f"{site}{os.pathsep}{REPO_ROOT}",
    )
    code = (
        "from benchkit.history.builds.defaults import pick_default_builds\n"
        "from benchkit.history.builds.sources import PipSource\n"
        f"source = PipSource(find_links=({str(folder)!r},), no_index=True)\n"
        "for pick in pick_default_builds(True, source):\n"
        "    print(pick.record.torch_version)\n"
    )
    # -S: no site-packages, so the unpacked torch is the installed one
    return subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True)


def _installed(folder: Path, version: str) -> Path:
    return next(folder.glob(f"torch-{version}-*.whl"))


def test_a_newer_release_of_the_same_flavour_is_the_second_build(tmp_path: Path) -> None:
    folder = _wheels(
        tmp_path / "w",
        ("2.12.0+cpu", None, ()),
        ("2.13.0+cpu", None, ()),
        ("2.14.0+cpu", None, ()),
        ("2.15.0", "13.0", CUDA13),  # newer still, but a CUDA build
    )
    done = _pick(tmp_path, _installed(folder, "2.13.0+cpu"), folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2.13.0+cpu", "2.14.0+cpu"], done.stderr
    assert (
        "the newest release newer than torch 2.13.0+cpu in pip's sources, a CPU build like it" in done.stderr
    )


def test_only_older_releases_give_the_newest_older_one(tmp_path: Path) -> None:
    folder = _wheels(
        tmp_path / "w", ("2.11.0+cpu", None, ()), ("2.12.0+cpu", None, ()), ("2.13.0+cpu", None, ())
    )
    done = _pick(tmp_path, _installed(folder, "2.13.0+cpu"), folder)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["2.12.0+cpu", "2.13.0+cpu"], done.stderr
    assert "the newest release older than torch 2.13.0+cpu" in done.stderr


def test_nothing_else_gives_one_build_and_says_how_to_add_a_second(tmp_path: Path) -> None:
    folder = _wheels(tmp_path / "w", ("2.13.0+cpu", None, ()))
    done = _pick(tmp_path, _installed(folder, "2.13.0+cpu"), folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2.13.0+cpu"]
    lines = [line for line in done.stderr.splitlines() if "one build only" in line]
    assert len(lines) == 1 and "--build WHEEL_OR_REQUIREMENT" in lines[0] and "history add" in lines[0]


def test_another_flavour_only_when_none_of_the_same_exists_said_with_its_size(tmp_path: Path) -> None:
    folder = _wheels(tmp_path / "w", ("2.13.0+cpu", None, ()), ("2.14.0", "13.0", CUDA13))
    done = _pick(tmp_path, _installed(folder, "2.13.0+cpu"), folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2.13.0+cpu", "2.14.0"], done.stderr
    [line] = [line for line in done.stderr.splitlines() if "default build: torch 2.14.0" in line]
    assert "no other CPU build in pip's sources" in line and "a CUDA 13 build" in line
    assert " MB wheel; its environment adds 2 CUDA packages" in line


def test_a_cuda_install_is_compared_with_a_cuda_build_of_its_major(tmp_path: Path) -> None:
    folder = _wheels(
        tmp_path / "w",
        ("2.14.1", "13.0", CUDA13),
        ("2.15.0+cpu", None, ()),
        ("2.15.0", "12.1", CUDA12),  # newer, but CUDA 12
        ("2.14.0", "13.0", CUDA13),
    )
    done = _pick(tmp_path, _installed(folder, "2.14.1"), folder)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["2.14.0", "2.14.1"], done.stderr
    assert (
        "the newest release older than torch 2.14.1 in pip's sources, a CUDA 13 build like it" in done.stderr
    )


def test_without_an_installed_torch_the_newest_release_and_the_one_before(tmp_path: Path) -> None:
    folder = _wheels(tmp_path / "w", ("2.12.0+cpu", None, ()), ("2.13.0+cpu", None, ()))
    done = _pick(tmp_path, None, folder)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["2.12.0+cpu", "2.13.0+cpu"], done.stderr


def test_flavours_from_labels_and_requirements() -> None:
    assert of_label("2.13.0+cpu") == CPU and of_label("2.14.1") is None
    assert of_label("2.5.1+cu121") == Flavour(Accelerator.CUDA, "12")
    assert of_label("2.6.0+rocm6.2.4") == Flavour(Accelerator.ROCM, "6")
    assert of_requirements(CUDA13) == Flavour(Accelerator.CUDA, "13")
    assert of_requirements(CUDA12) == Flavour(Accelerator.CUDA, "12")
    assert of_requirements(("sympy", "opt-einsum; extra == 'opt-einsum'")) == CPU
    assert not CPU.matches(Flavour(Accelerator.CUDA, "13"))
    assert not Flavour(Accelerator.CUDA, "13").matches(Flavour(Accelerator.CUDA, "12"))


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin"


def test_a_fresh_machine_without_a_gpu_gets_the_newest_cpu_build(tmp_path: Path) -> None:
    """`scripts/install.sh`'s torch step in a virtual environment without torch: the newest +cpu
    release, not the newer CUDA one, and the torch index that does not answer is left out."""
    folder = _wheels(
        tmp_path / "w", ("2.12.0+cpu", None, ()), ("2.13.0+cpu", None, ()), ("2.15.0", "13.0", CUDA13)
    )
    bin_dir = _venv(tmp_path / "venv")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refused = f"http://127.0.0.1:{closed.getsockname()[1]}/whl/cpu"
    closed.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(folder))
    command = [
        str(bin_dir / "python"),
        "-m",
        "benchkit.cli.first_torch",
        "--torch-index-url",
        refused,
    ]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"package index {refused} left out for this command" in done.stderr
    assert "torch 2.13.0+cpu: the newest CPU build in pip's sources" in done.stderr
    version = subprocess.run(
        [str(bin_dir / "python"), "-c", "import torch; print(torch.__version__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert version.stdout.strip() == "2.13.0+cpu", version.stderr
    again = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "torch is installed already: kept" in again.stderr


def _python_310() -> str | None:
    """A Python 3.10 on this machine: on PATH, or beside this Python (pyenv keeps versions side by side)."""
    beside = sorted(Path(sys.executable).resolve().parents[2].glob("3.10*/bin/python3.10"))
    for candidate in ["python3.10", *map(str, beside)]:
        try:
            found = subprocess.run(
                [candidate, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True
            )
        except OSError:  # not on this machine
            continue
        if found.returncode == 0:
            return found.stdout.strip()
    return None


def test_install_refuses_a_python_older_than_3_11(tmp_path: Path) -> None:
    python_310 = _python_310()
    if python_310 is None:
        pytest.skip("no Python 3.10 on this machine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python_310)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "install.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "benchkit needs Python >= 3.11; python3 here is Python 3.10" in done.stderr
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.11"' in pyproject
