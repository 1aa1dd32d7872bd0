import enum

from core.api import GroupedSetup

_SMALL = GroupedSetup(py_setup="x = torch.rand((5,))", cpp_setup="auto x = torch::rand({5});")


class Setup(enum.Enum):
    SMALL = _SMALL
