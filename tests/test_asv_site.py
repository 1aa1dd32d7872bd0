"""asv's part of the site, written from benchkit's one read of the results, is the folder
``asv publish`` writes: every file, byte for byte, but for info.json's time stamp, the order of
index.json's list of graph parameters (asv lists them in the order its walk of the results
folder meets the machines, benchkit by name), and asv's regressions view where asv's search
is off (benchkit's configs: an empty view, left out)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.history.results.read import load_asv_config, read_results
from benchkit.report.site.asv_site import asv_search_off, write_asv_site
from benchkit.util import Beside
from lab.synthetic import MACHINE, add_empty_benchmarks, make_project

SECOND = "second-box"


def _second_machine(results: Path) -> None:
    """The first machine's results again as another machine's, measured with an environment
    variable set (asv makes it a graph parameter), one results file a benchmark short."""
    folder = results / SECOND
    folder.mkdir()
    for n, path in enumerate(sorted((results / MACHINE).glob("*.json"))):
        data = json.loads(path.read_text())
        if path.name == "machine.json":
            data["machine"] = SECOND
        else:
            data["params"]["machine"] = SECOND
            data["env_vars"] = {"OMP_NUM_THREADS": "1"}
            if n == 3:
                dropped = sorted(data["results"])[0]
                data["results"].pop(dropped)
        (folder / path.name).write_text(json.dumps(data))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_asv_part_is_what_asv_publish_writes(tmp_path: Path) -> None:
    conf_path = make_project(tmp_path / "project", commits=14, benchmarks=30, seed=3)
    add_empty_benchmarks(conf_path, never_run=1, failing=2)
    _second_machine(conf_path.parent / "results")
    theirs, ours = tmp_path / "asv", tmp_path / "ours"
    command = [sys.executable, "-m", "asv", "publish", "--config", str(conf_path), "--html-dir", str(theirs)]
    subprocess.run(command, cwd=conf_path.parent, check=True, capture_output=True)

    write_asv_site(read_results(load_asv_config(conf_path)), ours)

    expected, written = _files(theirs), _files(ours)
    assert asv_search_off(load_asv_config(conf_path))
    assert json.loads(expected.pop("regressions.json")) == {"regressions": []}
    assert b"<entry>" not in expected.pop("regressions.xml")
    assert sorted(written) == sorted(expected)
    graphs = [name for name in expected if name.startswith("graphs/")]
    assert any(f"machine-{SECOND}" in name for name in graphs)
    assert any("env-OMP_NUM_THREADS" in name for name in graphs)
    differing = sorted(name for name in expected if written[name] != expected[name])
    assert differing == ["index.json", "info.json"]
    assert json.loads(written["info.json"]).keys() == json.loads(expected["info.json"]).keys()
    index, their_index = json.loads(written["index.json"]), json.loads(expected["index.json"])
    ours_listed, theirs_listed = index.pop("graph_param_list"), their_index.pop("graph_param_list")
    assert sorted(map(json.dumps, ours_listed)) == sorted(map(json.dumps, theirs_listed))
    assert len(ours_listed) == 2
    assert [page[0] for page in their_index["pages"]][-1] == "regressions"
    their_index["pages"].pop()
    assert json.dumps(index) == json.dumps(their_index)


def test_a_failure_beside_is_raised_with_its_traceback() -> None:
    def fails() -> None:
        raise ValueError("no such graph")

    beside = Beside(fails)
    with pytest.raises(RuntimeError, match="ValueError: no such graph"):
        beside.wait()
    Beside(lambda: None).wait()
