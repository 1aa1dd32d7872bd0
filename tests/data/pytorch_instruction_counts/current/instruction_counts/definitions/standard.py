"""A current definitions module: no TorchScript, GroupedVariants with setup blocks, a C++-only group."""

from core.api import GroupedModules, GroupedStmts, GroupedVariants
from core.types import FlatIntermediateDefinition
from core.utils import flatten

from definitions.setup import Setup

BENCHMARKS: FlatIntermediateDefinition = flatten(
    {
        "arith": GroupedStmts(r"x - 1", r"x - 1;", Setup.SMALL.value),
        "module": GroupedModules(
            "model = torch.nn.Softsign()",
            "auto model = torch::nn::Softsign();",
            setup=Setup.SMALL.value,
            signature="f(x) -> y",
        ),
        ("variants", "setup blocks"): GroupedVariants(
            r"""
            # @setup
            t = torch.ones((2, 2))
            # @floor
            t.floor()
            # @ceil
            t.ceil()
        """,
            r"""
            // @setup
            auto t = torch::ones({2, 2});
            // @Global_Setup
            #include <cmath>
            // @floor
            t.floor();
            // @ceil
            t.ceil();
        """,
        ),
        "C++ only": {
            "numel": GroupedStmts(cpp_stmt=r"x.numel();", setup=Setup.SMALL.value),
        },
    }
)
