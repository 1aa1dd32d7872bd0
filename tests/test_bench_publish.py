"""lab/bench_publish.py splits real `asv publish` by the steps asv prints as it starts each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchkit.history.results.read import load_asv_config, read_results
from benchkit.report.diff import find_profiles
from benchkit.report.site.publish import publish
from lab import bench_publish
from lab.synthetic import MACHINE, add_build, make_project


def test_asv_publish_is_split_into_its_own_steps(tmp_path: Path) -> None:
    conf = make_project(tmp_path / "project", commits=4, benchmarks=12, with_profiles=False)
    html = tmp_path / "html"
    command = [sys.executable, "-m", "asv", "publish", "--config", str(conf), "--html-dir", str(html)]
    timing = bench_publish._timed(command, tmp_path)
    names = [name for name, _ in timing.steps]
    # asv 0.6's steps, in its order; a change of its progress lines would leave the split empty.
    first = ["Loading machine info", "Getting params, commits, tags and branches", "Loading results"]
    assert names[:3] == first
    assert {"Detecting steps", "Generating graphs", "Writing index"} <= set(names)
    assert any(name.startswith("Generating output for ") for name in names)
    assert all(seconds >= 0 for _, seconds in timing.steps)
    # The steps tile the run from asv's first line to its exit.
    assert sum(seconds for _, seconds in timing.steps) <= timing.wall_s
    assert (html / "index.json").is_file()
    figures = bench_publish.SizeFigures(4, 12, [], [timing], [], timing, [], [], 0, [])
    groups = [part.split(" ")[0] for part in figures.asv_steps().split(", ")]
    assert groups[:2] == ["read", "step"] and "its" in groups and "graph" in groups


def test_one_more_build_joins_the_published_history(tmp_path: Path) -> None:
    conf = make_project(tmp_path / "project", commits=4, benchmarks=12)
    commit = add_build(conf)
    publish(conf)
    loaded = read_results(load_asv_config(conf))
    assert loaded.history(MACHINE)[-1].commit == commit
    index = json.loads((conf.parent / "html" / "index.json").read_text())
    assert commit in index["revision_to_hash"].values()
    assert len(find_profiles(conf.parent / "results")) == 5
