"""Per-operator summaries of input measurements: speedup percentiles and operatorbench's CSV."""

from __future__ import annotations

import csv
import io
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from benchkit.measure.operators.kernels import combined_fingerprint
from benchkit.measure.operators.timing import Backend, InputMeasurement
from benchkit.stats import QUANTILES, quantiles


@dataclass(frozen=True)
class OperatorSummary:
    operator: str
    backend_names: tuple[str, ...]
    speedup_quantiles: tuple[tuple[float, float, float], ...]  # per backend (and a/b ratio)
    elapsed_s: float
    mean_seconds: tuple[float, ...]  # eager, then each backend
    measured: int
    failed: int
    # One hash of what inductor generated for every measured input (each backend's code and
    # autotuned configs, `benchkit.measure.operators.kernels`): equal in two runs when both
    # timed the same kernels. "" when no input recorded one.
    kernels: str = ""


def summarize(
    operator: str, results: Sequence[InputMeasurement], backends: Sequence[Backend], elapsed_s: float
) -> OperatorSummary | None:
    measured = [r for r in results if r.ok]
    if not measured:
        return None
    names = [b.name for b in backends]
    speedups = [quantiles([r.eager_s / r.compiled_s[i] for r in measured]) for i in range(len(backends))]
    if len(backends) == 2:
        # As operatorbench: with two backends, also how the first compares to the second.
        names.append(f"{names[0]}/{names[1]}")
        speedups.append(quantiles([r.compiled_s[1] / r.compiled_s[0] for r in measured]))
    means = [statistics.fmean(r.eager_s for r in measured)]
    means += [statistics.fmean(r.compiled_s[i] for r in measured) for i in range(len(backends))]
    return OperatorSummary(
        operator,
        tuple(names),
        tuple(speedups),
        elapsed_s,
        tuple(means),
        len(measured),
        len(results) - len(measured),
        combined_fingerprint([kernel for r in measured for kernel in r.kernels]),
    )


def csv_header(backend_names: Sequence[str]) -> list[str]:
    """operatorbench's columns first and in its order (``Operator``, then each backend's
    20th/50th/80th percentile speedup), benchkit's after them."""
    percentiles = [f"{q * 100:.0f}th" for q in QUANTILES]
    return [
        "Operator",
        *[f"{name} {p}" for name, p in itertools.product(backend_names, percentiles)],
        "elapsed",
        *[f"{name} abs" for name in ("eager", *backend_names)],
        "inputs",
        "failed",
        "device",
        "statistic",
        "kernels",
    ]


def render_csv(
    summaries: Sequence[OperatorSummary], backend_names: Sequence[str], *, device: str, statistic: str
) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_header(backend_names))
    for summary in summaries:
        row = [summary.operator]
        for low, mid, high in summary.speedup_quantiles:
            row += [f"{low:.6f}", f"{mid:.6f}", f"{high:.6f}"]
        row.append(f"{summary.elapsed_s:.1f}")
        row += [f"{seconds:.8f}" for seconds in summary.mean_seconds]
        row += [str(summary.measured), str(summary.failed), device, statistic, summary.kernels]
        writer.writerow(row)
    return buffer.getvalue()


def summary_backend_names(backends: Sequence[Backend]) -> list[str]:
    names = [b.name for b in backends]
    return [*names, f"{names[0]}/{names[1]}"] if len(names) == 2 else names
