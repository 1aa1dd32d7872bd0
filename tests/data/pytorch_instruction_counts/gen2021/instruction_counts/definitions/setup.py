import enum

from core.api import GroupedSetup
from core.utils import parse_stmts

_SMALL = GroupedSetup(
    r"x = torch.full((3, 3), 2.0)",
    r"auto x = torch::full({3, 3}, 2.0);",
)

_PAIR = GroupedSetup(
    *parse_stmts(
        r"""
        Python                                   | C++
        ---------------------------------------- | ----------------------------------------
        a = torch.arange(6.0).view(2, 3)         | auto a = torch::arange(6.0).view({2, 3});
        b = torch.ones((2, 3))                   | auto b = torch::ones({2, 3});
    """
    )
)


class Setup(enum.Enum):
    SMALL = _SMALL
    PAIR = _PAIR
