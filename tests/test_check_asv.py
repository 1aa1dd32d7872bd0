"""The gate fails closed, through real asv runs: `asv run` -> `benchkit check` and the Changes page.

A tiny asv project (a temporary git repository, ``environment_type: existing``,
so no virtualenv is built) whose suite changes behaviour per run through the
``GATE_MODE`` variable: a benchmark fails, is skipped (asv_runner's
``SkipNotImplemented``), disappears, or its class's ``setup_cache`` fails -- each
recorded by asv itself, as in a real job. Each mode is measured on its own
commit; ``benchkit check`` compares each with the first, and the Changes page is
rendered from the same results.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchkit.report.site import data as site_data
from benchkit.report.site import render as site_render

REPO_ROOT = Path(__file__).resolve().parent.parent
MACHINE = "box"
SUITE = """
import os

from asv_runner.benchmarks.mark import SkipNotImplemented

MODE = os.environ.get("GATE_MODE", "")


class Counts:
    def setup_cache(self):
        if MODE == "setup_cache":
            raise RuntimeError("cache broken on purpose")
        return 1000

    if MODE != "drop":

        def track_a_instructions(self, base):
            if MODE == "fail":
                raise ValueError("broken on purpose")
            if MODE == "skip":
                raise SkipNotImplemented("not on this build")
            return base * 1.1 if MODE == "slow" else base

        track_a_instructions.unit = "instructions"
        track_a_instructions.pretty_name = "<b>A</b> & co"

    def track_b_instructions(self, base):
        return base

    track_b_instructions.unit = "instructions"


def track_speedup():
    return 0.5


track_speedup.unit = "ratio"
"""
# One commit per mode, in this order on main; every other one measured normally.
MODES = ("", "fail", "", "skip", "", "drop", "", "setup_cache", "slow")
A = "bench.Counts.track_a_instructions"


@dataclass
class Gate:
    root: Path
    commits: list[str]
    env: dict[str, str]

    @property
    def config(self) -> Path:
        return self.root / "asv.conf.json"

    def check(self, base: str, head: str, *more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "benchkit.cli", "check", base, head, "--asv-config", str(self.config),
             *more],
            cwd=REPO_ROOT, env=self.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Gate:
    root = tmp_path_factory.mktemp("gate-asv")
    home = root / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    conf = {"version": 1, "project": "gate", "repo": ".", "branches": ["main"],
            "environment_type": "existing", "results_dir": "results", "html_dir": "html",
            "benchmark_dir": "benchmarks"}  # fmt: skip
    (root / "asv.conf.json").write_text(json.dumps(conf))
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "benchmarks" / "bench.py").write_text(SUITE)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    for index, mode in enumerate(MODES):
        message = f"{index}: {mode or 'ok'}"
        subprocess.run(["git", "-C", str(root), "commit", "-q", "--allow-empty", "-m", message],
                       env=env, check=True)  # fmt: skip
    commits = _git(root, "rev-list", "--reverse", "main").split()
    subprocess.run(["asv", "machine", "--yes", "--machine", MACHINE], cwd=root, env=env,
                   capture_output=True, check=True)  # fmt: skip
    for commit, mode in zip(commits, MODES, strict=True):
        run = subprocess.run(
            ["asv", "run", "--python=same", "--set-commit-hash", commit, "--machine", MACHINE,
             "--show-stderr"],
            cwd=root, env={**env, "GATE_MODE": mode}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        output = run.stdout + run.stderr
        assert "bench.track_speedup" in output, output
        if mode == "setup_cache":  # asv's own record of it, which the gate must not read as "no change"
            assert "skipped (setup_cache failed)" in output, output
    return Gate(root, commits, env)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("index", "code", "expected"),
    [
        (2, 0, "✅ no regression"),
        (8, 1, f"| `{A}` | instructions | 1,000 | 1,100 | +10.0% (×1.10) | 0.5% |"),
        (1, 1, f"| `{A}` | instructions | 1,000 | failed | newly failing |"),
        (3, 1, f"| `{A}` | instructions | 1,000 | skipped | newly skipped |"),
        (5, 1, f"| `{A}` | instructions | 1,000 | missing | missing on head |"),
        (7, 2, "- instructions: 2 benchmark(s) have numbers on base, none on head (2 failed)"),
    ],
)
def test_check_exit_codes_through_real_asv_results(gate: Gate, index: int, code: int, expected: str) -> None:
    result = gate.check(gate.commits[0], gate.commits[index])
    assert result.returncode == code, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
    if code == 2:
        assert f"benchkit check: could not compare: {expected[2:]}" in result.stderr
    else:
        assert not result.stderr


@pytest.mark.slow
def test_check_judges_the_selection_and_writes_json(gate: Gate, tmp_path: Path) -> None:
    """-b: benchmarks outside the selection are not "missing on head"; a selected one still is."""
    out = tmp_path / "verdict.json"
    dropped = gate.commits[5]  # A is gone on head
    others = gate.check(gate.commits[4], dropped, "-b", "track_b|track_speedup", "--json", str(out))
    assert others.returncode == 0, others.stdout + others.stderr
    data = json.loads(out.read_text())
    assert data["exit_code"] == 0 and data["exit_reason"].startswith("every metric compared")
    assert {c["name"] for c in data["comparisons"]} == {
        "bench.Counts.track_b_instructions",
        "bench.track_speedup",
    }
    assert all(c["verdict"] == "unchanged" and c["note"] == "" for c in data["comparisons"]), data
    # Counts have a threshold; a speedup ratio's is 0: its noise (MDC) alone decides.
    thresholds = {c["metric"]: c["threshold"] for c in data["comparisons"]}
    assert thresholds["instructions"] > 0 and thresholds["ratio"] == 0, thresholds
    selected = gate.check(gate.commits[4], dropped, "-b", "track_a", "--json", str(out))
    # fails closed: the selected A lost its number (and with it the whole metric: exit 2 wins)
    assert selected.returncode == 2 and "missing on head" in selected.stdout, selected.stdout
    [row] = json.loads(out.read_text())["comparisons"]
    assert (row["name"], row["verdict"], row["head"]) == (A, "missing on head", None)
    nothing = gate.check(gate.commits[4], dropped, "-b", "no-such-benchmark")
    assert nothing.returncode == 2 and "nothing matched" in nothing.stderr


@pytest.mark.slow
def test_regressions_take_the_selection_too(gate: Gate, tmp_path: Path) -> None:
    def regressions(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "benchkit.cli", "regressions", "--asv-config", str(gate.config), *more],
            cwd=REPO_ROOT, env=gate.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    out = tmp_path / "steps.json"
    everything = regressions("--json", str(out))
    assert everything.returncode == 0, everything.stderr
    assert A in {s["name"] for s in json.loads(out.read_text())["steps"]}, everything.stdout
    only_b = regressions("-b", "track_b", "--json", str(out))
    assert only_b.returncode == 0, only_b.stderr
    assert A not in {s["name"] for s in json.loads(out.read_text())["steps"]}
    nothing = regressions("-b", "no-such-benchmark")
    assert nothing.returncode == 2 and "nothing matched" in nothing.stderr, nothing.stderr


def test_changes_page_shows_numbers_lost_on_head(gate: Gate) -> None:
    pages, _ = site_render.render_pages(site_data.load_site_data(gate.config))
    text = pages["changes.html"]
    pretty = html.escape("<b>A</b> & co")
    assert "<b>A</b>" not in text and pretty in text

    def section(base: int, head: int) -> str:
        anchor = f'id="pair-{MACHINE}-main-{gate.commits[base][:8]}-{gate.commits[head][:8]}"'
        assert anchor in text
        return text[text.index(anchor) :].split("</section>", 1)[0]

    for head, status in ((1, "newly failing"), (3, "newly skipped"), (5, "missing on head")):
        part = section(head - 1, head)
        assert f'<p class="counts">1 {status} ' in part, part
        assert f'<tr class="{status.replace(" ", "-")}"><td>{status}</td>' in part and pretty in part
    incomplete = section(6, 7)
    assert '<p class="counts">2 newly failing ' in incomplete
    assert "<li>instructions: 2 benchmark(s) have numbers on base, none on head (2 failed)</li>" in incomplete
