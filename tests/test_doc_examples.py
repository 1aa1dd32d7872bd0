"""Every example in README.md and docs/ is run here or marked `<!-- not run: REASON -->`.

An example is a code block (fenced, or indented by four spaces) that holds commands
(`benchkit`, `asv`, `python`, `bash`, ...) or Python; blocks showing output are not
examples. Run here: the Python blocks, the check config, the cheap commands. Every
`benchkit`/`asv` command of every example, run or not, must parse with the real
command line, and the commands the issue found broken are checked for what they do.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
COMMANDS = ("benchkit ", "asv ", "bash ", "python ", "python3 ", "dask ", "BENCHKIT_", "PIP_")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")


@dataclasses.dataclass(frozen=True)
class Example:
    path: Path
    line: int
    lang: str
    text: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """Command lines (continuations joined, comments and prompts dropped)."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        out = []
        for raw in joined.splitlines():
            line = raw.split("  #")[0].split(" # ")[0].strip().removeprefix("$ ")
            if line.startswith(COMMANDS) or re.match(r"[A-Z_]+=\S+ (benchkit|asv) ", line):
                out.append(line)
        return out


def _marker_before(lines: list[str], index: int) -> str | None:
    """The not-run reason on the nearest non-blank line above line `index`, if any."""
    j = index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    match = NOT_RUN.search(lines[j]) if j >= 0 else None
    return match.group(1) if match else None


def examples() -> list[Example]:
    found = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            fence = re.match(r"\s*```(\w*)\s*$", line)
            if fence:
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
                text = "\n".join(lines[i + 1 : end])
                lang = fence.group(1)
                if lang in ("python", "toml") or (lang in ("bash", "sh", "") and _is_commands(text)):
                    found.append(Example(path, i + 1, lang or "bash", text, _marker_before(lines, i)))
                i = end + 1
                continue
            indented = re.match(r"( {4,})\S", line)
            if indented and (i == 0 or not lines[i - 1].strip()) and not _in_list_text(lines, i):
                end = i
                while end < len(lines) and (
                    lines[end].startswith(indented.group(1)) or not lines[end].strip()
                ):
                    end += 1
                text = "\n".join(lines[i:end]).rstrip()
                if _is_commands(text):
                    found.append(Example(path, i + 1, "bash", _dedent(text), _marker_before(lines, i)))
                i = end
                continue
            i += 1
    return found


def _in_list_text(lines: list[str], i: int) -> bool:
    """An indented paragraph continuing a list item is text, not code (its item is not indented 4+)."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return (
        j >= 0
        and bool(re.match(r"\s*([*-]|\d+\.) ", lines[j]))
        and not lines[i].lstrip().startswith(COMMANDS)
    )


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def _is_commands(text: str) -> bool:
    first = next(
        (ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")), ""
    )
    if re.match(r"benchkit [\w-]+: ", first):  # a message benchkit prints: output, not a command
        return False
    return first.removeprefix("$ ").startswith(COMMANDS) or bool(re.match(r"[A-Z_]+=\S+ ", first))


ALL = examples()


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "BENCHKIT_CACHE_DIR": str(tmp_path / "cache")}


# ------------------------------------------------------------ the examples run here


def run_definitions_block(example: Example, tmp_path: Path) -> None:
    """The README's definitions: loaded and expanded by `benchkit list` as a user's file."""
    path = tmp_path / "my_benchmarks.py"
    path.write_text(example.text)
    done = subprocess.run(
        [sys.executable, "-m", "benchkit.cli", "list", "--definitions", str(path), "--no-standard"],
        cwd=REPO_ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    keys = [line.split("\t")[1] for line in done.stdout.splitlines()]
    # the GroupedVariants labels are exactly `add` (two cases) and `neg` (no comment text in a label)
    labels = {k.split(" | ")[0] for k in keys if k.startswith("ops/")}
    assert labels == {"ops/add/Case:  0", "ops/add/Case:  1", "ops/neg"}, labels
    assert any(k.startswith("my group/mul | C++ | TorchScript") for k in keys), keys


def run_recorder_block(example: Example, tmp_path: Path) -> None:
    """The recorder example with a small `model` and `batch` defined before it."""
    preamble = "import torch\nmodel = torch.nn.Linear(4, 2)\nbatch = torch.ones(3, 4)\n"
    done = subprocess.run(
        [sys.executable, "-c", preamble + example.text],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Operator: aten.addmm.default" in (tmp_path / "my_model.txt").read_text()


def run_check_config_block(example: Example, tmp_path: Path) -> None:
    from benchkit.report.check_config import load_check_config

    path = tmp_path / "benchkit-check.toml"
    path.write_text(example.text)
    config = load_check_config(path)
    assert config.thresholds["instructions"] == 0.005


# first line of an example -> how it is run here
README_API = (
    "from benchkit.define.api import GroupedSetup, GroupedStmts, GroupedModules, GroupedVariants, TimerArgs"
)
RUNNERS = {
    README_API: run_definitions_block,
    "from benchkit.measure.operators.recorder import OperatorInputRecorder": run_recorder_block,
    "[thresholds]          # defaults per metric": run_check_config_block,
}


def _runner(example: Example):  # type: ignore[no-untyped-def]
    first = example.text.strip().splitlines()[0].strip()
    return RUNNERS.get(first)


def test_every_example_is_run_here_or_marked_not_run() -> None:
    unaccounted = [e.where for e in ALL if e.not_run is None and _runner(e) is None]
    assert not unaccounted, f"neither run by this test nor marked <!-- not run: REASON -->: {unaccounted}"
    run = [e for e in ALL if e.not_run is None]
    marked = [e for e in ALL if e.not_run is not None]
    print(f"\n{len(ALL)} doc examples: {len(run)} run by this test, {len(marked)} marked not run")
    assert len(run) >= 3 and all(len(e.not_run or "x") > 10 for e in marked)


@pytest.mark.parametrize("example", [e for e in ALL if e.not_run is None], ids=lambda e: e.where)
def test_example_runs(example: Example, tmp_path: Path) -> None:
    runner = _runner(example)
    assert runner is not None
    runner(example, tmp_path)


def _parses(command: str) -> None:
    words = shlex.split(re.sub(r"\$\(.*?\)|\"\$\w+\"|\$\w+", "X", command))
    while words and re.match(r"[A-Z_]+=", words[0]):
        words = words[1:]
    if words[0] == "benchkit":
        from benchkit.cli import build_parser

        parser = build_parser()
    else:
        from asv.commands import make_argparser

        parser = make_argparser()[0]
    try:
        parser.parse_args(words[1:])
    except SystemExit as e:
        raise AssertionError(f"{command!r} does not parse") from e


EVERY_COMMAND = [
    (e.where, c)
    for e in ALL
    for c in e.commands()
    if re.match(r"([A-Z_]+=\S+ )*(benchkit|asv) ", c) and not re.search(r"[\[\]|…]|\.\.\.", c)
]


@pytest.mark.parametrize(("where", "command"), EVERY_COMMAND, ids=[f"{w} {c[:40]}" for w, c in EVERY_COMMAND])
def test_every_documented_command_parses(where: str, command: str) -> None:
    _parses(command)


def test_the_asv_find_example_selects_one_benchmark() -> None:
    """asv find refuses a regex that matches several benchmarks (time_wall and track_instructions)."""
    from benchkit.define.expand import case_names
    from benchkit.define.loader import load_cases

    [command] = [c for _, c in EVERY_COMMAND if c.startswith("asv find ")]
    regex = shlex.split(command)[3]
    names = {n for case in load_cases(standard=True) for n in case_names(case)[:2]}
    assert len([n for n in names if re.search(regex, n)]) == 1, command


def test_the_backfill_filter_example_selects_cases() -> None:
    from benchkit.define.expand import select
    from benchkit.define.loader import load_cases

    [command] = [c for _, c in EVERY_COMMAND if c.startswith("benchkit backfill main~10..main --filter")]
    assert select(load_cases(standard=True), shlex.split(command)[4])
