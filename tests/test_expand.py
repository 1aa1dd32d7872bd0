"""Expansion: case counts and labels by the seed's rules, and asv class generation."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from benchkit.define.api import (
    AutogradMode,
    DefinitionError,
    GroupedModules,
    GroupedSetup,
    GroupedStmts,
    GroupedVariants,
    Language,
    RuntimeMode,
    TimerArgs,
)
from benchkit.define.expand import asv_class_name, asv_classes, flatten, materialize, select

SETUP = GroupedSetup(
    "x = torch.ones((4, 4))\nw = torch.ones((4, 4), requires_grad=True)",
    "auto x = torch::ones({4, 4});\nauto w = torch::ones({4, 4}).set_requires_grad(true);",
)


def _modes(case):  # (runtime, autograd, language, threads)
    a = case.autolabels
    return (a.runtime.value, a.autograd.value, a.language.value, case.timer_args.num_threads)


def test_full_expansion_of_one_grouped_stmt() -> None:
    cases = materialize(
        {
            "mul": GroupedStmts(
                "y = x * w",
                "auto y = x * w;",
                SETUP,
                signature="f(x, w) -> y",
                torchscript=True,
                autograd=True,
                num_threads=(1, 2),
            )
        }
    )
    # runtime (2) x autograd (2) x language (2) x threads (2)
    assert len(cases) == 16
    assert len({_modes(c) for c in cases}) == 16
    assert {c.label for c in cases} == {("mul",)}
    by_mode = {_modes(c): c.timer_args for c in cases}
    fb = by_mode[("Eager", "Forward + Backward", "Python", 1)]
    assert fb.stmt == "y = x * w\ny.backward()"
    jit_cpp = by_mode[("TorchScript", "Forward + Backward", "C++", 2)]
    assert "jit_model.forward(ivalue_inputs);" in jit_cpp.stmt
    assert jit_cpp.stmt.endswith("y.toTensor().backward();")
    assert "torch::jit::load" in jit_cpp.setup and "#include <torch/script.h>" in jit_cpp.global_setup
    jit_py = by_mode[("TorchScript", "Forward", "Python", 1)]
    assert jit_py.stmt == "y = jit_model(x, w)"
    assert jit_py.torchscript is not None and jit_py.torchscript.path in jit_py.setup
    # Python and C++ JIT cases load the same artifact.
    assert jit_cpp.torchscript == jit_py.torchscript


HELD_OUT = {
    # 2 languages -> 2
    "empty": GroupedStmts("torch.empty(())", "torch::empty({0});"),
    ("a", "b"): {
        # Python only, 3 thread settings -> 3
        "py only": GroupedStmts("x + 1", setup=SETUP, num_threads=(1, 2, 4)),
        # C++ only -> 1
        None: {"cpp only": GroupedStmts(cpp_stmt="x + 1;", setup=SETUP)},
    },
    # TorchScript without autograd: (eager, jit) x (py, cpp) -> 4
    "jit": GroupedStmts("y = x + w", "auto y = x + w;", SETUP, signature="f(x, w) -> y", torchscript=True),
    # autograd without TorchScript, python only: fwd, fwd+bwd -> 2
    "grad": GroupedStmts("y = (x * w).sum()", setup=SETUP, signature="f(x, w) -> y", autograd=True),
    # a module, both languages, scripted: 4; an unscripted one with 2 threads: 2 x 2 = 4
    "modules": {
        "relu": GroupedModules(
            "model = torch.nn.ReLU()",
            "auto model = torch::nn::ReLU();",
            setup=SETUP,
            signature="f(x) -> y",
            torchscript=True,
        ),
        "lstm": GroupedModules(
            "model = torch.nn.LSTM(4, 2)",
            "auto model = torch::nn::LSTM(4, 2);",
            setup=SETUP,
            signature="f(x) -> y",
            num_threads=(1, 2),
        ),
    },
    # explicit TimerArgs pass through -> 1
    "explicit": TimerArgs("x = 1"),
    # variants: add has two lines (2 cases, each py+cpp = 2 -> 4), neg py only (1) -> 5
    "variants": GroupedVariants(
        "# @add\nx + 1\nx + 2\n# @neg\n-x",
        "// @add\nx + 1;\nx + 2;",
    ),
}


def test_held_out_definition_counts_and_labels() -> None:
    cases = materialize(HELD_OUT)
    counts = Counter("/".join(c.label) for c in cases)
    assert counts == {
        "empty": 2,
        "a/b/py only": 3,
        "a/b/cpp only": 1,
        "jit": 4,
        "grad": 2,
        "modules/relu": 4,
        "modules/lstm": 4,
        "explicit": 1,
        "variants/add/Case:  0": 2,
        "variants/add/Case:  1": 2,
        "variants/neg": 1,
    }
    assert len(cases) == 26
    explicit = next(c for c in cases if c.label == ("explicit",))
    assert explicit.autolabels.runtime is RuntimeMode.EXPLICIT
    assert explicit.autolabels.autograd is AutogradMode.EXPLICIT
    grad = [c for c in cases if c.label == ("grad",)]
    assert {c.autolabels.autograd for c in grad} == {AutogradMode.FORWARD, AutogradMode.FORWARD_BACKWARD}
    assert {c.autolabels.language for c in cases if c.label == ("a", "b", "cpp only")} == {Language.CPP}


def test_standard_suite_size_and_groups() -> None:
    from benchkit.define.loader import load_cases

    cases = load_cases(standard=True, paths=[])
    assert len(cases) >= 181
    groups = {c.label[0] for c in cases}
    for required in (
        "empty",
        "Pointwise",
        "Reduction",
        "Indexing",
        "Metadata and views",
        "nn Modules",
        "training",
        "InferenceMode",
        "MatMul",
        "Attention",
        "torch.compile",
    ):
        assert required in groups
    training = [c for c in cases if c.label[0] == "training"]
    assert {c.timer_args.num_threads for c in training} == {1, 2}
    assert all(c.autolabels.language is Language.CPP for c in cases if c.label[0] == "InferenceMode")


def test_duplicate_and_malformed_definitions() -> None:
    with pytest.raises(DefinitionError, match="a/b: label is defined twice"):
        flatten({"a": {"b": TimerArgs("x")}, ("a", "b"): TimerArgs("y")})
    with pytest.raises(DefinitionError, match="key 3 must be"):
        flatten({3: TimerArgs("x")})
    with pytest.raises(DefinitionError, match="expected a grouped benchmark"):
        flatten({"a": "x + 1"})


def test_select_by_regex() -> None:
    cases = materialize(HELD_OUT)
    assert {c.label for c in select(cases, r"^modules/relu .*TorchScript")} == {("modules", "relu")}
    with pytest.raises(DefinitionError, match="not a valid regular expression"):
        select(cases, "(")


def test_asv_names_are_valid_unique_and_stable() -> None:
    from benchkit.define.loader import load_cases

    cases = load_cases(standard=True, paths=[])
    names = [asv_class_name(c) for c in cases]
    assert len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and len(name) < 250 and "-" not in name
    # Another process (other hash seed) generates the same names and versions.
    code = (
        "import json; from benchkit.expand import asv_classes, load_cases;"
        "from benchkit.measure.walltime.timing import WallTimeMetric;"
        "from benchkit.measure.cpp.shards import CppSuite;"
        "cs = load_cases(standard=True, paths=[]);"
        "cl = asv_classes(cs, [WallTimeMetric(CppSuite([c.timer_args for c in cs]))]);"
        "print(json.dumps({n: c.time_wall.version for n, c in cl.items()}))"
    )
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                check=True,
                env={**__import__("os").environ, "PYTHONHASHSEED": seed},
            ).stdout
        )
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1] and len(runs[0]) == len(cases)


def test_asv_version_depends_only_on_the_case() -> None:
    from benchkit.measure.walltime.timing import WallTimeMetric

    a = materialize({"g": {"x": GroupedStmts("x + 1"), "y": GroupedStmts("x + 2")}})
    b = materialize({"g": {"x": GroupedStmts("x + 1"), "y": GroupedStmts("x + 3")}})
    metric = WallTimeMetric(cpp_suite=None)
    va = {n: c.time_wall.version for n, c in asv_classes(a, [metric]).items()}
    vb = {n: c.time_wall.version for n, c in asv_classes(b, [metric]).items()}
    assert set(va) == set(vb)  # names follow labels, not statements
    x_name = next(n for n in va if n.startswith("g_x_"))
    y_name = next(n for n in va if n.startswith("g_y_"))
    assert va[x_name] == vb[x_name]  # an unrelated edit keeps this case's history
    assert va[y_name] != vb[y_name]  # a changed statement starts a new history
    cls = next(iter(asv_classes(a, [metric]).values()))
    assert cls.time_wall.pretty_source.startswith("# stmt\nx + 1")
