"""Function-level instruction profiles: kept per commit and case, diffed between commits.

A count says *that* a case got slower; the profile says *where*. Every batch of
every batch of `benchkit.callgrind_track` keeps, per case, the standardized exclusive
instruction counts of each function (of the repeat whose total is reported).
Under asv they are stored beside asv's own results, one compressed file per
machine, commit and environment::

    <results_dir>/<machine>/benchkit-profiles/<commit>-<environment>.json.gz

asv reads every ``*.json`` below its results directory; ``.json.gz`` files are
left alone. Function names are stored once per file (a string table), so a
profile of the standard suite is a few hundred kilobytes.

Where: asv tells a benchmark process its commit, environment and config folder, but neither
its results folder nor its machine. benchkit's main job says both in the settings
(`benchkit.settings.AsvRunSettings`); for a user's own ``asv run`` they are read from the
config (asv's own loader where asv is importable) and asv's default machine.

`load_profile(path)` reads one back; finding and diffing them is `benchkit.report.diff`'s.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchkit import settings
from benchkit.errors import UserError
from benchkit.util import atomic_write_bytes

if TYPE_CHECKING:
    from benchkit.measure.callgrind.results import BatchResult

FORMAT = "benchkit-callgrind-profile"
VERSION = 1
PROFILE_DIR = "benchkit-profiles"
SUFFIX = ".json.gz"


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


# What ``benchkit counts --profile --profile-dir DIR`` writes in DIR.
PROFILE_FILE = "counts.json.gz"


def profile_path(profile_dir: Path) -> Path:
    """Where ``benchkit counts --profile --profile-dir DIR`` saves the function-level profile."""
    return profile_dir / PROFILE_FILE


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
    """asv.conf.json allows // comments; drop them outside strings (where asv is not importable)."""
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


def _read_asv_json(path: Path) -> Any:
    """asv's JSON files allow // comments: asv's own reader where asv is importable (a
    benchmark environment holds asv_runner only), else comments dropped here."""
    try:
        from asv import util as asv_util
    except ImportError:
        return json.loads(_strip_json_comments(path.read_text()))
    try:
        return asv_util.load_json(str(path), js_comments=True)
    except asv_util.UserError as e:
        raise ValueError(str(e)) from None


def _default_machine_name(results_dir: Path) -> str:
    """The machine a user's own ``asv run`` records for (the settings do not say): asv's
    default (the ~/.asv-machine.json entry of this host, or its only entry), else the only
    machine folder in the results."""
    try:
        machines = _read_asv_json(Path("~/.asv-machine.json").expanduser())
        entries = {k: v for k, v in machines.items() if isinstance(v, dict)}
        node = platform.node()
        entry = entries.get(node) or (next(iter(entries.values())) if len(entries) == 1 else None)
        if entry and entry.get("machine"):
            return str(entry["machine"])
    except (OSError, ValueError):
        pass
    folders = [p.parent.name for p in results_dir.glob("*/machine.json")]
    return folders[0] if len(folders) == 1 else platform.node()


def _configured_results_dir(conf_dir: Path) -> Path:
    """The results folder asv.conf.json names (a user's own ``asv run``: the settings do not
    say), read by asv's own config loader where asv is importable."""
    config = conf_dir / "asv.conf.json"
    try:
        from asv.config import Config
    except ImportError:  # a benchmark environment: asv_runner only
        try:
            return conf_dir / _read_asv_json(config).get("results_dir", "results")
        except (OSError, ValueError, AttributeError) as e:
            raise UserError(f"cannot read {config}: {e}") from None
    try:
        return conf_dir / Config.load(str(config)).results_dir  # relative to the config's folder
    except Exception as e:  # asv's UserError, OSError, a JSON error: all mean "cannot read"
        raise UserError(f"cannot read {config}: {e}") from None


def _asv_process(config: settings.Settings) -> settings.AsvProcess:
    if config.asv_process is None:
        raise UserError("not inside an asv benchmark run (ASV_CONF_DIR/ASV_COMMIT/ASV_ENV_NAME unset)")
    return config.asv_process


def asv_profile_path(config: settings.Settings | None = None) -> Path:
    """Where this asv benchmark process should store its profile."""
    config = config or settings.current()
    process = _asv_process(config)
    results_dir = config.asv.results_dir or _configured_results_dir(process.conf_dir)
    machine = config.asv.machine or _default_machine_name(results_dir)
    return results_dir / machine / PROFILE_DIR / f"{process.commit}-{process.env_name}{SUFFIX}"


def save_asv_profile(result: BatchResult, config: settings.Settings | None = None) -> Path:
    config = config or settings.current()
    path = asv_profile_path(config)
    process = _asv_process(config)
    return save_profile(
        path, result, commit=process.commit, env_name=process.env_name, machine=path.parent.parent.name
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
