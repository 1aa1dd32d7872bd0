"""The torch a fresh machine gets from ``scripts/install.sh``, and the indexes its pip uses
(its command line: `benchkit.cli.first_torch`).

Standard library only: it runs from the checkout before benchkit's dependencies exist. It
asks every index pip would use once (`benchkit.history.builds.indexes`), and when no
torch is installed it installs one, saying which, from where and why:

* a machine with an NVIDIA GPU: the newest torch of pip's sources (PyPI's Linux wheels
  are CUDA builds);
* any other machine: the newest CPU build (a ``+cpu`` release) of PyTorch's CPU index
  (or ``--torch-index-url``) and pip's sources; only when none holds one, pip's default
  torch, said with its size (on Linux a CUDA build: gigabytes).

It prints ``PIP_*=value`` lines for the rest of install.sh: the indexes that answered,
when any was left out (nothing otherwise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from benchkit.errors import UserError
from benchkit.history.builds import indexes
from benchkit.history.builds.flavour import CPU, of_label
from benchkit.history.builds.sources import PipSource, available_versions, resolve

TRIES = 3  # newest CPU releases tried when pip's constraints refuse one


def say(message: str) -> None:
    print(f"install.sh: {message}", file=sys.stderr, flush=True)


def has_nvidia_gpu() -> bool:
    if os.path.exists("/dev/nvidia0"):
        return True
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def torch_installed() -> bool:
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def choose_source(torch_index: str | None) -> PipSource:
    """pip's sources with the torch index added and the indexes that do not answer left out."""
    configured = indexes.configured_indexes()
    urls = [configured.index_url, *configured.extra_index_urls]
    if torch_index:
        urls.insert(1, torch_index)
    choice = indexes.choose(urls)
    for note in choice.notes():
        say(note)
    if choice.left_out:
        return PipSource(environ=tuple(indexes.pip_environ(choice).items()))
    return PipSource(extra_index_urls=(torch_index,) if torch_index else ())


def cpu_requirement(source: PipSource) -> str | None:
    """``torch==X+cpu`` for the newest CPU release pip's sources hold and pip accepts; None: none."""
    cpu = [v for v in available_versions(source) if of_label(v) == CPU]
    for version in cpu[:TRIES]:
        try:
            resolved = resolve(f"torch=={version}", source)
        except UserError:
            continue  # e.g. above a constraint of pip's configuration
        say(f"torch {resolved.version}: the newest CPU build in pip's sources ({resolved.url})")
        return f"torch=={resolved.version}"
    return None


def install_torch(source: PipSource, requirement: str) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", *source.args(), requirement]
    if subprocess.run(command, env=source.env()).returncode != 0:
        raise UserError(f"`pip install {requirement}` failed (see pip's output above)")
