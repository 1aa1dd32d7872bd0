"""Pages that grow with the history are split by month (`benchkit.report.site.paging`): each
keeps its newest items on its own page, every item lives on the page of its month, and every
link to an item reaches the page that holds it. Page sizes at scale: lab/bench_publish.py."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.scratch import module_dir

from benchkit import cli
from benchkit.report.site import paging
from lab import synthetic

COMMITS = 70  # a build a day from 2026-01-01: pairs of January (30) and February (28) in two parts


def _day(day: int) -> float:
    return (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=day)).timestamp()


def test_month_parts_keep_each_item_where_it_was() -> None:
    days = list(range(40))
    parts = paging.month_parts("p", days, _day, per_part=12)
    assert [(p.file, p.label, len(p.items)) for p in parts] == [
        ("p-2026-01.html", "2026-01 (1/3)", 12),
        ("p-2026-01-2.html", "2026-01 (2/3)", 12),
        ("p-2026-01-3.html", "2026-01 (3/3)", 7),
        ("p-2026-02.html", "2026-02", 9),
    ]
    before = paging.page_of(parts, str)
    later = paging.page_of(paging.month_parts("p", [*days, 40, 41], _day, per_part=12), str)
    assert {k: later[k] for k in before} == before  # a longer history moves no item
    assert paging.archive_links(parts)[0]["file"] == "p-2026-02.html"  # newest month first


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with module_dir(tmp_path_factory, "paged-site") as root:
        conf = synthetic.make_project(root, commits=COMMITS, benchmarks=12, seed=5, step_chance=0.2)
        assert cli.main(["publish", "--asv-config", str(conf)]) == 0
        yield root / "html"


def _ids(page: Path) -> list[str]:
    return re.findall(r' id="([^"]+)"', page.read_text())


def test_each_pair_lives_on_one_month_page_and_the_front_shows_the_newest(site: Path) -> None:
    months = sorted(p.name for p in site.glob("changes-*.html"))
    assert months == [
        "changes-2026-01-2.html", "changes-2026-01.html", "changes-2026-02-2.html", "changes-2026-02.html",
        "changes-2026-03.html",
    ]  # fmt: skip
    in_order = sorted(months, key=lambda m: (m[:15], len(m)))  # a month's first part, then its second
    # oldest first (each page lists its pairs newest first)
    pairs = [i for page in in_order for i in reversed(_ids(site / page)) if i.startswith("pair-")]
    assert len(pairs) == len(set(pairs)) == COMMITS - 1
    front = [i for i in _ids(site / "changes.html") if i.startswith("pair-")]
    assert front == pairs[-len(front) :][::-1] and len(front) == paging.FRONT_PAIRS  # newest first
    text = (site / "changes.html").read_text()
    assert all(f'href="{m}"' in text for m in months)


def test_every_link_to_an_item_reaches_the_page_that_holds_it(site: Path) -> None:
    pages = [*site.glob("*.html"), *site.glob("why/*.html")]
    checked = 0
    for page in pages:
        for target, anchor in re.findall(r'href="(?:\.\./)?((?:changes|operators)[^"#]*\.html)#([^"]+)"',
                                         page.read_text()):  # fmt: skip
            held = site / target
            assert held.is_file() and f'id="{anchor}"' in held.read_text(), (page.name, target, anchor)
            checked += 1
    assert checked > COMMITS


def test_operators_and_regressions_and_why_are_split_too(site: Path) -> None:
    sections = [i for p in site.glob("operators-*.html") for i in _ids(p) if i.startswith("ops-")]
    assert len(sections) == len(set(sections)) == COMMITS
    front = [i for i in _ids(site / "operators.html") if i.startswith("ops-")]
    assert len(front) == paging.FRONT_BUILDS
    for stem, row in (("regressions", '<td class="label"'), ("why", "function diff</a>")):
        months = list(site.glob(f"{stem}-*.html"))
        total = int(re.search(r"of (\d+)", (site / f"{stem}.html").read_text())[1])  # type: ignore[index]
        assert months and sum(p.read_text().count(row) for p in months) == total > 0, stem
