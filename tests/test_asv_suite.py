"""The generated asv suite through real asv: discovery of every case, and a real run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFINITIONS = """
from benchkit.define.api import GroupedSetup, GroupedStmts, TimerArgs

BENCHMARKS = {"mine": {
    "mul": GroupedStmts(
        "y = x * w", "auto y = x * w;",
        GroupedSetup("x = torch.ones(4, 4)\\nw = torch.ones(4, 4)",
                     "auto x = torch::ones({4, 4});\\nauto w = torch::ones({4, 4});"),
        signature="f(x, w) -> y", torchscript=True),
    "broken": TimerArgs("raise RuntimeError('broken on purpose')"),
}}
"""

_DISCOVER = r"""
import json, sys
from asv_runner.discovery import disc_benchmarks
names = {b.name: {"type": b.type, "version": b.version, "pretty_name": b.pretty_name, "unit": b.unit}
         for b in disc_benchmarks(sys.argv[1])}
print(json.dumps(names))
"""


def test_asv_discovers_every_standard_case() -> None:
    from benchkit.define.loader import load_cases

    cases = load_cases(paths=[], standard=True)
    out = subprocess.run(
        [sys.executable, "-c", _DISCOVER, str(REPO_ROOT / "benchmarks")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env={**os.environ, "BENCHKIT_DEFINITIONS": ""},
    )
    found = json.loads(out.stdout.splitlines()[-1])
    wall = {
        n: b for n, b in found.items() if n.startswith("instruction_counts.") and n.endswith(".time_wall")
    }
    assert len(wall) == len(cases)
    assert all(b["type"] == "time" and b["unit"] == "seconds" for b in wall.values())
    assert {b["pretty_name"].rsplit(" [", 1)[0] for b in wall.values()} == {c.key for c in cases}
    assert all(len(n) < 250 and "-" not in n for n in wall)


def test_asv_run_measures_python_cpp_and_torchscript(tmp_path: Path) -> None:
    definitions = tmp_path / "defs.py"
    definitions.write_text(DEFINITIONS)
    env = {**os.environ, "BENCHKIT_STANDARD": "0", "BENCHKIT_DEFINITIONS": str(definitions)}
    subprocess.run(["asv", "machine", "--yes"], cwd=REPO_ROOT, env=env, capture_output=True, check=True)
    result = subprocess.run(
        ["asv", "run", "--python=same", "--quick", "--show-stderr", "-b", r"instruction_counts\..*time_wall"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    # asv shortens long names on screen; the hash suffix of each class name survives.
    values = dict(re.findall(r"_([0-9a-f]{8})\.time_wall\s+(\S+)", output))
    from benchkit.define.expand import asv_class_name
    from benchkit.define.loader import load_cases

    cases = load_cases(paths=[str(definitions)], standard=False)
    by_case = {c.key: values.get(asv_class_name(c)[-8:]) for c in cases}
    assert len(by_case) == 5 and None not in by_case.values(), output
    for key, value in by_case.items():
        if key.startswith("mine/broken"):
            assert value == "failed"
        else:
            assert re.fullmatch(r"[0-9.]+(±[0-9.]+)?[nμu]s", value), (key, value)
    assert "broken on purpose" in output  # the failure's reason reaches the user


# Imports the suite as one of asv's processes would (its role is benchmark.py's first argument),
# then names every C++ shard, as a setup_cache does to find what is built.
_SUITE_IMPORT = r"""
import sys
sys.argv = ["benchmark.py", sys.argv[1]]
sys.path.insert(0, "benchmarks")
import instruction_counts
names = [shard.name for shard in instruction_counts.CPP_SUITE.shards]
print(len(names), "torch" in sys.modules)
"""


def test_only_asvs_forkserver_pays_for_importing_torch_with_the_suite() -> None:
    """asv imports the suite in its discover and setup_cache processes too (a setup_cache in
    every round): only the forkserver, whose children run the benchmarks, preloads torch."""
    seen = {}
    for role in ("discover", "setup_cache", "run_server"):
        done = subprocess.run(
            [sys.executable, "-c", _SUITE_IMPORT, role], cwd=REPO_ROOT, capture_output=True, text=True,
            env={**os.environ, "BENCHKIT_DEFINITIONS": ""}, check=True,
        )  # fmt: skip
        shards, torch_imported = done.stdout.split()
        assert int(shards) >= 1
        seen[role] = torch_imported == "True"
    assert seen == {"discover": False, "setup_cache": False, "run_server": True}


def test_the_callgrind_header_is_the_one_torch_ships() -> None:
    """Shards include it through torch's include folder (``<../HEADER>``): no path in their source."""
    import torch.utils.benchmark.utils.valgrind_wrapper as wrapper
    from torch.utils import cpp_extension

    from benchkit.measure.cpp.shards import CALLGRIND_HEADER

    header = Path(cpp_extension.include_paths()[0]) / ".." / CALLGRIND_HEADER
    assert header.is_file()
    assert header.resolve() == Path(wrapper.__file__).resolve().parent / "callgrind.h"
