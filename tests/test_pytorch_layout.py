"""Definitions in PyTorch's instruction_counts layout load unchanged, for each generation of
its API, with the labels PyTorch's flatten() gives (fixtures: tests/data/pytorch_instruction_counts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.define.loader import load_cases, load_definitions
from benchkit.errors import UserError

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "data" / "pytorch_instruction_counts"

# The labels PyTorch's flatten() gives each fixture: tuple keys joined, None adding nothing.
LABELS = {
    "gen2021": {
        ("arith", "neg"),
        ("arith", "mul"),
        ("views", "slicing", "[1]"),
        ("views", "slicing", "[:, 0]"),
        ("module", "Tanh"),
        ("two sides",),
    },
    "jit": {
        ("arith",),
        ("arith", "scripted"),
        ("module",),
        ("variants", "abs"),
        ("variants", "sign"),
        ("paired",),
    },
    "current": {
        ("arith",),
        ("module",),
        ("variants", "setup blocks", "floor"),
        ("variants", "setup blocks", "ceil"),
        ("C++ only", "numel"),
    },
}


def _standard(generation: str) -> Path:
    return FIXTURES / generation / "instruction_counts" / "definitions" / "standard.py"


@pytest.mark.parametrize("generation", sorted(LABELS))
def test_each_generation_loads_with_pytorchs_labels(generation: str) -> None:
    cases = load_cases([str(_standard(generation))], standard=False)
    assert {case.label for case in cases} == LABELS[generation]
    # The checkout's own packages were never imported, and nothing of the load is left behind.
    assert not any(name.split(".")[0] in ("core", "definitions", "worker") for name in sys.modules)


def test_the_folder_itself_names_its_standard_module() -> None:
    folder = _standard("current").parent.parent
    assert {c.label for c in load_cases([str(folder)], standard=False)} == LABELS["current"]


def test_torchscript_and_cpp_only_groups_expand_like_pytorchs() -> None:
    jit = load_cases([str(_standard("jit"))], standard=False)
    scripted = {(c.label, c.autolabels.as_dict["runtime"], c.autolabels.as_dict["language"]) for c in jit}
    assert (("arith", "scripted"), "TorchScript", "C++") in scripted
    assert (("arith",), "TorchScript", "Python") not in scripted  # no signature: no TorchScript variant
    current = load_cases([str(_standard("current"))], standard=False)
    (numel,) = [c for c in current if c.label == ("C++ only", "numel")]
    assert numel.autolabels.as_dict["language"] == "C++"
    (floor_cpp,) = [
        c for c in current if c.label[-1] == "floor" and c.autolabels.as_dict["language"] == "C++"
    ]
    assert "#include <cmath>" in floor_cpp.timer_args.global_setup
    assert "torch::ones({2, 2})" in floor_cpp.timer_args.setup


def test_two_checkouts_side_by_side_and_an_ordinary_module(tmp_path: Path) -> None:
    mine = tmp_path / "mine.py"
    mine.write_text(
        "from benchkit import GroupedSetup, GroupedStmts\n"
        "BENCHMARKS = {'own': {'abs': GroupedStmts('x.abs()', setup=GroupedSetup('x = torch.ones(2)'))}}\n"
    )
    merged = load_definitions([str(_standard("gen2021")), str(mine)], standard=False)
    assert ("arith", "neg") in merged and "own" in merged


def test_errors_name_the_file(tmp_path: Path) -> None:
    root = tmp_path / "instruction_counts"
    (root / "definitions").mkdir(parents=True)
    (root / "core").mkdir()
    broken = root / "definitions" / "standard.py"
    broken.write_text("from core.api import NoSuchThing\nBENCHMARKS = {}\n")
    with pytest.raises(UserError, match=r"standard\.py: loading the definitions failed: ImportError"):
        load_definitions([str(broken)], standard=False)
    with pytest.raises(UserError, match="is a folder"):
        load_definitions([str(tmp_path)], standard=False)


def test_cli_lists_a_checkout_unchanged() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchkit.cli",
            "list",
            "--no-standard",
            "--definitions",
            str(_standard("jit")),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "16 case(s)" in done.stdout + done.stderr
    assert "variants/sign" in done.stdout


@pytest.mark.slow
def test_counts_and_asv_measure_a_checkouts_cases(tmp_path: Path) -> None:
    """Real valgrind counts through `benchkit counts`, and real asv wall time, for cases of
    the current-generation fixture."""
    env = dict(os.environ, BENCHKIT_CACHE_DIR=str(tmp_path / "cache"), BENCHKIT_STANDARD="0")
    out = tmp_path / "counts.json"
    cases = "^(arith|C\\+\\+ only/numel) "
    command = ["counts", "--definitions", str(_standard("current")), "--filter", cases, "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "benchkit.cli", *command],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    counts = json.loads(out.read_text())
    assert len(counts) == 3 and all(entry["instructions"] > 0 for entry in counts.values())
    selection = "instruction_counts.arith.*time_wall"
    asv = subprocess.run(
        ["asv", "run", "--python=same", "--quick", "--show-stderr", "-b", selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(env, BENCHKIT_DEFINITIONS=str(_standard("current"))),
        timeout=1800,
    )
    assert asv.returncode == 0, asv.stdout[-3000:]
    assert asv.stdout.count("time_wall") >= 2 and "failed" not in asv.stdout
