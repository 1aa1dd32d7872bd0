#!/usr/bin/env bash
# The main job as a new user meets it: a fresh clone of this checkout, empty caches and home,
# the README's first command. Prints the wall time and the exit status of the whole command.
#
#   bash lab/fresh_main_job.sh [benchkit main options...]    # e.g. -b 'Linear'
#
# The clone is installed into its own virtual environment (with this machine's site packages,
# so the torch already installed is reused), so the machine's own benchkit install is untouched.
# BENCHKIT_FRESH_ISOLATED=1 makes that environment without this machine's site packages: a new
# user's machine, where install.sh installs torch and everything else itself.
# BENCHKIT_FRESH_KEEP=1 keeps the temp folder for inspection; BENCHKIT_FRESH_DIR=DIR works in DIR
# (which must be empty or absent) and keeps it (tests/test_fresh_main_job.py reads the results there).
set -uo pipefail
source_repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${BENCHKIT_FRESH_DIR:-}" ]; then
  work=$BENCHKIT_FRESH_DIR BENCHKIT_FRESH_KEEP=1
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/benchkit-fresh.XXXXXX)
fi
mkdir -p "$work/home" "$work/cache" "$work/inductor"
git clone --quiet "$source_repo" "$work/benchkit"
if [ "${BENCHKIT_FRESH_ISOLATED:-0}" = 1 ]; then
  python3 -m venv "$work/venv"
else
  python3 -m venv --system-site-packages "$work/venv"
fi
export HOME="$work/home" BENCHKIT_CACHE_DIR="$work/cache" TORCHINDUCTOR_CACHE_DIR="$work/inductor"
export PATH="$work/venv/bin:$PATH"
unset PYTHONPATH  # only what the README's command installs
cd "$work/benchkit"
echo "fresh-state main job in $work (commit $(git rev-parse --short HEAD))" >&2
start=$(date +%s)
bash scripts/install.sh && benchkit main "$@"
status=$?
end=$(date +%s)
echo "fresh-state main job: exit status $status, $((end - start)) s (install included)" >&2
[ "${BENCHKIT_FRESH_KEEP:-0}" = 1 ] || rm -rf "$work"
exit $status
