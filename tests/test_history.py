"""`benchkit history`: a real git repository of torch builds, made from real wheels."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest
from support.wheels import LOCAL_WHEEL, make_fake_torch_wheel

from benchkit.errors import UserError
from benchkit.history.builds import repo as history
from benchkit.history.builds.build_step import BUILD_FILE
from benchkit.history.builds.wheels import file_sha256, stored_wheel_path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "history", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )


def test_init_makes_one_commit_per_build_dated_and_tagged(tmp_path: Path) -> None:
    repo = history.HistoryRepo(tmp_path / "hist")
    [commit] = history.init_history(repo, [str(LOCAL_WHEEL)])
    record = repo.record(commit)
    assert record.torch_version == "2.13.0+cpu"
    assert record.wheel_filename == LOCAL_WHEEL.name
    # commit date = the build's date; message = version and upstream commit
    built = dt.datetime.fromisoformat(record.build_date.replace("Z", "+00:00"))
    assert int(_git(repo.path, "log", "-1", "--format=%at", commit)) == int(built.timestamp())
    assert int(_git(repo.path, "log", "-1", "--format=%ct", commit)) == int(built.timestamp())
    assert _git(repo.path, "log", "-1", "--format=%s", commit) == (
        f"torch 2.13.0+cpu (git_version {record.git_version})"
    )
    assert _git(repo.path, "rev-list", "-n1", "torch-2.13.0+cpu") == commit
    assert _git(repo.path, "ls-tree", "--name-only", commit) == BUILD_FILE
    # the wheel is kept (hard-linked where possible) in the content-addressed store
    assert stored_wheel_path(record.wheel_sha256, LOCAL_WHEEL.name).is_file()
    # init again: nothing to add, same commit
    assert history.init_history(repo, [str(LOCAL_WHEEL)]) == []
    assert repo.branch_tip("main") == commit


def test_same_builds_give_the_same_commits_on_any_machine(tmp_path: Path) -> None:
    """No local paths or clock times in commits: results from many machines share commit hashes."""
    wheel_a = make_fake_torch_wheel(
        tmp_path / "a", git_version="1" * 40, version="0.1", date_time=(2025, 1, 1, 0, 0, 0)
    )
    wheel_b = make_fake_torch_wheel(
        tmp_path / "b", git_version="2" * 40, version="0.2", date_time=(2025, 2, 1, 0, 0, 0)
    )
    tips = []
    for name in ("one", "two"):
        repo = history.HistoryRepo(tmp_path / name)
        # given newest first: init sorts by build date
        history.init_history(repo, [str(wheel_b), str(wheel_a)])
        tips.append(repo.branch_tip("main"))
        assert [repo.record(c).torch_version for c in repo.commits("main")] == ["0.1", "0.2"]
    assert tips[0] == tips[1]


def test_add_on_a_branch_starts_at_main_and_lists(tmp_path: Path) -> None:
    repo = history.HistoryRepo(tmp_path / "hist")
    base = make_fake_torch_wheel(tmp_path / "a", git_version="3" * 40, version="1.0")
    pr = make_fake_torch_wheel(
        tmp_path / "b", git_version="4" * 40, version="1.0", extra={"torch/x.py": b"1\n"}
    )
    history.init_history(repo, [str(base)])
    pr_commit = history.add_build(repo, history.record_for(str(pr), note="my PR"), branch="my-pr")
    assert _git(repo.path, "rev-parse", f"{pr_commit}^") == repo.branch_tip("main")
    assert _git(repo.path, "rev-list", "-n1", "torch-1.0-2") == pr_commit  # version tag taken: numbered
    rows = history.history_rows(repo)
    assert [(r.branch, r.torch, r.tags) for r in rows] == [
        ("main", "1.0", ("torch-1.0",)),
        ("my-pr", "1.0 [my PR]", ("torch-1.0-2",)),
    ]

    result = _cli("list", "--repo", str(repo.path))
    assert result.returncode == 0, result.stderr
    assert "my-pr" in result.stdout and "1.0 [my PR]" in result.stdout


def test_bad_input_gives_one_line_errors(tmp_path: Path) -> None:
    repo = history.HistoryRepo(tmp_path / "hist")
    with pytest.raises(UserError, match=r"no torch history at .*benchkit history init"):
        history.add_build(repo, history.record_for(str(make_fake_torch_wheel(tmp_path / "w"))))
    history.init_history(repo, [str(make_fake_torch_wheel(tmp_path / "w"))])

    not_a_wheel = tmp_path / "notes.whl"
    not_a_wheel.write_text("text")
    result = _cli("add", "--repo", str(repo.path), str(not_a_wheel))
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"benchkit history: error: {not_a_wheel} is not a wheel (not a zip archive)"
    )

    result = _cli("add", "--repo", str(repo.path), "numpy==2.0")
    assert result.returncode == 2 and "neither a wheel file nor a torch requirement" in result.stderr

    result = _cli("add", "--repo", str(repo.path), str(tmp_path / "w" / "torch-0.0.1+fake-py3-none-any.whl"))
    assert (
        result.returncode == 2 and "already commit" in result.stderr and "--allow-duplicate" in result.stderr
    )

    other = tmp_path / "junk"
    other.mkdir()
    (other / "file").write_text("x")
    with pytest.raises(UserError, match="exists and is not a benchkit history repository"):
        history.init_history(history.HistoryRepo(other), [str(make_fake_torch_wheel(tmp_path / "w"))])


def test_bad_tag_or_branch_names_change_nothing(tmp_path: Path) -> None:
    repo = history.HistoryRepo(tmp_path / "hist")
    history.init_history(repo, [str(make_fake_torch_wheel(tmp_path / "a", git_version="5" * 40))])
    before = _git(repo.path, "for-each-ref")
    pr = make_fake_torch_wheel(tmp_path / "b", git_version="6" * 40, extra={"torch/y.py": b"2\n"})
    for option in ("--tag=-d", "--tag=bad..name", "--tag=torch-0.0.1+fake", "--branch=-x", "--branch=a b"):
        result = _cli("add", "--repo", str(repo.path), option, str(pr))
        assert result.returncode == 2, (option, result.stderr)
        assert "invalid" in result.stderr or "already exists" in result.stderr, result.stderr
        assert _git(repo.path, "for-each-ref") == before, f"{option} changed the history"
    # A version that is no valid tag name gets a cleaned default tag, in one step with the commit.
    odd = make_fake_torch_wheel(tmp_path / "c", git_version="7" * 40, version="1.0 beta..2")
    commit = history.add_build(repo, history.record_for(str(odd)))
    assert _git(repo.path, "rev-list", "-n1", "torch-1.0-beta-2") == commit


def test_requirement_builds_are_fetched_with_pip_and_recorded(tmp_path: Path, monkeypatch) -> None:
    index = tmp_path / "index"
    wheel = make_fake_torch_wheel(index, git_version="5" * 40, version="0.0.5")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    repo = history.HistoryRepo(tmp_path / "hist")
    history.init_history(repo, ["torch==0.0.5"])
    record = repo.record(repo.branch_tip("main") or "")
    assert (record.requirement, record.wheel_sha256) == ("torch==0.0.5", file_sha256(wheel))
    assert "requirement: torch==0.0.5" in _git(repo.path, "log", "-1", "--format=%B", "main")


def test_optional_default_build_that_cannot_be_fetched_is_left_out(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty-index"))
    local = make_fake_torch_wheel(tmp_path / "w")
    repo = history.HistoryRepo(tmp_path / "hist")
    added = history.init_history(repo, [str(local), "torch==99.0"], optional=["torch==99.0"])
    assert len(added) == 1
    with pytest.raises(UserError, match=r"pip finds no wheel for torch==99\.0"):
        history.init_history(repo, ["torch==99.0"])


def test_history_location_comes_from_the_asv_config(tmp_path: Path) -> None:
    assert (
        history.repo_from_asv_config(REPO_ROOT / "asv.conf.json") == REPO_ROOT / ".benchkit" / "torch-history"
    )
    conf = tmp_path / "asv.conf.json"
    conf.write_text('{\n  // comment\n  "version": 1, "repo": "hist"\n}\n')
    assert history.repo_from_asv_config(conf) == tmp_path / "hist"
    with pytest.raises(UserError, match="not found"):
        history.repo_from_asv_config(tmp_path / "missing.json")
