"""The Regressions page of a real two-build main job, as a user sees it in Chromium.

A main job of two torch builds (the local wheel and a copy whose Linear computes twice) on the
e2e cases: every step of such a history has one build a side, so each row is "not judged",
greyed, its label explained on hover and in the legend under the table. tests/test_asv_e2e.py
checks the page of its resumed main job with it (one job serves both).
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

from lab.browser import Browser, QuietHandler


def check_regressions_page(site: Path) -> None:
    assert (site / "regressions.html").is_file(), site
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    browser = Browser(width=1400, height=900)
    try:
        browser.open(f"http://127.0.0.1:{httpd.server_address[1]}/regressions.html")
        rows = browser.evaluate(
            "[...document.querySelectorAll('table.changes tbody tr')].map(r => ({css: r.className, "
            "label: r.cells[0].textContent, title: r.cells[0].title, name: r.cells[1].textContent, "
            "interval: r.cells[5].textContent, color: getComputedStyle(r.cells[0]).color}))"
        )
        assert rows, "a two-build history of two different torch builds has steps"
        body = browser.evaluate("getComputedStyle(document.body).color")
        linear = [r for r in rows if "Linear" in r["name"]]
        assert linear, rows
        for row in rows:  # one build a side: nothing is judged, and the page says so
            assert row["css"] == "notjudged", row
            assert (
                row["label"].startswith("not judged") and row["interval"] == "not judged (one build a side)"
            )
            assert row["title"].startswith("one build on a side of the step"), row
            assert row["color"] != body, "not judged rows are greyed"
        legend = browser.evaluate(
            "[...document.querySelectorAll('.legend dt')].map(d => [d.textContent, "
            "d.nextElementSibling.textContent])"
        )
        assert [
            "not judged",
            "one build on a side of the step: nothing shows how far each level spreads",
        ] in legend
        # "not judged (code change)": the joint label in brackets is explained too.
        shown = {label for label, _ in legend}
        assert {r["label"].removeprefix("not judged (").rstrip(")") for r in rows} <= shown | {"not judged"}
        assert browser.evaluate("getComputedStyle(document.querySelector('.legend')).display") != "none"
        assert browser.errors() == []
        shot = os.environ.get("BENCHKIT_SCREENSHOT")
        if shot:
            browser.screenshot(Path(shot), full_page=True)
    finally:
        browser.close()
        httpd.shutdown()
        httpd.server_close()
