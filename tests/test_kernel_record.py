"""The generated-kernel record of the operator suite in the report stage: operator figures
judged by their own history's spread over pairs that ran the same kernel, and steps and
changes that say whether the generated kernel changed (`benchkit.report.gate.kernels`)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

import pytest

from benchkit.cli import main
from benchkit.history.results.read import Measurement, ResultSet, load_asv_config, load_history
from benchkit.measure.operators import asv as op_asv
from benchkit.measure.operators.timing import InputMeasurement
from benchkit.report.gate import check, check_config
from benchkit.report.site import pages
from benchkit.report.site.data import Build, SiteData, operator_rows
from lab.histories import ENV, MACHINE, History, commit_hash

OPERATOR = "operators.aten_add_Tensor"
RATIO = f"{OPERATOR}.track_compiled_over_eager('x')"
COMPILED = f"{OPERATOR}.track_compiled_seconds('x')"
EAGER = f"{OPERATOR}.track_eager_seconds('x')"
KERNEL = f"{OPERATOR}.track_kernel_hash('x')"
OLD, NEW = 0x3FA2C1D09B4E, 0x77AB01C2D3E4  # the kernel before and from build NEW_KERNEL on
BUILDS, NEW_KERNEL, SLOWER = 20, 10, 15
UNITS = {
    RATIO: "compiled/eager time (lower is better)",
    COMPILED: "seconds",
    EAGER: "seconds",
    KERNEL: "generated kernel hash (a record)",
}


@pytest.fixture
def history(tmp_path: Path) -> History:
    """20 builds, 1 % noise: a new kernel at build 10 makes the ratio 20 % worse; at build 15
    eager and compiled seconds double with the kernel unchanged; the last build's ratio is
    5 % worse, same kernel."""
    rng = random.Random(7)
    project = History(tmp_path)
    for name, unit in UNITS.items():
        project.bench(name.split("(")[0], unit, params=[["'x'"]])
    for i in range(BUILDS):
        slower = 2.0 if i >= SLOWER else 1.0
        ratio = (0.6 if i >= NEW_KERNEL else 0.5) * (1.08 if i == BUILDS - 1 else 1.0)
        values = {
            RATIO: ratio * math.exp(rng.gauss(0, 0.01)),
            COMPILED: 1e-5 * slower * math.exp(rng.gauss(0, 0.01)),
            EAGER: 2e-5 * slower * math.exp(rng.gauss(0, 0.01)),
            KERNEL: float(NEW if i >= NEW_KERNEL else OLD),
        }
        for name, value in values.items():
            project.add(i, name.split("(")[0], value)
    project.save()
    return project


def _comparisons(project: History, base: int, head: int) -> dict[str, check.Comparison]:
    verdict = check.run_check(commit_hash(base)[:8], commit_hash(head)[:8], asv_config=project.config)
    return {c.name: c for c in verdict.comparisons}


def test_the_gate_says_whether_the_kernel_changed_and_never_compares_the_record(history: History) -> None:
    changed = _comparisons(history, NEW_KERNEL - 1, NEW_KERNEL)
    assert changed[RATIO].status == "regression"
    assert changed[RATIO].note.endswith("generated kernel changed (3fa2c1d09b4e → 77ab01c2d3e4)")
    assert changed[KERNEL].status == "not compared"
    assert (
        changed[KERNEL].note == "the generated kernel's hash (3fa2c1d09b4e → 77ab01c2d3e4), not performance"
    )
    assert "kernel" not in changed[EAGER].note  # eager time runs no generated kernel
    same = _comparisons(history, SLOWER - 1, SLOWER)
    assert same[COMPILED].status == "regression" and same[COMPILED].note.endswith("same generated kernel")


def test_a_record_the_torch_build_could_not_make_is_no_failure() -> None:
    """A build whose torch passed benchkit no output code records 0: not compared, no note, and
    never a lost number (the timing process writes 0, not NaN, which asv reads as skipped)."""
    none = op_asv._kernel_fields(InputMeasurement("aten.add.Tensor", "x", "f:1", 1.0, (1.0,)))
    assert (none["kernel_hash"], none["kernel"]) == (0.0, None)
    base = ResultSet("a" * 40, MACHINE, {(KERNEL, ENV): Measurement(float(OLD), None, None, "v1")})
    head = ResultSet("b" * 40, MACHINE, {(KERNEL, ENV): Measurement(none["kernel_hash"], None, None, "v1")})
    config = check_config.parse_check_config({}, "defaults")
    units = {key.split("(")[0]: unit for key, unit in UNITS.items()}
    ratio = {(RATIO, ENV): Measurement(0.5, None, None, "v1")}
    compared = check.compare(
        dataclasses.replace(base, measurements={**base.measurements, **ratio}),
        dataclasses.replace(head, measurements={**head.measurements, **ratio}),
        units,
        config,
    )
    by_name = {c.name: c for c in compared}
    assert by_name[KERNEL].status == "not compared"
    assert "(3fa2c1d09b4e → not recorded)" in by_name[KERNEL].note
    assert "kernel" not in by_name[RATIO].note


def test_an_operator_ratio_is_judged_by_its_history_over_pairs_of_the_same_kernel(history: History) -> None:
    """1 % noise: the ratio's threshold is its own MDC (a few percent: a t-test on 18 pairs'
    spread), so +8 % on the last build is a regression, where a fixed 10 % would have called it
    unchanged; the pair whose kernel
    changed (a real +20 %) is no A/A pair for the noise."""
    last = _comparisons(history, BUILDS - 2, BUILDS - 1)[RATIO]
    assert last.status == "regression", last.note
    assert last.mdc is not None and last.mdc < 0.08 and last.threshold == last.mdc
    assert last.noise is not None and last.noise.basis == f"history: {BUILDS - 2} pairs"
    fixed = check_config.parse_check_config({"thresholds": {"ratio": 0.10}}, "fixed")
    loaded = load_history(load_asv_config(history.config), MACHINE)
    noise = check.history_noise(loaded, UNITS, fixed)
    assert noise[(RATIO, ENV)].pairs == BUILDS - 2  # of 19: the new kernel's pair left out
    assert noise[(EAGER, ENV)].pairs == BUILDS - 1  # eager runs no generated kernel: every pair


def test_steps_say_whether_the_kernel_changed_in_text_json_and_on_the_site(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "steps.json"
    assert main(["regressions", "--asv-config", str(history.config), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    steps = json.loads(out.read_text())
    labels = {(s["name"], s["position"]): s["shown_label"] for s in steps["steps"]}
    assert labels[(RATIO, NEW_KERNEL)] == "kernel changed"
    assert labels[(COMPILED, SLOWER)] == "same kernel"
    assert labels[(EAGER, SLOWER)] == "-"  # eager seconds: no kernel to label by
    assert not [s for s in steps["steps"] if s["name"] == KERNEL]  # the record makes no steps
    assert steps["labels"]["kernel changed"].startswith("an operator figure stepped where")
    ratio_row = next(line for line in text.splitlines() if RATIO in line)
    assert ratio_row.rstrip().endswith("kernel changed")
    assert "#   same kernel: an operator figure stepped while" in text
    # The site's Regressions page: the same label, its meaning on hover and in the legend.
    loaded = load_history(load_asv_config(history.config), MACHINE)
    commits = tuple(r.commit for r in loaded)
    data = SiteData(
        conf=None,
        machines=(MACHINE,),
        builds={c: Build(c, i, 1_700_000_000 + i, "2.13.0", c) for i, c in enumerate(commits)},
        results={(MACHINE, r.commit): r for r in loaded},
        branch_commits={(MACHINE, "main"): commits},
        benchmarks={},
        config=check_config.parse_check_config({}, "built-in defaults"),
        env_count=1,
    )
    page = pages.render_regressions(data, pages.regression_sections(data))["regressions.html"]
    assert '<td class="label" title="an operator figure stepped where inductor' in page
    assert ">kernel changed</td>" in page and "<dt>same kernel</dt>" in page
    # The Operators page reads results that hold the record.
    [row] = operator_rows(loaded[0], {})
    assert (row.operator, row.device) == ("aten.add.Tensor", "cpu")
