"""One torch build's instruction counts, as a task on any host: wheel → environment → counts.

This is what a backfill worker runs (`benchkit.history.results.backfill` sends it to Dask).
It knows nothing of Dask, of asv's results or of the other builds: it gets a build
record and the counting settings, and returns the counts, the function-level
profile and how long each step took -- or the reason it could not, as data.

* **Wheel**: the build record's exact wheel (sha256-verified) from this host's
  wheel cache, a ``BENCHKIT_WHEELHOUSE`` folder or the package index
  (`benchkit.history.builds.build_step.resolve_record_wheel`).
* **Environment**: one virtualenv per wheel on this host, kept for later tasks
  (``<benchkit cache>/backfill/envs/<sha256>``). It is built under a lock and
  marked complete only at the end, so a worker killed half-way leaves an
  environment that the next task removes and builds again.
* **Counts**: ``benchkit counts`` run by that environment's Python -- the same code
  path as counting on one machine, so a count does not depend on which host or
  which route produced it. The child dies with the worker (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.history.builds.build_step import BuildRecord, resolve_record_wheel
from benchkit.history.results.fingerprint import counting_fingerprint, differences
from benchkit.util import REPO_ROOT, cache_dir, content_key, file_lock

ENV_REQUIREMENTS = ("numpy", "tqdm")  # what the counting code imports besides torch (asv.conf.json's matrix)
_COMPLETE = ".benchkit-complete"


class FingerprintRefused(Exception):
    """This host cannot count for the logical machine (its fingerprint differs)."""


def _die_with_parent() -> None:
    """In the child before exec: be killed when the worker that started us dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run(command: Sequence[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, preexec_fn=_die_with_parent, **kwargs
    )


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def host_constraints() -> list[str]:
    """``name==version`` of every distribution installed for this Python but torch and
    pip: the environment gets the same versions of torch's dependencies as
    ``benchkit counts`` run here imports (another typing_extensions or markupsafe is
    other code, and moved counts)."""
    import importlib.metadata

    pins = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name and name not in ("torch", "pip"):
            pins.setdefault(name, f"{name}=={dist.version}")
    return sorted(pins.values())


def build_environment(wheel: Path, sha256: str) -> Path:
    """The Python of this host's environment for one wheel, made on first use."""
    root = cache_dir("backfill", "envs")
    env = root / sha256[:24]
    python = env / "bin" / "python"
    constraints = host_constraints()
    complete = f"{sha256}\n{content_key(*constraints)}"
    with file_lock(root / f"{sha256[:24]}.lock"):
        marker = env / _COMPLETE
        if marker.exists() and marker.read_text() == complete:
            return python
        shutil.rmtree(env, ignore_errors=True)  # a half-made environment from a killed worker
        pip_install = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        pinned = root / f"{sha256[:24]}.constraints.txt"
        pinned.write_text("".join(f"{line}\n" for line in constraints))
        steps = [
            [sys.executable, "-m", "virtualenv", "--quiet", str(env)],
            [*pip_install, "-c", str(pinned), str(wheel), *ENV_REQUIREMENTS],
            [str(python), "-m", "benchkit.cli.build_step", "verify", "--wheel", str(wheel)],
        ]
        for step in steps:
            done = _run(step, timeout=3600, cwd=REPO_ROOT)
            if done.returncode != 0 and "-c" in step:
                # An older wheel may need other versions than this host has: unpinned.
                step = [a for a in step if a not in ("-c", str(pinned))]
                done = _run(step, timeout=3600, cwd=REPO_ROOT)
            if done.returncode != 0:
                shutil.rmtree(env, ignore_errors=True)
                raise UserError(
                    f"preparing the environment for {wheel.name} failed: `{' '.join(step[:4])} ...` "
                    f"exited {done.returncode}\n{_tail(done.stdout + done.stderr)}"
                )
        (env / _COMPLETE).write_text(complete)
    return python


def count_build(
    record_json: Mapping[str, Any],
    commit: str,
    expected_fingerprint: Mapping[str, str],
    case_filter: str | None = None,
    definitions: Sequence[str] = (),
    settings: Mapping[str, str] | None = None,
    case_timeout: float = 300.0,
) -> dict[str, Any]:
    """Count one build's cases on this host. Returns a plain dict (what travels back).

    ``status`` is ``ok`` (every case counted), ``partial`` (some cases failed; their
    reasons are in ``counts``) or ``failed`` (no counts: ``reason`` says why).
    Raises `FingerprintRefused` before doing anything on a host that differs.
    """
    started = time.monotonic()
    host = platform.node()
    fingerprint = counting_fingerprint()
    mismatch = differences(expected_fingerprint, fingerprint)
    if mismatch:
        raise FingerprintRefused(f"host {host} refused: " + "; ".join(mismatch))
    outcome: dict[str, Any] = {"commit": commit, "host": host, "pid": os.getpid(), "fingerprint": fingerprint}
    seconds: dict[str, float] = {}
    outcome["seconds"] = seconds
    record = BuildRecord.from_json(dict(record_json), f"commit {commit[:12]}")
    try:
        step = time.monotonic()
        wheel = resolve_record_wheel(record, f"commit {commit[:12]}")
        seconds["wheel"] = time.monotonic() - step
        step = time.monotonic()
        python = build_environment(wheel, record.wheel_sha256)
        seconds["environment"] = time.monotonic() - step
    except (UserError, OSError, subprocess.SubprocessError) as e:
        return {**outcome, "status": "failed", "reason": str(e), "counts": {}}
    with tempfile.TemporaryDirectory(prefix="benchkit-backfill-") as tmp:
        from benchkit.measure.callgrind.profiles import profile_path as counts_profile

        counts_path, profile_path = Path(tmp) / "counts.json", counts_profile(Path(tmp))
        command = [str(python), "-m", "benchkit.cli", "counts", "--json", str(counts_path),
                   "--profile", "--profile-dir", tmp, "--case-timeout", str(case_timeout)]  # fmt: skip
        if case_filter:
            command += ["--filter", case_filter]
        for definition in definitions:
            command += ["--definitions", definition]
        env = {**os.environ, **(settings or {})}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
        step = time.monotonic()
        try:
            done = _run(command, timeout=24 * 3600, cwd=tmp, env=env)
        except subprocess.SubprocessError as e:
            return {**outcome, "status": "failed", "reason": f"benchkit counts: {e}", "counts": {}}
        seconds["count"] = time.monotonic() - step
        if not counts_path.exists():
            reason = f"benchkit counts exited {done.returncode} without results\n{_tail(done.stderr)}"
            return {**outcome, "status": "failed", "reason": reason, "counts": {}}
        counts = json.loads(counts_path.read_text())
        profile = profile_path.read_bytes() if profile_path.exists() else None
    seconds["total"] = time.monotonic() - started
    failed = sorted(key for key, entry in counts.items() if entry.get("status") != "ok")
    return {
        **outcome,
        "status": "partial" if failed else "ok",
        "reason": f"{len(failed)} case(s) failed: {', '.join(failed[:5])}" if failed else "",
        "counts": counts,
        "profile_gz": profile,
        "summary": _tail(done.stderr, 1),
    }
