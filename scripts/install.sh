#!/usr/bin/env bash
# Install everything benchkit needs on a fresh machine of this kind (idempotent).
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

# torch first, pinned to the local CPU wheel: an unpinned `torch` would pull the
# CUDA build and several GB of nvidia packages from the index.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[dev]'
