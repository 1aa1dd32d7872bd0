"""`benchkit.names`: benchmark names built and read back in one place."""

from __future__ import annotations

import dataclasses

import pytest

from benchkit import names
from benchkit.define.api import TimerArgs
from benchkit.expand import asv_class_name, materialize
from benchkit.names import BenchmarkName, CaseKeys, Metric, MetricKind, RunGroup

MARKUP_LABEL = """<b id="injected">a & b</b> 'quoted'"""


@pytest.mark.parametrize(
    ("name", "parts", "metric", "device"),
    [
        (
            "instruction_counts.nn_Linear_PYTHON_EAGER_FORWARD_t1_0123abcd.track_instructions",
            ("instruction_counts", "nn_Linear_PYTHON_EAGER_FORWARD_t1_0123abcd", "track_instructions", None),
            Metric.INSTRUCTIONS,
            None,
        ),
        (
            "instruction_counts.nn_Linear_PYTHON_EAGER_FORWARD_t1_0123abcd.time_wall",
            ("instruction_counts", "nn_Linear_PYTHON_EAGER_FORWARD_t1_0123abcd", "time_wall", None),
            Metric.WALL_TIME,
            None,
        ),
        (
            "operators.aten_mm_default.track_compiled_over_eager(('f32[8, 16]',))",
            ("operators", "aten_mm_default", "track_compiled_over_eager", "('f32[8, 16]',)"),
            Metric.COMPILED_OVER_EAGER,
            "cpu",
        ),
        (
            "operators_cuda.aten_mm_default.track_compile_cache_hit(('4096x768 f16',))",
            ("operators_cuda", "aten_mm_default", "track_compile_cache_hit", "('4096x768 f16',)"),
            Metric.COMPILE_CACHE_HIT,
            "cuda",
        ),
        (
            "mem.Suite.track_allocations(1, 'a(b)')",
            ("mem", "Suite", "track_allocations", "1, 'a(b)'"),
            None,
            None,
        ),
        ("pkg.mod.Suite.time_it", ("pkg.mod", "Suite", "time_it", None), None, None),
        ("bench.time_function", ("", "bench", "time_function", None), None, None),
    ],
)
def test_parse_and_build_round_trip(
    name: str, parts: tuple[str, str, str, str | None], metric: Metric | None, device: str | None
) -> None:
    parsed = BenchmarkName.parse(name)
    assert (parsed.module, parsed.class_name, parsed.method, parsed.params) == parts
    assert str(parsed) == name
    assert (parsed.metric, parsed.device) == (metric, device)
    assert parsed.benchmark == name.partition("(")[0]
    if metric is not None:
        built = BenchmarkName.build(metric, parsed.class_name, device or "cpu", parsed.params)
        assert built == parsed


def test_the_same_case_under_another_metric() -> None:
    wall = BenchmarkName.parse("instruction_counts.C_0123abcd.time_wall")
    assert str(wall.with_metric(Metric.INSTRUCTIONS)) == "instruction_counts.C_0123abcd.track_instructions"
    assert wall.case == "instruction_counts.C_0123abcd"
    compile_time = BenchmarkName.parse("operators.aten_mm_default.track_compile_seconds(('x',))")
    assert str(compile_time.with_metric(Metric.COMPILE_CACHE_HIT)) == (
        "operators.aten_mm_default.track_compile_cache_hit(('x',))"
    )
    assert compile_time.case == "operators.aten_mm_default(('x',))"


def test_operator_metrics_count_only_in_operator_modules() -> None:
    assert BenchmarkName.parse("other.aten_mm_default.track_eager_seconds").metric is None
    # The case metrics keep their meaning in any module (copies of the suite under -b, tests).
    assert BenchmarkName.parse("ic.C.track_instructions").metric is Metric.INSTRUCTIONS
    assert names.operator_module("cuda") == "operators_cuda"
    assert names.operator_class_name("aten.mm.default") == "aten_mm_default"


def test_metric_properties() -> None:
    assert [m.method for m in names.CASE_METRICS] == ["time_wall", "track_instructions"]
    assert len(names.OPERATOR_METRICS) == 6 and all(
        m.method.startswith("track_") for m in names.OPERATOR_METRICS
    )
    assert Metric("track_instructions") is Metric.INSTRUCTIONS
    assert (Metric.WALL_TIME.unit, Metric.INSTRUCTIONS.unit, Metric.EAGER_SECONDS.unit) == (
        "seconds",
        "instructions",
        "seconds",
    )
    # As the gate judges them: by the unit asv records.
    assert [m.kind for m in Metric] == [
        MetricKind.WALL_TIME,
        MetricKind.INSTRUCTIONS,
        MetricKind.RATIO,
        MetricKind.WALL_TIME,
        MetricKind.WALL_TIME,
        MetricKind.WALL_TIME,
        MetricKind.RATIO,
        MetricKind.RATIO,
    ]
    records = (Metric.COMPILE_CACHE_HIT, Metric.KERNEL_HASH)  # of the cache, of the kernel: not performance
    assert all(m.lower_is_better and not m.is_record for m in Metric if m not in records)
    assert all(m.lower_is_better is None and m.is_record for m in records)
    assert [kind.label for kind in MetricKind] == ["instructions", "wall time", "ratio"]
    assert f"{MetricKind.WALL_TIME}" == "wall_time"  # what the JSON and the pages print


@pytest.mark.parametrize(
    ("name", "unit", "kind", "fallback_unit", "group"),
    [
        (
            "ic.C.track_instructions",
            "instructions",
            MetricKind.INSTRUCTIONS,
            "instructions",
            RunGroup.INSTRUCTION_COUNTS,
        ),
        ("ic.C.time_wall", None, MetricKind.WALL_TIME, "seconds", RunGroup.WALL_TIME),
        ("bench.B.track_b_instructions", None, MetricKind.INSTRUCTIONS, None, RunGroup.OTHER),
        ("ops.O.track_speedup", "x", MetricKind.RATIO, None, RunGroup.OTHER),
        (
            "operators.O.track_eager_seconds(1)",
            "seconds",
            MetricKind.WALL_TIME,
            "seconds",
            RunGroup.OPERATOR_TIMINGS,
        ),
        ("operators.O.track_eager_seconds(1)", None, MetricKind.RATIO, "seconds", RunGroup.OPERATOR_TIMINGS),
        (
            "operators_cuda.O.track_compiled_over_eager",
            None,
            MetricKind.RATIO,
            None,
            RunGroup.OPERATOR_TIMINGS_CUDA,
        ),
    ],
)
def test_kinds_units_and_groups(
    name: str, unit: str | None, kind: MetricKind, fallback_unit: str | None, group: RunGroup
) -> None:
    parsed = BenchmarkName.parse(name)
    assert parsed.judged_as(unit) is kind
    assert parsed.fallback_unit() == fallback_unit
    assert parsed.run_group is group


@pytest.mark.parametrize(
    ("label", "class_name"),
    [
        # Class names are history identity: pinned as benchkit has always made them.
        ("nn Modules/Linear", "nn_Modules_Linear_PYTHON_EXPLICIT_EXPLICIT_t1_0ee359ce"),
        (MARKUP_LABEL, "b_id_injected_a_b_b_quoted_PYTHON_EXPLICIT_EXPLICIT_t1_dd2704cc"),
    ],
)
def test_case_key_class_and_pretty_name_lead_to_each_other(label: str, class_name: str) -> None:
    [case] = materialize({label: TimerArgs("y = x + 1", setup="x = 1")})
    assert asv_class_name(case) == class_name
    keys = CaseKeys([case.key, "another | key"])
    assert keys.of_class(class_name) == case.key
    assert CaseKeys(["another | key"]).of_class(class_name) is None
    for metric in names.CASE_METRICS:
        name = BenchmarkName.build(metric, class_name)
        assert str(name) == f"instruction_counts.{class_name}.{metric.method}"
        # Back to the key as written, by the hash in the class name, not by the pretty name.
        assert keys.of_benchmark(str(name)) == keys.of_benchmark(name) == case.key
        readable = names.readable_name(case.key, metric)
        pretty = names.pretty_name(case.key, metric)
        assert readable == f"{case.key} [{metric.method}]"
        assert not set("<>&\"'") & set(pretty)
        assert (pretty == readable) is (label != MARKUP_LABEL)
        assert len(pretty) == len(readable)


def test_a_foreign_name_has_no_case() -> None:
    assert CaseKeys(["k"]).of_benchmark("bench.time_function") is None
    assert dataclasses.replace(BenchmarkName.parse("a.B.c"), params="1").benchmark == "a.B.c"


def test_metric_regexes_split_a_selection_into_wall_times_and_the_rest() -> None:
    import re

    found = [
        "instruction_counts.e2e_ReLU_1.time_wall",
        "instruction_counts.e2e_ReLU_1.track_instructions",
        "instruction_counts.other_2.time_wall",
        "operators.Add.track_compile_seconds(0)",
    ]

    def selected(regexes: list[str]) -> list[str]:  # asv's rule: any regex re.search-es the name
        return [name for name in found if any(re.search(r, name) for r in regexes)]

    assert selected(names.metric_regexes([], Metric.WALL_TIME, keep=True)) == [found[0], found[2]]
    assert selected(names.metric_regexes([], Metric.WALL_TIME, keep=False)) == [found[1], found[3]]
    mine = [r"^instruction_counts\.e2e_", r"Add"]
    assert selected(names.metric_regexes(mine, Metric.WALL_TIME, keep=True)) == [found[0]]
    assert selected(names.metric_regexes(mine, Metric.WALL_TIME, keep=False)) == [found[1], found[3]]
