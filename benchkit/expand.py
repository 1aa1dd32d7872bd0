"""The definition stage's public entry: definitions -> cases -> asv benchmarks.

`load_cases` reads the standard suite and the user's definition modules
(`benchkit.define.loader`), `materialize` expands grouped definitions into
concrete cases, and `asv_classes` turns cases into asv ``time_*`` / ``track_*``
benchmark classes (`benchkit.define.expand`).
"""

from benchkit.define.expand import Case, asv_class_name, asv_classes, flatten, materialize, select
from benchkit.define.loader import load_cases, load_definitions

__all__ = [
    "Case",
    "asv_class_name",
    "asv_classes",
    "flatten",
    "load_cases",
    "load_definitions",
    "materialize",
    "select",
]
