"""A torch build's flavour: which accelerator it was built for (CPU, CUDA of a major version, ROCm).

Two builds of different flavours differ in more than their version (other kernels, other
dependencies: a CUDA build pulls gigabytes of nvidia packages), so the default builds of a
history share the installed torch's flavour where pip's sources allow. A flavour is read from
what is at hand without downloading a wheel: an installed torch's ``torch/version.py``, a
version's local label (``+cpu``, ``+cu126``, ``+rocm6.2``), or a wheel's ``Requires-Dist``
(PyPI's Linux wheels carry no label; their CUDA packages name the major, e.g.
``nvidia-cudnn-cu13`` or ``cuda-toolkit==13.0.3``). Standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable

_CUDA_LABEL = re.compile(r"^cu(\d+)$")  # cu126 -> 12, cu130 -> 13, cu92 -> 9
_PACKAGE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_CU_SUFFIX = re.compile(r"-cu(\d+)$")
_PINNED_MAJOR = re.compile(r"(?:==|>=|~=|<=|<|>)\s*(\d+)\.")


class Accelerator(enum.Enum):
    CPU = "CPU"
    CUDA = "CUDA"
    ROCM = "ROCm"


@dataclasses.dataclass(frozen=True)
class Flavour:
    accelerator: Accelerator
    major: str | None = None  # CUDA's or ROCm's major version; None: unknown or CPU

    def name(self) -> str:
        """e.g. "CPU", "CUDA 13", "ROCm 6"."""
        return self.accelerator.value + (f" {self.major}" if self.major else "")

    def describe(self) -> str:
        return f"a {self.name()} build"

    def matches(self, other: Flavour | None) -> bool:
        """Same accelerator, and the same major where both know it."""
        if other is None or other.accelerator is not self.accelerator:
            return False
        return self.major is None or other.major is None or self.major == other.major


CPU = Flavour(Accelerator.CPU)


def _cuda_major(digits: str) -> str:
    # PyTorch labels carry major and one minor digit: cu118 -> 11, cu92 -> 9
    return digits[:-1] if len(digits) > 1 else digits


def of_label(version: str) -> Flavour | None:
    """The flavour a version's local label names (None: no label, or one that names none)."""
    if "+" not in version:
        return None
    label = version.split("+", 1)[1].lower()
    if label == "cpu" or label.startswith("cpu."):
        return CPU
    cuda = _CUDA_LABEL.match(label)
    if cuda:
        return Flavour(Accelerator.CUDA, _cuda_major(cuda.group(1)))
    if label.startswith("rocm"):
        major = re.match(r"rocm(\d+)", label)
        return Flavour(Accelerator.ROCM, major.group(1) if major else None)
    return None


def of_version_file(cuda: object, hip: object) -> Flavour:
    """The flavour of an installed torch or a wheel, from its ``torch/version.py`` values."""
    if isinstance(cuda, str) and cuda:
        return Flavour(Accelerator.CUDA, cuda.split(".")[0])
    if isinstance(hip, str) and hip:
        return Flavour(Accelerator.ROCM, hip.split(".")[0])
    return CPU


def of_requirements(requires_dist: Iterable[str]) -> Flavour:
    """The flavour a wheel's dependencies show: CUDA packages make it a CUDA build, else CPU.

    (A ROCm wheel carries its label, so an unlabelled wheel without CUDA packages is CPU.)
    """
    majors: list[str] = []
    cuda = False
    for requirement in requires_dist:
        body, _, marker = requirement.partition(";")
        if "extra ==" in marker:
            continue  # optional extras are no part of the build
        match = _PACKAGE.match(body)
        if not match:
            continue
        name, rest = match.group(1).lower().replace("_", "-"), match.group(3)
        if not (name.startswith("nvidia-") or name.startswith("cuda-")) or name == "cuda-pathfinder":
            continue
        cuda = True
        suffix = _CU_SUFFIX.search(name)
        if suffix:
            majors.append(suffix.group(1))  # nvidia-cudnn-cu13: the major itself
        elif name in ("cuda-toolkit", "nvidia-cuda-runtime", "cuda-bindings"):
            pinned = _PINNED_MAJOR.search(rest)
            if pinned:
                majors.append(pinned.group(1))
    if not cuda:
        return CPU
    return Flavour(Accelerator.CUDA, max(set(majors), key=majors.count) if majors else None)
