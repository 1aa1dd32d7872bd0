"""The builds `benchkit history init` and `benchkit main` measure when given none.

Picked from what this machine has, each with one line saying which, from where and why:

1. the torch installed in this Python: its own wheel when pip's sources hold it
   (same version and upstream commit), else its installed files packed into a wheel;
   without an installed torch, the newest release pip's sources offer;
2. one other release to compare it with: the newest release newer than the first build,
   else the newest older one; of the first build's flavour (a CPU build for a CPU
   install, a CUDA build of the same CUDA major for a CUDA install) where pip's sources
   hold one, else of another flavour, said with its download size. For a CPU install
   PyTorch's CPU index is looked in first (unless an index URL is given).

Only when pip's sources hold no other release (or with ``--no-index``) is there one
build, and a line says how to add a second. Indexes that do not answer are left out
for the whole command (`benchkit.history.builds.indexes`). When nothing is found, the
error says what to pass instead.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import sys
from pathlib import Path

from benchkit import settings
from benchkit.errors import UserError
from benchkit.history.builds import indexes
from benchkit.history.builds.build_step import BuildRecord
from benchkit.history.builds.flavour import CPU, Flavour, of_label, of_requirements, of_version_file
from benchkit.history.builds.installed import InstalledTorch, installed_torch, repack_installed
from benchkit.history.builds.repo import log, record_for_wheel
from benchkit.history.builds.sources import (
    PIP_CONFIG,
    PipSource,
    Resolved,
    available_versions,
    download_size,
    fetch,
    fetch_resolved,
    resolve,
)
from benchkit.history.builds.wheels import read_wheel_info, stored_wheel_path

MAX_LOOKUPS = 4  # releases resolved (a few seconds each) in search of one of the same flavour
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
    if _release_key(newer.record.torch_version) < _release_key(installed.record.torch_version):
        return picks  # compared with an older release: the install's later date orders it right
    day_before = dt.datetime.fromtimestamp(_ts(newer.record.build_date) - 86400, dt.UTC)
    date = day_before.strftime("%Y-%m-%dT%H:%M:%SZ")
    newer_version = newer.record.torch_version
    how = f"{installed.how} (dated {date}, a day before torch {newer_version}: an install has no build date)"
    return [Pick(dataclasses.replace(installed.record, build_date=date), how, True), *picks[1:]]


def _ts(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def command_source(source: PipSource, for_default_builds: bool) -> PipSource:
    """`source` as this command uses it: for the default builds of a CPU install PyTorch's CPU
    index is added first (unless an index is given), and every index that does not answer is
    left out (`indexes`), each said in one line. Its ``environ`` carries the choice to pip's
    child processes."""
    if source.no_index:
        return source
    torch = installed_torch() if for_default_builds else None
    flavour = torch.flavour if torch is not None else None
    configured = indexes.configured_indexes()
    extra = (*configured.extra_index_urls, *source.extra_index_urls)
    if flavour == CPU and source.index_url is None:
        extra = (indexes.PYTORCH_CPU_INDEX, *extra)
    choice = indexes.choose([source.index_url or configured.index_url, *extra])
    for note in choice.notes():
        log(note)
    if not choice.left_out:  # pip's configured indexes stand; only the CPU index is added
        added = extra[: len(extra) - len(configured.extra_index_urls) - len(source.extra_index_urls)]
        return dataclasses.replace(source, extra_index_urls=(*added, *source.extra_index_urls))
    # Every index goes in the environment, so that pip's configured ones cannot come back.
    return dataclasses.replace(
        source, index_url=None, extra_index_urls=(), environ=tuple(indexes.pip_environ(choice).items())
    )


def _release_key(version: str) -> tuple[tuple[int, ...], int]:
    """Orders public versions: 2.14.1 > 2.14.0 > 2.14.0rc1 > 2.14.0.dev20250101."""
    public = version.split("+")[0]
    numbers = re.match(r"^(\d+(?:\.\d+)*)", public)
    release = tuple(int(n) for n in numbers.group(1).split(".")) if numbers else ()
    while release and release[-1] == 0:
        release = release[:-1]
    return release, 0 if _is_pre(public) else 1


def _is_pre(version: str) -> bool:
    return re.search(r"(a|b|rc|dev|alpha|beta|pre)\d*", version.split("+")[0].lower()) is not None


def _size(resolved: Resolved) -> str:
    size = download_size(resolved)
    wheel = "a wheel of unknown size" if size is None else f"a {size / 1e6:,.0f} MB wheel"
    packages = [r for r in resolved.requires_dist if r.lower().startswith(("nvidia-", "cuda-"))]
    if packages:
        wheel += f"; its environment adds {len(packages)} CUDA packages, gigabytes"
    return wheel


def _comparison(base_version: str, flavour: Flavour, source: PipSource) -> Pick | None:
    found = comparison_release(base_version, flavour, source)
    return None if found is None else _pick(*found, source)


def comparison_release(base_version: str, flavour: Flavour, source: PipSource) -> tuple[Resolved, str] | None:
    """The release the first build is compared with, and why (resolved, not fetched): same flavour
    first, newer before older; None when pip's sources hold no other release."""
    base = _release_key(base_version)
    listed = [v for v in available_versions(source) if source.pre or not _is_pre(v)]
    listed = [v for v in listed if _release_key(v)[0] != base[0]]
    newer = sorted((v for v in listed if _release_key(v) > base), key=_release_key, reverse=True)
    older = sorted((v for v in listed if _release_key(v) < base), key=_release_key, reverse=True)
    order = [(v, "newer") for v in newer] + [(v, "older") for v in older]
    other: tuple[Resolved, str, Flavour] | None = None
    lookups = 0
    for version, side in order:
        labelled = of_label(version)
        if labelled is not None and not flavour.matches(labelled):
            continue  # another flavour by its label: only if nothing of this flavour is found
        if lookups >= MAX_LOOKUPS:
            break
        lookups += 1
        resolved = _resolved(version, source)
        if resolved is None:
            continue
        found = labelled or of_requirements(resolved.requires_dist)
        if flavour.matches(found):
            why = (
                f"the newest release {side} than torch {base_version} in pip's sources, "
                f"{found.describe()} like it"
            )
            return resolved, why
        other = other or (resolved, side, found)
    for version, side in order if other is None else ():
        labelled = of_label(version)
        resolved = _resolved(version, source) if labelled is not None else None
        if resolved is not None and labelled is not None:
            other = (resolved, side, labelled)
            break
    if other is None:
        return None
    resolved, side, found = other
    why = (
        f"no other {flavour.name()} build in pip's sources: the newest release {side} than torch "
        f"{base_version}, {found.describe()} ({_size(resolved)})"
    )
    return resolved, why


def _resolved(version: str, source: PipSource) -> Resolved | None:
    try:
        return resolve(f"torch=={version}", source)
    except UserError as e:  # e.g. refused by pip's constraints
        lines = [line.strip() for line in str(e).splitlines()[1:] if line.strip()] or [str(e)]
        log(f"torch=={version} left out: {lines[0]}")
        return None


def _pick(resolved: Resolved, why: str, source: PipSource) -> Pick:
    fetched = fetch_resolved(resolved, source)
    record = record_for_wheel(fetched.path, requirement=f"torch=={resolved.version}")
    return Pick(record, f"{why}: {resolved.url}")


def pick_default_builds(include_index: bool = True, source: PipSource = PIP_CONFIG) -> list[Pick]:
    """This machine's default builds, oldest first is up to the caller; raises when there are none."""
    picks: list[Pick] = []
    torch = installed_torch()
    if torch is not None:
        picks.append(_installed_pick(torch, source))
    if include_index:
        if torch is None:
            try:
                fetched = fetch("torch", source)
            except UserError as e:
                log(f"no torch release in pip's sources: {str(e).splitlines()[0]}")
            else:
                version = fetched.resolved.version
                record = record_for_wheel(fetched.path, requirement=f"torch=={version}")
                how = f"no torch is installed: the newest release in pip's sources, {fetched.resolved.url}"
                picks.append(Pick(record, how))
        if picks:
            base = picks[0].record.torch_version
            flavour = torch.flavour if torch is not None else _flavour_of(picks[0])
            other = _comparison(base, flavour, source)
            if other is not None:
                picks.append(other)
                picks = _date_repacked_first(picks)
    if not picks:
        why = "no torch is installed in " + sys.executable
        why += " and pip finds no torch release" if include_index else " (--no-index)"
        raise UserError(f"no torch build to measure: {why}; {PASS_BUILDS_HINT}")
    for pick in picks:
        log(f"default build: torch {pick.record.torch_version} = {pick.how}")
    if len(picks) == 1:
        where = "pip's sources hold no other torch release" if include_index else "--no-index"
        log(
            f"one build only ({where}): nothing to compare it with; add a second with "
            "`benchkit main --build WHEEL_OR_REQUIREMENT` (repeatable) or `benchkit history add ...`"
        )
    return picks


def _flavour_of(pick: Pick) -> Flavour:
    info = read_wheel_info(stored_wheel_path(pick.record.wheel_sha256, pick.record.wheel_filename))
    return of_label(pick.record.torch_version) or of_version_file(info.cuda, None)


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
