"""Where an instruction-count change went: the function-level diff of two stored
profiles, grouped into ATen/c10, the interpreter, the allocator, bindings and the rest."""

from __future__ import annotations

import dataclasses
import functools
import re
import sys

from benchkit.errors import UserError
from benchkit.measure.callgrind.profiles import CaseProfile, Profile, load_profile
from benchkit.names import CaseKeys
from benchkit.report.diff import CaseDiff, diff_case, find_profiles
from benchkit.report.gate.check_types import Comparison
from benchkit.report.site.data import PairChanges, log


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Where one case's instructions went between two commits (per execution of its statement)."""

    diff: CaseDiff  # with every function that moved
    groups: tuple[tuple[str, float, float], ...]  # (group, base, head), in FUNCTION_GROUPS order


class ProfileStore:
    """The profiles `benchkit.measure.callgrind.profiles` stored beside asv's results, each file read once.

    Only the few most recent files stay loaded: pairs are visited in history
    order, so each commit's profile serves its two pairs and is then dropped.
    """

    KEEP = 4

    def __init__(self, results_dir: str) -> None:
        self.paths = {(p.machine, p.commit, p.env_name): p.path for p in find_profiles(results_dir)}
        self.loaded: dict[tuple[str, str, str], tuple[Profile, CaseKeys] | None] = {}

    def case(self, machine: str, commit: str, env: str, benchmark: str) -> CaseProfile | None:
        """The case of `benchmark` in a stored profile, found by the hash of the case key at the
        end of its asv class name: asv's pretty name holds look-alikes, not the key."""
        slot = (machine, commit, env)
        if slot not in self.loaded:
            path = self.paths.get(slot)
            if path is None:
                return None
            try:
                profile = load_profile(path)
                self.loaded[slot] = (profile, CaseKeys(profile.cases))
            except UserError as e:
                log(f"warning: {e}")
                self.loaded[slot] = None
            while len(self.loaded) > self.KEEP:
                del self.loaded[next(iter(self.loaded))]
        entry = self.loaded[slot]
        if entry is None:
            return None
        profile, keys = entry
        key = keys.of_benchmark(benchmark)
        return None if key is None else profile.cases.get(key)


def explain(store: ProfileStore, pair: PairChanges, c: Comparison) -> Explanation | None:
    """The function-level diff behind an instruction-count change; None without both profiles."""
    base = store.case(pair.machine, pair.base.commit, c.env, c.name)
    head = store.case(pair.machine, pair.head.commit, c.env, c.name)
    if base is None or head is None:
        return None
    diff = diff_case(base, head, top=sys.maxsize)
    totals = {group: [0.0, 0.0] for group in GROUP_ORDER}
    for side, case in enumerate((base, head)):
        for function, count in case.per_execution().items():
            totals[function_group(function)][side] += count
    return Explanation(diff, tuple((g, b, h) for g, (b, h) in totals.items()))


# (group, pattern over the function's name, pattern over its file and object), checked in
# order. Names are matched without their argument lists: `at::empty_generic(..., c10::Allocator*)`
# is ATen, not the allocator.
FUNCTION_GROUPS = (
    ("allocator",
     r"^(malloc|free|cfree|calloc|realloc|posix_memalign|memalign|aligned_alloc|sysmalloc|_int_\w+|"
     r"malloc_\w+|unlink_chunk|tcache_\w+|arena_\w+|je_\w+|tc_\w+|operator new|operator delete|PyMem_\w+|"
     r"_?PyObject_(Malloc|Calloc|Realloc|Free)|pymalloc_\w+)$|(^|::)(alloc_cpu|free_cpu)$|Allocator\w*::",
     r"(^|/)(malloc|obmalloc|arena|CPUAllocator|alloc_cpu)\.(c|cpp)$|/malloc/|libjemalloc|libtcmalloc"),
    ("Python interpreter",
     r"^_?Py[A-Z_]\w*|^_Py",
     r"(^|/)(Objects|Python|Include|Modules|Parser)/|libpython"),
    ("torch bindings, autograd, JIT",
     r"^(torch::|pybind11::|THP)",
     r"(^|/)torch/csrc/|libtorch_python"),
    ("ATen/c10",
     r"(^|[\s<,])(at|c10|caffe2)::",
     r"(^|/)(aten|ATen|c10)/|libc10\b"),
    ("math libraries (MKL, oneDNN, OpenMP, Sleef)",
     r"^(mkl_|MKL_|dnnl|mkldnn|cblas_|[sd]gemm|Sleef_|__kmp|omp_|GOMP_|gomp_)",
     r"libmkl|libdnnl|libgomp|libiomp|libsleef|/(mkl|ideep|onednn|sleef)/"),
)  # fmt: skip
OTHER_GROUP = "other"
GROUP_ORDER = (*(group for group, _, _ in FUNCTION_GROUPS), OTHER_GROUP)
_COMPILED_GROUPS = tuple((g, re.compile(n), re.compile(w)) for g, n, w in FUNCTION_GROUPS)
# Callgrind's "file:symbol [object]"; the file is absent when `symbol` starts right away (`at::f`).
_FUNCTION = re.compile(r"^(?:(?P<file>[^:]*?):(?!:))?(?P<symbol>.*?)(?: \[(?P<object>[^\]]*)\])?$")


@functools.lru_cache(maxsize=65536)
def function_group(function: str) -> str:
    """Where a function's instructions belong (the allocator wins over the library it lives in)."""
    match = _FUNCTION.match(function)
    assert match is not None  # every string matches
    symbol = match.group("symbol").replace("(anonymous namespace)", "{anonymous}")
    name = re.sub(r"'\d+$", "", symbol.split("(", 1)[0]).strip()  # no arguments, no recursion mark
    where = " ".join(filter(None, (match.group("file"), match.group("object"))))
    for group, name_pattern, where_pattern in _COMPILED_GROUPS:
        if name_pattern.search(name) or where_pattern.search(where):
            return group
    return OTHER_GROUP
