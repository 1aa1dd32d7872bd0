"""What an instruction count depends on besides torch and the case: a host's *counting fingerprint*.

Callgrind counts instructions of an emulated CPU, so two hosts give the same count
for the same case and torch build when they agree on everything the count can see:
valgrind's version (it decides which instructions exist and how they are
emulated), the CPU features valgrind passes through (AVX2 or not, which decides
torch's kernels), the C library (malloc and string routines run inside the
measured region), the Python build (the interpreter loop is measured too), the
machine architecture, and benchkit's counting code. Hosts with equal fingerprints
form one *logical machine*: their counts are filed under one asv machine whose
name is derived from the fingerprint, so results from many hosts land in one
history. A host that differs is refused with the fields that differ, never merged.

The CPU capability torch chooses under valgrind is known only after a batch ran;
it is checked per result against the logical machine's record
(``cpu_capability_under_valgrind``).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping
from pathlib import Path

from benchkit.measure.callgrind.count_cache import counting_code_key
from benchkit.measure.callgrind.results import valgrind_version
from benchkit.util import content_key

MACHINE_PREFIX = "benchkit-counts-"
FINGERPRINT_FIELDS = ("valgrind", "cpu_avx2", "libc", "python", "arch", "counting_code")


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def counting_fingerprint(python_version: str | None = None) -> dict[str, str]:
    """This host's fingerprint; ``python_version`` is the measured interpreter's
    ``sys.version`` when it is not this one. Raises `ValgrindUnavailable` without valgrind."""
    libc, libc_version = platform.libc_ver()
    return {
        "valgrind": valgrind_version(),
        "cpu_avx2": "yes" if "avx2" in _cpu_flags() else "no",
        "libc": f"{libc} {libc_version}".strip(),
        "python": (python_version or sys.version).split()[0],
        "arch": platform.machine(),
        "counting_code": counting_code_key(),
    }


def machine_name(fingerprint: Mapping[str, str]) -> str:
    """The asv machine name of a logical machine: the same fingerprint, the same name everywhere."""
    return MACHINE_PREFIX + content_key(
        *(f"{k}={fingerprint.get(k, '')}" for k in FINGERPRINT_FIELDS), length=10
    )


def differences(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[str]:
    """Human-readable fields in which `actual` differs from `expected` (empty: same machine)."""
    return [
        f"{field}: {actual.get(field)!r}, logical machine has {expected.get(field)!r}"
        for field in FINGERPRINT_FIELDS
        if expected.get(field) != actual.get(field)
    ]
