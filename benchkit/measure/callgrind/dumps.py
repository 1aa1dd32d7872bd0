"""Reading Callgrind's output files: totals, exclusive counts per function, torch's
standardized names with noisy symbols dropped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path


def read_total(path: str | os.PathLike[str]) -> int:
    """Total Ir of a dump from its ``summary:``/``totals:`` line (cheap: no body parse)."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                fields = line.split()
                return int(fields[1]) if len(fields) > 1 else 0
    raise ValueError(f"{path}: no summary line; not a complete callgrind dump")


# A call: the ``calls=`` line and the cost line after it, which is the callee's
# inclusive cost, not the caller's own.
_CALL = re.compile(r"^calls=.*\n.*\n?", re.MULTILINE)
# Name definitions: callgrind numbers files, functions and objects separately and
# writes ``(12) name`` the first time, ``(12)`` after (in any line of that kind).
_DEFINITION = re.compile(r"^(?:c?f[lie]|c?fn|jf[in]|c?ob)=\((\d+)\) (.*)$", re.MULTILINE)
_TABLE_OF = {"fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl", "jfi": "fl",
             "fn": "fn", "cfn": "fn", "jfn": "fn", "ob": "ob", "cob": "ob"}  # fmt: skip
# Lines that only describe calls and jumps; with the calls removed, they own no cost.
_CALL_DETAIL = re.compile(r"^(?:cob|cfi|cfl|cfn|jfi|jfn|jump|jcnd)=.*\n", re.MULTILINE)
# The lines that decide whose the following cost lines are.
_OWNER = re.compile(r"^(fn|fi|fe|fl|ob)=(.*)$", re.MULTILINE)


def read_function_counts(path: str | os.PathLike[str]) -> dict[str, int]:
    """Exclusive (self) Ir per function of one callgrind dump.

    Keys are ``file:function [object]``, the strings ``callgrind_annotate``
    prints and torch's `FunctionCounts` expects: cost lines after ``fi=``/``fe=``
    (inlined code) go to that file, as callgrind_annotate does, and the cost
    line following a ``calls=`` line is the callee's inclusive cost, so it is
    not the caller's own. Parsed here rather than through callgrind_annotate
    (a Perl process per dump) because a batch reads hundreds of dumps while the
    valgrind workers want both cores: regular expressions drop the call lines,
    collect the name definitions and sum each run of cost lines, so Python
    handles only the lines that change whose costs follow (a sixth of them).
    """
    text = Path(path).read_text()
    positions = re.search(r"^positions:(.*)$", text, re.MULTILINE)
    n_positions = len(positions.group(1).split()) if positions else 1
    # The first event (Ir) after the position columns.
    cost = re.compile(r"^[0-9+*-]\S*" + r" \S+" * (n_positions - 1) + r" (\d+)", re.MULTILINE)
    tables: dict[str, dict[str, str]] = {"fl": {}, "fn": {}, "ob": {}}
    for match in _DEFINITION.finditer(text):
        kind = match.group(0).partition("=")[0]
        tables[_TABLE_OF[kind]][f"({match.group(1)})"] = match.group(2)
    text = _CALL_DETAIL.sub("", _CALL.sub("", text))

    def name(kind: str, value: str) -> str:
        ident, _, _ = value.partition(" ")
        return tables[kind].get(ident, value) if ident[:1] == "(" else value

    counts: dict[str, int] = {}
    obj = file = fn = ""
    key = ""
    parts = _OWNER.split(text)
    for i in range(1, len(parts), 3):
        head, value, costs = parts[i], parts[i + 1], parts[i + 2]
        if head == "fn":
            fn = name("fn", value)
            key = f"{file}:{fn} [{obj}]"
        elif head == "fl":
            file = name("fl", value)
        elif head == "ob":
            obj = name("ob", value)
        else:  # fi, fe: inlined code from another file
            file = name("fl", value)
            key = f"{file}:{fn} [{obj}]"
        if len(costs) > 1:
            found = cost.findall(costs)
            if found:
                counts[key] = counts.get(key, 0) + sum(map(int, found))
    return {k: v for k, v in counts.items() if v}


_STANDARD_NAMES: dict[str, str | None] = {}

# Functions whose cost follows where things happen to lie in memory, not what a
# statement does; dropped like torch's own `denoise()` drops CPython's noisy
# symbols (whose Python 3.11+ counterpart is `unicodekeys_lookup_unicode`).
# glibc's slow paths (bins, consolidation, aligned allocation) depend on the heap
# that everything before the statement left; the public malloc/free/memalign
# entry points, with their per-call cost and thread-cache fast path, stay. A torch
# wheel changed in one Python function moves unrelated cases through these
# functions, some beyond the gate's 0.5% threshold (docs/instruction_counts.md).
LAYOUT_NOISE = re.compile(
    r"malloc\.c:(_int_malloc|_int_free|_int_memalign|_int_realloc|malloc_consolidate"
    r"|unlink_chunk[\w.]*|alloc_perturb|sysmalloc[\w.]*|systrim[\w.]*)$"
    r"|dictobject\.c:unicodekeys_lookup_unicode$"
    # pymalloc's pool bookkeeping: whether freeing an object empties its pool (and the
    # next allocation sets one up again) depends on what else lives in that pool. Its
    # public entry points (PyObject_Malloc, PyObject_Free, ...) stay, one per call.
    r"|:_PyObject_(Malloc|Calloc|Realloc|Free)$"
)

# Excluded with its whole call tree by valgrind (--toggle-collect), see template_command.
TYPE_CACHE_MISS = "find_name_in_mro"


def _standard_name(raw: str) -> str | None:
    """torch's clean-up of one function name (None: a noisy symbol that is dropped).

    `CallgrindStats.as_standardized` strips build-directory prefixes and library
    names (so two builds diff cleanly) and `FunctionCounts.denoise` drops CPython
    symbols known to be noisy. Both work on whole profiles, which is slow per
    function, so each distinct name goes through them once per process.
    """
    if raw not in _STANDARD_NAMES:
        from torch.utils.benchmark.utils.common import TaskSpec
        from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
            CallgrindStats,
            FunctionCount,
            FunctionCounts,
        )

        inclusive = FunctionCounts((), inclusive=True)
        stats = CallgrindStats(
            task_spec=TaskSpec(stmt="", setup=""),
            number_per_run=1,
            built_with_debug_symbols=False,
            baseline_inclusive_stats=inclusive,
            baseline_exclusive_stats=FunctionCounts((), inclusive=False),
            stmt_inclusive_stats=inclusive,
            stmt_exclusive_stats=FunctionCounts((FunctionCount(1, raw),), inclusive=False),
            stmt_callgrind_out=None,
        )
        kept = list(stats.as_standardized().stats(inclusive=False).denoise())
        name = kept[0].function if kept else None
        _STANDARD_NAMES[raw] = None if name is None or LAYOUT_NOISE.search(name) else name
    return _STANDARD_NAMES[raw]


def standardize(counts: Mapping[str, int], inductor_roots: Sequence[Path] = ()) -> dict[str, int]:
    """Exclusive counts under torch's standardized names (`_standard_name`), noisy
    symbols dropped. Code that torch.compile generated into a case's cache folder
    under one of `inductor_roots` is named without that (per-build, per-case) folder."""
    roots = "|".join(re.escape(str(root)) for root in inductor_roots)
    generated = re.compile(f"(?:{roots})" + r"/[0-9a-f]+/") if roots else None
    merged: dict[str, int] = {}
    for raw, count in counts.items():
        name = _standard_name(raw)
        if name is None:
            continue
        if generated is not None:
            name = generated.sub("<torch.compile cache>/", name)
        merged[name] = merged.get(name, 0) + count
    return {name: count for name, count in merged.items() if count}
