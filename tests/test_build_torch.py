"""The asv build step: reading torch wheels, deciding how to get one, running it.

Decisions and commands are checked without building PyTorch; the source path
is executed for real on a tiny stand-in project named ``torch``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.wheels import LOCAL_WHEEL, make_fake_torch_wheel

from benchkit.errors import UserError
from benchkit.history.builds import build_step, wheels

REPO_ROOT = Path(__file__).resolve().parent.parent


def _source_checkout(root: Path, requirements: bool = False) -> Path:
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "setup.py").write_text("raise SystemExit('not meant to run')\n")
    if requirements:
        (root / "requirements.txt").write_text("# build requirements\n")
    return root


def _record_checkout(root: Path, wheel: Path, requirement: str | None = None) -> Path:
    info = build_step.read_wheel_info(wheel)
    sha = build_step.file_sha256(wheel)
    record = build_step.BuildRecord(info.version, info.git_version, "2025-05-06T07:08:10Z", wheel.name, sha,
                            wheel.stat().st_size, requirement)  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / build_step.BUILD_FILE).write_text(json.dumps(record.to_json()))
    return root


# ------------------------------------------------------------------ wheel info


def test_reads_version_and_git_version_of_the_local_torch_wheel() -> None:
    info = build_step.read_wheel_info(LOCAL_WHEEL)
    assert info.version == "2.13.0+cpu"
    assert info.git_version == "cf30153c4c131c8164ee7798e5022d810682e2cb"  # upstream commit of 2.13.0
    assert info.cuda is None
    assert 2020 < info.build_date.year < 2100


def test_wheel_info_parses_without_executing(tmp_path: Path) -> None:
    wheel = make_fake_torch_wheel(tmp_path, git_version="b" * 40)
    info = build_step.read_wheel_info(wheel)
    assert (info.version, info.git_version) == ("0.0.1+fake", "b" * 40)
    assert info.build_date.isoformat() == "2025-05-06T07:08:10+00:00"


def test_a_file_that_is_not_a_wheel_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "torch-1.0-py3-none-any.whl"
    bogus.write_text("hello")
    with pytest.raises(UserError, match=r"is not a wheel \(not a zip archive\)"):
        build_step.read_wheel_info(bogus)
    with pytest.raises(UserError, match="no such file"):
        build_step.read_wheel_info(tmp_path / "missing.whl")


def test_a_wheel_that_is_not_torch_is_a_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "numpy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as wheel:
        wheel.writestr("numpy/__init__.py", "")
        wheel.writestr("numpy-1.0.dist-info/METADATA", "Name: numpy\n")
    with pytest.raises(
        UserError, match=r"is not a torch wheel: it has no torch/version.py \(it contains numpy-1.0"
    ):
        build_step.read_wheel_info(other)


# --------------------------------------------------------------------- planning


def test_history_commit_uses_its_wheel_from_the_store(tmp_path: Path) -> None:
    wheel = make_fake_torch_wheel(tmp_path / "built")
    build_step.store_wheel(wheel, build_step.file_sha256(wheel))
    checkout = _record_checkout(tmp_path / "checkout", wheel)
    plan = build_step.plan_build(checkout, "c" * 40, tmp_path / "cache", environ={})
    assert plan.kind == "history-wheel"
    assert plan.wheel is not None and plan.wheel.read_bytes() == wheel.read_bytes()
    assert plan.wheel.parent.parent == build_step.wheel_store()


def test_the_store_keeps_its_own_copy_and_checks_it_when_used(tmp_path: Path) -> None:
    house = tmp_path / "house"
    wheel = make_fake_torch_wheel(house, git_version="9" * 40)
    original = wheel.read_bytes()
    sha = build_step.file_sha256(wheel)
    stored = build_step.stored_wheel_path(sha, wheel.name)
    stored.unlink(missing_ok=True)
    build_step.store_wheel(wheel, sha)
    assert stored.stat().st_ino != wheel.stat().st_ino
    # The user rewrites their file in place: the stored build stays what was recorded.
    with open(wheel, "r+b") as f:
        f.write(b"XXXX")
    assert stored.read_bytes() == original
    checkout = _record_checkout(tmp_path / "checkout", stored)
    assert build_step.plan_build(checkout, "c" * 40, tmp_path / "cache", environ={}).wheel == stored
    # A damaged stored wheel of the same size is not used; it is fetched again from a wheelhouse.
    stored.write_bytes(original[:-4] + b"ZZZZ")
    wheel.write_bytes(original)
    plan = build_step.plan_build(
        checkout, "c" * 40, tmp_path / "cache", environ={build_step.WHEELHOUSE_ENV: str(house)}
    )
    assert plan.wheel == stored and build_step.file_sha256(stored) == sha


def test_history_commit_finds_its_wheel_in_a_wheelhouse_and_checks_the_hash(tmp_path: Path) -> None:
    house = tmp_path / "house"
    wheel = make_fake_torch_wheel(house, git_version="d" * 40)
    checkout = _record_checkout(tmp_path / "checkout", wheel)
    stored = build_step.stored_wheel_path(build_step.file_sha256(wheel), wheel.name)
    stored.unlink(missing_ok=True)
    plan = build_step.plan_build(
        checkout, "c" * 40, tmp_path / "cache", environ={build_step.WHEELHOUSE_ENV: str(house)}
    )
    assert plan.wheel == stored and stored.is_file()

    # Same file name, different content: not the recorded build.
    stored.unlink()
    make_fake_torch_wheel(house, git_version="e" * 40)
    with pytest.raises(UserError, match=r"is neither in the benchkit wheel cache .* BENCHKIT_WHEELHOUSE"):
        build_step.plan_build(
            checkout, "c" * 40, tmp_path / "cache", environ={build_step.WHEELHOUSE_ENV: str(house)}
        )


def test_history_requirement_is_fetched_again_when_the_cache_lost_it(tmp_path: Path, monkeypatch) -> None:
    index = tmp_path / "index"
    wheel = make_fake_torch_wheel(index, git_version="f" * 40, version="0.0.2")
    checkout = _record_checkout(tmp_path / "checkout", wheel, requirement="torch==0.0.2")
    build_step.stored_wheel_path(build_step.file_sha256(wheel), wheel.name).unlink(missing_ok=True)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    plan = build_step.plan_build(checkout, "c" * 40, tmp_path / "cache", environ={})
    assert plan.wheel is not None and build_step.file_sha256(plan.wheel) == build_step.file_sha256(wheel)


def test_source_checkout_uses_a_wheelhouse_wheel_with_the_commits_git_version(tmp_path: Path) -> None:
    house = tmp_path / "house"
    make_fake_torch_wheel(house, git_version="1" * 40, version="0.0.1")
    match = make_fake_torch_wheel(house, git_version="2" * 40, version="0.0.2")
    checkout = _source_checkout(tmp_path / "pytorch")
    plan = build_step.plan_build(
        checkout, "2" * 40, tmp_path / "cache", environ={build_step.WHEELHOUSE_ENV: str(house)}
    )
    assert (plan.kind, plan.wheel) == ("wheelhouse", match)


def _fake_tool(bin_dir: Path, name: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text('#!/bin/sh\nexec "$@"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_source_build_command_flags_and_compiler_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an own wheel store: the build step also looks there by git_version
    monkeypatch.setenv("BENCHKIT_CACHE_DIR", str(tmp_path / "own-cache"))
    checkout = _source_checkout(tmp_path / "pytorch", requirements=True)
    cache = tmp_path / "cache"
    bin_dir = tmp_path / "bin"
    ccache = _fake_tool(bin_dir, "ccache")
    environ = {"PATH": str(bin_dir), "USE_CUDA": "0", "HOME": "/nowhere"}
    plan = build_step.plan_build(checkout, "3" * 40, cache, environ=environ)
    assert plan.kind == "source"
    assert plan.command == (
        "python", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
        "--wheel-dir", str(cache), str(checkout),
    )  # fmt: skip
    assert plan.prerequisites == ("python", "-m", "pip", "install", "-r", str(checkout / "requirements.txt"))
    env = dict(plan.env)
    assert env["USE_CUDA"] == "0"  # the user's flags pass through
    assert env["MAX_JOBS"] == str(os.cpu_count())
    assert env["CMAKE_CXX_COMPILER_LAUNCHER"] == str(ccache)
    assert "HOME" not in env

    sccache = _fake_tool(bin_dir, "sccache")  # preferred when both exist
    assert dict(build_step.plan_build(checkout, "3" * 40, cache, environ=environ).env)[
        "CMAKE_C_COMPILER_LAUNCHER"
    ] == str(sccache)
    chosen = {**environ, "CMAKE_CXX_COMPILER_LAUNCHER": "distcc", "MAX_JOBS": "7"}
    env = dict(build_step.plan_build(checkout, "3" * 40, cache, environ=chosen).env)
    assert env["CMAKE_CXX_COMPILER_LAUNCHER"] == "distcc" and "CMAKE_C_COMPILER_LAUNCHER" not in env
    assert env["MAX_JOBS"] == "7"
    assert "ccache" not in json.dumps(
        build_step.plan_build(checkout, "3" * 40, cache, environ={"PATH": ""}).env
    )


def test_missing_wheelhouse_is_a_clear_error(tmp_path: Path) -> None:
    checkout = _source_checkout(tmp_path / "pytorch")
    with pytest.raises(UserError, match=r"wheelhouse .*nope \(from BENCHKIT_WHEELHOUSE\) does not exist"):
        build_step.plan_build(
            checkout, "4" * 40, tmp_path / "c", environ={build_step.WHEELHOUSE_ENV: str(tmp_path / "nope")}
        )


def test_commit_with_no_wheel_and_no_source_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an own wheel store: the build step also looks there by git_version
    monkeypatch.setenv("BENCHKIT_CACHE_DIR", str(tmp_path / "own-cache"))
    empty = tmp_path / "checkout"
    empty.mkdir()
    (empty / "README").write_text("just a file")
    with pytest.raises(
        UserError, match=r"nothing to build .* no benchkit-build.json .* not a PyTorch source"
    ):
        build_step.plan_build(empty, "5" * 40, tmp_path / "c", environ={})
    checkout = _source_checkout(tmp_path / "pytorch")
    with pytest.raises(
        UserError, match=r"no torch wheel with this git_version .* source builds are disabled"
    ):
        build_step.plan_build(checkout, "5" * 40, tmp_path / "c", environ={build_step.SOURCE_BUILD_ENV: "0"})


def test_build_step_cli_reports_errors_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchkit.cli.build_step", "build", "--build-dir", str(tmp_path),
         "--cache-dir", str(tmp_path / "cache"), "--commit", "6" * 40],
        cwd=REPO_ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("benchkit-build: error: commit 666666666666: nothing to build")
    assert "Traceback" not in result.stderr


# -------------------------------------------------------------------- execution


def test_source_build_runs_pip_wheel_and_keeps_the_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an own wheel store: the build step also looks there by git_version
    monkeypatch.setenv("BENCHKIT_CACHE_DIR", str(tmp_path / "own-cache"))
    """The real source path, on a stand-in project (PyTorch itself would take hours)."""
    checkout = tmp_path / "pytorch"
    (checkout / "torch").mkdir(parents=True)
    (checkout / "torch" / "__init__.py").write_text("")
    (checkout / "torch" / "version.py").write_text(
        "__version__ = '0.0.3'\ngit_version = '" + "7" * 40 + "'\n"
    )
    (checkout / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='torch', version='0.0.3', packages=['torch'])\n"
    )
    house, cache = tmp_path / "house", tmp_path / "cache"
    house.mkdir()
    environ = {**os.environ, build_step.WHEELHOUSE_ENV: str(house)}
    plan = build_step.plan_build(checkout, "7" * 40, cache, environ=environ)
    assert plan.kind == "source"
    built = build_step.execute_plan(plan, cache, environ=environ)
    assert built.parent == cache and build_step.read_wheel_info(built).git_version == "7" * 40
    assert [p.name for p in house.iterdir()] == [built.name]
    # The next build of this commit finds the kept wheel instead of compiling again.
    assert (
        build_step.plan_build(checkout, "7" * 40, tmp_path / "cache2", environ=environ).kind == "wheelhouse"
    )


def test_execute_plan_leaves_exactly_one_wheel_for_asv(tmp_path: Path) -> None:
    wheel = make_fake_torch_wheel(tmp_path / "built")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "torch-old-py3-none-any.whl").write_text("stale")
    plan = build_step.BuildPlan("wheelhouse", "8" * 40, "test", wheel=wheel)
    result = build_step.execute_plan(plan, cache, environ={})
    assert sorted(p.name for p in cache.glob("*.whl")) == [wheel.name]
    assert result.read_bytes() == wheel.read_bytes()


# ------------------------------------------------------------ install checking


def _install_into(site: Path, wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)


def test_verify_detects_a_half_replaced_torch(tmp_path: Path) -> None:
    wheel = make_fake_torch_wheel(tmp_path / "w", extra={"torch/nn.py": b"x = 1\n"})
    site = tmp_path / "site"
    _install_into(site, wheel)
    assert wheels.verify_installed(wheel, [site]) == 3
    (site / "torch" / "nn.py").write_text("x = 2  # left over from an older build\n")
    with pytest.raises(UserError, match=r"differs from torch-0.0.1\+fake-py3-none-any.whl: torch/nn.py"):
        wheels.verify_installed(wheel, [site])
    with pytest.raises(UserError, match="no torch installed"):
        wheels.verify_installed(wheel, [tmp_path / "empty"])


def test_patch_wheel_replaces_a_file_and_keeps_record_truthful(tmp_path: Path) -> None:
    wheel = make_fake_torch_wheel(tmp_path / "w", extra={"torch/nn.py": b"x = 1\n"})
    patched = wheels.patch_wheel(wheel, tmp_path / "p" / wheel.name, {"torch/nn.py": b"x = 1\nx += 1\n"})
    site = tmp_path / "site"
    _install_into(site, patched)
    assert (site / "torch" / "nn.py").read_text() == "x = 1\nx += 1\n"
    assert wheels.verify_installed(patched, [site]) == 3  # RECORD hashes match the new content
    with pytest.raises(UserError, match=r"torch/nn\.py"):
        wheels.verify_installed(wheel, [site])
    assert build_step.read_wheel_info(patched).git_version == build_step.read_wheel_info(wheel).git_version


def test_repo_asv_config_routes_builds_through_this_module() -> None:
    from asv import util as asv_util

    conf = asv_util.load_json(str(REPO_ROOT / "asv.conf.json"), js_comments=True)
    for key, value in build_step.asv_build_settings().items():
        assert conf[key] == value, key
