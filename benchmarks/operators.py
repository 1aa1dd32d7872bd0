"""TorchInductor operator speedups as asv history (see docs/operators.md).

One class per operator of the default set (``benchkit.measure.operators.workload.DEFAULT_OPERATORS``),
parameterized by the operator's inputs from the bundled model logs; or, with
``BENCHKIT_OPERATOR_LOGS=PATH`` (log files or folders such as PyTorch's
``operator_inp_logs``, separated by ``os.pathsep``), one class per operator of
those logs with its three most-called inputs:

* ``track_compiled_over_eager``: compiled time / eager time. Lower is better
  (asv's convention): 0.5 means the inductor kernel takes half the eager time.
* ``track_eager_seconds`` / ``track_compiled_seconds``: seconds per call.

  These three are recorded as asv records a timing: one sample per timing process (a
  replicate of the whole measurement), asv's value their median; the gate compares two
  builds by their replicates.
* ``track_compile_seconds``: seconds ``compile_fx`` took for this input (a cache hit when the
  inductor cache is warm; see below), a sample per compiling process
  (``BENCHKIT_COMPILE_REPLICATES``).
* ``track_compile_cache_hit``: the inductor cache state of that compile: 1.0 when it found
  every kernel in the cache (warm; it wrote nothing there), 0.0 when it compiled (cold). Not
  performance: the report stage reads it to judge compile times only between builds
  compiled in the same state.
* ``track_kernel_hash``: what inductor generated for this input, a 48-bit hash of its output
  code and of the launch configs its autotuning chose. Not performance either: the report
  stage tells by it whether an operator's step or change came with a new kernel.

All classes share one ``setup_cache``: asv runs it per environment (one torch
build, i.e. one commit) and round, and hands its result to every benchmark as the
first argument. It compiles the selected operators' inputs (outside all timing)
and times them in interleaved rounds, in three fresh processes whose medians are
kept (see ``benchkit.measure.operators.asv.measure_default_set_for_asv``), once per asv
command: later rounds reuse it (``benchkit.measure.operators.asv``). The per-benchmark
methods only look numbers up.
Compiled kernels and their autotuned launch configs go to benchkit's inductor cache for
the torch build, so every timing process of a commit runs the same kernels and
re-measuring it does not recompile. For honest compile times from a fully cold start set
``BENCHKIT_INDUCTOR_COLD=1`` (fresh, empty inductor and Triton caches for that run).
``BENCHKIT_OPERATOR_PROCESSES`` and ``BENCHKIT_OPERATOR_ROUNDS`` (per process) change how
much timing is done.

Importing this module parses the small bundled logs and nothing else.
"""

from typing import Any, ClassVar

from benchkit.measure.operators import asv as _asv_operators
from benchkit.measure.operators import workload as _workload
from benchkit.names import Metric as _Metric
from benchkit.names import operator_class_name as _class_name
from benchkit.names import operator_module as _operator_module

_WORKLOAD = _workload.asv_workload()
_INPUTS = {name: _workload.input_labels(_WORKLOAD.inputs(name)) for name in _WORKLOAD.operators}


class _OperatorBenchmark:
    """Base of the per-operator classes; ``operator`` and ``params`` are set per subclass."""

    operator = ""
    param_names: ClassVar[list[str]] = ["input"]
    params: ClassVar[list[list[str]]] = [[]]
    timeout = 60.0

    def setup_cache(self) -> dict[str, Any]:
        return _asv_operators.setup_cache(_INPUTS, _CLASS_NAMES, _operator_module("cpu"))

    # Compiling and timing the whole default set happens once, here; cold it takes minutes.
    setup_cache.timeout = 1800  # type: ignore[attr-defined]

    def setup(self, cache: dict[str, Any], label: str) -> None:
        entry = cache["operators"].get(self.operator)
        if entry is None:  # asv runs only selected benchmarks, and those were timed
            raise RuntimeError(f"{self.operator}: not timed by this run's setup_cache")
        if "skip" in entry:
            raise NotImplementedError(f"{self.operator}: {entry['skip']}")  # asv records a skip
        result = entry["inputs"].get(label)
        if result is None:
            raise NotImplementedError(f"{self.operator}: input not measured in this run")
        if result["error"]:
            raise RuntimeError(f"{self.operator} [{label}]: {result['error']}")  # asv records a failure
        self.result = result

    def track_compiled_over_eager(self, cache: dict[str, Any], label: str) -> Any:
        return _asv_operators.replicate_samples(self.result, _Metric.COMPILED_OVER_EAGER)

    track_compiled_over_eager.unit = _Metric.COMPILED_OVER_EAGER.unit  # type: ignore[attr-defined]

    def track_eager_seconds(self, cache: dict[str, Any], label: str) -> Any:
        return _asv_operators.replicate_samples(self.result, _Metric.EAGER_SECONDS)

    track_eager_seconds.unit = _Metric.EAGER_SECONDS.unit  # type: ignore[attr-defined]

    def track_compiled_seconds(self, cache: dict[str, Any], label: str) -> Any:
        return _asv_operators.replicate_samples(self.result, _Metric.COMPILED_SECONDS)

    track_compiled_seconds.unit = _Metric.COMPILED_SECONDS.unit  # type: ignore[attr-defined]

    def track_compile_seconds(self, cache: dict[str, Any], label: str) -> Any:
        return _asv_operators.compile_samples(self.result)

    track_compile_seconds.unit = _Metric.COMPILE_SECONDS.unit  # type: ignore[attr-defined]

    def track_compile_cache_hit(self, cache: dict[str, Any], label: str) -> float:
        return self.result["compile_cache_hit"]

    track_compile_cache_hit.unit = _Metric.COMPILE_CACHE_HIT.unit  # type: ignore[attr-defined]

    def track_kernel_hash(self, cache: dict[str, Any], label: str) -> float:
        return self.result["kernel_hash"]

    track_kernel_hash.unit = _Metric.KERNEL_HASH.unit  # type: ignore[attr-defined]


_CLASS_NAMES = {name: _class_name(name) for name in _WORKLOAD.operators}


def _define_classes(namespace: dict[str, Any], base: type, inputs: dict[str, list[str]], where: str) -> None:
    """One subclass of ``base`` per operator in ``inputs``, parameterized by its input labels."""
    for name, labels in inputs.items():
        namespace[_class_name(name)] = type(
            _class_name(name),
            (base,),
            {"operator": name, "params": [labels], "__doc__": f"TorchInductor vs eager for {name} {where}."},
        )


_define_classes(globals(), _OperatorBenchmark, _INPUTS, "on the bundled model inputs")
