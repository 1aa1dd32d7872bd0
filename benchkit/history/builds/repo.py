"""`benchkit history`: a git repository in which each commit stands for one torch build.

asv measures *commits of a repository*. PyTorch's own repository would need a
multi-hour source build per commit, so a wheel history gives asv prebuilt
torch builds instead: commit date = the build's date (asv orders and plots by
it), message = torch version and upstream ``torch.version.git_version``, one
tag per version. The commit holds only ``benchkit-build.json`` (file name,
sha256 and size of the wheel, or the requirement it came from); wheels stay in
benchkit's wheel cache. Commits are made with fixed author and dates and record
no local paths, so the same builds give the same commit hashes everywhere and
results from many machines land on the same commits of one site.

The repository is bare: nothing is checked out there, asv clones commits itself.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchkit.errors import UserError
from benchkit.history.builds.build_step import BUILD_FILE, BuildRecord
from benchkit.history.builds.sources import PIP_CONFIG, PipSource, fetch
from benchkit.history.builds.wheels import file_sha256, read_wheel_info, store_wheel

MAIN_BRANCH = "main"
DEFAULT_REPO = Path(".benchkit/torch-history")
_IDENTITY = {
    "GIT_AUTHOR_NAME": "benchkit",
    "GIT_AUTHOR_EMAIL": "benchkit@localhost",
    "GIT_COMMITTER_NAME": "benchkit",
    "GIT_COMMITTER_EMAIL": "benchkit@localhost",
}


def log(message: str) -> None:
    print(f"benchkit history: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------- git access


@dataclasses.dataclass(frozen=True)
class HistoryRepo:
    path: Path

    def git(
        self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None, check: bool = True
    ) -> str:
        full_env = {**os.environ, "GIT_DIR": str(self.path), **(env or {})}
        result = subprocess.run(
            ["git", *args], input=stdin, env=full_env, capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            raise UserError(f"git {' '.join(args)} failed in {self.path}: {result.stderr.strip()}")
        return result.stdout.strip()

    def exists(self) -> bool:
        return (self.path / "objects").is_dir() and (self.path / "HEAD").is_file()

    def require(self) -> None:
        if not self.exists():
            raise UserError(f"no torch history at {self.path}: create it with `benchkit history init`")

    def init(self) -> None:
        if self.path.exists() and any(self.path.iterdir()) and not self.exists():
            raise UserError(f"{self.path} exists and is not a benchkit history repository")
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--quiet", "--bare", f"--initial-branch={MAIN_BRANCH}", str(self.path)],
            check=True,
            capture_output=True,
        )
        (self.path / "description").write_text("benchkit torch history: one commit per torch build\n")

    def branch_tip(self, branch: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False)
        return out or None

    def head_branch(self) -> str:
        """The branch HEAD names: what `asv run HEAD^!` and `asv continuous main HEAD` measure."""
        return self.git("symbolic-ref", "--short", "HEAD")

    def set_head(self, branch: str) -> None:
        if self.branch_tip(branch) is None:
            raise UserError(
                f"history {self.path} has no branch {branch!r} (branches: {', '.join(self.branches())})"
            )
        self.git("symbolic-ref", "HEAD", f"refs/heads/{branch}")

    def branches(self) -> list[str]:
        out = self.git("for-each-ref", "--format=%(refname:short)", "refs/heads")
        names = out.splitlines()
        return sorted(names, key=lambda n: (n != MAIN_BRANCH, n))

    def commits(self, revision_range: str) -> list[str]:
        """Commits oldest first."""
        out = self.git("rev-list", "--reverse", "--first-parent", revision_range)
        return out.splitlines()

    def record(self, commit: str) -> BuildRecord:
        text = self.git("show", f"{commit}:{BUILD_FILE}")
        return BuildRecord.from_json(json.loads(text), f"{self.path} commit {commit[:12]}")

    def tags_by_commit(self) -> dict[str, list[str]]:
        out = self.git("for-each-ref", "--format=%(objectname) %(*objectname) %(refname:short)", "refs/tags")
        tags: dict[str, list[str]] = {}
        for line in out.splitlines():
            parts = line.split()
            commit = parts[1] if len(parts) == 3 else parts[0]
            tags.setdefault(commit, []).append(parts[-1])
        return tags

    def commit_record(self, record: BuildRecord, branch: str, tag: str | None) -> str:
        """Append `record` to `branch` (created off main when new); returns the commit hash."""
        content = json.dumps(record.to_json(), indent=1, sort_keys=True) + "\n"
        blob = self.git("hash-object", "-w", "--stdin", stdin=content)
        tree = self.git("mktree", stdin=f"100644 blob {blob}\t{BUILD_FILE}\n")
        old_tip = self.branch_tip(branch)
        parent = old_tip if old_tip is not None else self.branch_tip(MAIN_BRANCH)
        date = f"{int(_parse_date(record.build_date))} +0000"
        env = {**_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        message = commit_message(record)
        args = ["commit-tree", tree, *(["-p", parent] if parent else []), "-F", "-"]
        commit = self.git(*args, stdin=message, env=env)
        # One transaction: the branch moves and the tag appears together, or neither does.
        # Compare-and-swap: a concurrent `history add` to the same branch fails instead of being lost.
        # A lightweight tag (a plain ref): asv then names commits by the bare tag.
        updates = f"update refs/heads/{branch} {commit} {old_tip or '0' * 40}\n"
        if tag:
            updates += f"create refs/tags/{tag} {commit}\n"
        self.git("update-ref", "--stdin", stdin=f"start\n{updates}prepare\ncommit\n")
        return commit

    def check_ref_name(self, kind: str, name: str) -> None:
        """A clear error unless `name` is a valid branch ("heads") or tag ("tags") name, before any change."""
        what = "branch" if kind == "heads" else "tag"
        if not name or name.startswith("-"):
            raise UserError(f"invalid {what} name {name!r}: it must not be empty or start with '-'")
        if subprocess.run(["git", "check-ref-format", f"refs/{kind}/{name}"], capture_output=True).returncode:
            raise UserError(f"invalid {what} name {name!r} (see `git help check-ref-format`)")
        if kind == "tags" and self.git("rev-parse", "--verify", "--quiet", f"refs/tags/{name}", check=False):
            raise UserError(f"tag {name!r} already exists in {self.path}; choose another with --tag")


def _parse_date(iso: str) -> float:
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UserError(f"build record has an invalid build_date {iso!r}") from None


def commit_message(record: BuildRecord) -> str:
    lines = [f"torch {record.torch_version} (git_version {record.git_version})", ""]
    lines.append(f"wheel: {record.wheel_filename}")
    lines.append(f"sha256: {record.wheel_sha256}")
    if record.requirement:
        lines.append(f"requirement: {record.requirement}")
    if record.note:
        lines.append(f"note: {record.note}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------- build records


def record_for_wheel(path: Path, requirement: str | None = None, note: str | None = None) -> BuildRecord:
    """Read a torch wheel, keep it in the wheel cache, and describe it as a build record."""
    info = read_wheel_info(path)
    sha = file_sha256(path)
    store_wheel(path, sha)
    return BuildRecord(
        torch_version=info.version,
        git_version=info.git_version,
        build_date=info.build_date.strftime("%Y-%m-%dT%H:%M:%SZ"),
        wheel_filename=info.filename,
        wheel_sha256=sha,
        wheel_size=path.stat().st_size,
        requirement=requirement,
        note=note,
    )


def record_for_requirement(
    requirement: str, note: str | None = None, source: PipSource = PIP_CONFIG
) -> BuildRecord:
    """The wheel pip picks for `requirement` (no dependencies), kept in the wheel store and recorded.

    A wheel already in the store (same sha256) is not fetched again.
    """
    if not re.match(r"torch(?![A-Za-z0-9_.-])", requirement.replace(" ", "")):
        raise UserError(
            f"{requirement!r} is neither a wheel file nor a torch requirement such as torch==2.14.1"
        )
    fetched = fetch(requirement, source)
    return record_for_wheel(fetched.path, requirement=requirement, note=note)


def record_for(build: str, note: str | None = None, source: PipSource = PIP_CONFIG) -> BuildRecord:
    path = Path(build).expanduser()
    if path.suffix == ".whl" or path.exists() or os.sep in build:
        return record_for_wheel(path, note=note)
    return record_for_requirement(build, note=note, source=source)


# ------------------------------------------------------------------- operations


def default_tag(repo: HistoryRepo, version: str) -> str:
    existing = set(repo.git("tag", "--list").splitlines())
    # A version may hold characters a tag cannot (spaces, "..", "~", ":", ...).
    base = "torch-" + re.sub(r"[^A-Za-z0-9._+-]+|\.\.+", "-", version).strip(".-")
    if base not in existing:
        return base
    n = 2
    while f"{base}-{n}" in existing:
        n += 1
    return f"{base}-{n}"


def add_build(
    repo: HistoryRepo,
    record: BuildRecord,
    branch: str = MAIN_BRANCH,
    tag: str | None = None,
    allow_duplicate: bool = False,
) -> str:
    repo.require()
    repo.check_ref_name("heads", branch)
    tag = tag or default_tag(repo, record.torch_version)
    repo.check_ref_name("tags", tag)
    if branch != MAIN_BRANCH and repo.branch_tip(MAIN_BRANCH) is None:
        raise UserError(f"history {repo.path} has no {MAIN_BRANCH} branch yet; add a build to it first")
    tip = repo.branch_tip(branch) or repo.branch_tip(MAIN_BRANCH)
    if tip is not None:
        for commit in repo.commits(tip):
            if repo.record(commit).wheel_sha256 == record.wheel_sha256 and not allow_duplicate:
                raise UserError(
                    f"{record.wheel_filename} is already commit {commit[:12]} of branch {branch} in "
                    f"{repo.path} (pass --allow-duplicate to measure the same build twice)"
                )
        previous = repo.record(tip)
        if _parse_date(record.build_date) < _parse_date(previous.build_date):
            log(
                f"warning: {record.torch_version} was built {record.build_date}, before the tip of "
                f"{branch} ({previous.torch_version}, {previous.build_date}); asv orders commits by date"
            )
    commit = repo.commit_record(record, branch, tag)
    log(f"{branch}: {commit[:12]} torch {record.torch_version} (git_version {record.git_version[:12]})")
    repo.set_head(branch)  # like a checkout: HEAD is the branch of the build added last
    return commit


def describe_refs(repo: HistoryRepo) -> list[str]:
    """One line each for main and HEAD: what `asv continuous main HEAD` compares."""
    lines = []
    head = repo.head_branch()
    for name, branch in ((MAIN_BRANCH, MAIN_BRANCH), ("HEAD", head)):
        tip = repo.branch_tip(branch)
        if tip is None:
            lines.append(f"{name}: (no builds yet)")
            continue
        record = repo.record(tip)
        via = f" -> {branch}" if name == "HEAD" else ""
        lines.append(f"{name}{via}: {tip[:12]} torch {record.torch_version} (built {record.build_date})")
    return lines


def init_history(
    repo: HistoryRepo, builds: Sequence[str], optional: Sequence[str] = (), source: PipSource = PIP_CONFIG
) -> list[str]:
    """Create (or complete) the history's main branch with `builds`, oldest build first.

    Builds already on main are kept; `optional` builds that cannot be fetched
    (e.g. no network, or not installable on this platform) are skipped with a warning.
    """
    records: list[BuildRecord] = []
    for build in builds:
        try:
            records.append(record_for(build, source=source))
        except UserError as e:
            if build not in optional:
                raise
            log(f"warning: leaving {build} out of the history: {e}")
    return init_history_records(repo, records)


def init_history_records(repo: HistoryRepo, records: Sequence[BuildRecord]) -> list[str]:
    """Put `records` on main, sorted by build date, leaving out builds main already has."""
    if not repo.exists():
        repo.init()
        log(f"created {repo.path}")
    tip = repo.branch_tip(MAIN_BRANCH)
    on_main = {repo.record(c).wheel_sha256 for c in repo.commits(tip)} if tip else set()
    added = []
    for record in sorted(records, key=lambda r: _parse_date(r.build_date)):
        if record.wheel_sha256 in on_main:
            log(f"main already has torch {record.torch_version}")
            continue
        added.append(add_build(repo, record))
        on_main.add(record.wheel_sha256)
    return added


@dataclasses.dataclass(frozen=True)
class HistoryRow:
    """One build of the history as `benchkit history list` shows it."""

    branch: str
    commit: str  # abbreviated
    built: str
    torch: str  # the version, with the build's note in brackets
    git_version: str  # abbreviated
    tags: tuple[str, ...]

    HEADER = ("branch", "commit", "built", "torch", "git_version", "tags")

    def cells(self) -> tuple[str, ...]:
        return (self.branch, self.commit, self.built, self.torch, self.git_version, ",".join(self.tags))


def history_rows(repo: HistoryRepo) -> list[HistoryRow]:
    """Every build, main's first."""
    repo.require()
    tags = repo.tags_by_commit()
    rows = []
    for branch in repo.branches():
        revision_range = branch if branch == MAIN_BRANCH else f"{MAIN_BRANCH}..{branch}"
        if branch != MAIN_BRANCH and repo.branch_tip(MAIN_BRANCH) is None:
            revision_range = branch
        for commit in repo.commits(revision_range):
            record = repo.record(commit)
            rows.append(
                HistoryRow(
                    branch=branch,
                    commit=commit[:12],
                    built=record.build_date,
                    torch=record.torch_version + (f" [{record.note}]" if record.note else ""),
                    git_version=record.git_version[:12],
                    tags=tuple(tags.get(commit, [])),
                )
            )
    return rows


# ------------------------------------------------------------------ asv config


def repo_from_asv_config(config: Path | None) -> Path:
    """The ``repo`` of the asv config (relative to its folder), or the default location."""
    path = config or Path("asv.conf.json")
    if not path.is_file():
        if config is not None:
            raise UserError(f"asv config {config} not found")
        return DEFAULT_REPO.resolve()
    from asv import util as asv_util

    try:
        data = asv_util.load_json(str(path), js_comments=True)
    except asv_util.UserError as e:
        raise UserError(f"{path}: {e}") from None
    repo = data.get("repo")
    if not isinstance(repo, str):
        raise UserError(f'{path}: no "repo" entry naming the torch history')
    return (path.resolve().parent / repo).resolve()
