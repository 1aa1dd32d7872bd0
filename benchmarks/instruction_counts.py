"""Every case of the definitions as asv benchmarks (one class per case).

* ``time_wall``: seconds per execution of the statement (`benchkit.measure.walltime`).
* ``track_instructions``: Callgrind instructions per execution
  (`benchkit.callgrind_track`; one batch per commit serves them all, counting
  only the selected cases not yet counted for that torch build).

Definitions: the standard suite plus the modules named by the
``BENCHKIT_DEFINITIONS`` environment variable (see `benchkit.define.loader`).
Importing this module only expands definitions (string work). In asv's
forkserver (``benchmark.py run_server``), which forks every benchmark process
after importing the suite, torch is imported here once so those processes share
it; asv's other processes (``discover``, ``setup_cache``) run no benchmark and skip
that second of import in every round.
"""

import sys

if sys.argv[1:2] == ["run_server"]:
    import torch  # noqa: F401 - preloaded for forkserver children; creates no threads

from benchkit.callgrind_track import InstructionCountMetric
from benchkit.expand import asv_classes, load_cases
from benchkit.measure.cpp.shards import CppSuite
from benchkit.measure.walltime.timing import WallTimeMetric
from benchkit.names import CASES_MODULE

CASES = load_cases()
CPP_SUITE = CppSuite([case.timer_args for case in CASES])

_METRICS = [WallTimeMetric(CPP_SUITE, CASES_MODULE), InstructionCountMetric(CASES, CASES_MODULE, CPP_SUITE)]
globals().update(asv_classes(CASES, _METRICS))
