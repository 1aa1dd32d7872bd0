#!/usr/bin/env bash
# Install everything benchkit needs on a fresh Linux machine (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v valgrind >/dev/null || need_apt+=(valgrind)
command -v g++ >/dev/null || need_apt+=(g++)
command -v chromium >/dev/null || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install.sh: apt-get install ${need_apt[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# torch first, when none is installed: the CPU build from PyTorch's CPU index (plain
# `pip install torch` from PyPI is the CUDA build with several GB of nvidia packages).
# BENCHKIT_TORCH_INDEX_URL picks another index; the torch already installed is kept.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q torch \
  --index-url "${BENCHKIT_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" \
  --extra-index-url https://pypi.org/simple
python3 -m pip install -q -e '.[dev]'
