"""The definition API under its first import path; it lives in `benchkit.define.api`."""

from benchkit.define.api import *  # noqa: F403
from benchkit.define.api import __all__  # noqa: F401
