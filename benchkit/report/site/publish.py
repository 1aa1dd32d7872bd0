"""Publishing: asv's site into the html folder (`asv_site`: asv's own classes on the results,
read once), its page moved aside (`pages.ASV_PAGE`) for benchkit's front page, benchkit's pages
beside it, asv's CDN assets pointed at local copies, its grid rid of benchmarks without
results, and a ``file://`` transport for asv's JSON."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.history.lock import job_lock
from benchkit.history.results.read import LoadedResults, load_asv_config, read_results
from benchkit.report.site.asv_site import write_asv_site
from benchkit.report.site.data import SuiteCoverage, load_site_data, log, suite_coverage
from benchkit.report.site.pages import ASV_PAGE, PAGES
from benchkit.report.site.render import render_pages
from benchkit.util import Beside, atomic_write_text, bulk_load

ASSETS_DIR = Path(__file__).with_name("assets")
VENDOR_DIR = ASSETS_DIR / "vendor"
# Which asv CDN file each local copy replaces, by the URL's last path component.
VENDORED = {
    "jquery-3.3.1.min.js": "jquery-3.3.1.min.js",
    "jquery.flot.min.js": "jquery.flot.js",
    "jquery.flot.time.min.js": "jquery.flot.time.js",
    "jquery.flot.selection.min.js": "jquery.flot.selection.js",
    "jquery.flot.categories.min.js": "jquery.flot.categories.js",
    "jquery.flot.orderBars.js": "jquery.flot.orderBars.js",
    "stupidtable.min.js": "stupidtable.min.js",
    "md5.min.js": "md5.min.js",
    "bootstrap.min.js": "bootstrap.min.js",
    "bootstrap.min.css": "css/bootstrap.min.css",
}


def write_public(path: Path, text: str) -> None:
    """Write atomically, readable by everyone: a web server usually runs as another user
    (the temporary file `atomic_write_text` renames into place is private)."""
    atomic_write_text(path, text)
    path.chmod(0o644)


# -------------------------------------------------------------- asv's pages


_EXTERNAL_TAG = re.compile(r"<(script|link)\b[^>]*?\b(?:src|href)=\"(https?://[^\"]+)\"[^>]*>", re.I)


def localize_asv_assets(html_dir: Path) -> list[str]:
    """Point asv's CDN <script>/<link> tags at local copies; returns URLs left external."""
    shutil.copytree(VENDOR_DIR, html_dir / "vendor", dirs_exist_ok=True)
    left: list[str] = []
    for page in html_dir.glob("*.html"):
        text = page.read_text()

        def local(match: re.Match[str]) -> str:
            tag, url = match.group(1).lower(), match.group(2)
            vendored = VENDORED.get(url.rsplit("/", 1)[-1])
            if vendored is None:
                if tag == "script" or "stylesheet" in match.group(0):
                    left.append(url)
                return match.group(0)
            if tag == "script":
                return f'<script src="vendor/{vendored}">'
            return f'<link rel="stylesheet" href="vendor/{vendored}">'

        new = _EXTERNAL_TAG.sub(local, text)
        if new != text:
            write_public(page, new)
    return left


def enable_file_access(html_dir: Path) -> int:
    """Let asv's pages work from ``file://``: a script twin of every JSON file, and the transport
    (assets/asv_file_shim.js) that reads them; returns how many twins were written."""
    count = 0
    for path in html_dir.rglob("*.json"):
        relative = json.dumps(path.relative_to(html_dir).as_posix())
        # The JSON text is a JavaScript expression as it is; it is not parsed here.
        path.with_name(path.name + ".js").write_bytes(
            b"benchkitJson(" + relative.encode() + b"," + path.read_bytes() + b");\n"
        )
        count += 1
    page = html_dir / ASV_PAGE
    text = page.read_text()
    shim = '<script src="benchkit/asv_file_shim.js"></script>\n'
    if shim in text:
        return count
    at = re.search(r"<script[^>]*\bsrc=\"asv\.js\"", text)
    if at is None:
        log("warning: asv's page does not load asv.js where expected; its graphs need a server")
        return count
    write_public(page, text[: at.start()] + shim + text[at.start() :])
    return count


def move_asv_page(html_dir: Path) -> None:
    """asv's index.html becomes `ASV_PAGE`: benchkit's front page takes its place. asv's scripts
    find their data relative to the page's folder and route by the URL's hash, so they work there."""
    index = html_dir / "index.html"
    if not index.is_file():
        raise UserError(f"asv's part of the site has no index.html in {html_dir}")
    os.rename(index, html_dir / ASV_PAGE)


_ASV_GRID_ITEM = re.compile(r'<li id="nav-li-"[^>]*><a href="#/">Benchmark grid</a></li>')
_ASV_REGRESSIONS_ITEM = re.compile(r'\s*<li id="nav-li-regressions">.*?</li>', re.S)


def link_from_asv(html_dir: Path) -> bool:
    """asv's navigation bar: benchkit's pages first, then asv's grid under benchkit's name for it
    ("Graphs") and its list; asv's "Regressions" tab leaves the bar, as benchkit's replaces it (its
    view stays at ``#/regressions``). False if asv's bar changed shape (a banner is added instead)."""
    page = html_dir / ASV_PAGE
    text = page.read_text()
    ours = [(f, label) for f, label in PAGES if f != ASV_PAGE]
    items = "".join(f'<li class="benchkit-nav"><a href="{f}">{label}</a></li>' for f, label in ours)
    grid = _ASV_GRID_ITEM.search(text)
    if grid is None:
        banner = f'<div class="benchkit-nav">benchkit: <ul>{items}</ul></div>'
        write_public(page, text.replace("<body>", f"<body>{banner}", 1))
        return False
    renamed = grid.group(0).replace(">Benchmark grid<", f">{dict(PAGES)[ASV_PAGE]}<")
    new = text[: grid.start()] + items + renamed + text[grid.end() :]
    write_public(page, _ASV_REGRESSIONS_ITEM.sub("", new, count=1))
    return True


def _css_string(text: str) -> str:
    """`text` inside a double-quoted CSS string: anything but letters, digits and ``._-`` escaped."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else f"\\{ord(c):x} " for c in text)


def trim_asv_grid(html_dir: Path, coverage: SuiteCoverage) -> None:
    """asv lists every benchmark of benchmarks.json, measured or not (after ``asv run -b X``, the
    whole suite as empty boxes): leave out those with no result at any build, grey those that
    only failed or were skipped. The front page counts and names both."""
    index = html_dir / "index.json"
    listing = json.loads(index.read_text())
    benchmarks = listing.get("benchmarks", {})
    left_out = [key for key in coverage.never_run if key in benchmarks]
    for key in left_out:
        del benchmarks[key]
    if left_out:
        write_public(index, json.dumps(listing, separators=(",", ":")))
    if not coverage.no_number:
        return
    page = html_dir / ASV_PAGE
    selectors = ",\n".join(
        f'#summarygrid-display a.benchmark-container[href="#{_css_string(key)}"]'
        for key in coverage.no_number
    )
    rule = f"{selectors} {{ opacity: .35; filter: grayscale(1); }}"
    text = page.read_text()
    write_public(
        page, text.replace("</head>", f'<style id="benchkit-no-numbers">\n{rule}\n</style>\n</head>', 1)
    )


# ------------------------------------------------------------------ publish


def write_pages(pages: Mapping[str, str], html_dir: Path) -> None:
    for path, text in pages.items():
        write_public(html_dir / path, text)
    assets = html_dir / "benchkit"
    assets.mkdir(exist_ok=True)
    for name in ("site.css", "site.js", "asv_file_shim.js"):
        shutil.copyfile(ASSETS_DIR / name, assets / name)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _put_in_place(new: Path, target: Path) -> None:
    """Replace the site `target` by the complete site `new`: readers see the old or the new one."""
    if target.is_dir() and _exchange(new, target):
        shutil.rmtree(new)  # it now holds the old site
        return
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        os.rename(target, old)
    os.rename(new, target)
    shutil.rmtree(old, ignore_errors=True)


def publish(
    conf_path: Path = Path("asv.conf.json"),
    html_dir: Path | None = None,
    config_path: Path | None = None,
    skip_damaged: bool = False,
    wait: bool = True,
    loaded: LoadedResults | None = None,
) -> Path:
    """asv's site and benchkit's pages into the html folder; returns the folder.
    `loaded`: the project's results when the caller has read them (the main job).

    The site is made in a folder beside it and put in place once complete, so an interrupted
    publish leaves the previous site whole."""
    conf_path = conf_path.resolve()
    if not conf_path.is_file():
        raise UserError(f"asv config {conf_path} not found")
    with job_lock(conf_path, wait):
        return _publish(conf_path, html_dir, config_path, skip_damaged, loaded)


def _publish(
    conf_path: Path,
    html_dir: Path | None,
    config_path: Path | None,
    skip_damaged: bool,
    loaded: LoadedResults | None,
) -> Path:
    started = time.perf_counter()
    conf = loaded.conf if loaded else load_asv_config(conf_path)
    target = (html_dir or conf_path.parent / conf.html_dir).resolve()
    for stale in target.parent.glob(f".{target.name}.*-*"):  # left by a publish that was killed
        shutil.rmtree(stale, ignore_errors=True)
    building = target.with_name(f".{target.name}.new-{os.getpid()}")
    building.mkdir(parents=True)
    building.chmod(0o755)
    try:
        _publish_into(conf_path, conf, building, target, config_path, skip_damaged, loaded, started)
        _put_in_place(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target


def _publish_into(
    conf_path: Path,
    conf: Any,
    building: Path,
    target: Path,
    config_path: Path | None,
    skip_damaged: bool,
    loaded: LoadedResults | None,
    started: float,
) -> None:
    readme = target / "README.md"  # a README a repository tracks in the site's folder stays
    kept_readme = readme.read_bytes() if readme.is_file() else None
    if loaded is None:
        with bulk_load():
            loaded = read_results(conf, [] if skip_damaged else None)
    # asv's part and benchkit's pages are made from the same results, side by side.
    asv_part = Beside(functools.partial(write_asv_site, loaded, building))
    log(f"publishing into {target}: asv's graphs beside benchkit's pages")
    try:
        data = load_site_data(conf_path, config_path, skip_damaged, loaded, conf)
        pages, counts = render_pages(data)
    except BaseException:
        asv_part.stop()
        raise
    for found in data.damaged:
        log(f"--skip-damaged: left out {found.describe()}")
    rendered_s = time.perf_counter() - started
    try:
        asv_part.wait()
    except RuntimeError as e:
        tail = "\n".join(str(e).strip().splitlines()[-15:])
        raise UserError(f"writing asv's part of the site failed:\n{tail}") from None
    asv_s = time.perf_counter() - started
    if kept_readme is not None:
        (building / "README.md").write_bytes(kept_readme)
    move_asv_page(building)
    write_pages(pages, building)
    left = localize_asv_assets(building)
    if left:
        log("warning: asv's pages still load from the network: " + ", ".join(left))
    if not link_from_asv(building):
        log(f"warning: asv's {ASV_PAGE} has no navigation bar where expected; added a banner instead")
    trim_asv_grid(building, suite_coverage(data))
    enable_file_access(building)
    total = time.perf_counter() - started
    log(
        f"pages rendered in {rendered_s:.1f} s beside asv's graphs ({asv_s:.1f} s), written in "
        f"{total - asv_s:.1f} s: "
        + ", ".join(f"{n} {what}" for what, n in counts.items())
        + f" -> {target / 'index.html'}"
    )
