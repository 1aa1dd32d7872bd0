#!/usr/bin/env bash
# What a one-case asv selection costs (issue 20): `asv run --python=same -b <one case>`
# for a Python and a C++ time_wall case and a track_instructions case, each twice: first
# with an empty benchkit cache (cold: a C++ shard compile, a Callgrind batch of one case),
# then warm (the shard and the count are found by content). Fresh HOME and cache dir.
#
#   bash lab/bench_selection.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d /tmp/benchkit-bench-selection.XXXXXX)
export HOME=$scratch/home BENCHKIT_CACHE_DIR=$scratch/cache TORCHINDUCTOR_CACHE_DIR=$scratch/inductor
mkdir -p "$HOME"
python3 -m asv machine --yes --machine bench-selection >/dev/null
for bench in \
  'Pointwise_Math_add_Tensor_Scalar_PYTHON.*time_wall' \
  'Pointwise_Math_add_Tensor_Scalar_CPP.*time_wall' \
  'Pointwise_Math_add_Tensor_Scalar_PYTHON.*track_instructions'; do
  for state in cold warm; do
    start=$(date +%s.%N)
    line=$(python3 -m asv run --python=same -b "$bench" --machine bench-selection 2>&1 | tail -1)
    end=$(date +%s.%N)
    printf '%-62s %s %6.1f s   %s\n' "$bench" "$state" "$(echo "$end - $start" | bc)" "${line##* }"
  done
done
rm -rf "$scratch"
