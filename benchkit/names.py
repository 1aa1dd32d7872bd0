"""benchkit's vocabulary of benchmark identity: what each asv benchmark name means.

asv names a benchmark ``module.Class.method`` and a parameterized one
``module.Class.method(p0, p1)``. benchkit writes three modules of them:

* ``instruction_counts.<case class>.time_wall`` / ``.track_instructions``: one class per case
  of the definitions (`asv_class_name`: a readable slug and a hash of the case key);
* ``operators.<operator class>.<method>(input)``: the operator suite on the CPU;
* ``operators_cuda.<operator class>.<method>(input)``: the same on CUDA.

Names are the identity of a history: every stage builds and reads them here, and nothing
else takes one apart. Only the standard library and `benchkit.util` are imported, so every
stage can use this module.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from collections.abc import Iterable, Mapping, Sequence

from benchkit.util import content_key

CASES_MODULE = "instruction_counts"  # benchmarks/instruction_counts.py
# asv module of the operator suite -> the device its benchmarks measure on
OPERATOR_MODULES: Mapping[str, str] = {"operators": "cpu", "operators_cuda": "cuda"}

SECONDS = "seconds"
INSTRUCTIONS = "instructions"


class MetricKind(enum.StrEnum):
    """How the gate judges a benchmark: the metric names of ``benchkit-check.toml``, its
    thresholds and overrides. The values are what the JSON and the pages print."""

    INSTRUCTIONS = "instructions"
    WALL_TIME = "wall_time"
    RATIO = "ratio"  # any other tracked value: relative threshold, lower is better

    @property
    def label(self) -> str:
        return {"wall_time": "wall time"}.get(self.value, self.value)


class RunGroup(enum.StrEnum):
    """The groups of the run summary (`benchkit.report.run_summary`) that `benchkit main` prints."""

    WALL_TIME = "wall time"
    INSTRUCTION_COUNTS = "instruction counts"
    OPERATOR_TIMINGS = "operator timings"
    OPERATOR_TIMINGS_CUDA = "operator timings (cuda)"
    OTHER = "other"


class Suite(enum.Enum):
    CASES = "cases"  # one class per definition case, in CASES_MODULE
    OPERATORS = "operators"  # one class per operator, in each of OPERATOR_MODULES


class Metric(enum.Enum):
    """Every asv method benchkit makes. The value is the method name."""

    method: str
    unit: str  # as the benchmark declares it to asv (benchmarks.json's "unit")
    label: str
    lower_is_better: bool | None  # None: a record, not a performance number
    suite: Suite

    WALL_TIME = ("time_wall", SECONDS, "wall time", True, Suite.CASES)
    INSTRUCTIONS = ("track_instructions", INSTRUCTIONS, "instruction counts", True, Suite.CASES)
    COMPILED_OVER_EAGER = (
        "track_compiled_over_eager",
        "compiled/eager time (lower is better)",
        "compiled/eager time",
        True,
        Suite.OPERATORS,
    )
    EAGER_SECONDS = ("track_eager_seconds", SECONDS, "eager seconds", True, Suite.OPERATORS)
    COMPILED_SECONDS = ("track_compiled_seconds", SECONDS, "compiled seconds", True, Suite.OPERATORS)
    COMPILE_SECONDS = ("track_compile_seconds", SECONDS, "compile seconds", True, Suite.OPERATORS)
    # Whether the compile found its kernels in inductor's cache: tells compile times apart.
    COMPILE_CACHE_HIT = (
        "track_compile_cache_hit",
        "inductor cache hit (1 warm, 0 cold)",
        "inductor cache hit",
        None,
        Suite.OPERATORS,
    )
    # What inductor generated for the input: a hash of its output code and of the launch configs
    # its autotuning chose (`benchkit.measure.operators.kernels`), as a 48-bit number.
    KERNEL_HASH = (
        "track_kernel_hash",
        "generated kernel hash (a record)",
        "generated kernel",
        None,
        Suite.OPERATORS,
    )

    def __new__(
        cls, method: str, unit: str, label: str, lower_is_better: bool | None, suite: Suite
    ) -> Metric:
        member = object.__new__(cls)
        member._value_ = method
        member.method = method
        member.unit = unit
        member.label = label
        member.lower_is_better = lower_is_better
        member.suite = suite
        return member

    @property
    def is_record(self) -> bool:
        """A record of how a number came about (a cache state, a kernel hash), not performance."""
        return self.lower_is_better is None

    @property
    def replicated(self) -> bool:
        """Recorded as one asv sample per timing process (a replicate), asv's value their
        median: the operator timings, which the gate judges by those replicates."""
        return self in (Metric.EAGER_SECONDS, Metric.COMPILED_SECONDS, Metric.COMPILED_OVER_EAGER)

    @property
    def kind(self) -> MetricKind:
        """How the gate judges it when benchmarks.json has its unit (`BenchmarkName.judged_as`)."""
        return kind_of_unit(self.unit)

    @classmethod
    def of_suite(cls, suite: Suite) -> tuple[Metric, ...]:
        return tuple(m for m in cls if m.suite is suite)


CASE_METRICS = Metric.of_suite(Suite.CASES)
OPERATOR_METRICS = Metric.of_suite(Suite.OPERATORS)


def kind_of_unit(unit: str) -> MetricKind:
    if unit == INSTRUCTIONS:
        return MetricKind.INSTRUCTIONS
    return MetricKind.WALL_TIME if unit == SECONDS else MetricKind.RATIO


# ------------------------------------------------------------------ benchmark names


def _joined(parts: Sequence[str], params: str | None) -> str:
    dotted = ".".join(part for part in parts if part)
    return dotted if params is None else f"{dotted}({params})"


def _name_parts(name: str) -> tuple[str, str, str, str | None]:
    base, paren, rest = name.partition("(")
    params = rest.removesuffix(")") if paren else None
    head, _, method = base.rpartition(".")
    module, _, class_name = head.rpartition(".")
    return module, class_name, method, params


@functools.lru_cache(maxsize=1 << 16)
def _parse_name(name: str) -> BenchmarkName:
    """`BenchmarkName.parse`, kept: a history's pages parse the same few thousand names millions
    of times (the result is frozen, so sharing it is safe)."""
    return BenchmarkName(*_name_parts(name))


@dataclasses.dataclass(frozen=True)
class BenchmarkName:
    """One asv benchmark name, taken apart: ``module.class_name.method(params)``.

    ``params`` is the text between the parentheses asv appends for one parameter
    combination (None: no parentheses). A name of fewer than three dotted parts (a
    module-level function benchmark) has empty leading parts.
    """

    module: str
    class_name: str
    method: str
    params: str | None = None

    @classmethod
    def parse(cls, name: str) -> BenchmarkName:
        return _parse_name(name) if cls is BenchmarkName else cls(*_name_parts(name))

    @classmethod
    def build(
        cls, metric: Metric, class_name: str, device: str = "cpu", params: str | None = None
    ) -> BenchmarkName:
        """The name benchkit gives `metric` of a class (an operator's on `device`)."""
        module = CASES_MODULE if metric.suite is Suite.CASES else operator_module(device)
        return cls(module, class_name, metric.method, params)

    def __str__(self) -> str:
        return _joined((self.module, self.class_name, self.method), self.params)

    @property
    def benchmark(self) -> str:
        """The key of benchmarks.json: the name without its parameters."""
        return _joined((self.module, self.class_name, self.method), None)

    @property
    def case(self) -> str:
        """The name without its method: what a case's wall time and instruction count share."""
        return _joined((self.module, self.class_name), self.params)

    def with_params(self, params: str | None) -> BenchmarkName:
        return dataclasses.replace(self, params=params)

    def with_metric(self, metric: Metric) -> BenchmarkName:
        """The benchmark of `metric` of the same class and parameters."""
        return dataclasses.replace(self, method=metric.method)

    @property
    def device(self) -> str | None:
        """The device of an operator benchmark; None for any other."""
        return OPERATOR_MODULES.get(self.module)

    @functools.cached_property  # parsed names are shared (`_parse_name`): asked once per name
    def metric(self) -> Metric | None:
        """What benchkit measures under this name; None for a foreign benchmark.

        A case metric counts under any module (``-b`` copies of the suite, other asv
        projects recording the same methods); an operator metric only in an operator module.
        """
        try:
            metric = Metric(self.method)
        except ValueError:
            return None
        if metric.suite is Suite.OPERATORS and self.device is None:
            return None
        return metric

    @property
    def asv_timing(self) -> bool:
        """asv's own convention: a ``time_*`` method measures seconds."""
        return self.method.startswith("time_")

    def fallback_unit(self) -> str | None:
        """The unit of a value whose benchmark benchmarks.json lacks (asv rewrites that file
        with the benchmarks of its last run): seconds or instructions, known from the name."""
        try:
            unit: str | None = Metric(self.method).unit  # by the method alone, in any module
        except ValueError:
            unit = None
        if unit in (SECONDS, INSTRUCTIONS):
            return unit
        return SECONDS if self.asv_timing else None

    def judged_as(self, unit: str | None) -> MetricKind:
        """The gate's metric kind: by asv's unit; by the method name when benchmarks.json
        lacks the benchmark (then a track of another unit is judged as a ratio)."""
        if unit is not None:
            return kind_of_unit(unit)
        if self.method.endswith(INSTRUCTIONS):
            return MetricKind.INSTRUCTIONS
        return MetricKind.WALL_TIME if self.asv_timing else MetricKind.RATIO

    @property
    def run_group(self) -> RunGroup:
        metric = self.metric
        if metric is not None and metric.suite is Suite.OPERATORS:
            return (
                RunGroup.OPERATOR_TIMINGS
                if self.device == "cpu"
                else RunGroup(f"operator timings ({self.device})")
            )
        if self.asv_timing:
            return RunGroup.WALL_TIME
        return RunGroup.INSTRUCTION_COUNTS if self.metric is Metric.INSTRUCTIONS else RunGroup.OTHER


def metric_regexes(bench: Sequence[str], metric: Metric, keep: bool) -> list[str]:
    """asv ``-b`` regexes that select, of what `bench` selects (asv's regexes, any of them; all
    benchmarks when empty), the benchmarks of `metric` (`keep`) or every other one. asv keeps
    a benchmark when any regex ``re.search``-es its name, so each regex gets a look-ahead on the
    method at the end of the name (before asv's parameters, if any)."""
    method = re.escape("." + metric.method) + r"(\(.*\))?$"
    guard = f"(?=.*{method})" if keep else f"(?!.*{method})"
    return [f"^{guard}.*?(?:{regex})" for regex in bench] or [f"^{guard}"]


def metrics_regexes(bench: Sequence[str], metrics: Sequence[Metric]) -> list[str]:
    """asv ``-b`` regexes that select, of what `bench` selects, the benchmarks of any of `metrics`."""
    methods = "|".join(re.escape(m.method) for m in metrics)
    guard = rf"(?=.*\.(?:{methods})(\(.*\))?$)"
    return [f"^{guard}.*?(?:{regex})" for regex in bench] or [f"^{guard}"]


def benchmark_key(name: str) -> str:
    """The key of benchmarks.json for a (possibly parameterized) benchmark name."""
    return BenchmarkName.parse(name).benchmark


def operator_module(device: str) -> str:
    """The asv module of the operator suite on `device`."""
    return next(module for module, where in OPERATOR_MODULES.items() if where == device)


def operator_class_name(operator: str) -> str:
    """``aten.mm.default`` -> ``aten_mm_default`` (asv names are module.Class.method: no dots)."""
    return operator.replace(".", "_")


# ------------------------------------------------------------------ cases


_MAX_SLUG = 200  # asv keeps names below 250 characters; leave room for module/method
_KEY_HASH_LENGTH = 8


def case_key_hash(case_key: str) -> str:
    return content_key(case_key, length=_KEY_HASH_LENGTH)


def asv_class_name(words: Sequence[str], case_key: str) -> str:
    """A readable Python identifier for a case, stable across processes: a slug of `words`
    (the label and the modes) and a hash of its key. The name is the case's history identity."""
    slug = "_".join(re.sub(r"[^0-9a-zA-Z]+", "_", w).strip("_") for w in words if w)
    slug = re.sub(r"_+", "_", slug)[:_MAX_SLUG].strip("_")
    # The slug alone can collide (e.g. "a-b" vs "a b"); the key hash cannot.
    return f"{slug}_{case_key_hash(case_key)}"


class CaseKeys:
    """Case keys found by asv class name (or benchmark name), among known keys: the hash at
    the end of a case's class name is of its key, so the key comes back as it was written."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._by_hash = {case_key_hash(key): key for key in keys}

    def of_class(self, class_name: str) -> str | None:
        return self._by_hash.get(class_name.rpartition("_")[2])

    def of_benchmark(self, name: str | BenchmarkName) -> str | None:
        parsed = name if isinstance(name, BenchmarkName) else BenchmarkName.parse(name)
        return self.of_class(parsed.class_name) if parsed.class_name else None


# Look-alikes for the characters HTML gives a meaning to. asv shows a benchmark's
# pretty name as HTML in some places and as text in others, so entities would show
# as "&lt;" in the latter; these characters read the same in both and run nothing.
_HTML_LOOKALIKES = str.maketrans({"<": "\uff1c", ">": "\uff1e", "&": "\uff06", '"': "\uff02", "'": "\uff07"})


def html_safe_name(text: str) -> str:
    """`text` with ``< > & " '`` replaced by full-width look-alikes: safe as HTML and as text."""
    return text.translate(_HTML_LOOKALIKES)


def readable_name(case_key: str, metric: Metric) -> str:
    """A case's benchmark as people read it: ``<case key> [<method>]``. Escape it for HTML."""
    return f"{case_key} [{metric.method}]"


def pretty_name(case_key: str, metric: Metric) -> str:
    """The ``pretty_name`` benchkit gives asv: `readable_name` in look-alikes, as asv inserts it
    as HTML. It does not lead back to the key: use `CaseKeys` with the benchmark name."""
    return html_safe_name(readable_name(case_key, metric))
