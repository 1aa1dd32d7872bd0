"""A TorchScript-era definitions module: core.api with torchscript=True and GroupedVariants."""

from core.api import GroupedModules, GroupedStmts, GroupedVariants
from core.types import FlatIntermediateDefinition
from core.utils import flatten, parse_stmts

from definitions.setup import Setup

BENCHMARKS: FlatIntermediateDefinition = flatten(
    {
        "arith": {
            None: GroupedStmts(r"x + 1", r"x + 1;", Setup.SMALL.value),
            "scripted": GroupedStmts(
                r"y = x * 3",
                r"auto y = x * 3;",
                Setup.SMALL.value,
                signature=r"f(x) -> y",
                torchscript=True,
                autograd=False,
            ),
        },
        "module": GroupedModules(
            "model = torch.nn.ReLU()",
            "auto model = torch::nn::ReLU();",
            setup=Setup.SMALL.value,
            signature="f(x) -> y",
            torchscript=True,
        ),
        "variants": GroupedVariants(
            r"""
            # @abs
            x.abs()
            # @sign
            x.sign()
        """,
            r"""
            // @abs
            x.abs();
            // @sign
            x.sign();
        """,
        ),
        "paired": GroupedStmts(
            *parse_stmts(r"""
        Python                                   | C++
        ---------------------------------------- | ----------------------------------------
        c = a + b                                | auto c = a + b;
    """),
            Setup.PAIR.value,
        ),
    }
)
