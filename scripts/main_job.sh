#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing (scripts/install.sh),
# then `benchkit main`: build the default torch history, run the suite through
# asv on every build, publish html/, print what changed between the torch
# versions. Arguments go to `benchkit main` (--rounds N, --no-index, -b REGEX, ...).
# Safe to re-run: commits that already have results are not measured again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec python3 -m benchkit.cli main "$@"
