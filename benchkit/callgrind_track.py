"""The Callgrind stage's public entry: instruction counts of cases, in asv and outside it.

The stage lives in `benchkit.measure.callgrind` (see its docstring for how a batch
runs); this module names what other code and users call.
"""

from benchkit.measure.callgrind.metric import InstructionCountMetric
from benchkit.measure.callgrind.results import BatchResult, CaseCount, ValgrindUnavailable
from benchkit.measure.callgrind.supervisor import collect

__all__ = ["BatchResult", "CaseCount", "InstructionCountMetric", "ValgrindUnavailable", "collect"]
