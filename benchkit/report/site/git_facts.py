"""What the site asks the history's git repository, each in one git call: asv's repository
object asks tag by tag (two processes a tag), and a process started from a publisher holding a
long history's results is slow to start (about 0.1 s each at 1,000 builds x 1,400 benchmarks).
The answers are asv's own: the same tags in the same order, the same dates."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from typing import Any

from benchkit.errors import UserError


def _git_dir(repo: Any) -> str | None:
    """The folder of an asv git repository object; None for another kind (asv's API then)."""
    path = getattr(repo, "_path", None)
    return path if isinstance(path, str) and type(repo).__name__ == "Git" else None


def _git(git_dir: str, *args: str) -> str:
    proc = subprocess.run(["git", "-C", git_dir, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} in {git_dir} failed: {proc.stderr.strip()}")
    return proc.stdout


def tag_commits(repo: Any) -> dict[str, str]:
    """Tag -> the commit it names, in the order of ``git tag -l --sort=taggerdate`` (asv's
    `get_tags`)."""
    git_dir = _git_dir(repo)
    if git_dir is None:
        return dict(repo.get_tags())
    form = "--format=%(refname:strip=2) %(objectname) %(*objectname)"
    listed = _git(git_dir, "for-each-ref", "--sort=taggerdate", form, "refs/tags")
    tags = {}
    for line in listed.splitlines():
        name, target, *peeled = line.split(" ")
        tags[name] = peeled[0] if peeled and peeled[0] else target
    return tags


def commit_dates_ms(repo: Any, commits: Iterable[str]) -> dict[str, int]:
    """Commit -> its author date in milliseconds (asv's `get_date`)."""
    commits = sorted(set(commits))
    git_dir = _git_dir(repo)
    if git_dir is None:
        return {commit: int(repo.get_date_from_name(commit)) for commit in commits}
    if not commits:
        return {}
    listed = _git(git_dir, "log", "--no-walk=unsorted", "--format=%H %at", *commits)
    dates = {}
    for line in listed.splitlines():
        commit, seconds = line.split()
        dates[commit] = int(seconds) * 1000
    return dates
