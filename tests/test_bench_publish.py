"""lab/bench_publish.py splits real `asv publish` by the steps asv prints as it starts each."""

from __future__ import annotations

import sys
from pathlib import Path

from lab import bench_publish
from lab.synthetic import make_project


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
    figures = bench_publish.SizeFigures(4, 12, [], [timing], [], [], [], 0, [])
    groups = [part.split(" ")[0] for part in figures.asv_steps().split(", ")]
    assert groups[:2] == ["read", "step"] and "its" in groups and "graph" in groups
