"""`benchkit publish`: the pages it adds to asv's site, checked in headless Chromium.

The site is published from a small history written with asv's own Results API
into a real benchkit torch-history repository (lab/synthetic.py,
which lab/bench_publish.py also uses), by real `asv publish`. The browser is
Debian's chromium, driven over the DevTools protocol on a pipe (lab.browser):
every page must render its expected content, make no request outside the machine,
and log no error to the console. Screenshots go to ``$BENCHKIT_SCREENSHOT_DIR`` when set,
else to the test's temporary folder.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.scratch import module_dir

from benchkit import cli, names
from benchkit.errors import UserError
from benchkit.history.results import read as results
from benchkit.measure.callgrind import profiles
from benchkit.measure.callgrind.profiles import profile_path
from benchkit.report import diff as profile_diff
from benchkit.report.gate import check, check_config
from benchkit.report.site import data as site_data
from benchkit.report.site import pages
from benchkit.report.site import publish as site_publish
from lab import synthetic
from lab.browser import Browser, serve

REPO_ROOT = Path(__file__).resolve().parent.parent
# The why pages' function groups, in the order the pages list them (docs/site.md).
GROUPS = [
    "allocator",
    "Python interpreter",
    "torch bindings, autograd, JIT",
    "ATen/c10",
    "math libraries (MKL, oneDNN, OpenMP, Sleef)",
    "other",
]


# ------------------------------------------------------------------ browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    instance = Browser()
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture(scope="module")
def server(site_dir: Path) -> Iterator[str]:
    """A static server on the loopback address: asv's own pages load their JSON with XHR."""
    with serve(site_dir) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("BENCHKIT_SCREENSHOT_DIR")
    return Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")


# ---------------------------------------------------------------- the site


COMMITS = 8
UPSTREAM_2_13 = "https://github.com/pytorch/pytorch/commit/cf30153c4c131c8164ee7798e5022d810682e2cb"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with module_dir(tmp_path_factory, "site-project") as root:
        # Frequent steps so that every kind of change shows up in a short history.
        yield synthetic.make_project(root, commits=COMMITS, benchmarks=60, seed=3, step_chance=0.2)


@pytest.fixture(scope="module")
def site_dir(project: Path) -> Path:
    (project.parent / "html").mkdir()
    (project.parent / "html" / "README.md").write_text("kept\n")
    assert cli.main(["publish", "--asv-config", str(project)]) == 0
    return project.parent / "html"


def _text(markup: str) -> str:
    """Markup as the text a reader sees, for assertion messages."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def _main_commits(project: Path) -> list[str]:
    """Commits of the history's main branch, oldest first (`project`: its asv.conf.json)."""
    out = subprocess.run(
        ["git", "-C", str(project.parent / "history"), "rev-list", "--reverse", "main"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_publish_writes_asv_site_and_benchkit_pages(site_dir: Path) -> None:
    for page in ("index.html", "graphs.html", "index.json", "changes.html", "why.html", "operators.html"):
        assert (site_dir / page).is_file(), page
    assert (site_dir / "README.md").read_text() == "kept\n"  # asv publish wipes the folder; we keep it
    assert '<h2 id="latest">Latest builds</h2>' in (site_dir / "index.html").read_text()
    asv_page = (site_dir / pages.ASV_PAGE).read_text()
    assert 'src="asv.js"' in asv_page
    for file, label in pages.PAGES:
        if file != pages.ASV_PAGE:
            assert f'<li class="benchkit-nav"><a href="{file}">{label}</a></li>' in asv_page
    assert not re.search(r"<script[^>]+src=\"https?://", asv_page), (
        "asv's page still loads scripts from a CDN"
    )
    assert not re.search(r"<link[^>]+href=\"https?://", asv_page)
    for vendored in site_publish.VENDORED.values():
        assert (site_dir / "vendor" / vendored).is_file(), vendored
    # A web server running as another user can read every page.
    for page in [*site_dir.glob("*.html"), *site_dir.glob("why/*.html")]:
        assert page.stat().st_mode & 0o044 == 0o044, page


def test_changes_page_lists_exactly_what_benchkit_check_flags(site_dir: Path, project: Path) -> None:
    text = (site_dir / "changes.html").read_text()
    commits = _main_commits(project)
    assert len(commits) == COMMITS
    flagged_total = 0
    for base, head in itertools.pairwise(commits):
        verdict = check.run_check(base, head, asv_config=project)
        flagged = {c.name for c in verdict.comparisons if site_data.listed(c)}
        flagged_total += len(flagged)
        anchor = f'id="pair-synthetic-main-{base[:8]}-{head[:8]}"'
        assert anchor in text
        section = text[text.index(anchor) :].split("</section>", 1)[0]
        titles = {
            html.unescape(t) for t in re.findall(r'<a href="graphs\.html#[^"]+" title="([^"]+)"', section)
        }
        assert titles == flagged, (base[:8], head[:8])
    assert flagged_total > 5, "the synthetic history should change often"
    assert '<th class="num">MDC</th>' in text and "minimum detectable change" in text
    # Metric groups, the upstream commit of each build, and asv graph links with the pair.
    assert "Instruction counts (" in text and "Wall time (" in text
    assert "Operator ratios and other tracked values (" in text
    assert re.search(r'href="https://github\.com/pytorch/pytorch/commit/[0-9a-f]{40}"', text)
    graph = r"graphs\.html#instruction_counts\.Synthetic_op\w+\.\w+\?machine=synthetic&amp;branch=main&amp;"
    assert re.search(graph + r"commits=[0-9a-f]{8}-[0-9a-f]{8}", text)


def test_regressions_page_lists_every_history_step_escaped(
    site_dir: Path, project: Path, tmp_path: Path
) -> None:
    """regressions.html: the steps `benchkit regressions` finds, linked in the nav, names escaped."""
    text = (site_dir / "regressions.html").read_text()
    assert '<a href="regressions.html" class="active">Regressions</a>' in text
    data = site_data.load_site_data(project)
    run = subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "regressions", "--asv-config", str(project), "--json",
         str(tmp_path / "steps.json")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    found = json.loads((tmp_path / "steps.json").read_text())["steps"]
    steps = [step["name"] for step in found]
    assert run.stdout.startswith(f"# {len(steps)} step(s) over ")
    assert len(steps) > 5, "the synthetic history should step often"
    # Every row: the label `benchkit regressions` gave that step, beside its benchmark. (The
    # page's lead text names every label, so finding a label anywhere in the page proves nothing.)
    rows = re.findall(r'<td class="label" title="[^"]*">([^<]*)</td><td><a href="graphs\.html#[^"]+" '
                      r'title="([^"]+)"', text)  # fmt: skip
    shown = sorted((html.unescape(name), html.unescape(label)) for label, name in rows)
    assert shown == sorted((step["name"], step["shown_label"]) for step in found)
    # Frequent steps in wall time and counts alike: each joint label occurs (seed 3, 8 commits).
    assert {"code change", "wall time only", "counts only"} <= {label for _, label in shown}
    # A hostile pretty name reaches the page escaped.
    name = steps[0]
    info = dataclasses.replace(data.benchmarks[name], pretty="<script>alert(1)</script>")
    hostile = dataclasses.replace(data, benchmarks={**data.benchmarks, name: info})
    page = pages.render_regressions(hostile, pages.regression_sections(hostile))["regressions.html"]
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_why_pages_explain_every_instruction_change_from_the_stored_profiles(
    site_dir: Path, project: Path
) -> None:
    data = site_data.load_site_data(project)
    stored = {(p.commit, p.env_name): p.path for p in profile_diff.find_profiles(data.conf.results_dir)}
    explained = 0
    for pair in site_data.pair_changes(data):
        for c in pair.changes:
            if c.metric != "instructions":
                continue
            page = (site_dir / pages.why_file(pair, c.name)).read_text()
            base_cases = profiles.load_profile(stored[(pair.base.commit, c.env)]).cases
            key = names.CaseKeys(base_cases).of_benchmark(c.name)
            assert key is not None
            base = base_cases[key].per_execution()
            head = profiles.load_profile(stored[(pair.head.commit, c.env)]).cases[key].per_execution()
            # The function that moved most is listed, in its group's section.
            function = max(base.keys() | head.keys(), key=lambda f: abs(head.get(f, 0) - base.get(f, 0)))
            # It is listed exactly once, under one of the groups.
            sections = re.split(r"<h2 id=\"[^\"]*\">", page)[1:]
            holding = [sec.split("</h2>", 1)[0] for sec in sections if html.escape(function) in sec]
            assert len(holding) == 1 and html.unescape(holding[0]) in GROUPS, (c.name, function, holding)
            # Group totals add up to asv's value (instructions per execution) on both sides.
            assert f"{sum(base.values()):,.0f} → {sum(head.values()):,.0f}" in page
            # It links to its pair on the pair's month page, where that pair is.
            link = re.search(rf'href="\.\./(changes-[0-9-]+\.html)#{re.escape(pair.anchor)}"', page)
            assert link and f'id="{pair.anchor}"' in (site_dir / link[1]).read_text()
            explained += 1
    assert explained > 3
    index = (site_dir / "why.html").read_text()
    assert index.count("function diff</a>") == explained
    assert "no stored profiles" not in index


def test_a_wall_time_whose_count_moved_links_to_the_counts_why_page(site_dir: Path, project: Path) -> None:
    data = site_data.load_site_data(project)
    sections = {}
    for page in site_dir.glob("changes*.html"):
        for section in page.read_text().split("<section")[1:]:
            found = re.search(r'id="(pair-[^"]+)"', section)
            if found:
                sections[found[1]] = section
    linked = 0
    for pair in site_data.pair_changes(data):
        counts = {
            names.BenchmarkName.parse(c.name).case: c for c in pair.changes if c.metric == "instructions"
        }
        for c in pair.changes:
            count = counts.get(names.BenchmarkName.parse(c.name).case)
            if c.metric != "wall_time" or count is None or count.status == "unchanged":
                continue
            row = re.search(rf'title="{re.escape(c.name)}">.*?</tr>', sections[pair.anchor], re.S)
            assert row, (pair.anchor, c.name)
            assert f'<a href="{pages.why_file(pair, count.name)}">its count: where?</a>' in row[0]
            linked += 1
    assert linked > 0


def test_the_verdict_files_wall_links_are_the_sites(site_dir: Path, project: Path) -> None:
    # The main job's verdict.md links a wall time to its count's why page as the site's rows do.
    from benchkit.report.site.count_links import count_links

    data = site_data.load_site_data(project)
    site_links = set()
    for page in site_dir.glob("changes*.html"):
        for row in page.read_text().split("<tr")[1:]:
            title = re.search(r'title="([^"]+)"', row)
            href = re.search(r'<a href="(why/[^"]+)">its count: where\?</a>', row)
            if title and href:
                site_links.add((html.unescape(title[1]), href[1]))
    found = set()
    for pair in site_data.pair_changes(data):
        for link in count_links(pair.changes, pair.machine, pair.base.commit, pair.head.commit, site_dir):
            assert link.wall.metric == "wall_time" and (site_dir / link.path).is_file()
            found.add((link.wall.name, link.path))
    assert found and found == site_links


def test_why_pages_find_cases_without_benchmarks_json(tmp_path: Path) -> None:
    # asv rewrites benchmarks.json with the benchmarks of its latest run (`asv run -b ...`):
    # older results then lack their pretty names, and the profile's case is found by the hash
    # at the end of the asv class name.
    conf = synthetic.make_project(tmp_path, commits=3, benchmarks=20, seed=5, step_chance=0.5)
    listing = tmp_path / "results" / "benchmarks.json"
    kept = {k: v for k, v in json.loads(listing.read_text()).items() if "track_instructions" not in k}
    listing.write_text(json.dumps(kept))
    html_dir = site_publish.publish(conf)
    index = (html_dir / "why.html").read_text()
    assert index.count("function diff</a>") > 0 and "no profiles" not in index


def test_changes_without_profiles_say_so(tmp_path: Path) -> None:
    conf = synthetic.make_project(tmp_path, commits=3, benchmarks=20, seed=5, step_chance=0.5,
                                      with_profiles=False)  # fmt: skip
    html_dir = site_publish.publish(conf)
    assert not list((html_dir / "why").glob("*.html"))
    changes = (html_dir / "changes.html").read_text()
    assert "Instruction counts (" in changes and "no profiles" in changes
    assert "have no stored profiles for both commits" in (html_dir / "why.html").read_text()


def test_a_single_build_has_nothing_to_compare_and_a_bad_config_is_named(tmp_path: Path) -> None:
    conf = synthetic.make_project(tmp_path, commits=1, benchmarks=20, seed=1)
    bad = tmp_path / "benchkit-check.json"
    bad.write_text(json.dumps({"thresholds": {"instructions": "tight"}}))
    with pytest.raises(UserError, match=r"benchkit-check\.json: \[thresholds\] instructions"):
        site_publish.publish(conf)
    bad.unlink()
    html_dir = site_publish.publish(conf)
    assert "No branch has two measured commits yet" in (html_dir / "changes.html").read_text()
    assert "No instruction-count change" in (html_dir / "why.html").read_text()
    assert (html_dir / "operators.html").read_text().count('<section class="ops"') == 1


def test_operator_rows_summarize_inputs_like_operatorbench(project: Path) -> None:
    import numpy as np

    data = site_data.load_site_data(project)
    commit = _main_commits(project)[-1]
    result_set = data.results[("synthetic", commit)]
    rows = {r.operator: r for r in site_data.operator_rows(result_set, data.benchmarks)}
    assert "aten.add.Tensor" in rows  # class name aten_add_Tensor mapped back to the operator
    row = rows["aten.add.Tensor"]
    ratios = [
        m.value
        for (name, _), m in result_set.measurements.items()
        if name.startswith("operators.aten_add_Tensor.track_compiled_over_eager(")
    ]
    assert row.inputs == len(ratios) == 3 and row.failed == 0
    expected = np.quantile([1 / r for r in ratios], (0.2, 0.5, 0.8))
    assert row.speedups == pytest.approx(tuple(expected))
    eager = [
        m.value
        for (name, _), m in result_set.measurements.items()
        if name.startswith("operators.aten_add_Tensor.track_eager_seconds(")
    ]
    assert row.eager_s == pytest.approx(sum(eager) / 3)


@pytest.mark.parametrize(
    ("function", "group"),
    [  # names as Callgrind reports them for torch 2.13.0 (benchkit counts --profile)
        ("Python/ceval.c:_PyEval_EvalFrameDefault'2", "Python interpreter"),
        ("Objects/dictobject.c:unicodekeys_lookup_unicode", "Python interpreter"),
        ("Python/ceval_gil.h:take_gil", "Python interpreter"),
        ("???:_PyEval_EvalFrameDefault [/usr/lib/libpython3.11.so.1.0]", "Python interpreter"),
        ("???:at::native::copy_impl(at::Tensor&, at::Tensor const&, bool)", "ATen/c10"),
        ("???:c10::impl::OperatorEntry::lookup(c10::DispatchKeySet) const", "ATen/c10"),
        ("aten/src/ATen/native/BinaryOps.cpp:at::native::add_out", "ATen/c10"),
        # an argument of allocator type does not make a function part of the allocator
        ("???:at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*)", "ATen/c10"),
        ("c10/core/impl/alloc_cpu.cpp:c10::alloc_cpu(unsigned long)", "allocator"),
        ("???:c10::DefaultCPUAllocator::allocate(unsigned long)", "allocator"),
        ("./malloc/./malloc/malloc.c:_int_free", "allocator"),
        ("Objects/obmalloc.c:_PyObject_Free", "allocator"),
        ("???:operator new(unsigned long)", "allocator"),
        ("???:torch::autograd::VariableType::(anonymous namespace)::addmm(at::Tensor const&)",
         "torch bindings, autograd, JIT"),
        ("torch/csrc/autograd/python_variable.cpp:THPVariable_add", "torch bindings, autograd, JIT"),
        ("???:pybind11::detail::type_caster_generic::load", "torch bindings, autograd, JIT"),
        ("???:mkl_blas_mc3_sgemm_copyat", "math libraries (MKL, oneDNN, OpenMP, Sleef)"),
        ("./nptl/./nptl/pthread_mutex_lock.c:pthread_mutex_lock@@GLIBC_2.2.5", "other"),
        ("./string/../sysdeps/x86_64/multiarch/memset-vec-unaligned-erms.S:__memset_avx2_unaligned", "other"),
        ("???:0x000000000dcf2770", "other"),
    ],
)  # fmt: skip
def test_functions_are_grouped_by_where_they_live(function: str, group: str) -> None:
    assert pages.function_group(function) == group


def test_values_keep_their_unit_when_benchmarks_json_lacks_the_benchmark() -> None:
    # asv rewrites benchmarks.json for the benchmarks of its latest run; older results keep
    # names it no longer lists, so their unit comes from the method name.
    config = check_config.parse_check_config({}, "defaults")
    before = results.Measurement(2.5e-5, None, None, "v1")
    after = results.Measurement(5e-5, None, None, "v1")
    wall = check.compare_one("ic.Case.time_wall", "env", None, before, after, config)
    assert pages.fmt_value(wall, wall.after) == "50.0μs"
    counts = check.compare_one("ic.Case.track_instructions", "env", None,
                               results.Measurement(1234567.0, None, None, "v1"), None, config)  # fmt: skip
    assert pages.fmt_value(counts, counts.before) == "1,234,567"


def test_publish_without_results_is_a_clear_error(tmp_path: Path) -> None:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, "repo": "nowhere", "results_dir": "results"}))
    with pytest.raises(UserError, match="no asv results"):
        site_data.load_site_data(conf)
    with pytest.raises(UserError, match="not found"):
        site_publish.publish(tmp_path / "missing.json")


# ------------------------------------------------------------- in a browser


def test_changes_page_in_browser(browser: Browser, site_dir: Path, shots: Path) -> None:
    browser.open((site_dir / "changes.html").as_uri())
    browser.assert_clean("changes.html")
    sections = browser.evaluate("document.querySelectorAll('section.pair').length")
    assert sections == COMMITS - 1
    assert browser.evaluate("document.querySelector('nav.bk-nav a.active').textContent") == "Changes"
    assert browser.evaluate("document.querySelectorAll('a.upstream').length") >= 2 * (COMMITS - 1)
    # Sorting by ratio: the column's values come out ordered.
    ordered = browser.evaluate(
        """(() => {
        const table = [...document.querySelectorAll('table.changes')].find(t => t.tBodies[0].rows.length > 2);
        if (!table) return null;
        table.tHead.rows[0].cells[4].click();
        return [...table.tBodies[0].rows].map(r => Number(r.cells[4].dataset.v));
    })()"""
    )
    assert ordered and ordered == sorted(ordered)
    browser.screenshot(shots / "changes.png")


def test_operator_page_in_browser(browser: Browser, site_dir: Path, project: Path, shots: Path) -> None:
    commits = _main_commits(project)
    browser.open((site_dir / "operators.html").as_uri())
    browser.assert_clean("operators.html")
    visible = browser.evaluate("[...document.querySelectorAll('section.ops:not(.hidden)')].map(s => s.id)")
    assert visible == [f"ops-synthetic-{commits[-1][:8]}"]  # newest commit first
    headers = browser.evaluate(
        "[...document.querySelectorAll('section.ops:not(.hidden) th')].map(t => t.textContent)"
    )
    assert headers[:6] == ["operator", "device", "inputs", "speedup p20", "p50", "p80"]
    devices = browser.evaluate(
        "[...document.querySelectorAll('section.ops:not(.hidden) tbody tr')].map(r => r.cells[1].textContent)"
    )
    assert devices == ["cpu", "cpu"]
    rows = browser.evaluate("document.querySelectorAll('section.ops:not(.hidden) tbody tr').length")
    assert rows == 2  # the synthetic history's operators at 60 benchmarks
    # Every operator's history is drawn: one point per commit, plus the marker of this commit.
    points = browser.evaluate(
        "document.querySelectorAll('svg.symbols symbol')[0].querySelectorAll('circle').length"
    )
    assert points == COMMITS
    assert (
        browser.evaluate("document.querySelectorAll('section.ops:not(.hidden) circle.here').length") == rows
    )
    browser.screenshot(shots / "operators.png")
    # Another commit through the picker, as a link from the changes page does.
    browser.open((site_dir / "operators.html").as_uri() + f"#ops-synthetic-{commits[2][:8]}")
    visible = browser.evaluate("[...document.querySelectorAll('section.ops:not(.hidden)')].map(s => s.id)")
    assert visible == [f"ops-synthetic-{commits[2][:8]}"]
    assert browser.evaluate("document.getElementById('op-commit').value") == visible[0]
    # Sort by median speedup, descending on the second click.
    medians = browser.evaluate(
        """(() => {
        const th = document.querySelectorAll('section.ops:not(.hidden) th')[4];
        th.click(); th.click();
        return [...document.querySelectorAll('section.ops:not(.hidden) tbody tr')]
            .map(r => Number(r.cells[4].dataset.v));
    })()"""
    )
    assert medians == sorted(medians, reverse=True)
    browser.assert_clean("operators.html#commit")


def test_why_index_in_browser(browser: Browser, site_dir: Path, shots: Path) -> None:
    browser.open((site_dir / "why.html").as_uri())
    browser.assert_clean("why.html")
    assert browser.evaluate("document.querySelector('h1').textContent").startswith("Why")
    rows = browser.evaluate("document.querySelectorAll('tbody tr').length")
    changes = (site_dir / "changes.html").read_text().count("track_instructions]</a>")
    assert rows == changes > 0
    browser.screenshot(shots / "why-index.png")


def test_why_page_in_browser(browser: Browser, site_dir: Path, shots: Path) -> None:
    index = (site_dir / "why.html").read_text()
    first = re.search(r'<a href="(why/[0-9a-f]+\.html)">function diff</a>', index)
    assert first
    browser.open((site_dir / first.group(1)).as_uri())
    browser.assert_clean(first.group(1))
    assert browser.evaluate("document.querySelector('h1').textContent").startswith("Why: Synthetic/")
    groups = browser.evaluate(
        "[...document.querySelectorAll('table.groups tbody tr td:first-child')].map(td => td.textContent)"
    )
    assert groups == GROUPS
    assert browser.evaluate("document.querySelectorAll('td.fn').length") >= 1
    browser.screenshot(shots / "why-page.png", full_page=True)


@pytest.mark.parametrize("opened_from", ["static server", "file"])
def test_asv_pages_render_offline_with_benchkit_links(
    browser: Browser, server: str, site_dir: Path, shots: Path, opened_from: str
) -> None:
    base = server if opened_from == "static server" else site_dir.as_uri()
    browser.open(
        f"{base}/{pages.ASV_PAGE}",
        ready="document.querySelectorAll('.benchmark-container canvas').length > 3",
    )
    browser.assert_clean(f"{pages.ASV_PAGE} from {opened_from}")
    assert not browser.evaluate("$('#error').is(':visible')")
    links = browser.evaluate("[...document.querySelectorAll('li.benchkit-nav a')].map(a => a.textContent)")
    assert links == [label for file, label in pages.PAGES if file != pages.ASV_PAGE]
    browser.screenshot(shots / f"asv-index-{opened_from.split()[-1]}.png")
    # A graph link taken from the changes page opens asv's graph of that benchmark.
    changes = (site_dir / "changes.html").read_text()
    href = re.search(r'<a href="(graphs\.html#instruction_counts[^"]+)"', changes)
    assert href
    browser.open(
        f"{base}/{html.unescape(href.group(1))}",
        ready="document.querySelector('#main-graph canvas.flot-base')",
    )
    browser.assert_clean(f"asv graph from {opened_from}")
    title = browser.evaluate("document.getElementById('title').textContent")
    assert "instruction_counts.Synthetic_op" in title
    assert not browser.evaluate("$('#error').is(':visible')")
    browser.screenshot(shots / f"asv-graph-{opened_from.split()[-1]}.png")


# ------------------------------------------------------- a real asv history


REAL_CASES = (
    r"nn_Modules_(Linear|ReLU)_PYTHON_EAGER_FORWARD_t1_.*\.(time_wall|track_instructions)"
    r"|operators\.aten_relu_default\."
)


@pytest.mark.slow
def test_site_of_a_real_history(tmp_path: Path, shots: Path) -> None:
    """Two real torch builds measured by real asv: the 2.13.0 wheel, then the same wheel with
    ``nn.Linear.forward`` computing its result four times (support.wheels' injected regression).
    The published site must show the Linear slowdown on the changes page (ReLU is the control),
    explain an instruction-count change when the suite records them, and show the operator table.

    One round a side: a process of this machine can run 1.3-1.7x slower than the next, so the
    injected change must be well beyond that for one process a side to show it."""
    from support.asv_project import FAST
    from support.asv_project import make_project as make_asv_project
    from support.wheels import LOCAL_WHEEL, slow_linear_wheel

    project = make_asv_project(tmp_path / "project", tmp_path / "env")
    project.env["BENCHKIT_STANDARD"] = "1"  # the standard suite's nn.Linear / nn.ReLU cases
    del project.env["BENCHKIT_DEFINITIONS"]
    slow = slow_linear_wheel(tmp_path / "pr-wheel", times=4)
    init = project.benchkit("history", "init", "--repo", str(project.history), str(LOCAL_WHEEL), str(slow))
    assert init.returncode == 0, init.stderr
    project.env["BENCHKIT_OPERATOR_ROUNDS"] = "3"  # the operator table needs numbers, not precision
    project.env["BENCHKIT_OPERATOR_PROCESSES"] = "1"
    project.asv("run", "ALL", "-b", REAL_CASES, "--machine", "e2e", "--record-samples", *FAST, "-v")
    published = project.benchkit("publish", "--asv-config", str(project.config))
    (shots / "real-publish.log").parent.mkdir(parents=True, exist_ok=True)
    (shots / "real-publish.log").write_text(published.stdout + published.stderr)
    assert published.returncode == 0, published.stderr
    html_dir = project.root / "html"
    commits = _main_commits(project.config)
    assert len(commits) == 2

    changes = (html_dir / "changes.html").read_text()
    section = changes.split(f'id="pair-e2e-main-{commits[0][:8]}-{commits[1][:8]}"', 1)[1]
    section = section.split("</section>", 1)[0]
    wall = section.split("Wall time (", 1)[1].split("</table>", 1)[0]
    listed = [row for row in wall.split("<tr")[1:] if "Modules/Linear | Python" in row]
    assert listed, f"Linear's wall time not listed; the pair's summary: {_text(section)[:1500]}"
    linear = listed[0]
    assert linear.startswith(' class="regression"')
    # Wall time under whatever else runs: the gate's factor, not the size (counts below).
    assert float(re.search(r"×([0-9.]+) \(", linear).group(1)) > 1.1  # type: ignore[union-attr]
    assert UPSTREAM_2_13 in changes  # the wheel's torch.version.git_version, linked
    data = site_data.load_site_data(project.config)
    # The suite records Callgrind counts (valgrind is part of the install): Linear's extra call
    # must be explained.
    assert any(i.key.endswith(".track_instructions") for i in data.benchmarks.values())
    assert "Instruction counts (" in section
    counted = section.split("Instruction counts (", 1)[1].split("</table>", 1)[0]
    linear_counts = next(row for row in counted.split("<tr")[1:] if "Modules/Linear | Python" in row)
    # Linear computes its result four times: its instruction count grows by more than half.
    assert linear_counts.startswith(' class="regression"')
    assert float(re.search(r"×([0-9.]+) \(", linear_counts).group(1)) > 1.3  # type: ignore[union-attr]
    why = re.search(r'<a href="(why/[0-9a-f]+\.html)">where\?</a>', section)
    assert why, "no why page for the instruction-count change"
    # The wall time's row links to the count's why page: its count moved too.
    assert f'<a href="{why.group(1)}">its count: where?</a>' in linear
    page = (html_dir / why.group(1)).read_text()
    assert "Python interpreter" in page and "ATen/c10" in page

    operators = (html_dir / "operators.html").read_text()
    assert "aten.relu.default" in operators
    assert operators.count('<section class="ops"') == 2
    # Two builds: every step has one build a side, so none is judged a regression or improvement.
    regressions = (html_dir / "regressions.html").read_text()
    assert 'class="regression"' not in regressions and 'class="improvement"' not in regressions
    assert "not judged (one build a side)" in regressions

    browser = Browser()
    try:
        for page in ("changes.html", "why.html", "operators.html", "regressions.html"):
            browser.open((html_dir / page).as_uri())
            browser.assert_clean(page)
            browser.screenshot(shots / f"real-{page.replace('.html', '.png')}", full_page=True)
        for path in sorted((html_dir / "why").glob("*.html"))[:2]:
            browser.open(path.as_uri())
            browser.assert_clean(path.name)
            browser.screenshot(shots / f"real-why-{path.stem}.png", full_page=True)
    finally:
        browser.close()


DEMO_DEFINITIONS = """
from benchkit.define.api import GroupedSetup, GroupedStmts

BENCHMARKS = {{"site demo": {{"linear": GroupedStmts(
    py_stmt={stmt!r},
    setup=GroupedSetup(py_setup="model = torch.nn.Linear(64, 64)\\nx = torch.ones((8, 64))"),
    num_threads=1,
)}}}}
"""


@pytest.mark.slow
def test_why_page_from_real_callgrind_profiles(tmp_path: Path, shots: Path) -> None:
    """Real Callgrind profiles (`benchkit counts --profile`, real torch, real valgrind) of one case
    whose statement runs ``nn.Linear`` once, then twice plus an add, stand for two commits of a
    history; the why page must put the extra work where it happens."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    counted = {}
    for version, stmt in {"base": "y = model(x)", "head": "y = model(x)\ny = model(x) + 1"}.items():
        definitions = tmp_path / f"defs_{version}.py"
        definitions.write_text(DEMO_DEFINITIONS.format(stmt=stmt))
        out = profile_path(tmp_path / version)
        run = subprocess.run(
            [sys.executable, "-m", "benchkit.cli", "counts", "--definitions", str(definitions),
             "--filter", "site demo", "--profile", "--profile-dir", str(out.parent)],
            env={**os.environ, "BENCHKIT_STANDARD": "0"}, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        counted[version] = out
    key = "site demo/linear | Python | Eager | Forward | 1 thread(s)"
    cases = {v: profiles.load_profile(p).cases[key] for v, p in counted.items()}

    conf = synthetic.make_project(tmp_path / "project", commits=2, benchmarks=8, with_profiles=False)
    results_dir = tmp_path / "project" / "results"
    # Named as benchkit names the case: the why page finds it by the key's hash in the class name.
    case_class = names.asv_class_name(["site demo", "linear", "PYTHON", "EAGER", "FORWARD", "t1"], key)
    name = str(names.BenchmarkName.build(names.Metric.INSTRUCTIONS, case_class))
    spec = {"name": name, "unit": "instructions", "type": "track", "params": [], "param_names": [],
            "pretty_name": names.pretty_name(key, names.Metric.INSTRUCTIONS), "version": "v1"}  # fmt: skip
    benchmarks_json = json.loads((results_dir / "benchmarks.json").read_text())
    benchmarks_json[name] = spec
    (results_dir / "benchmarks.json").write_text(json.dumps(benchmarks_json))
    for commit, version in zip(_main_commits(conf), ("base", "head"), strict=True):
        [path] = (results_dir / synthetic.MACHINE).glob(f"{commit[:8]}-*.json")
        result = Results.load(str(path))
        value = cases[version].instructions
        result.add_result(spec, BenchmarkResult([value], [None], [None], 0, "", None), record_samples=True)
        result.save(str(results_dir))
        stored = results_dir / synthetic.MACHINE / profiles.PROFILE_DIR
        stored.mkdir(parents=True, exist_ok=True)
        shutil.copy(counted[version], stored / f"{commit}-{result.env_name}{profiles.SUFFIX}")

    html_dir = site_publish.publish(conf)
    changes = (html_dir / "changes.html").read_text()
    row = rf'title="{re.escape(name)}">.*?<a href="(why/\w+\.html)"'
    why = re.search(row, changes, re.S)
    assert why, "the doubled Linear call should be an instruction-count regression with a why page"
    page = (html_dir / why.group(1)).read_text()
    totals = {
        group: float(after.replace(",", "")) - float(before.replace(",", ""))
        for group, before, after in re.findall(
            r'<tr><td><a href="#[^"]+">([^<]+)</a></td><td class="num">([\d,.]+)</td>'
            r'<td class="num">([\d,.]+)</td>',
            page,
        )
    }
    # A second Linear call is more interpreter work, more dispatcher/ATen work and a second sgemm.
    assert set(totals) == set(GROUPS)
    for group in ("Python interpreter", "ATen/c10", "math libraries (MKL, oneDNN, OpenMP, Sleef)"):
        assert totals[group] > 1000, (group, totals)
    assert "_PyEval_EvalFrameDefault" in page and "at::" in page
    browser = Browser()
    try:
        browser.open((html_dir / why.group(1)).as_uri())
        browser.assert_clean(why.group(1))
        browser.screenshot(shots / "real-profile-why.png", full_page=True)
    finally:
        browser.close()
