"""TorchInductor operator speedups on CUDA as asv history (see docs/operators.md).

The same benchmarks as ``operators`` (one class per operator, one parameter value per
input, the same ``track_*`` metrics), measured on the GPU: the CUDA default set
(``benchkit.measure.operators.workload.CUDA_DEFAULT_OPERATORS``, inputs of the sizes a
GPU trains, in float16 and float32), timed by operatorbench's CUDA method (eager and
compiled each replayed from a CUDA graph, inductor's ``benchmark_gpu`` per repeat, the
median over repeats), in two fresh processes whose medians are kept.

The module name is the device's part of a benchmark's identity: ``operators.aten_mm_default``
is a CPU history, ``operators_cuda.aten_mm_default`` a CUDA one, and the two never mix.
On a machine without a CUDA device every benchmark here is recorded as skipped ("no CUDA
device"), after one process has found no device; nothing is timed. Each benchmark runs in
one asv round: its numbers come from the shared ``setup_cache``.
"""

from typing import Any, ClassVar

from benchkit.measure.operators import asv as _asv_operators
from benchkit.measure.operators import workload as _workload
from benchkit.names import operator_module as _operator_module

from .operators import _class_name, _define_classes, _OperatorBenchmark

_WORKLOAD = _workload.asv_workload("cuda")
_INPUTS = {name: _workload.input_labels(_WORKLOAD.inputs(name)) for name in _WORKLOAD.operators}
_CLASS_NAMES = {name: _class_name(name) for name in _WORKLOAD.operators}


class _CudaOperatorBenchmark(_OperatorBenchmark):
    """The CPU classes' lookups, fed by a setup_cache that times on CUDA."""

    rounds = 1
    params: ClassVar[list[list[str]]] = [[]]

    def setup_cache(self) -> dict[str, Any]:
        return _asv_operators.setup_cache(_INPUTS, _CLASS_NAMES, _operator_module("cuda"), "cuda")

    setup_cache.timeout = 1800  # type: ignore[attr-defined]

    def setup(self, cache: dict[str, Any], label: str) -> None:
        if cache.get("no_device"):
            raise NotImplementedError(f"skipped: {cache['no_device']}")  # asv records a skip
        super().setup(cache, label)


_define_classes(globals(), _CudaOperatorBenchmark, _INPUTS, "on CUDA, on the CUDA default set's inputs")
