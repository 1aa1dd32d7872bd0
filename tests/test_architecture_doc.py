"""docs/ stays a reference a user can read: the architecture page names every module of the
package (a new module without a line there fails here), and no page grows past 300 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "benchkit"
DOCS = ROOT / "docs"
MAX_PAGE_LINES = 300


def _modules() -> list[str]:
    """Every module under benchkit/, as its path there; a package's empty __init__ is no module
    of its own."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text())):
            continue
        found.append(path.relative_to(PACKAGE).as_posix())
    return found


def test_the_architecture_page_names_every_module() -> None:
    page = (DOCS / "architecture.md").read_text()
    missing = [m for m in _modules() if f"`{m}`" not in page]
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


def test_user_pages_stay_short_and_do_not_point_into_the_lab_notebook() -> None:
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        assert len(text.splitlines()) <= MAX_PAGE_LINES, f"{page.name}: over {MAX_PAGE_LINES} lines"
        assert "measurements/" not in text, f"{page.name} links into the old docs/measurements/"
