"""`benchkit check`: judging asv results written with asv's own Results API."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from asv import util as asv_util
from support.check_project import BASE, HEAD, Project

from benchkit.errors import UserError
from benchkit.report.gate import check, check_config
from benchkit.report.gate.check_types import Verdict

REPO_ROOT = Path(__file__).resolve().parent.parent
ROUNDS, PER_ROUND = 8, 3  # asv rounds a side (at least MIN_ROUNDS: the rounds test) and samples in each


def _samples(center: float, spread: float, n: int = 10, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def _statuses(verdict: Verdict) -> dict[str, str]:
    return {c.name: c.status for c in verdict.comparisons}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def test_instruction_counts_use_a_tight_threshold(project: Project) -> None:
    project.bench("ic.Add.track_instructions", "instructions")
    project.bench("ic.Mul.track_instructions", "instructions")
    project.add(BASE, "ic.Add.track_instructions", [1_000_000])
    project.add(HEAD, "ic.Add.track_instructions", [1_010_000])  # +1%
    project.add(BASE, "ic.Mul.track_instructions", [2_000_000])
    project.add(HEAD, "ic.Mul.track_instructions", [2_006_000])  # +0.3%
    verdict = project.check()
    assert verdict.exit_code == 1
    assert _statuses(verdict) == {
        "ic.Add.track_instructions": "regression",
        "ic.Mul.track_instructions": "unchanged",
    }
    row = next(line for line in verdict.markdown.splitlines() if "ic.Add" in line)
    assert "1,000,000 | 1,010,000 | +1.0% (×1.01) | 0.5%" in row
    assert "#### Regressions" in verdict.markdown and "**1 regression**" in verdict.markdown


def _rounds(center: float, spread: float, seed: int = 0) -> list[float]:
    """`ROUNDS` rounds of `PER_ROUND` samples, round after round as asv records them."""
    return _samples(center, spread, n=ROUNDS * PER_ROUND, seed=seed)


def test_wall_time_is_judged_by_its_rounds_and_the_factor(project: Project) -> None:
    for name in ("slower", "noisy", "small", "faster"):
        project.bench(f"wt.{name}.time_it", "seconds", repeat=PER_ROUND)
    cases = {  # name: (base samples, head samples)
        "slower": (_rounds(1e-5, 0.02), _rounds(1.5e-5, 0.02, seed=1)),
        "noisy": (_rounds(1e-5, 0.9), _rounds(1.5e-5, 0.9, seed=1)),  # 1.5x, rounds this spread hide it
        "small": (_rounds(1e-5, 0.01), _rounds(1.05e-5, 0.01, seed=1)),  # significant but under ×1.10
        "faster": (_rounds(2e-5, 0.02), _rounds(1e-5, 0.02, seed=1)),
    }
    for name, (before, after) in cases.items():
        project.add(BASE, f"wt.{name}.time_it", [sorted(before)[12]], [before])
        project.add(HEAD, f"wt.{name}.time_it", [sorted(after)[12]], [after])
    # By default each wall time's threshold is its own noise (MDC): +5% with 1% noise is seen.
    verdict = project.check()
    assert _statuses(verdict) == {
        "wt.slower.time_it": "regression",
        "wt.noisy.time_it": "can't tell",
        "wt.small.time_it": "regression",
        "wt.faster.time_it": "improvement",
    }
    assert verdict.exit_code == 1
    noisy = next(c for c in verdict.comparisons if c.name == "wt.noisy.time_it")
    small = next(c for c in verdict.comparisons if c.name == "wt.small.time_it")
    assert small.mdc is not None and small.mdc < 0.05 and small.threshold == small.mdc
    assert small.noise is not None and small.noise.rounds == f"{ROUNDS}+{ROUNDS}"
    assert "MDC ±" in noisy.note and noisy.mdc is not None and noisy.mdc > 0.5
    # A fixed factor overrides the noise: +5% is real, but under ×1.10.
    fixed = {c.name: c for c in project.check(factor=1.10).comparisons}
    assert fixed["wt.small.time_it"].status == "unchanged"
    assert fixed["wt.small.time_it"].note == "below the threshold but beyond noise"
    # One factor for wall time only: 2.0 lets the 1.5x slowdown pass.
    assert project.check(factor=2.0).exit_code == 0


def test_wall_time_with_too_few_rounds_and_no_history_is_insufficient_data(project: Project) -> None:
    """Two rounds a side and no history: the samples of two processes cannot show the noise
    between processes, so a change within the threshold is not called unchanged, and one
    beyond it fails the gate with the noise unknown."""
    for name in ("steady", "slower"):
        project.bench(f"wt.{name}.time_it", "seconds", repeat=PER_ROUND)
    cases = {
        "steady": (_samples(1e-5, 0.01, n=2 * PER_ROUND), _samples(1.0e-5, 0.01, n=2 * PER_ROUND, seed=1)),
        "slower": (_samples(1e-5, 0.01, n=2 * PER_ROUND), _samples(1.5e-5, 0.01, n=2 * PER_ROUND, seed=1)),
    }
    for name, (before, after) in cases.items():
        project.add(BASE, f"wt.{name}.time_it", [sorted(before)[3]], [before])
        project.add(HEAD, f"wt.{name}.time_it", [sorted(after)[3]], [after])
    verdict = project.check()
    by_name = {c.name: c for c in verdict.comparisons}
    steady, slower = by_name["wt.steady.time_it"], by_name["wt.slower.time_it"]
    assert steady.status == "insufficient data"
    assert steady.noise is not None
    assert steady.noise.basis == "fewer than 7 rounds a side and under 4 history pairs"
    assert slower.status == "regression" and "noise unknown" in slower.note
    assert verdict.exit_code == 1
    # No noise to test against: the threshold column shows the fallback factor alone.
    row = next(line for line in verdict.markdown.splitlines() if "`wt.steady.time_it`" in line)
    assert "| ×1.10 |" in row, row


def test_a_seconds_figure_without_samples_is_not_told_it_lacks_rounds(project: Project) -> None:
    """One number per build (an operator's eager seconds): no rounds could ever be there, so
    the note names the missing history alone."""
    project.bench("ops.relu.track_eager_seconds", "seconds")
    project.add(BASE, "ops.relu.track_eager_seconds", [1.0e-5])
    project.add(HEAD, "ops.relu.track_eager_seconds", [1.01e-5])
    [only] = project.check().comparisons
    assert only.status == "insufficient data" and only.noise is not None
    assert only.noise.basis == "under 4 history pairs"


def test_operator_ratios_use_a_relative_threshold(project: Project) -> None:
    project.bench("ops.add.track_speedup", "ratio")
    project.bench("ops.mul.track_speedup", "ratio")
    project.add(BASE, "ops.add.track_speedup", [0.50])
    project.add(HEAD, "ops.add.track_speedup", [0.57])  # +14%
    project.add(BASE, "ops.mul.track_speedup", [0.50])
    project.add(HEAD, "ops.mul.track_speedup", [0.52])  # +4%
    verdict = project.check()
    # Two commits give no history to estimate a ratio's noise: +4% is not "unchanged" but unknown.
    assert _statuses(verdict) == {
        "ops.add.track_speedup": "regression",
        "ops.mul.track_speedup": "insufficient data",
    }
    assert all(c.metric == "ratio" for c in verdict.comparisons)


def test_failures_are_listed_and_never_hide_the_rest(project: Project) -> None:
    for name in ("breaks", "broken", "mended", "fine"):
        project.bench(f"f.{name}.track_instructions", "instructions")
    project.add(BASE, "f.breaks.track_instructions", [100.0])
    project.add(HEAD, "f.breaks.track_instructions", [None])
    project.add(BASE, "f.broken.track_instructions", [None])
    project.add(HEAD, "f.broken.track_instructions", [None])
    project.add(BASE, "f.mended.track_instructions", [None])
    project.add(HEAD, "f.mended.track_instructions", [100.0])
    project.add(BASE, "f.fine.track_instructions", [100.0])
    project.add(HEAD, "f.fine.track_instructions", [200.0])
    verdict = project.check()
    assert _statuses(verdict) == {
        "f.breaks.track_instructions": "newly failing",
        "f.broken.track_instructions": "still failing",
        "f.mended.track_instructions": "fixed",
        "f.fine.track_instructions": "regression",
    }
    assert verdict.exit_code == 1
    lost = verdict.markdown.split("#### Measured on base, no number on head")[1].split("####")[0]
    assert "f.breaks" in lost and "newly failing" in lost and "f.broken" not in lost
    assert "f.broken" in verdict.markdown.split("#### Still failing")[1].split("####")[0]


def test_failing_on_both_alone_is_not_a_regression(project: Project) -> None:
    project.bench("f.broken.track_instructions", "instructions")
    project.bench("f.fine.track_instructions", "instructions")
    project.add(BASE, "f.broken.track_instructions", [None])
    project.add(HEAD, "f.broken.track_instructions", [None])
    project.add(BASE, "f.fine.track_instructions", [100.0])
    project.add(HEAD, "f.fine.track_instructions", [100.0])
    verdict = project.check()
    assert verdict.exit_code == 0
    assert "1 still failing" in verdict.markdown and "#### Still failing" in verdict.markdown


def test_parameterized_benchmarks_are_compared_per_parameter(project: Project) -> None:
    project.bench("p.track_instructions", "instructions", params=[["1", "2"]])
    project.add(BASE, "p.track_instructions", [100.0, 100.0])
    project.add(HEAD, "p.track_instructions", [100.0, 150.0])
    verdict = project.check()
    assert _statuses(verdict) == {
        "p.track_instructions(1)": "unchanged",
        "p.track_instructions(2)": "regression",
    }


def test_changed_benchmark_code_is_not_compared(project: Project) -> None:
    project.bench("c.track_instructions", "instructions")
    project.bench("d.track_instructions", "instructions")
    project.add(BASE, "c.track_instructions", [100.0], version="v1")
    project.add(HEAD, "c.track_instructions", [200.0], version="v2")
    project.add(BASE, "d.track_instructions", [100.0])
    project.add(HEAD, "d.track_instructions", [100.0])
    verdict = project.check()
    assert _statuses(verdict)["c.track_instructions"] == "not compared"
    assert verdict.exit_code == 0 and "benchmark code changed" in verdict.markdown


def test_reviewed_overrides_by_regex(project: Project) -> None:
    for name in ("Noisy", "Flaky", "Plain"):
        project.bench(f"ic.{name}.track_instructions", "instructions")
        project.add(BASE, f"ic.{name}.track_instructions", [1000.0])
        project.add(HEAD, f"ic.{name}.track_instructions", [1030.0])  # +3% everywhere
    (project.root / "benchkit-check.toml").write_text(
        """
[thresholds]
instructions = 0.01

[[override]]
match = 'ic\\.Noisy\\.'
threshold = 0.05
reason = "allocator-dependent counts"

[[override]]
match = "Flaky"
ignore = true
reason = "tracked in issue 12"
"""
    )
    verdict = project.check()  # the config beside asv.conf.json is found by default
    assert _statuses(verdict) == {
        "ic.Noisy.track_instructions": "unchanged",
        "ic.Flaky.track_instructions": "ignored",
        "ic.Plain.track_instructions": "regression",
    }
    assert "tracked in issue 12" in verdict.markdown
    assert "benchkit-check.toml" in verdict.markdown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[override]]\nmatch = "("\nreason = "x"\n', r"override #1: invalid regular expression '\('"),
        ('[[override]]\nmatch = "a"\n', r"override #1 \('a'\): needs a reason"),
        ("[thresholds]\ncycles = 0.1\n", r"\[thresholds\] cycles: unknown metric"),
        ("[thresholds]\ninstructions = 'tight'\n", r"threshold must be a number"),
        ("[gate]\nx = 1\n", r"unknown setting\(s\) gate"),
        ("not toml at all [", r"invalid TOML"),
    ],
)
def test_config_mistakes_name_file_and_entry(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "benchkit-check.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as info:
        check_config.load_check_config(path)
    assert str(path) in str(info.value)


def test_json_config_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({"thresholds": {"ratio": 0.2}, "override": [{"match": "x", "reason": "r"}]}))
    config = check_config.load_check_config(path)
    assert config.thresholds["ratio"] == 0.2 and config.overrides[0].reason == "r"


def test_could_not_compare_cases(project: Project, tmp_path: Path) -> None:
    project.bench("a.track_instructions", "instructions")
    project.add(BASE, "a.track_instructions", [1.0])
    with pytest.raises(
        UserError, match=r"'bbbb2222' is neither a name in the history .* nor a commit with results"
    ):
        project.check()
    project.add(HEAD, "a.track_instructions", [1.0], machine="other")
    with pytest.raises(UserError, match=r"results of several machines \(box, other\).*--machine"):
        project.check()
    with pytest.raises(UserError, match=r"no results for 'bbbb2222'|neither a name"):
        project.check(machine="box")
    with pytest.raises(UserError, match=r"asv config .* not found"):
        check.run_check(BASE, HEAD, asv_config=tmp_path / "nope.json")


def test_cli_exit_codes_and_markdown_file(project: Project) -> None:
    project.bench("ic.Add.track_instructions", "instructions")
    project.add(BASE, "ic.Add.track_instructions", [1000.0])
    project.add(HEAD, "ic.Add.track_instructions", [1100.0])
    project.save()
    out = project.root / "report.md"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "benchkit.cli",
                "check",
                *args,
                "--asv-config",
                str(project.root / "asv.conf.json"),
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )

    regression = run(BASE[:8], HEAD[:8], "--markdown", str(out))
    assert regression.returncode == 1, regression.stderr
    assert "| `ic.Add.track_instructions`" in regression.stdout
    assert out.read_text() == regression.stdout
    assert run(BASE[:8], BASE[:8]).returncode == 0
    missing = run(BASE[:8], "cccc")
    assert missing.returncode == 2
    assert missing.stderr.startswith("benchkit check: error: 'cccc' is neither a name") and not missing.stdout


def test_repository_config_is_valid_and_applies() -> None:
    config = check_config.load_check_config(REPO_ROOT / "benchkit-check.toml")
    assert config.thresholds == check_config.DEFAULT_THRESHOLDS
    metric, threshold, override = config.rule_for("operators.AtenAdd.track_compile_seconds(x)", "wall_time")
    assert (metric, threshold) == ("wall_time", 0.5) and override is not None
    assert config.rule_for("instruction_counts.X.track_instructions", "instructions")[1:] == (0.005, None)


def test_metric_from_the_name_when_benchmarks_json_lacks_the_benchmark(project: Project) -> None:
    project.bench("ic.Add.track_instructions", "instructions")
    project.add(BASE, "ic.Add.track_instructions", [1000.0])
    project.add(HEAD, "ic.Add.track_instructions", [1020.0])  # +2%: a regression for instructions only
    project.save()
    asv_util.write_json(
        str(project.results / "benchmarks.json"), {}, api_version=2
    )  # e.g. after `asv run -b other`
    verdict = check.run_check(BASE[:8], HEAD[:8], asv_config=project.root / "asv.conf.json")
    [comparison] = verdict.comparisons
    assert (comparison.metric, comparison.status) == ("instructions", "regression")


def _cli(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    project.save()
    return subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "check", BASE[:8], HEAD[:8], *args,
         "--asv-config", str(project.root / "asv.conf.json")],
        cwd=REPO_ROOT, capture_output=True, text=True,
    )  # fmt: skip


def test_a_clean_pair_passes_with_every_metric(project: Project) -> None:
    project.bench("ic.Add.track_instructions", "instructions")
    project.bench("wt.Add.time_it", "seconds", repeat=PER_ROUND)
    project.bench("ops.add.track_speedup", "ratio")
    for commit, seed in ((BASE, 0), (HEAD, 1)):
        project.add(commit, "ic.Add.track_instructions", [1_000_000])
        samples = _rounds(1e-5, 0.02, seed=seed)
        project.add(commit, "wt.Add.time_it", [sorted(samples)[12]], [samples])
        project.add(commit, "ops.add.track_speedup", [0.5])
    verdict = project.check()
    assert (verdict.exit_code, verdict.problems) == (0, ())
    statuses = _statuses(verdict)
    assert statuses.pop("ops.add.track_speedup") == "insufficient data"  # no history for a ratio's noise
    assert set(statuses.values()) == {"unchanged"}
    assert "✅ no regression found" in verdict.markdown
    assert (
        "**0 regressions**, 0 newly failing, 0 newly skipped, 0 missing on head, 2 unchanged, "
        "0 can't tell, 1 insufficient data"
    ) in verdict.markdown


@pytest.mark.parametrize(
    ("head_value", "status", "shown"),
    [("absent", "missing on head", "missing"), (math.nan, "newly skipped", "skipped"),
     (None, "newly failing", "failed")],
)  # fmt: skip
def test_head_losing_a_number_base_had_fails_the_gate(
    project: Project, head_value: float | str | None, status: str, shown: str
) -> None:
    for name in ("Lost", "Kept"):
        project.bench(f"ic.{name}.track_instructions", "instructions")
        project.add(BASE, f"ic.{name}.track_instructions", [1000.0])
    project.add(HEAD, "ic.Kept.track_instructions", [1000.0])
    if head_value != "absent":
        assert not isinstance(head_value, str)
        project.add(HEAD, "ic.Lost.track_instructions", [head_value])
    verdict = project.check()
    assert _statuses(verdict) == {
        "ic.Lost.track_instructions": status,
        "ic.Kept.track_instructions": "unchanged",
    }
    assert (verdict.exit_code, verdict.problems) == (1, ())
    assert "❌ fails" in verdict.markdown and f", 1 {status}," in verdict.markdown
    lost = verdict.markdown.split("#### Measured on base, no number on head")[1]
    assert f"| `ic.Lost.track_instructions` | instructions | 1,000 | {shown} | {status} |" in lost
    cli = _cli(project)
    assert cli.returncode == 1 and not cli.stderr, cli.stderr


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("head failed", "instructions: 2 benchmark(s) have numbers on base, none on head (2 failed)"),
        (
            "head lacks",
            "instructions: 2 benchmark(s) have numbers on base, none on head (2 without a result)",
        ),
        (
            "base lacks",
            "instructions: 2 benchmark(s) have numbers on head, none on base (2 without a result)",
        ),
    ],
)
def test_a_metric_with_numbers_on_one_side_only_cannot_be_compared(
    project: Project, case: str, reason: str
) -> None:
    """No valgrind, a failed setup_cache: the whole metric has no numbers on one side -> exit 2."""
    names = ("ic.Add.track_instructions", "ic.Mul.track_instructions")
    for name in names:
        project.bench(name, "instructions")
    project.bench("ops.add.track_speedup", "ratio")
    for commit in (BASE, HEAD):
        project.add(commit, "ops.add.track_speedup", [0.5])  # another metric compares fine
    measured, other = (HEAD, BASE) if case == "base lacks" else (BASE, HEAD)
    for name in names:
        project.add(measured, name, [1000.0])
        if case == "head failed":  # as asv records a failed setup_cache: every benchmark failed
            project.add(other, name, [None])
    verdict = project.check()
    assert verdict.exit_code == 2
    assert verdict.problems == (reason,)
    assert "⚠️ could not compare everything" in verdict.markdown and f"- {reason}" in verdict.markdown
    cli = _cli(project)
    assert cli.returncode == 2, cli.stdout + cli.stderr
    assert f"benchkit check: could not compare: {reason}\n" in cli.stderr
    assert "### benchkit check" in cli.stdout  # the table still shows what there is


def test_a_metric_failing_on_both_sides_cannot_be_compared(project: Project) -> None:
    """Issue 15: every operator benchmark failed in both builds and the gate passed."""
    for name in ("ops.add.track_speedup", "ops.mul.track_speedup"):
        project.bench(name, "ratio")
        project.add(BASE, name, [None])
        project.add(HEAD, name, [None])
    project.bench("ic.Add.track_instructions", "instructions")
    project.add(BASE, "ic.Add.track_instructions", [1000.0])
    project.add(HEAD, "ic.Add.track_instructions", [1000.0])
    verdict = project.check()
    assert verdict.exit_code == 2
    assert verdict.problems == (
        "ratio: no numbers on either side for 2 benchmark(s) (base: 2 failed; head: 2 failed)",
    )
    # Reviewed away, the same pair passes: ignored benchmarks are not counted.
    (project.root / "benchkit-check.toml").write_text(
        '[[override]]\nmatch = "^ops\\\\."\nignore = true\nreason = "operators broken on this runner"\n'
    )
    assert project.check().exit_code == 0


def test_nothing_to_compare_is_exit_2(project: Project) -> None:
    project.bench("c.track_instructions", "instructions")
    project.add(BASE, "c.track_instructions", [100.0], version="v1")
    project.add(HEAD, "c.track_instructions", [100.0], version="v2")
    verdict = project.check()
    assert _statuses(verdict) == {"c.track_instructions": "not compared"}
    assert verdict.exit_code == 2
    assert verdict.problems == ("no benchmark has numbers on both sides to compare",)


def test_configured_thresholds_change_verdicts(project: Project) -> None:
    project.bench("ic.Add.track_instructions", "instructions")
    project.bench("ops.add.track_speedup", "ratio")
    project.add(BASE, "ic.Add.track_instructions", [1000.0])
    project.add(HEAD, "ic.Add.track_instructions", [1010.0])  # +1%
    project.add(BASE, "ops.add.track_speedup", [0.50])
    project.add(HEAD, "ops.add.track_speedup", [0.54])  # +8%
    defaults = project.check()
    assert _statuses(defaults) == {
        "ic.Add.track_instructions": "regression",
        "ops.add.track_speedup": "insufficient data",
    }
    (project.root / "benchkit-check.toml").write_text("[thresholds]\ninstructions = 0.02\nratio = 0.05\n")
    configured = project.check()
    assert _statuses(configured) == {
        "ic.Add.track_instructions": "unchanged",
        "ops.add.track_speedup": "regression",
    }
    row = next(line for line in configured.markdown.splitlines() if "ops.add" in line)
    assert "| +8.0% (×1.08) | 5% |" in row
    assert configured.exit_code == 1


def test_override_metric_key_changes_the_rule(project: Project) -> None:
    project.bench("mem.Peak.track_allocations", "count")  # any other unit: the ratio rule (10%)
    project.add(BASE, "mem.Peak.track_allocations", [1000.0])
    project.add(HEAD, "mem.Peak.track_allocations", [1030.0])  # +3%
    [plain] = project.check().comparisons
    assert (plain.metric, plain.status) == ("ratio", "insufficient data")
    config = project.root / "benchkit-check.toml"
    config.write_text(
        '[[override]]\nmatch = "track_allocations$"\nmetric = "instructions"\n'
        'reason = "allocation counts are deterministic"\n'
    )
    verdict = project.check()
    [judged] = verdict.comparisons
    assert (judged.metric, judged.status, judged.threshold) == ("instructions", "regression", 0.005)
    row = next(line for line in verdict.markdown.splitlines() if "mem.Peak" in line)
    assert "| instructions |" in row and "| 0.5% |" in row and "allocation counts are deterministic" in row
    # The override takes its metric's configured threshold unless it sets its own.
    config.write_text("[thresholds]\ninstructions = 0.05\n" + config.read_text())
    assert _statuses(project.check()) == {"mem.Peak.track_allocations": "unchanged"}
