"""Check benchkit's layout: no import circles, data flowing one way through the
stages, files within the size limit, and the lab kept apart. Prints the tree with line counts.

    python scripts/check_layout.py          # exit 1 on a violation

Stages, in the order data flows: define -> measure -> history -> report, then
the orchestration above them (mainjob) and the command line (cli). A module may
import its own stage and earlier ones, never a later one; within history/,
builds/ comes before results/. The same rules hold at the type level: imports under
``if TYPE_CHECKING:`` (which never run) count there too, so a data type lives below every
module that names it.

The lab (lab/: the programs that measure benchkit itself) stays outside the product: no module
of benchkit imports lab, and no module of lab edits ``sys.path`` (it imports benchkit as the
installed package) or imports the tests' code (``tests``, ``support``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "benchkit"
LAB = ROOT / "lab"
TESTS_CODE = ("tests", "support")  # the test suite's packages (tests/support is `support` there)
SYS_PATH_EDITS = {"insert", "append", "extend", "remove", "pop", "clear"}
MAX_LINES = 510  # "about 500"
# Rank of each top-level part; shared helpers (errors, util, stats) are 0.
RANKS = {
    "errors": 0,
    "util": 0,
    "stats": 0,
    "names": 0,  # the vocabulary of benchmark names, read by every stage
    "settings": 0,  # read by every stage
    "settings_record": 0,
    "rounds_policy": 0,  # how many rounds each figure gets: read by measure, report and the job
    "define": 1,
    "expand": 1,  # the definition stage's public entry
    "api": 1,  # the definition API under its first import path
    "moved": 0,  # old import paths: one-line errors naming the new ones
    "measure": 2,
    "callgrind_track": 2,  # the Callgrind stage's public entry
    "history": 3,
    "report": 4,
    "asv_runs": 5,  # running asv from the jobs
    "operator_rounds": 5,  # the main job's interleaved operator replicates
    "wall_rounds": 5,  # the main job's wall-time rounds, measured by benchkit
    "job_measure": 5,  # the main job's measuring step
    "mainjob": 5,
    "cli": 6,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.AST, known: set[str]) -> set[str]:
    """benchkit modules one import statement names (a `from pkg import mod` counts as pkg.mod)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.startswith("benchkit")}
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchkit"):
        return {
            f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
            for a in node.names
        }
    return set()


def imports_of(path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """benchkit modules `path` imports: (those imported when it runs, those imported only
    for type checking, in the body of an ``if TYPE_CHECKING:``)."""
    runtime: set[str] = set()
    typing_only: set[str] = set()

    def visit(node: ast.AST, found: set[str]) -> None:
        found |= _imported(node, known)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, typing_only)
            for child in node.orelse:
                visit(child, found)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, found)

    visit(ast.parse(path.read_text()), runtime)
    return runtime, typing_only - runtime


# Within a stage: parts in the order data flows (a module may import its own part and earlier ones).
# report/: the comparison of two builds (gate), steps over a history (steps, which read the
# gate's noise), what a run or a pair of builds tells (diff, run_summary, job_verdict), the site,
# and the records for PyTorch's database (export, which links into the site).
SUBRANKS = {
    "history": {"builds": 0, "results": 1},
    "report": {"gate": 0, "steps": 1, "diff": 2, "run_summary": 2, "job_verdict": 2, "site": 3, "export": 4},
}


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


def order_problems(graph: dict[str, set[str]], level: str = "") -> list[str]:
    """Imports of a later stage, or of a later part of the same stage."""
    problems = []
    for module, deps in graph.items():
        if module == "benchkit":
            continue  # the package's lazy re-export of the definition API
        for dep in sorted(deps):
            # A package's __init__ (docstring only) ranks with its first child; skip package roots.
            if dep != "benchkit" and rank(dep) > rank(module):
                problems.append(
                    f"{module} (stage {rank(module)}) {level}imports {dep} (later stage {rank(dep)})"
                )
            here, there = subrank(module), subrank(dep)
            if here and there and here[0] == there[0] and there[1] > here[1]:
                problems.append(f"{module} {level}imports {dep}, a later part of the {here[0]} stage")
    return problems


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    return find_cycle({m: {d for d in deps if d != "benchkit"} for m, deps in graph.items()})


def _top_level_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, first part of the module name) of every absolute import in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def _is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that change ``sys.path``: a call of one of its list methods, an assignment to it
    or to a slice or item of it."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in SYS_PATH_EDITS and _is_sys_path(node.func.value):
                lines.append(node.lineno)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            inner = target.value if isinstance(target, ast.Subscript) else target
            if _is_sys_path(inner):
                lines.append(node.lineno)
    return sorted(lines)


def lab_problems(package_files: list[Path]) -> list[str]:
    """The lab kept apart: benchkit never imports it; it leaves ``sys.path`` alone and imports
    none of the tests' code."""
    problems = [
        f"{path.relative_to(ROOT)}:{line}: imports lab (the lab measures benchkit, not the other way round)"
        for path in package_files
        for line, top in _top_level_imports(ast.parse(path.read_text()))
        if top == "lab"
    ]
    for path in sorted(LAB.rglob("*.py")) if LAB.is_dir() else []:
        tree = ast.parse(path.read_text())
        shown = path.relative_to(ROOT)
        problems += [
            f"{shown}:{line}: edits sys.path (lab imports benchkit as the installed package)"
            for line in _sys_path_edits(tree)
        ]
        problems += [
            f"{shown}:{line}: imports {top} (the lab does not use the tests' code)"
            for line, top in _top_level_imports(tree)
            if top in TESTS_CODE
        ]
    return problems


def main() -> int:
    files = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in files}
    imports = {module_name(p): imports_of(p, known) for p in files}
    runtime = {m: found - {m} for m, (found, _) in imports.items()}
    typing_only = {m: found - {m} for m, (_, found) in imports.items()}
    # The type level: everything a module names, run or not.
    typed = {m: runtime[m] | typing_only[m] for m in imports}
    problems = order_problems(runtime) + order_problems(typing_only, "type-level ")
    cycle = circle(runtime)
    if cycle:
        problems.append("import circle: " + " -> ".join(cycle))
    elif cycle := circle(typed):
        problems.append("type-level import circle (through TYPE_CHECKING imports): " + " -> ".join(cycle))
    problems += lab_problems(files)
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
        print(
            "layout ok: no import circle, stages import only earlier stages (also at the type level), "
            "files within limits, the lab apart (benchkit never imports it; it leaves sys.path alone "
            "and imports none of the tests' code)"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
