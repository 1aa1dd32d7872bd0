"""A 2021-style definitions module: core.api_impl, iter_parsed_lines, flattened BENCHMARKS."""

import functools

from core.api_impl import GroupedModules, GroupedStmts
from core.types import FlatIntermediateDefinition
from core.utils import flatten, iter_parsed_lines, parse_stmts

from definitions.setup import Setup

Small_GroupedStmts = functools.partial(GroupedStmts, setup=Setup.SMALL.value)

BENCHMARKS: FlatIntermediateDefinition = flatten(
    {
        "arith": {
            "neg": Small_GroupedStmts(r"-x", r"-x;"),
            "mul": GroupedStmts(
                r"a * b",
                r"a * b;",
                Setup.PAIR.value,
                signature=r"f(a, b) -> None",
                torchscript=True,
            ),
        },
        ("views", "slicing"): {
            py_slice: GroupedStmts(f"x{py_slice}", f"x.index({cpp_slice});", Setup.SMALL.value)
            for py_slice, cpp_slice in iter_parsed_lines(r"""
            Python                                   | C++
            ---------------------------------------- | ----------------------------------------
            [1]                                      | {1}
            [:, 0]                                   | {torch::indexing::Slice(), 0}
        """)
        },
        "module": {
            "Tanh": GroupedModules(
                "model = torch.nn.Tanh()",
                "auto model = torch::nn::Tanh();",
                setup=Setup.SMALL.value,
                signature="f(x) -> y",
            ),
        },
        "two sides": GroupedStmts(
            *parse_stmts(r"""
            Python                                   | C++
            ---------------------------------------- | ----------------------------------------
            y = x.exp()                              | auto y = x.exp();
            z = y.sum()                              | auto z = y.sum();
        """),
            Setup.SMALL.value,
        ),
    }
)
