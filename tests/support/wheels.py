"""Torch wheels for tests: the local 2.13.0 wheel, small fake torch wheels, and the local
wheel patched with an injected regression (the wheel patcher)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

from benchkit.history.builds.wheels import patch_wheel_module

LOCAL_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def make_fake_torch_wheel(
    folder: Path,
    git_version: str = "a" * 40,
    version: str = "0.0.1+fake",
    extra: dict[str, bytes] | None = None,
    date_time: tuple[int, int, int, int, int, int] = (2025, 5, 6, 7, 8, 10),
    cuda: str | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A small, installable wheel shaped like torch's (torch/version.py, RECORD); `cuda` and
    `requires` (Requires-Dist lines) make it look like a CUDA build, as PyPI's are."""
    requires_lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        "torch/__init__.py": b"from torch.version import __version__\n",
        "torch/version.py": (
            f"from typing import Optional\n__version__ = '{version}'\ndebug = False\n"
            f"cuda: Optional[str] = {cuda!r}\ngit_version = '{git_version}'\n"
        ).encode(),
        f"torch-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n{requires_lines}".encode()
        ),
        f"torch-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        **(extra or {}),
    }
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in files.items():
        writer.writerow(_record_line(name, data))
    writer.writerow([f"torch-{version}.dist-info/RECORD", "", ""])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(zipfile.ZipInfo(name, date_time), data)
        wheel.writestr(zipfile.ZipInfo(f"torch-{version}.dist-info/RECORD", date_time), record.getvalue())
    return path


def repeated_forward_patch(cls: str, times: int = 2) -> str:
    """Source appended to a torch module so that `cls.forward` computes its result `times` times."""
    name = cls.lower()
    return f"""

# benchkit test build: an injected regression -- {cls} computes its result {times} times.
_benchkit_{name}_forward = {cls}.forward


def _benchkit_{name}_forward_repeated(self, input):
    for _ in range({times - 1}):
        _benchkit_{name}_forward(self, input)
    return _benchkit_{name}_forward(self, input)


{cls}.forward = _benchkit_{name}_forward_repeated
"""


def slow_linear_wheel(folder: Path, times: int = 2) -> Path:
    """The local wheel with `nn.Linear` computing its result `times` times."""
    patch = repeated_forward_patch("Linear", times)
    return patch_wheel_module(
        LOCAL_WHEEL, folder / LOCAL_WHEEL.name, "torch/nn/modules/linear.py", lambda text: text + patch
    )
