"""A definition label holding HTML renders as text on every published page, checked in Chromium.

asv 0.6 inserts a benchmark's ``pretty_name`` and source as HTML (summary grid, graph
tree, code tooltips). The label below would run script there if handed over as is.
The path is the real one: definitions -> benchkit's asv suite -> asv run -> benchkit
publish (asv's pages and benchkit's) -> Chromium. The why page of such a label is
published from a synthetic history with profiles (`lab/synthetic.py`).
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
from support.wheels import LOCAL_WHEEL

from benchkit import names
from benchkit.history.builds import repo as history
from benchkit.report.site import data as site_data
from benchkit.report.site import pages
from benchkit.report.site import publish as site_publish
from lab import synthetic
from lab.browser import Browser, QuietHandler

EVIL = '<img src=x onerror="window.__pwned=1">'
DEFINITIONS = f"""
from benchkit.define.api import TimerArgs

BENCHMARKS = {{{EVIL!r}: {{"add": TimerArgs("y = x + 1  # <b>bold</b>", setup="x = torch.ones(2)")}}}}
"""


@pytest.mark.slow
def test_a_label_with_html_is_text_on_asv_and_benchkit_pages(tmp_path: Path, worker_asv_envs: Path) -> None:
    project = make_project(tmp_path / "project", worker_asv_envs)
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
        if page.name != pages.ASV_PAGE:  # asv's page loads its data as JSON
            assert EVIL not in page.read_text(), page.name

    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    browser = Browser()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        views = {
            "summary grid": (
                f"{base}/{pages.ASV_PAGE}",
                "document.querySelectorAll('.benchmark-text').length > 0",
            ),
            "graph tree": (
                f"{base}/{pages.ASV_PAGE}#{name}",
                "document.querySelector('#main-graph canvas.flot-base')",
            ),
            **{
                p.name: (f"{base}/{p.name}", "document.readyState === 'complete'")
                for p in site.glob("*.html")
            },
        }
        for page, (url, ready) in views.items():
            browser.open(url, ready=ready)
            assert browser.evaluate("window.__pwned === undefined"), f"{page}: the label ran script"
            assert browser.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0, page
        browser.open(views["summary grid"][0], ready=views["summary grid"][1])
        shown = browser.evaluate("[...document.querySelectorAll('.benchmark-text')].map(e => e.textContent)")
        assert any("img src=x onerror" in text for text in shown), shown
    finally:
        browser.close()
        httpd.shutdown()
        httpd.server_close()


def test_a_label_with_html_has_its_why_page_showing_the_label_as_text(tmp_path: Path) -> None:
    # asv's pretty name holds look-alikes of < > & " ' while the profiles hold the key as
    # written: the why page finds the case by the key's hash in the asv class name.
    label = f"{EVIL} & 'quoted'"
    key = f"{label} | Python | Eager | Forward | 1 thread(s)"  # the synthetic cases' modes
    # Every series steps at every commit: the label's instruction count changes.
    conf = synthetic.make_project(
        tmp_path / "project", commits=2, benchmarks=8, step_chance=1.0, labels=[label]
    )
    site = site_publish.publish(conf)
    [pair] = site_data.pair_changes(site_data.load_site_data(conf))
    ours = names.CaseKeys([key])
    [change] = [c for c in pair.changes if c.metric == "instructions" and ours.of_benchmark(c.name)]
    page = site / pages.why_file(pair, change.name)
    assert page.is_file(), "no why page for the label's instruction-count change"
    assert f'href="{page.relative_to(site)}"' in (site / "why.html").read_text()

    browser = Browser()
    try:
        browser.open(page.as_uri(), ready="document.readyState === 'complete'")
        assert browser.evaluate("window.__pwned === undefined"), "the label ran script"
        assert browser.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
        heading = browser.evaluate("document.querySelector('h1').textContent")
        assert heading == f"Why: {key} [track_instructions]"
        lead = browser.evaluate("document.querySelector('p.lead a').textContent")
        assert lead == f"{key} [track_instructions]"
    finally:
        browser.close()
