"""asv benchmark suite of benchkit. asv imports this package from `benchmark_dir`.

The repository root goes on sys.path so the suite runs against this checkout's
`benchkit` in every asv environment, whatever torch build it holds.
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
