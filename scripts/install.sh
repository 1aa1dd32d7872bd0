#!/usr/bin/env bash
# Install everything benchkit needs on a fresh Linux machine (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "install.sh: benchkit needs Python >= 3.11; python3 here is $(python3 -V 2>&1) ($(command -v python3))." >&2
  echo "install.sh: put a newer python3 first on PATH (e.g. a virtual environment of it) and run this again." >&2
  exit 2
fi

need_apt=()
command -v valgrind >/dev/null || need_apt+=(valgrind)
command -v g++ >/dev/null || need_apt+=(g++)
command -v chromium >/dev/null || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install.sh: apt-get install ${need_apt[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# torch first, when none is installed: a CPU build on a machine without an NVIDIA GPU (PyTorch's
# CPU index, or BENCHKIT_TORCH_INDEX_URL, and pip's sources), each index asked once; an index
# that does not answer is left out of every pip call below (the PIP_* lines it prints).
pip_env=$(python3 -m benchkit.cli.first_torch --torch-index-url "${BENCHKIT_TORCH_INDEX_URL:-}")
while IFS= read -r assignment; do
  [ -n "$assignment" ] && export "$assignment"
done <<<"$pip_env"
python3 -m pip install -q -e '.[dev]'
