"""The loop a Python statement is measured in, shared by wall time and Callgrind.

Standard library only: the Callgrind worker loads it while running as a plain
script under valgrind, before (and without) the rest of benchkit.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

# loop(iterations, begin, end, **setup_values) -> (begin(), end())
StatementLoop = Callable[..., tuple[Any, Any]]


def compile_statement_loop(
    stmt: str, setup: str, namespace: dict[str, Any], label: str
) -> tuple[StatementLoop, dict[str, Any]]:
    """Run `setup` in `namespace` and compile `stmt` into a loop over its variables.

    Setup's variables become the loop function's parameters, i.e. fast locals,
    as in timeit's template (which `torch.utils.benchmark.Timer` uses): a global
    lookup per use would be measured too. The loop calls ``begin()`` right
    before and ``end()`` right after the iterations and returns both results:
    a clock for wall time, start/stop of a counted region for Callgrind, so
    nothing but the iterations lies between the two calls.
    """
    exec(compile(setup, f"<setup of {label}>", "exec"), namespace)
    names = [k for k in namespace if k.isidentifier() and not k.startswith("__")]
    source = (
        f"def _benchkit_loop(_benchkit_iterations, _benchkit_begin, _benchkit_end, {', '.join(names)}):\n"
        "    _benchkit_began = _benchkit_begin()\n"
        "    for _ in _benchkit_iterations:\n"
        f"{textwrap.indent(stmt, ' ' * 8)}\n"
        "    return _benchkit_began, _benchkit_end()\n"
    )
    code: dict[str, Any] = {}
    exec(compile(source, f"<stmt of {label}>", "exec"), namespace, code)
    return code["_benchkit_loop"], {name: namespace[name] for name in names}
