"""The builds `benchkit history init` and `benchkit main` measure when given none.

Picked from what this machine has, each with one line saying where it came from:

1. the torch installed in this Python: its own wheel when pip's sources hold it
   (same version and upstream commit), else its installed files packed into a wheel;
2. the newest torch release pip's sources offer that is newer than the installed one
   (optional: left out with a warning when pip finds none, or with ``--no-index``).

Without an installed torch, the newest release pip finds is the one build. When
nothing is found, the error says what to pass instead.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from pathlib import Path

from benchkit import settings
from benchkit.errors import UserError
from benchkit.history.builds.build_step import BuildRecord
from benchkit.history.builds.installed import InstalledTorch, installed_torch, repack_installed
from benchkit.history.builds.repo import log, record_for_wheel
from benchkit.history.builds.sources import PIP_CONFIG, PipSource, fetch
from benchkit.history.builds.wheels import read_wheel_info, stored_wheel_path

PASS_BUILDS_HINT = (
    "pass torch builds instead: `benchkit main --build WHEEL_OR_REQUIREMENT` (repeatable) or "
    "`benchkit history init WHEEL_OR_REQUIREMENT...`"
)


@dataclasses.dataclass(frozen=True)
class Pick:
    record: BuildRecord
    how: str  # where it came from, for the user
    repacked: bool = False  # its files, not its wheel: the build date is unknown (install time)


def _installed_pick(torch: InstalledTorch, source: PipSource) -> Pick:
    where = f"the installed torch {torch.version} ({sys.executable})"
    try:
        fetched = fetch(f"torch=={torch.version}", source)
    except UserError as e:
        reason = str(e).splitlines()[0]
    else:
        if read_wheel_info(fetched.path).git_version == torch.git_version:
            record = record_for_wheel(fetched.path, requirement=f"torch=={torch.version}")
            return Pick(record, f"{where}: its wheel {fetched.resolved.url}")
        reason = f"pip's torch=={torch.version} is another build (another git_version)"
    log(f"no wheel of {where} in pip's sources ({reason}); packing its installed files into one")
    wheel = repack_installed(torch)
    return Pick(record_for_wheel(wheel), f"{where}: its installed files packed into {wheel.name}", True)


def _date_repacked_first(picks: list[Pick]) -> list[Pick]:
    """A repacked install carries its install time, not its build date; asv orders builds by date,
    so date it a day before the newer release it is compared with when it would sort after it."""
    installed, newer = picks[0], picks[-1]
    if not installed.repacked or _ts(installed.record.build_date) < _ts(newer.record.build_date):
        return picks
    day_before = dt.datetime.fromtimestamp(_ts(newer.record.build_date) - 86400, dt.timezone.utc)
    date = day_before.strftime("%Y-%m-%dT%H:%M:%SZ")
    newer_version = newer.record.torch_version
    how = f"{installed.how} (dated {date}, a day before torch {newer_version}: an install has no build date)"
    return [Pick(dataclasses.replace(installed.record, build_date=date), how, True), *picks[1:]]


def _ts(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def pick_default_builds(include_index: bool = True, source: PipSource = PIP_CONFIG) -> list[Pick]:
    """This machine's default builds, oldest first is up to the caller; raises when there are none."""
    picks: list[Pick] = []
    torch = installed_torch()
    if torch is not None:
        picks.append(_installed_pick(torch, source))
    if include_index:
        spec = f"torch>{torch.public_version}" if torch is not None else "torch"
        try:
            fetched = fetch(spec, source)
        except UserError as e:
            log(f"warning: no newer torch release ({spec}) from pip's sources, measuring without one: "
                f"{str(e).splitlines()[0]}")  # fmt: skip
        else:
            version = fetched.resolved.version
            record = record_for_wheel(fetched.path, requirement=f"torch=={version}")
            picks.append(Pick(record, f"the newest torch release pip finds ({spec}): {fetched.resolved.url}"))
            picks = _date_repacked_first(picks)
    if not picks:
        why = "no torch is installed in " + sys.executable
        why += " and pip finds no torch release" if include_index else " (--no-index)"
        raise UserError(f"no torch build to measure: {why}; {PASS_BUILDS_HINT}")
    for pick in picks:
        log(f"default build: torch {pick.record.torch_version} = {pick.how}")
    return picks


def installed_torch_wheel(source: PipSource = PIP_CONFIG) -> Path:
    """A wheel file of the torch installed here (for scripts that patch or install it):
    ``BENCHKIT_TORCH_WHEEL`` when set, else its wheel from pip's sources, else its files packed."""
    explicit = settings.current().history.torch_wheel
    if explicit is not None:
        return explicit
    torch = installed_torch()
    if torch is None:
        raise UserError(
            f"no torch is installed in {sys.executable}; set {settings.Var.TORCH_WHEEL}=/path/to/torch.whl"
        )
    record = _installed_pick(torch, source).record
    return stored_wheel_path(record.wheel_sha256, record.wheel_filename)
