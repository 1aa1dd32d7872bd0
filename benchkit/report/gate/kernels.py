"""What the generated-kernel record tells about an operator's change: did inductor generate
another kernel at that build?

The operator suite records with every input ``track_kernel_hash``: a hash of inductor's output
code and of the launch configs its autotuning chose (`benchkit.measure.operators.kernels`).
It is no performance number. For the figures that depend on the generated kernel (the
compiled/eager ratio, compiled seconds, compile seconds) it says whether two builds ran the
same kernel:

* `benchkit check` notes it beside such a comparison ("generated kernel changed" or "same
  generated kernel") and lists the record itself as not compared;
* `benchkit regressions` and the site label such a step **kernel changed** or **same
  kernel**: a speedup that moved while the kernel stayed is torch's eager side, the
  machine or noise; one that moved with it is the compiler's doing (its code, or a launch
  config autotuning chose anew);
* the history's noise of such a figure (`benchkit.report.gate.noise.history_sigmas`) counts only
  pairs of builds that ran the same kernel, as a wall time counts only pairs whose
  instruction count did not move.

Results without the record (older ones) are judged and labelled as before. The marks on
comparisons and steps are in `benchkit.report.gate.kernel_marks`.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from benchkit.names import BenchmarkName, Metric

if TYPE_CHECKING:
    from benchkit.history.results.read import Measurement, ResultSet

# Figures that come from the generated kernel (eager seconds do not).
KERNEL_FIGURES = (Metric.COMPILED_OVER_EAGER, Metric.COMPILED_SECONDS, Metric.COMPILE_SECONDS)
KERNEL_CHANGED = "kernel changed"
SAME_KERNEL = "same kernel"
LABEL_MEANINGS = {
    KERNEL_CHANGED: "an operator figure stepped where inductor's generated kernel changed (its code or "
    "the launch configs its autotuning chose): the compiler's doing",
    SAME_KERNEL: "an operator figure stepped while inductor's generated kernel stayed the same: torch's "
    "eager side, the machine or noise, not the generated code",
}


def is_kernel_record(name: str) -> bool:
    return BenchmarkName.parse(name).metric is Metric.KERNEL_HASH


@functools.cache
def kernel_record_of(name: str) -> str | None:
    """The kernel record of the input whose kernel-dependent figure `name` is, or None."""
    parsed = BenchmarkName.parse(name)
    if parsed.metric not in KERNEL_FIGURES:
        return None
    return str(parsed.with_metric(Metric.KERNEL_HASH))


def kernel_hash(measurement: Measurement | None) -> str | None:
    """The recorded hash as 12 hex digits, or None (not recorded, failed, skipped)."""
    if measurement is None or not measurement.has_number or measurement.value is None:
        return None
    value = float(measurement.value)
    if not math.isfinite(value) or value <= 0 or value != int(value):
        return None
    return f"{int(value):012x}"


def kernels_of(base: ResultSet, head: ResultSet, name: str, env: str) -> tuple[str, str] | None:
    """(base's kernel hash, head's) for a kernel-dependent figure recorded on both; else None."""
    record = kernel_record_of(name)
    if record is None:
        return None
    before = kernel_hash(base.measurements.get((record, env)))
    after = kernel_hash(head.measurements.get((record, env)))
    return None if before is None or after is None else (before, after)


def kernel_changed(base: ResultSet, head: ResultSet, name: str, env: str) -> bool | None:
    """Whether the two builds ran different kernels for this figure; None: not known."""
    found = kernels_of(base, head, name, env)
    return None if found is None else found[0] != found[1]
