#!/usr/bin/env bash
# The main job on a fresh machine: install benchkit, build the default torch
# history, run the suite through asv on every build, publish html/, and print
# what changed between the torch versions. Arguments go to `benchkit main`
# (e.g. --full, --no-index, -b REGEX). Safe to re-run: finished commits are kept.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
LOCAL_TORCH=/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl

echo "==> [0/5] installing benchkit and its tools" >&2
# torch first, from the local CPU wheel: an unpinned `torch` from the index would
# pull a CUDA build with gigabytes of nvidia packages into this python.
if ! "$PY" -c "import torch" 2>/dev/null; then
    if [ -f "$LOCAL_TORCH" ]; then
        "$PY" -m pip install --quiet "$LOCAL_TORCH"
    else
        echo "no torch in $PY and no $LOCAL_TORCH: install a CPU torch first" >&2
        exit 2
    fi
fi
"$PY" -m pip install --quiet "asv>=0.6.4" "asv_runner>=0.2" virtualenv numpy
"$PY" -m pip install --quiet --no-deps -e .
command -v git >/dev/null || { echo "git is required" >&2; exit 2; }

exec "$PY" -m benchkit.cli main "$@"
