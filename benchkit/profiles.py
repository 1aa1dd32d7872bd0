"""Function-level instruction profiles: kept per commit and case, diffed between commits.

A count says *that* a case got slower; the profile says *where*. Every batch of
`benchkit.callgrind_track` keeps, per case, the standardized exclusive
instruction counts of each function (of the repeat whose total is reported).
Under asv they are stored beside asv's own results, one compressed file per
machine, commit and environment::

    <results_dir>/<machine>/benchkit-profiles/<commit>-<environment>.json.gz

asv reads every ``*.json`` below its results directory; ``.json.gz`` files are
left alone. Function names are stored once per file (a string table), so a
profile of the standard suite is a few hundred kilobytes.

Python API (used by ``benchkit diff`` and the site's "why" pages):

* `load_profile(path)` -> `Profile`; `find_profiles(results_dir)` lists stored ones;
* `resolve_profile(name, ...)`: a file, a commit hash (prefix) or a history ref;
* `diff_profiles(base, head)` -> one `CaseDiff` per case: the change of the
  total per execution and the functions that moved most, in both directions.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import platform
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit.errors import UserError
from benchkit.util import atomic_write_bytes

if TYPE_CHECKING:
    from benchkit.callgrind_track import BatchResult

FORMAT = "benchkit-callgrind-profile"
VERSION = 1
PROFILE_DIR = "benchkit-profiles"
SUFFIX = ".json.gz"
MACHINE_ENV = "BENCHKIT_ASV_MACHINE"


@dataclasses.dataclass(frozen=True)
class CaseProfile:
    """One case of a profile. ``functions`` hold totals over ``number`` executions."""

    key: str
    status: str  # "ok" | "failed" | "skipped"
    instructions: float | None  # per execution
    number: int
    functions: Mapping[str, int] = dataclasses.field(repr=False)
    error: str = ""

    def per_execution(self) -> dict[str, float]:
        return {fn: count / self.number for fn, count in self.functions.items()} if self.number else {}


@dataclasses.dataclass(frozen=True)
class Profile:
    cases: Mapping[str, CaseProfile]
    metadata: Mapping[str, Any]
    commit: str | None = None
    env_name: str | None = None
    machine: str | None = None
    path: Path | None = None

    @property
    def label(self) -> str:
        if self.commit:
            return self.commit[:8] + (f" ({self.env_name})" if self.env_name else "")
        return str(self.path) if self.path else "profile"


# -- writing -------------------------------------------------------------------------


def profile_document(
    result: BatchResult, commit: str | None = None, env_name: str | None = None, machine: str | None = None
) -> dict[str, Any]:
    """The JSON document of a batch: function names once, counts as [name index, count]."""
    names: dict[str, int] = {}
    cases: dict[str, Any] = {}
    for key, count in result.counts.items():
        entry: dict[str, Any] = {
            "status": count.status,
            "instructions": count.instructions,
            "number": count.number,
            "repeat_totals": list(count.repeat_totals),
        }
        if count.error:
            entry["error"] = count.error
        entry["functions"] = [
            [names.setdefault(fn, len(names)), c]
            for fn, c in sorted(count.functions.items(), key=lambda item: -abs(item[1]))
        ]
        cases[key] = entry
    return {
        "format": FORMAT,
        "version": VERSION,
        "commit": commit,
        "env_name": env_name,
        "machine": machine,
        "metadata": result.metadata,
        "names": list(names),
        "cases": cases,
    }


def save_profile(
    path: str | os.PathLike[str],
    result: BatchResult,
    commit: str | None = None,
    env_name: str | None = None,
    machine: str | None = None,
) -> Path:
    path = Path(path)
    document = profile_document(result, commit, env_name, machine)
    # mtime=0: the same batch gives the same bytes.
    data = gzip.compress(json.dumps(document, separators=(",", ":")).encode(), compresslevel=6, mtime=0)
    atomic_write_bytes(path, data)
    return path


def _strip_json_comments(text: str) -> str:
    """asv.conf.json allows // comments; drop them outside strings."""
    out, i, in_string = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _asv_machine_name(results_dir: Path) -> str:
    """The machine asv is recording for. asv does not tell benchmark processes, so:
    BENCHKIT_ASV_MACHINE, else asv's own default (the ~/.asv-machine.json entry of this
    host, or its only entry), else the only machine folder in the results."""
    if os.environ.get(MACHINE_ENV):
        return os.environ[MACHINE_ENV]
    try:
        machines = json.loads(_strip_json_comments(Path("~/.asv-machine.json").expanduser().read_text()))
        entries = {k: v for k, v in machines.items() if isinstance(v, dict)}
        node = platform.node()
        entry = entries.get(node) or (next(iter(entries.values())) if len(entries) == 1 else None)
        if entry and entry.get("machine"):
            return str(entry["machine"])
    except (OSError, ValueError):
        pass
    folders = [p.parent.name for p in results_dir.glob("*/machine.json")]
    return folders[0] if len(folders) == 1 else platform.node()


def asv_profile_path() -> Path:
    """Where this asv benchmark process should store its profile (from ASV_* variables)."""
    conf_dir, commit, env_name = (os.environ.get(n) for n in ("ASV_CONF_DIR", "ASV_COMMIT", "ASV_ENV_NAME"))
    if not (conf_dir and commit and env_name):
        raise UserError("not inside an asv benchmark run (ASV_CONF_DIR/ASV_COMMIT/ASV_ENV_NAME unset)")
    config = Path(conf_dir) / "asv.conf.json"
    try:
        conf = json.loads(_strip_json_comments(config.read_text()))
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {config}: {e}") from None
    results_dir = Path(conf_dir) / conf.get("results_dir", "results")
    machine = _asv_machine_name(results_dir)
    return results_dir / machine / PROFILE_DIR / f"{commit}-{env_name}{SUFFIX}"


def save_asv_profile(result: BatchResult) -> Path:
    path = asv_profile_path()
    return save_profile(
        path,
        result,
        commit=os.environ["ASV_COMMIT"],
        env_name=os.environ["ASV_ENV_NAME"],
        machine=path.parent.parent.name,
    )


# -- reading ---------------------------------------------------------------------------


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read a profile file (plain JSON inside gzip; nothing is executed or unpickled)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        document = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except OSError as e:
        raise UserError(f"cannot read profile {path}: {e}") from None
    except (ValueError, EOFError, gzip.BadGzipFile) as e:
        raise UserError(f"{path} is not a benchkit profile: {e}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise UserError(f"{path} is not a benchkit profile (no format {FORMAT!r})")
    if document.get("version") != VERSION:
        raise UserError(f"{path}: profile version {document.get('version')!r}, expected {VERSION}")
    try:
        cases = cases_from_document(document)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise UserError(f"{path}: damaged profile ({type(e).__name__}: {e})") from None
    return Profile(
        cases=cases,
        metadata=document.get("metadata", {}),
        commit=document.get("commit"),
        env_name=document.get("env_name"),
        machine=document.get("machine"),
        path=path,
    )


def cases_from_document(document: Mapping[str, Any]) -> dict[str, CaseProfile]:
    """The cases of a profile document (as written by `profile_document`)."""
    names = document["names"]
    return {
        key: CaseProfile(
            key=key,
            status=entry["status"],
            instructions=entry["instructions"],
            number=entry["number"],
            functions={names[i]: c for i, c in entry["functions"]},
            error=entry.get("error", ""),
        )
        for key, entry in document["cases"].items()
    }


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


def resolve_profile(
    name: str,
    asv_config: Path = Path("asv.conf.json"),
    machine: str | None = None,
    env: str | None = None,
) -> Path:
    """A profile file path, a commit hash (prefix) with stored profiles, or a ref of the history."""
    if Path(name).is_file():
        return Path(name)
    from benchkit.check import load_asv_config, resolve_commit

    conf = load_asv_config(asv_config)
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


# -- diffing ---------------------------------------------------------------------------


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


def _cmd_diff(args: argparse.Namespace) -> int:
    paths = [
        resolve_profile(name, args.asv_config, args.machine, args.env) for name in (args.base, args.head)
    ]
    base, head = (load_profile(p) for p in paths)
    diffs = diff_profiles(base, head, args.filter, args.top)
    if not diffs:
        raise UserError(f"no case matches --filter {args.filter!r}")
    sys.stdout.write(format_diff(diffs, base.label, head.label, args.all))
    if args.json:
        from benchkit.util import atomic_write_json

        atomic_write_json(args.json, {d.key: d.to_json() for d in diffs})
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "diff",
        help="explain instruction-count changes between two commits, function by function",
        description="Per case: the change of instructions per execution and the functions that moved most.",
    )
    parser.add_argument("base", metavar="BASE", help="commit hash (prefix), history ref, or profile file")
    parser.add_argument("head", metavar="HEAD", help="commit hash (prefix), history ref, or profile file")
    parser.add_argument("-f", "--filter", metavar="REGEX", help="only cases whose key matches")
    parser.add_argument("--top", type=int, default=8, help="functions shown per direction (default 8)")
    parser.add_argument("--all", action="store_true", help="also list unchanged cases")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the diff as JSON")
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument("--machine", help="asv machine name (when results hold several)")
    parser.add_argument("--env", help="asv environment name (when a commit has several)")
    parser.set_defaults(func=_cmd_diff)
