"""Where builds come from: a real PEP 503 index in a temp folder read by real pip, the
installed torch as a build, and what HEAD names in the wheel history (real git)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.wheels import make_fake_torch_wheel

from benchkit.history.builds import repo as history
from benchkit.history.builds.wheels import file_sha256, read_wheel_info, stored_wheel_path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _pip_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """pip with no configuration of this machine (no find-links, no extra index, no constraints)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        BENCHKIT_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=str(REPO_ROOT),
        **extra,
    )
    return env


def _benchkit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchkit.cli", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )


def make_simple_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 simple index (file:// URL) serving `wheels` as project torch, with sha256 fragments."""
    project = root / "simple" / "torch"
    project.mkdir(parents=True)
    files = root / "files"
    files.mkdir()
    links = []
    for wheel in wheels:
        shutil.copyfile(wheel, files / wheel.name)
        links.append(f'<a href="../../files/{wheel.name}#sha256={file_sha256(wheel)}">{wheel.name}</a><br>')
    (root / "simple" / "index.html").write_text('<html><body><a href="torch/">torch</a></body></html>\n')
    (project / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return (root / "simple").as_uri()


def test_add_from_a_local_index_with_pre_stores_the_wheel_and_never_fetches_it_twice(tmp_path: Path) -> None:
    release = make_fake_torch_wheel(tmp_path / "w", git_version="1" * 40, version="2.14.1")
    # a nightly: the same small wheel re-versioned as a pre-release
    nightly = make_fake_torch_wheel(
        tmp_path / "w", git_version="2" * 40, version="2.15.0.dev20251101", date_time=(2025, 11, 1, 0, 0, 0)
    )
    index = make_simple_index(tmp_path / "index", [release, nightly])
    env = _pip_env(tmp_path)
    repo = tmp_path / "hist"
    init = _benchkit(env, "history", "init", "--repo", str(repo), "--index-url", index, "torch==2.14.1")
    assert init.returncode == 0, init.stderr

    # Without --pre pip does not take the nightly: the newest release is already on main.
    plain = _benchkit(env, "history", "add", "torch", "--repo", str(repo), "--index-url", index)
    assert plain.returncode == 2 and "already commit" in plain.stderr, plain.stderr
    pre = ["--pre", "--index-url", index, "--repo", str(repo)]
    add = _benchkit(env, "history", "add", "torch", "--branch", "nightly", *pre)
    assert add.returncode == 0, add.stderr
    record = history.HistoryRepo(repo).record("nightly")
    assert (record.torch_version, record.wheel_sha256) == ("2.15.0.dev20251101", file_sha256(nightly))
    stored = stored_wheel_path(record.wheel_sha256, nightly.name)
    # the store is under the command's BENCHKIT_CACHE_DIR
    stored = tmp_path / "cache" / stored.relative_to(stored.parents[2])
    assert stored.is_file() and file_sha256(stored) == record.wheel_sha256
    assert "HEAD -> nightly: " in add.stdout and "torch 2.15.0.dev20251101" in add.stdout

    # A second add of the same requirement finds the wheel in the store: nothing is fetched.
    again = _benchkit(env, "history", "add", "torch", "--branch", "n2", *pre)
    assert again.returncode == 0 and "in the wheel store already (nothing fetched)" in again.stderr, (
        again.stderr
    )
    # The index drops the nightly (they expire): the build step still gets the exact wheel.
    (tmp_path / "index" / "files" / nightly.name).unlink()
    make_simple_index(tmp_path / "index2", [release])
    code = (
        "from benchkit.history.builds.build_step import resolve_record_wheel\n"
        "from benchkit.history.builds.repo import HistoryRepo\n"
        "from pathlib import Path\n"
        f"print(resolve_record_wheel(HistoryRepo(Path({str(repo)!r})).record('nightly'), 'x'))"
    )
    served = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert served.returncode == 0 and file_sha256(served.stdout.strip()) == record.wheel_sha256, served.stderr

    # An index that lacks the build: one error naming the requirement and the index.
    missing = _benchkit(env, "history", "add", "torch==9.9", "--index-url", index, "--repo", str(repo))
    assert missing.returncode == 2 and "pip finds no wheel for torch==9.9 (--index-url" in missing.stderr


def test_head_names_the_branch_of_the_build_added_last(tmp_path: Path) -> None:
    env = _pip_env(tmp_path)
    base = make_fake_torch_wheel(tmp_path / "a", git_version="a" * 40, version="1.0.0")
    pr = make_fake_torch_wheel(
        tmp_path / "b", git_version="b" * 40, version="1.0.1", date_time=(2025, 6, 1, 0, 0, 0)
    )
    repo = tmp_path / "hist"
    assert _benchkit(env, "history", "init", "--repo", str(repo), str(base)).returncode == 0
    add = _benchkit(env, "history", "add", str(pr), "--branch", "pr", "--repo", str(repo))
    assert add.returncode == 0, add.stderr
    git = ["git", "--git-dir", str(repo)]
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    pr_tip = subprocess.run(
        [*git, "rev-parse", "pr"], capture_output=True, text=True, check=True
    ).stdout.strip()
    main_tip = subprocess.run([*git, "rev-parse", "main"], capture_output=True, text=True, check=True).stdout
    assert head == pr_tip != main_tip.strip()
    listed = _benchkit(env, "history", "list", "--repo", str(repo)).stdout
    assert (
        f"HEAD -> pr: {pr_tip[:12]} torch 1.0.1" in listed and f"main: {main_tip[:12]} torch 1.0.0" in listed
    )
    back = _benchkit(env, "history", "head", "main", "--repo", str(repo))
    assert back.returncode == 0 and "HEAD -> main: " in back.stdout
    bad = _benchkit(env, "history", "head", "nope", "--repo", str(repo))
    assert bad.returncode == 2 and "no branch 'nope'" in bad.stderr


def test_without_torch_or_index_one_line_says_what_to_pass(tmp_path: Path) -> None:
    # -S: a Python that sees no site-packages, so no installed torch; pip sees an empty folder only.
    env = _pip_env(tmp_path, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path))
    code = "from benchkit.history.builds.defaults import pick_default_builds; pick_default_builds()"
    done = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert (
        "no torch build to measure: no torch is installed" in last and "--build WHEEL_OR_REQUIREMENT" in last
    )


@pytest.mark.slow
def test_installed_torch_without_any_wheel_source_is_packed_from_its_files(tmp_path: Path) -> None:
    """pip's config hidden: the installed torch becomes a wheel of exactly its recorded files."""
    import torch

    env = _pip_env(tmp_path, PIP_NO_INDEX="1")
    code = (
        "from benchkit.history.builds.defaults import pick_default_builds\n"
        "[p] = pick_default_builds(include_index=False)\n"
        "print(p.record.wheel_sha256, p.record.wheel_filename)\n"
    )
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert (
        "packing its installed files" in first.stderr
        and f"default build: torch {torch.__version__}" in first.stderr
    )
    sha, name = first.stdout.split()
    wheel = next((tmp_path / "cache" / "wheels").glob(f"*/{name}"))
    info = read_wheel_info(wheel)
    assert (info.version, info.git_version) == (torch.__version__, torch.version.git_version)
    with zipfile.ZipFile(wheel) as z:
        assert z.testzip() is None and "torch/__init__.py" in z.namelist()
        assert not [n for n in z.namelist() if n.endswith(("INSTALLER", "direct_url.json"))]
    # made once: the second pick reuses it (same bytes)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert second.stdout.split()[0] == sha


def test_a_repacked_install_is_dated_before_the_newer_release() -> None:
    from benchkit.history.builds.build_step import BuildRecord
    from benchkit.history.builds.defaults import Pick, _date_repacked_first

    def record(version: str, date: str) -> BuildRecord:
        return BuildRecord(version, "a" * 40, date, f"torch-{version}.whl", "0" * 64, 1)

    installed = Pick(record("2.13.0+cpu", "2026-11-26T01:56:50Z"), "installed", repacked=True)
    newer = Pick(record("2.15.0", "2026-10-01T00:00:00Z"), "index")
    first, second = _date_repacked_first([installed, newer])
    assert first.record.build_date == "2026-09-30T00:00:00Z" and "an install has no build date" in first.how
    assert second == newer
    # a real wheel keeps its own date, and so does an install already older than the release
    assert _date_repacked_first([dataclasses.replace(installed, repacked=False), newer])[
        0
    ] == dataclasses.replace(installed, repacked=False)
    older = Pick(record("2.13.0+cpu", "2026-01-01T00:00:00Z"), "installed", repacked=True)
    assert _date_repacked_first([older, newer])[0] == older
