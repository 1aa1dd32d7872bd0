"""The generated-kernel record's word on a comparison (see `benchkit.report.gate.kernels`):
"generated kernel changed" or "same generated kernel" beside it (a step's word is
`benchkit.report.steps.changepoints.label_step`). Apart from the record itself, which the noise
estimate reads below the gate's records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchkit.history.results.read import ResultSet
from benchkit.report.gate.check_status import NUMERIC_STATUSES, Status
from benchkit.report.gate.check_types import Comparison
from benchkit.report.gate.kernels import (
    is_kernel_record,
    kernel_hash,
    kernels_of,
)


def mark_kernels(comparisons: Sequence[Comparison], base: ResultSet, head: ResultSet) -> list[Comparison]:
    """The kernel records are listed as not compared; a kernel-dependent comparison with both
    records says whether the generated kernel changed."""
    out = []
    for c in comparisons:
        if c.status not in NUMERIC_STATUSES:
            out.append(c)
        elif is_kernel_record(c.name):
            shown = " → ".join(kernel_hash(m) or "not recorded" for m in (c.before, c.after))
            note = f"the generated kernel's hash ({shown}), not performance"
            out.append(dataclasses.replace(c, status=Status.NOT_COMPARED, note=note, noise=None))
        elif (found := kernels_of(base, head, c.name, c.env)) is not None:
            before, after = found
            said = (
                f"generated kernel changed ({before} → {after})"
                if before != after
                else "same generated kernel"
            )
            out.append(dataclasses.replace(c, note="; ".join(n for n in (c.note, said) if n)))
        else:
            out.append(c)
    return out
