"""Wall-time measurement through real torch: Python, C++, TorchScript, threads."""

from __future__ import annotations

import pytest

from benchkit.define.api import GroupedSetup, GroupedStmts, Language, TimerArgs
from benchkit.define.expand import materialize
from benchkit.measure.cpp.shards import CppSuite, Snippet, layout
from benchkit.measure.walltime.timing import MeasuredClock, prepare


def test_python_block_scales_with_work() -> None:
    fast = prepare(TimerArgs("x.sum()", "x = torch.ones(10)"))
    slow = prepare(TimerArgs("x.sum()", "x = torch.ones(1_000_000)"))
    assert min(slow.run_block(20) for _ in range(3)) > 5 * min(fast.run_block(20) for _ in range(3))


def test_python_setup_errors_propagate() -> None:
    with pytest.raises(NameError):
        prepare(TimerArgs("y = x + 1", "z = 1"), "bad case").run_block(1)


def test_measured_clock_reports_per_execution_time() -> None:
    clock = MeasuredClock()
    before = clock()
    clock.add(0.5, 1000)
    assert clock() - before == pytest.approx(0.5 / 1000)


def test_cpp_layout_is_deterministic_and_groups_by_global_setup() -> None:
    from benchkit.measure.cpp.shards import SNIPPETS_PER_SHARD

    n = SNIPPETS_PER_SHARD + 10
    snippets = [Snippet(f"x + {i};", "auto x = torch::ones({1});", "", 1) for i in range(n)]
    snippets.append(Snippet("y;", "", "#include <vector>", 1))
    shards = layout(snippets)
    assert layout(list(reversed(snippets))) == shards
    assert sum(len(s.snippets) for s in shards) == n + 1
    assert any(s.global_setup == "#include <vector>" and len(s.snippets) == 1 for s in shards)
    assert len(shards) == 3 and all(len(s.snippets) <= SNIPPETS_PER_SHARD for s in shards)


def test_torchscript_cases_run_in_python_and_cpp() -> None:
    setup = GroupedSetup(
        "x = torch.ones(3)\nw = torch.ones(3)", "auto x = torch::ones({3});\nauto w = torch::ones({3});"
    )
    cases = materialize(
        {
            "ts": GroupedStmts(
                "y = x * w + 1", "auto y = x * w + 1;", setup, signature="f(x, w) -> y", torchscript=True
            )
        }
    )
    jit = [c for c in cases if c.autolabels.runtime.name == "JIT"]
    assert {c.autolabels.language for c in jit} == {Language.PYTHON, Language.CPP}
    suite = CppSuite([c.timer_args for c in cases])
    for case in jit:
        prepared = prepare(case.timer_args, case.key, suite)
        assert prepared.run_block(5) > 0


def test_python_threads_are_set() -> None:
    prepare(TimerArgs("assert torch.get_num_threads() == 2", num_threads=2)).run_block(2)


def test_unscriptable_model_is_skipped_with_reason() -> None:
    from benchkit.measure.walltime.timing import CaseSkipped

    cases = materialize(
        {
            "ts": GroupedStmts(
                "y = x.numpy()",
                setup=GroupedSetup("x = torch.ones(2)"),
                signature="f(x) -> y",
                torchscript=True,
            )
        }
    )
    jit = next(c for c in cases if c.autolabels.runtime.name == "JIT")
    with pytest.raises(CaseSkipped, match=r"torch\.jit could not script"):
        prepare(jit.timer_args, jit.key)


def test_precompiled_header_only_when_cores_have_several_shards_each() -> None:
    from benchkit.measure.cpp.pch import worth_precompiling

    assert not worth_precompiling(missing=2, jobs=2)  # one shard per core: parse in parallel
    assert not worth_precompiling(missing=4, jobs=2)
    assert worth_precompiling(missing=5, jobs=2)
    assert worth_precompiling(missing=3, jobs=1)


def test_shards_compile_with_a_precompiled_header() -> None:
    """With torch's headers precompiled, every shard compiles with them."""
    from benchkit.measure.cpp import pch
    from benchkit.measure.cpp import shards as cpp_batch

    cases = [
        TimerArgs("auto y = x + 1;", "auto x = torch::ones({2});", language=Language.CPP),
        TimerArgs("auto y = x - 1;", "auto x = torch::ones({2});", global_setup="#include <vector>",
                  language=Language.CPP),
    ]  # fmt: skip
    suite = CppSuite(cases)
    assert len(suite.shards) == 2  # different global setups: different translation units
    pch.build_precompiled_header()
    assert cpp_batch.build_all(suite.shards) == {}
    header = pch.pch_header(pch.extra_cflags())
    assert header is not None and header.with_suffix(".h.gch").stat().st_size > 1_000_000
    for shard in suite.shards:
        ninja = (cpp_batch._build_dir(shard) / "build.ninja").read_text()
        assert f"-include {header}" in ninja
    flags = pch._cpp_extension_cflags([])
    assert "-DTORCH_API_INCLUDE_EXTENSION_H" in flags
    assert not any(f.startswith("-DTORCH_EXTENSION_NAME=") for f in flags)
    for args in cases:
        assert prepare(args, cpp_suite=suite).run_block(10) > 0
