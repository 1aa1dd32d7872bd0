"""The definition API: validation errors and GroupedVariants parsing."""

from __future__ import annotations

import pytest

from benchkit.define.api import (
    DefinitionError,
    GroupedModules,
    GroupedSetup,
    GroupedStmts,
    GroupedVariants,
    Language,
    TimerArgs,
    parse_signature,
    parse_stmts,
)


def test_signature_parsing() -> None:
    assert parse_signature("f(x, w) -> y") == (("x", "w"), "y")
    assert parse_signature("f(x) -> None") == (("x",), None)
    assert parse_signature("f() -> y") == ((), "y")
    assert parse_signature(None) == (None, None)


@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ("g(x) -> y", "invalid signature"),
        ("f(x, w) -> y, z", "only one output"),
        ("f(x, 1w) -> y", "is not a name"),
        ("f(x, x) -> y", "repeated argument"),
        ("f(x)", "invalid signature"),
    ],
)
def test_bad_signature_names_definition(signature: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message) as info:
        GroupedStmts("y = x", signature=signature)
    # The error points at the line of this file that built the definition.
    assert "GroupedStmts defined at" in str(info.value)
    assert "test_api.py:" in str(info.value)


def test_autograd_needs_output() -> None:
    with pytest.raises(DefinitionError, match="autograd=True needs an output"):
        GroupedStmts("x += 1", signature="f(x) -> None", autograd=True)


def test_torchscript_needs_signature_and_python() -> None:
    with pytest.raises(DefinitionError, match="needs a signature"):
        GroupedStmts("y = x + 1", torchscript=True)
    with pytest.raises(DefinitionError, match="needs py_stmt"):
        GroupedStmts(cpp_stmt="auto y = x + 1;", signature="f(x) -> y", torchscript=True)


def test_model_setup_must_define_model() -> None:
    with pytest.raises(DefinitionError, match="py_model_setup does not define `model`"):
        GroupedModules("net = torch.nn.ReLU()", signature="f(x) -> y")
    with pytest.raises(DefinitionError, match="cpp_model_setup does not define `model`"):
        GroupedModules(cpp_model_setup="auto net = torch::nn::ReLU();", signature="f(x) -> y")
    with pytest.raises(DefinitionError, match="signature"):
        GroupedModules("model = torch.nn.ReLU()")
    # `model` in a comment or a longer name does not count as a definition.
    with pytest.raises(DefinitionError, match="does not define"):
        GroupedModules("my_model = torch.nn.ReLU()  # model", signature="f(x) -> y")


def test_modules_generate_calls() -> None:
    bench = GroupedModules(
        "model = torch.nn.ReLU()", "auto model = torch::nn::ReLU();", signature="f(x) -> y"
    )
    assert bench.py_fwd_stmt == "y = model(x)"
    assert bench.cpp_fwd_stmt == "auto y = model->forward(x);"


def test_stmts_derive_scriptable_model() -> None:
    bench = GroupedStmts("y = x * w", signature="f(x, w) -> y", torchscript=True)
    assert bench.py_model_setup == "def model(x, w):\n    y = x * w\n    return y\n"


def test_num_threads_validation() -> None:
    assert GroupedStmts("x", num_threads=(1, 2)).num_threads == (1, 2)
    with pytest.raises(DefinitionError, match="num_threads"):
        GroupedStmts("x", num_threads=0)


def test_setup_and_stmts_are_dedented() -> None:
    setup = GroupedSetup(
        """
        x = 1
        """
    )
    assert setup.py_setup == "\nx = 1\n"


def test_timer_args_validation_and_json_round_trip() -> None:
    args = TimerArgs("auto y = x;", setup="auto x = torch::ones({1});", num_threads=2, language="c++")
    assert args.language is Language.CPP
    assert TimerArgs.from_json(args.to_json()) == args
    with pytest.raises(DefinitionError, match="num_threads"):
        TimerArgs("x", num_threads=0)
    with pytest.raises(DefinitionError, match="unknown language"):
        TimerArgs("x", language="rust")
    with pytest.raises(DefinitionError, match="only supported for C\\+\\+"):
        TimerArgs("x", global_setup="#include <x>")


def test_timer_args_accepts_torch_language_enum() -> None:
    from torch.utils.benchmark import Language as TorchLanguage

    assert TimerArgs("x", language=TorchLanguage.CPP).language is Language.CPP
    assert TimerArgs("x", language=TorchLanguage.PYTHON).language is Language.PYTHON


VARIANTS_PY = """
    # @setup
    x = torch.ones((4, 4))

    # @add
    x + 1
    x + x
    # @mul
    x * 2
"""
VARIANTS_CPP = """
    // @setup
    auto x = torch::ones({4, 4});
    // @global setup
    #include <vector>
    // @add
    x + 1;
    // @sub
    x - 1;
"""


def test_variants_one_case_per_line_with_setup() -> None:
    variants = GroupedVariants(VARIANTS_PY, VARIANTS_CPP, num_threads=(1, 2))
    assert list(variants) == [("add", "Case:  0"), ("add", "Case:  1"), ("mul",), ("sub",)]
    first = variants[("add", "Case:  0")]
    assert (first.py_fwd_stmt, first.cpp_fwd_stmt) == ("x + 1", "x + 1;")
    second = variants[("add", "Case:  1")]
    assert (second.py_fwd_stmt, second.cpp_fwd_stmt) == ("x + x", None)
    assert variants[("mul",)].cpp_fwd_stmt is None
    assert variants[("sub",)].py_fwd_stmt is None
    assert first.setup.py_setup.strip() == "x = torch.ones((4, 4))"
    assert first.setup.cpp_setup.strip() == "auto x = torch::ones({4, 4});"
    assert first.setup.global_setup.strip() == "#include <vector>"
    assert first.num_threads == (1, 2)


def test_variant_comments_keep_line_pairing() -> None:
    variants = GroupedVariants("# @a\nx + 1\n# a comment\nx + 3", "// @a\ny + 1;\ny + 2;\ny + 3;")
    pairs = [(v.py_fwd_stmt, v.cpp_fwd_stmt) for v in variants.values()]
    assert pairs == [("x + 1", "y + 1;"), (None, "y + 2;"), ("x + 3", "y + 3;")]


def test_variants_errors() -> None:
    with pytest.raises(DefinitionError, match="label @add is used twice"):
        GroupedVariants("# @add\nx + 1\n# @add\nx + 2")
    with pytest.raises(DefinitionError, match="comes before any"):
        GroupedVariants("x + 1\n# @add\nx + 2")
    with pytest.raises(DefinitionError, match="global_setup"):
        GroupedVariants("# @global_setup\nimport os\n# @a\nx")


def test_parse_stmts_side_by_side() -> None:
    py, cpp = parse_stmts(
        """
        Python                 | C++
        ---------------------- | ----------------------
        x = torch.ones(2)      | auto x = torch::ones({2});
                               | using namespace torch::indexing;
        """
    )
    assert py.strip() == "x = torch.ones(2)"
    assert cpp.strip().splitlines() == ["auto x = torch::ones({2});", "using namespace torch::indexing;"]
    with pytest.raises(DefinitionError, match="header"):
        parse_stmts("x = 1\ny = 2\nz = 3")
