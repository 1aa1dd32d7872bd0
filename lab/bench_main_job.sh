#!/usr/bin/env bash
# The fresh-state main job of two benchkit revisions, one after the other in one run (this
# machine is noisy: compare within a run, not across days). Each side is
# the fresh_main_job.sh of that revision (lab/, or scripts/ before lab/ existed): fresh clone,
# own virtualenv, empty HOME, benchkit cache and inductor cache, both default torch builds.
#
#   bash lab/bench_main_job.sh OLD_REV [benchkit main options...]
#
# e.g. `bash lab/bench_main_job.sh 1246152` (whole suite, ~40 min) or
# `bash lab/bench_main_job.sh 1246152 -b 'Linear'`. Prints one line per side:
# revision, exit status, seconds (install included), then where the two logs are.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
old=${1:?usage: bench_main_job.sh OLD_REV [benchkit main options...]}
shift
work=$(mktemp -d /tmp/benchkit-bench-main.XXXXXX)
git -C "$here" worktree add --quiet --detach "$work/old" "$old" || exit 2
results=()
for side in old new; do
  checkout=$here
  [ "$side" = old ] && checkout=$work/old
  rev=$(git -C "$checkout" rev-parse --short HEAD)
  start=$(date +%s)
  fresh=$checkout/lab/fresh_main_job.sh
  [ -f "$fresh" ] || fresh=$checkout/scripts/fresh_main_job.sh
  bash "$fresh" "$@" >"$work/$side.log" 2>&1
  status=$?
  results+=("$side $rev: exit $status, $(($(date +%s) - start)) s")
  tail -3 "$work/$side.log" >&2
done
git -C "$here" worktree remove --force "$work/old"
printf '%s\n' "${results[@]}"
echo "logs: $work/old.log $work/new.log"
