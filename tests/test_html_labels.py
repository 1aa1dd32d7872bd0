"""A definition label holding HTML renders as text on every published page, checked in Chromium.

asv 0.6 inserts a benchmark's ``pretty_name`` and source as HTML (summary grid, graph
tree, code tooltips). The label below would run script there if handed over as is.
The path is the real one: definitions -> benchkit's asv suite -> asv run -> benchkit
publish (asv's pages and benchkit's) -> Chromium.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import threading
from pathlib import Path

import pytest
from support.asv_project import MACHINE, make_project
from support.browser import Browser, QuietHandler
from support.wheels import LOCAL_WHEEL

from benchkit.history import repo as history

pytestmark = pytest.mark.slow
EVIL = '<img src=x onerror="window.__pwned=1">'
DEFINITIONS = f"""
from benchkit.define.api import TimerArgs

BENCHMARKS = {{{EVIL!r}: {{"add": TimerArgs("y = x + 1  # <b>bold</b>", setup="x = torch.ones(2)")}}}}
"""


def test_a_label_with_html_is_text_on_asv_and_benchkit_pages(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", tmp_path / "env")
    definitions = tmp_path / "evil_definitions.py"
    definitions.write_text(DEFINITIONS)
    project.env["BENCHKIT_DEFINITIONS"] = str(definitions)
    project.benchkit("history", "init", "--repo", str(project.history), str(LOCAL_WHEEL), check=True)
    tip = history.HistoryRepo(project.history).branch_tip("main")
    assert tip
    project.asv(
        "run", "--python=same", "--set-commit-hash", tip, "--quick", "--machine", MACHINE,
        "-b", "img_src_x.*time_wall",
    )  # fmt: skip
    project.benchkit("publish", "--asv-config", str(project.config), check=True)
    site = project.root / "html"

    # What asv got: no markup in the name, the source escaped (shown as text in the tooltip).
    [(name, info)] = [
        (n, b)
        for n, b in json.loads((site / "index.json").read_text())["benchmarks"].items()
        if "img_src" in n and n.endswith("time_wall")
    ]
    assert not set("<>&\"'") & set(info["pretty_name"])
    assert "&lt;b&gt;bold&lt;/b&gt;" in info["code"] and "<b>" in html.unescape(info["code"])
    # benchkit's own pages never hold the raw markup.
    for page in site.glob("*.html"):
        if page.name != "index.html":  # asv's page loads its data as JSON
            assert EVIL not in page.read_text(), page.name

    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    browser = Browser()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        pages = {
            "summary grid": (f"{base}/index.html", "document.querySelectorAll('.benchmark-text').length > 0"),
            "graph tree": (
                f"{base}/index.html#{name}",
                "document.querySelector('#main-graph canvas.flot-base')",
            ),
            **{
                p.name: (f"{base}/{p.name}", "document.readyState === 'complete'")
                for p in site.glob("*.html")
            },
        }
        for page, (url, ready) in pages.items():
            browser.open(url, ready=ready)
            assert browser.evaluate("window.__pwned === undefined"), f"{page}: the label ran script"
            assert browser.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0, page
        browser.open(pages["summary grid"][0], ready=pages["summary grid"][1])
        shown = browser.evaluate("[...document.querySelectorAll('.benchmark-text')].map(e => e.textContent)")
        assert any("img src=x onerror" in text for text in shown), shown
    finally:
        browser.close()
        httpd.shutdown()
        httpd.server_close()
