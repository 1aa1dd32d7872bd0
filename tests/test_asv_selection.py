"""Which benchmarks an asv command selected, as `setup_cache` sees it (benchkit.measure.selection)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.measure import selection as asv_selection
from benchkit.measure.operators.asv import selected_operators


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/usr/bin/python3", "-m", "asv", "run", "-b", "x"], ["run", "-b", "x"]),
        (["/venv/bin/asv", "continuous", "main", "HEAD"], ["continuous", "main", "HEAD"]),
        (["python3", "/venv/bin/asv", "run"], ["run"]),
        (["python3", "-m", "benchkit", "main"], None),
        (["python3", "script.py", "asv"], None),  # an argument named asv is not the command
    ],
)
def test_asv_arguments_from_a_command_line(argv: list[str], expected: list[str] | None) -> None:
    assert asv_selection.asv_arguments(argv) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["run", "-b", "Linear", "--bench", "ReLU$", "HEAD^!"], ("Linear", "ReLU$")),
        (["continuous", "-b", "Pointwise", "main", "HEAD"], ("Pointwise",)),
        (["run", "--python=same", "--bench=time_wall"], ("time_wall",)),
        (["run", "ALL"], None),  # no -b: the whole suite
        (["run", "--no-such-option"], None),  # asv would refuse it: do not guess
        (["run", "-b", "("], None),  # not a regex
        (["publish"], None),
    ],
)
def test_bench_regexes_parsed_with_asvs_own_parser(
    arguments: list[str], expected: tuple[str, ...] | None
) -> None:
    assert asv_selection.parse_regexes(arguments) == expected


def test_matching_follows_asv_including_parameters() -> None:
    names = ["ic.A_t1.time_wall", "ic.A_t1.track_instructions", "ic.B_t1.time_wall"]
    assert asv_selection.selected(names, None) == set(names)
    assert asv_selection.selected(names, ["A_t1"]) == set(names[:2])
    assert asv_selection.selected(names, ["^ic\\.B", "track_"]) == {names[1], names[2]}
    named = asv_selection.benchmark_name("op.Relu.track_x", ("T([4], f32)",))
    assert named == "op.Relu.track_x('T([4], f32)')"


def test_cpp_layout_is_the_same_whichever_metric_is_selected() -> None:
    key_of_class = {"ic.AddCpp_h1": "k-add", "ic.MulCpp_h2": "k-mul", "ic.AddCppTwin_h3": "k-add"}
    layout = asv_selection.cpp_layout_keys
    assert layout(key_of_class, None) is None  # whole suite
    assert layout(key_of_class, ["AddCpp_h1.time_wall"]) == ["k-add"]
    assert layout(key_of_class, ["AddCpp_h1.track_instructions"]) == ["k-add"]
    assert layout(key_of_class, ["AddCppTwin"]) == ["k-add"]  # a twin class shares its snippet
    assert layout(key_of_class, ["Cpp"]) == ["k-add", "k-mul"]
    assert layout(key_of_class, ["ReLU"]) == []


def test_operators_are_selected_by_any_method_and_input() -> None:
    inputs = {"aten.relu.default": ["a", "b"], "aten.mm.default": ["c"]}
    classes = {name: name.replace(".", "_") for name in inputs}
    assert selected_operators(inputs, classes, "operators", None) == list(inputs)
    assert selected_operators(inputs, classes, "operators", ["relu"]) == ["aten.relu.default"]
    assert selected_operators(inputs, classes, "operators", ["track_eager_seconds\\('c'\\)"]) == [
        "aten.mm.default"
    ]
    assert selected_operators(inputs, classes, "operators", ["time_wall"]) == []


FAKE_ASV = """
import json, subprocess, sys
# A parent process whose command line is an asv command, as asv's own is.
child = "import json; from benchkit.measure import selection as s; i = s.current_invocation(); "
child += "print(json.dumps(None if i is None else [i.pid, i.regexes]))"
out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout
print(json.dumps({"me": __import__("os").getpid(), "seen": json.loads(out)}))
"""


def test_the_asv_command_is_found_among_the_ancestors(tmp_path: Path, repo_root: Path) -> None:
    fake = tmp_path / "asv"
    fake.write_text(FAKE_ASV)
    env = {"PYTHONPATH": str(repo_root), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(fake), "run", "-b", "Linear", "HEAD^!"],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["seen"] == [report["me"], ["Linear"]]
    # Not under asv at all: no selection, i.e. everything.
    plain = subprocess.run(
        [sys.executable, "-c", "from benchkit.measure import selection as s; print(s.current_invocation())"],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    assert plain.stdout.strip() == "None"
