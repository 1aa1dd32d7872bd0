"""``python3 -m benchkit.cli.first_torch [--torch-index-url URL]``: install.sh's first step,
the torch a fresh machine gets and the indexes its pip uses (`benchkit.history.builds.first_torch`).

Run from the checkout before benchkit's dependencies exist (standard library only). It prints
``PIP_*=value`` lines for the rest of install.sh: the indexes that answered, when any was left
out (nothing otherwise); exit status 2 with one line when torch cannot be installed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from benchkit.errors import UserError
from benchkit.history.builds import indexes
from benchkit.history.builds.first_torch import (
    choose_source,
    cpu_requirement,
    has_nvidia_gpu,
    install_torch,
    say,
    torch_installed,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m benchkit.cli.first_torch")
    parser.add_argument("--torch-index-url", default="", help="default: PyTorch's CPU index")
    args = parser.parse_args(argv)
    gpu = has_nvidia_gpu()
    torch_index = None if gpu else (args.torch_index_url or indexes.PYTORCH_CPU_INDEX)
    try:
        source = choose_source(torch_index)
        if torch_installed():
            say("torch is installed already: kept")
        elif gpu:
            say("an NVIDIA GPU is here: the newest torch of pip's sources (PyPI's are CUDA builds)")
            install_torch(source, "torch")
        else:
            requirement = cpu_requirement(source)
            if requirement is None:
                say(
                    "no CPU build of torch in pip's sources: pip's default torch instead "
                    "(on Linux x86_64 a CUDA build with gigabytes of nvidia packages)"
                )
                requirement = "torch"
            install_torch(source, requirement)
    except UserError as e:
        say(str(e))
        return 2
    for key, value in source.environ:
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
