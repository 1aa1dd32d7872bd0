import enum

from core.api import GroupedSetup
from core.utils import parse_stmts

_SMALL = GroupedSetup(
    r"x = torch.linspace(-1, 1, 9).view(3, 3)", r"auto x = torch::linspace(-1, 1, 9).view({3, 3});"
)

_PAIR = GroupedSetup(
    *parse_stmts(
        r"""
        Python                                   | C++
        ---------------------------------------- | ----------------------------------------
        a = torch.eye(3)                         | auto a = torch::eye(3);
        b = torch.full((3, 3), 0.5)              | auto b = torch::full({3, 3}, 0.5);
    """
    )
)


class Setup(enum.Enum):
    SMALL = _SMALL
    PAIR = _PAIR
