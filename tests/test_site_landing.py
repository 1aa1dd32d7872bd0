"""The site's front door: ``index.html`` is benchkit's front page, asv's page is ``graphs.html``.

A synthetic history (lab/synthetic.py) published by real `asv publish`, with
the suite's benchmarks.json listing many benchmarks that have no result at any build (as
after ``asv run -b X``) and a few that failed at every build. The front page must show the
newest pair's changes as `benchkit check` judges them and the newest steps as
`benchkit regressions` finds them, never claim "no change" for what it could not compare,
and lead to asv's grid, which leaves out the benchmarks never run and greys those that only
failed. Checked in the HTML and in headless Chromium (lab.browser).
"""

from __future__ import annotations

import dataclasses
import html
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from asv.results import Results
from asv.runner import BenchmarkResult
from support.scratch import module_dir

from benchkit import cli
from benchkit.report.gate import check
from benchkit.report.site import data as site_data
from benchkit.report.site import landing, pages, render
from benchkit.report.site import publish as site_publish
from lab import synthetic
from lab.browser import Browser, serve

REPO_ROOT = Path(__file__).resolve().parent.parent
COMMITS, BENCHMARKS, NEVER_RUN, FAILING = 6, 40, 30, 3


@dataclasses.dataclass(frozen=True)
class Site:
    conf: Path
    html: Path
    never_run: list[str]
    failing: list[str]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with module_dir(tmp_path_factory, "landing") as root:
        conf = synthetic.make_project(root, commits=COMMITS, benchmarks=BENCHMARKS, seed=3, step_chance=0.2)
        never_run, failing = synthetic.add_empty_benchmarks(conf, NEVER_RUN, FAILING)
        yield Site(conf, site_publish.publish(conf), never_run, failing)


def _section(text: str, element_id: str) -> str:
    start = text.index(f'id="{element_id}"')
    return text[start:].split("</section>", 1)[0]


def _linked_names(part: str, table_class: str) -> list[str]:
    """The benchmark names (link titles) of a table's rows, in order."""
    table = part.split(f'class="sortable changes {table_class}"', 1)[1].split("</table>", 1)[0]
    return [html.unescape(t) for t in re.findall(r'<a href="graphs\.html#[^"]+" title="([^"]+)"', table)]


def test_front_page_shows_the_newest_pair_as_the_gate_judges_it(site: Site) -> None:
    data = site_data.load_site_data(site.conf)
    newest = site_data.pair_changes(data)[-1]
    verdict = check.run_check(newest.base.commit, newest.head.commit, asv_config=site.conf)
    flagged = [c for c in verdict.comparisons if site_data.listed(c)]
    assert len(flagged) > 3, "the synthetic history should change often"
    index = (site.html / "index.html").read_text()
    part = _section(index, "latest-synthetic-main")
    link = re.search(rf'href="(changes-[0-9-]+\.html)#{re.escape(newest.anchor)}"', part)
    assert link and f'id="{newest.anchor}"' in (site.html / link[1]).read_text()  # its month's page
    shown = _linked_names(part, "latest-changes")
    assert len(shown) == min(len(flagged), landing.LATEST_CHANGES)
    assert set(shown) <= {c.name for c in flagged}
    # What fails the gate comes first, whatever the metric.
    statuses = re.findall(r'<tr class="[^"]*"><td>([^<]+)</td>', part)
    order = [site_data.LISTED_ORDER.index(html.unescape(s)) for s in statuses]
    assert order == sorted(order) and len(order) == len(shown)
    hidden = len(flagged) - len(shown)
    assert (f"{hidden} more change(s) of this pair" in part) == (hidden > 0)
    commits = f"commits={newest.base.short}-{newest.head.short}"
    assert all(commits in href for href in re.findall(r'href="(graphs\.html#[^"]+)"', part))


def test_front_page_shows_the_newest_steps_benchkit_regressions_finds(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    assert cli.main(["regressions", "--asv-config", str(site.conf), "--json", str(out)]) == 0
    found = json.loads(out.read_text())["steps"]
    index = (site.html / "index.html").read_text()
    steps = index.split('<h2 id="steps">', 1)[1].split('<h2 id="history">', 1)[0]
    rows = re.findall(r'<td class="label" title="[^"]*">([^<]*)</td><td><a href="graphs\.html#[^"]+" '
                      r'title="([^"]+)"', steps)  # fmt: skip
    shown = [(html.unescape(name), html.unescape(label)) for label, name in rows]
    assert len(shown) == min(len(found), landing.LATEST_STEPS) and len(found) > landing.LATEST_STEPS
    assert set(shown) <= {(s["name"], s["shown_label"]) for s in found}
    # The newest: no step left off lies later in the history than one shown.
    position = {(s["name"], s["shown_label"]): s["position"] for s in found}
    left_off = [s["position"] for s in found if (s["name"], s["shown_label"]) not in set(shown)]
    assert min(position[row] for row in shown) >= max(left_off)
    assert f"{len(found) - len(shown)} more step(s)" in steps and 'href="regressions.html"' in steps


def test_front_page_counts_the_benchmarks_without_numbers(site: Site) -> None:
    listing = json.loads((site.conf.parent / "results" / "benchmarks.json").read_text())
    suite = [name for name in listing if name != "version"]
    index = (site.html / "index.html").read_text()
    holds = index.split('<h2 id="history">', 1)[1]
    expected = len(suite) - NEVER_RUN - FAILING
    assert f"{expected} of the suite's {len(suite)} benchmarks have numbers in this history." in holds
    assert f"{FAILING} ran but failed or were skipped at every build" in holds
    assert f"{NEVER_RUN} have no result at any build" in holds
    for name in site.never_run + site.failing:
        assert f"<code>{html.escape(name)}</code>" in holds


def test_asv_grid_leaves_out_what_never_ran_and_greys_what_only_failed(site: Site) -> None:
    listed = json.loads((site.html / "index.json").read_text())["benchmarks"]
    assert not set(site.never_run) & set(listed)
    assert set(site.failing) <= set(listed)
    # The file:// twin says the same.
    twin = (site.html / "index.json.js").read_text()
    assert all(name not in twin for name in site.never_run) and all(name in twin for name in site.failing)
    asv_page = (site.html / pages.ASV_PAGE).read_text()
    style = asv_page.split('<style id="benchkit-no-numbers">', 1)[1].split("</style>", 1)[0]
    assert sorted(re.findall(r'href="#([^"]+)"', style)) == sorted(site.failing)


def test_one_regressions_entry_in_every_navigation_bar(site: Site) -> None:
    for page in [*site.html.glob("*.html"), *site.html.glob("why/*.html")]:
        text = page.read_text()
        if page.name == "error.html":  # asv's page for scripts that failed to load: no bar
            continue
        bar = re.search(r"<nav\b.*?</nav>", text, re.S)
        assert bar, page.name
        assert len(re.findall(r">\s*Regressions\s*</a>", bar.group(0))) == 1, page.name
        assert len(re.findall(r">\s*Graphs\s*</a>", bar.group(0))) == 1, page.name


def _fail_counts_at(conf: Path, commit: str) -> None:
    """Record every instruction count of `commit` as failed, as when valgrind is missing."""
    results = conf.parent / "results"
    listing = json.loads((results / "benchmarks.json").read_text())
    failed = BenchmarkResult(result=[None], samples=[None], number=[None], errcode=1, stderr="", profile=None)
    [path] = (results / synthetic.MACHINE).glob(f"{commit[:8]}-*.json")
    run = Results.load(str(path))
    for name in run.get_all_result_keys():
        if name.endswith(".track_instructions"):
            run.add_result(listing[name], failed, record_samples=True)
    run.save(str(results))


def test_front_page_fails_closed(tmp_path: Path) -> None:
    one = synthetic.make_project(tmp_path / "one", commits=1, benchmarks=12, with_profiles=False)
    index = render.render_pages(site_data.load_site_data(one))[0]["index.html"]
    assert "One measured build on this branch: nothing to compare it with" in index
    assert "no change" not in index

    conf = synthetic.make_project(tmp_path / "lost", commits=3, benchmarks=20, with_profiles=False)
    data = site_data.load_site_data(conf)
    _fail_counts_at(conf, site_data.pair_changes(data)[-1].head.commit)
    index = render.render_pages(site_data.load_site_data(conf))[0]["index.html"]
    part = _section(index, "latest-synthetic-main")
    assert "Could not compare:" in part and "have numbers on base, none on head" in part
    assert "newly failing" in part and "no change" not in part

    empty = tmp_path / "empty"
    (empty / "results").mkdir(parents=True)
    history = str(tmp_path / "lost" / "history")
    conf = {"version": 1, "repo": history, "branches": ["main"], "results_dir": "results"}
    (empty / "asv.conf.json").write_text(json.dumps(conf))
    index = render.render_pages(site_data.load_site_data(empty / "asv.conf.json"))[0]["index.html"]
    assert "No results yet" in index and "no change" not in index


def test_front_page_escapes_names(site: Site) -> None:
    data = site_data.load_site_data(site.conf)
    newest = site_data.pair_changes(data)[-1]
    name = newest.changes[0].name
    evil = "<script>alert(1)</script>"
    info = dataclasses.replace(data.benchmarks[name], pretty=evil)
    hostile = dataclasses.replace(data, benchmarks={**data.benchmarks, name: info})
    index = render.render_pages(hostile)[0]["index.html"]
    assert evil not in index and html.escape(evil, quote=False) in index


# ------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("BENCHKIT_SCREENSHOT_DIR")
    return Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")


GRID_DRAWN = "document.querySelectorAll('.benchmark-container canvas').length > 3"


@pytest.mark.parametrize("opened_from", ["static server", "file"])
def test_front_door_in_browser(site: Site, shots: Path, opened_from: str) -> None:
    browser = Browser(width=1200, height=800)
    try:
        with serve(site.html) as url:
            base = url if opened_from == "static server" else site.html.as_uri()
            browser.open(f"{base}/index.html")
            browser.assert_clean(f"index.html from {opened_from}")
            assert browser.evaluate("document.querySelector('h1').textContent") == "torch: what changed"
            rows = browser.evaluate("document.querySelectorAll('table.latest-changes tbody tr').length")
            assert rows == landing.LATEST_CHANGES or 0 < rows < landing.LATEST_CHANGES
            assert browser.evaluate("document.querySelectorAll('table.latest-steps tbody tr').length") > 0
            nav = browser.evaluate("[...document.querySelectorAll('nav.bk-nav a')].map(a => a.textContent)")
            assert nav.count("Regressions") == 1 and "Graphs" in nav
            browser.screenshot(shots / f"landing-{opened_from.split()[-1]}.png")

            # "Graphs" leads to asv's grid: every benchmark with a result, none without.
            graphs = browser.evaluate("[...document.querySelectorAll('nav.bk-nav a')].find(a => "
                                      "a.textContent === 'Graphs').href")  # fmt: skip
            browser.open(graphs, ready=GRID_DRAWN)
            browser.assert_clean(f"{pages.ASV_PAGE} from {opened_from}")
            boxes = browser.evaluate(
                "Object.fromEntries([...document.querySelectorAll('a.benchmark-container')].map(a => "
                "[decodeURIComponent(a.getAttribute('href').slice(1)), getComputedStyle(a).opacity]))"
            )
            assert len(boxes) == BENCHMARKS + FAILING and not set(site.never_run) & set(boxes)
            assert {boxes[name] for name in site.failing} == {"0.35"}
            assert {v for k, v in boxes.items() if k not in site.failing} == {"1"}
            asv_nav = browser.evaluate(
                "[...document.querySelectorAll('#nav a')].map(a => a.textContent.trim())"
            )
            assert asv_nav.count("Regressions") == 1 and asv_nav.count("Graphs") == 1
            browser.screenshot(shots / f"graphs-{opened_from.split()[-1]}.png")

            # A link made for asv's page when it was index.html goes on to the graph.
            changes = (site.html / "changes.html").read_text()
            link = html.unescape(re.search(r'<a href="graphs\.html(#instruction_counts[^"]+)"', changes)[1])
            browser.open(
                f"{base}/index.html{link}", ready="document.querySelector('#main-graph canvas.flot-base')"
            )
            assert browser.evaluate("location.pathname").endswith(f"/{pages.ASV_PAGE}")
            assert "instruction_counts.Synthetic_op" in browser.evaluate(
                "document.getElementById('title').textContent"
            )
            browser.assert_clean(f"old graph link from {opened_from}")
    finally:
        browser.close()


def _indexed_png(data: bytes) -> np.ndarray:
    """The pixels of an 8-bit palette PNG with unfiltered rows (what scripts/screenshot_site.py writes)."""
    chunks, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        chunks.setdefault(data[at + 4 : at + 8], b"")
        chunks[data[at + 4 : at + 8]] += data[at + 8 : at + 8 + length]
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 3)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, width + 1)
    assert not rows[:, 0].any()
    return np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)[rows[:, 1:]]


def test_screenshot_script_makes_a_small_png_of_the_front_page(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "site.png"
    script = REPO_ROOT / "scripts" / "screenshot_site.py"
    run = subprocess.run([sys.executable, str(script), str(site.html), "--out", str(out)],
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert out.stat().st_size < 150_000 and f"{out}: 1200x800" in run.stdout
    shot = _indexed_png(out.read_bytes())
    assert shot.shape == (800, 1200, 3)
    # The same page in Chromium over DevTools, decoded by the script's own reader: the two agree.
    spec = importlib.util.spec_from_file_location("screenshot_site", script)
    assert spec and spec.loader
    screenshot_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screenshot_site)
    browser = Browser(width=1200, height=800)
    try:
        browser.open((site.html / "index.html").as_uri())
        reference = screenshot_site.read_rgb(browser.screenshot(tmp_path / "reference.png").read_bytes())
    finally:
        browser.close()
    difference = np.abs(shot.astype(int) - reference.astype(int))
    assert difference.mean() < 1.0, difference.mean()
    nav = np.array([0x24, 0x30, 0x3C])  # benchkit's bar (site.css), not asv's page
    assert (shot[5:35, 300:1100] == nav).all(axis=2).mean() > 0.8
