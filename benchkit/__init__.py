"""benchkit: historical performance tracking for PyTorch on asv.

Data flows one way through the package:

    api (grouped definitions) -> expand (concrete cases, asv classes)
      -> measurement (timing, callgrind_track, operators) -> asv results -> site
"""

from benchkit.api import (
    DefinitionError,
    GroupedModules,
    GroupedSetup,
    GroupedStmts,
    GroupedVariants,
    Language,
    TimerArgs,
)

__all__ = [
    "DefinitionError",
    "GroupedModules",
    "GroupedSetup",
    "GroupedStmts",
    "GroupedVariants",
    "Language",
    "TimerArgs",
]
__version__ = "0.1.0"
