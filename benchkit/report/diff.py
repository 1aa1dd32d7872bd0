"""Where instructions went between two commits: stored profiles found by commit,
diffed case by case (`benchkit diff`, the site's "why" pages).

* `find_profiles(results_dir)` lists stored profiles; `resolve_profiles(names, ...)`
  takes files, commit hashes (prefixes) or history refs;
* `diff_profiles(base, head)` -> one `CaseDiff` per case: the change of the total
  per execution and the functions that moved most, in both directions.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.measure.callgrind.profiles import PROFILE_DIR, SUFFIX, CaseProfile, Profile


@dataclasses.dataclass(frozen=True)
class ProfileFile:
    path: Path
    machine: str
    commit: str
    env_name: str


def find_profiles(results_dir: str | os.PathLike[str], machine: str | None = None) -> list[ProfileFile]:
    """Stored profiles below an asv results directory (optionally of one machine)."""
    found = []
    for path in sorted(Path(results_dir).glob(f"*/{PROFILE_DIR}/*{SUFFIX}")):
        stem = path.name[: -len(SUFFIX)]
        commit, _, env_name = stem.partition("-")
        owner = path.parent.parent.name
        if machine is None or owner == machine:
            found.append(ProfileFile(path, owner, commit, env_name))
    return found


def resolve_profiles(
    names: Sequence[str],
    asv_config: Path = Path("asv.conf.json"),
    machine: str | None = None,
    env: str | None = None,
) -> list[Path]:
    """Each name's profile file: a file path as it is, else a commit hash (prefix) with stored
    profiles or a ref of the history. asv's config is read once, when a name is not a file."""
    from benchkit.history.results.read import load_asv_config

    conf = None
    paths = []
    for name in names:
        if Path(name).is_file():
            paths.append(Path(name))
            continue
        if conf is None:
            conf = load_asv_config(asv_config)
        paths.append(_stored_profile(name, conf, machine, env))
    return paths


def _stored_profile(name: str, conf: Any, machine: str | None = None, env: str | None = None) -> Path:
    """The stored profile of a commit hash (prefix) or a ref of the history (`conf`: asv's config)."""
    from benchkit.history.results.read import resolve_commit

    profiles = find_profiles(conf.results_dir, machine)
    machines = sorted({p.machine for p in profiles})
    if not profiles:
        where = f" for machine {machine}" if machine else ""
        raise UserError(
            f"no stored profiles{where} in {conf.results_dir}: run asv with track_instructions first"
        )
    if len(machines) > 1:
        raise UserError(f"profiles of several machines ({', '.join(machines)}): choose one with --machine")
    commit = name
    if not any(p.commit.startswith(name) for p in profiles):
        commit = resolve_commit(conf, name, machines[0])
    matches = [p for p in profiles if p.commit.startswith(commit) and (env is None or p.env_name == env)]
    if not matches:
        raise UserError(
            f"{name!r}: no stored profile for commit {commit[:8]}" + (f" in {env}" if env else "")
        )
    if len({p.commit for p in matches}) > 1:
        raise UserError(f"{name!r} is ambiguous: {', '.join(sorted({p.commit[:12] for p in matches}))}")
    if len(matches) > 1:
        envs = ", ".join(p.env_name for p in matches)
        raise UserError(f"{name!r}: profiles of several environments ({envs}): choose one with --env")
    return matches[0].path


@dataclasses.dataclass(frozen=True)
class FunctionDelta:
    function: str
    base: float  # instructions per execution
    head: float

    @property
    def delta(self) -> float:
        return self.head - self.base


@dataclasses.dataclass(frozen=True)
class CaseDiff:
    """How one case changed. ``status``: changed, unchanged, failed (either side not ok),
    added (only in head) or removed (only in base)."""

    key: str
    status: str
    base: float | None
    head: float | None
    increases: tuple[FunctionDelta, ...] = ()
    decreases: tuple[FunctionDelta, ...] = ()
    note: str = ""

    @property
    def delta(self) -> float | None:
        return None if self.base is None or self.head is None else self.head - self.base

    @property
    def relative(self) -> float | None:
        return None if self.delta is None or not self.base else self.delta / self.base

    def to_json(self) -> dict[str, Any]:
        def moved(items: tuple[FunctionDelta, ...]) -> list[dict[str, Any]]:
            return [{"function": d.function, "base": d.base, "head": d.head, "delta": d.delta} for d in items]

        return {
            "status": self.status,
            "base": self.base,
            "head": self.head,
            "delta": self.delta,
            "relative": self.relative,
            "increases": moved(self.increases),
            "decreases": moved(self.decreases),
            "note": self.note,
        }


def diff_case(base: CaseProfile, head: CaseProfile, top: int = 10) -> CaseDiff:
    if base.status != "ok" or head.status != "ok":
        side = "base" if base.status != "ok" else "head"
        error = (base if side == "base" else head).error.strip().splitlines()
        return CaseDiff(
            base.key,
            "failed",
            base.instructions,
            head.instructions,
            note=f"{side} {(base if side == 'base' else head).status}: {error[-1] if error else ''}",
        )
    before, after = base.per_execution(), head.per_execution()
    deltas = [
        FunctionDelta(fn, before.get(fn, 0.0), after.get(fn, 0.0)) for fn in before.keys() | after.keys()
    ]
    deltas = [d for d in deltas if d.delta]
    up = sorted((d for d in deltas if d.delta > 0), key=lambda d: (-d.delta, d.function))
    down = sorted((d for d in deltas if d.delta < 0), key=lambda d: (d.delta, d.function))
    status = "changed" if base.instructions != head.instructions else "unchanged"
    return CaseDiff(
        base.key, status, base.instructions, head.instructions, tuple(up[:top]), tuple(down[:top])
    )


def diff_profiles(base: Profile, head: Profile, pattern: str | None = None, top: int = 10) -> list[CaseDiff]:
    """One `CaseDiff` per case in either profile (matching `pattern`), largest relative change first."""
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as e:
        raise UserError(f"--filter {pattern!r} is not a valid regular expression: {e}") from None
    diffs = []
    for key in dict.fromkeys([*base.cases, *head.cases]):
        if regex is not None and not regex.search(key):
            continue
        if key not in head.cases:
            diffs.append(CaseDiff(key, "removed", base.cases[key].instructions, None))
        elif key not in base.cases:
            diffs.append(CaseDiff(key, "added", None, head.cases[key].instructions))
        else:
            diffs.append(diff_case(base.cases[key], head.cases[key], top))
    order = {"changed": 0, "failed": 1, "added": 2, "removed": 3, "unchanged": 4}
    return sorted(diffs, key=lambda d: (order[d.status], -abs(d.relative or 0.0), d.key))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def format_diff(
    diffs: Sequence[CaseDiff], base_label: str, head_label: str, show_unchanged: bool = False
) -> str:
    lines = [f"instructions per execution: {base_label} -> {head_label}", ""]
    for d in diffs:
        if d.status == "unchanged" and not show_unchanged:
            continue
        if d.status in ("changed", "unchanged"):
            rel = d.relative or 0.0
            lines.append(f"{d.key}")
            lines.append(f"  {_fmt(d.base)} -> {_fmt(d.head)}  ({d.delta:+,.1f}, {rel:+.3%})")
            width = max((len(f"{m.delta:+,.1f}") for m in (*d.increases, *d.decreases)), default=0)
            for moved in (*d.increases, *d.decreases):
                lines.append(f"    {moved.delta:>+{width},.1f}  {moved.function}")
        else:
            lines.append(f"{d.key}")
            lines.append(f"  {d.status}: {_fmt(d.base)} -> {_fmt(d.head)}  {d.note}".rstrip())
        lines.append("")
    counts: dict[str, int] = {}
    for d in diffs:
        counts[d.status] = counts.get(d.status, 0) + 1
    lines.append(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no cases")
    return "\n".join(lines) + "\n"
