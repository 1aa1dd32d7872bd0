"""Check benchkit's layout: no import circles, data flowing one way through the
stages, files within the size limit. Prints the tree with line counts.

    python scripts/check_layout.py          # exit 1 on a violation

Stages, in the order data flows: define -> measure -> history -> report, then
the orchestration above them (mainjob) and the command line (cli). A module may
import its own stage and earlier ones, never a later one; within history/,
builds/ comes before results/. Imports only needed
for type checking (under ``if TYPE_CHECKING:``) are not counted.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "benchkit"
MAX_LINES = 510  # "about 500"
# Rank of each top-level part; shared helpers (errors, util, stats) are 0.
RANKS = {
    "errors": 0,
    "util": 0,
    "stats": 0,
    "names": 0,  # the vocabulary of benchmark names, read by every stage
    "settings": 0,  # read by every stage
    "settings_record": 0,
    "define": 1,
    "expand": 1,  # the definition stage's public entry
    "api": 1,  # the definition API under its first import path
    "moved": 0,  # old import paths: one-line errors naming the new ones
    "measure": 2,
    "callgrind_track": 2,  # the Callgrind stage's public entry
    "history": 3,
    "report": 4,
    "mainjob": 5,
    "cli": 6,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(path: Path, known: set[str]) -> set[str]:
    """benchkit modules `path` imports (a `from pkg import mod` counts as pkg.mod)."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("benchkit"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchkit"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found


# Within a stage: parts in the order data flows (a module may import its own part and earlier ones).
SUBRANKS = {"history": {"builds": 0, "results": 1}}


def rank(module: str) -> int:
    parts = module.split(".")
    return RANKS[parts[1]] if len(parts) > 1 else 0


def subrank(module: str) -> tuple[str, int] | None:
    """(stage, rank within it) of a module in a part of a stage with ordered parts."""
    parts = module.split(".")
    order = SUBRANKS.get(parts[1]) if len(parts) > 2 else None
    return (parts[1], order[parts[2]]) if order and parts[2] in order else None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def main() -> int:
    files = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in files}
    graph = {module_name(p): imports_of(p, known) - {module_name(p)} for p in files}
    problems = []
    for module, deps in graph.items():
        if module == "benchkit":
            continue  # the package's lazy re-export of the definition API
        for dep in deps:
            # A package's __init__ (docstring only) ranks with its first child; skip package roots.
            if dep != "benchkit" and rank(dep) > rank(module):
                problems.append(f"{module} (stage {rank(module)}) imports {dep} (later stage {rank(dep)})")
            here, there = subrank(module), subrank(dep)
            if here and there and here[0] == there[0] and there[1] > here[1]:
                problems.append(f"{module} imports {dep}, a later part of the {here[0]} stage")
    cycle = find_cycle({m: {d for d in deps if d != "benchkit"} for m, deps in graph.items()})
    if cycle:
        problems.append("import circle: " + " -> ".join(cycle))
    for path in files:
        lines = len(path.read_text().splitlines())
        note = ""
        if lines > MAX_LINES:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if "one file" not in doc:
                problems.append(f"{path.relative_to(ROOT)}: {lines} lines without a reason in its docstring")
            note = "  (says why it is one file)"
        print(f"{lines:5d}  {path.relative_to(ROOT)}{note}")
    print(f"{len(files)} modules, {sum(len(p.read_text().splitlines()) for p in files)} lines")
    for problem in problems:
        print(f"layout: {problem}", file=sys.stderr)
    if not problems:
        print("layout ok: no import circle, stages import only earlier stages, files within limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
