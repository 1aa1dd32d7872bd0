"""Every example in README.md and docs/*.md runs here, or says why it cannot.

An example is a fenced code block tagged `bash`, `python` or `toml`, or an indented block of
commands (bash); every fenced block names its language (`text`, `json`, `jsonc` for the
rest), and commands in a `text` block fail here. How each kind runs:

* `bash`: its commands, one after another, in a sandbox (tests/support/doc_sandbox.py: a
  benchkit checkout with a torch history and asv results of a few builds). Each command
  must exit 0, or the status its line's comment names (`# exit status 2`).
* `python`: a definitions module (it sets `BENCHMARKS`) is loaded and expanded by
  `benchkit list`; other Python runs as a script in the sandbox.
* `toml`: a `benchkit check` configuration, loaded as `benchkit check` loads one.

A `text` block right after an example (blank lines between at most) is what the example
prints: its lines must appear in the output in that order, together; `...` stands for any
text within a line, or for any lines on a line of its own.

An example that cannot run here carries `<!-- not run: REASON -->` on the line above it,
REASON one of `gpu`, `pytorch-checkout` or `over a minute (WHAT TAKES IT)`. Every
`benchkit`/`asv` command of every example, run or not, must parse with the real command line.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.doc_sandbox import make_sandbox, sandbox_env
from support.scratch import module_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
EXAMPLE_LANGUAGES = ("bash", "python", "toml")
OTHER_LANGUAGES = ("text", "json", "jsonc")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")
REASONS = re.compile(r"gpu|pytorch-checkout|over a minute \(.+\)")
EXIT_STATUS = re.compile(r"#.*\bexit status (\d+)\b")
# How a line of commands starts (an indented or `text` block holding one is an unfenced example).
COMMANDS = re.compile(r"(\$ )?(benchkit|asv|bash|python3?|dask|flock|pip) |[A-Z_]+=\S+ (benchkit|asv) ")
# Examples whose commands measure (torch, valgrind, inductor): slow tests, run by CI.
MEASURES = re.compile(r"(benchkit (run|counts|operators)|asv run) ")
DEFINITIONS_FILE = "my_benchmarks.py"  # the definitions example of docs/definitions.md, in the sandbox


@dataclasses.dataclass(frozen=True)
class Command:
    line: str
    status: int  # the exit status the doc gives it (0 unless its comment says)


@dataclasses.dataclass(frozen=True)
class Example:
    path: Path
    line: int
    lang: str
    text: str
    not_run: str | None
    output: str | None  # the `text` block right after it: what it prints

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    def commands(self) -> list[Command]:
        """Its command lines (continuations joined, comment lines dropped), bash examples only."""
        if self.lang != "bash":
            return []
        joined = re.sub(r"\\\n\s*", " ", self.text)
        out = []
        for raw in joined.splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                status = EXIT_STATUS.search(line)
                out.append(Command(line, int(status.group(1)) if status else 0))
        return out

    @property
    def measures(self) -> bool:
        return any(MEASURES.match(c.line) and c.status == 0 for c in self.commands())


@dataclasses.dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    end: int  # index of the closing fence's line


def _blocks(path: Path, lines: list[str]) -> Iterator[Block]:
    i = 0
    while i < len(lines):
        fence = re.match(r"(\s*)```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent = len(fence.group(1))
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{path.relative_to(REPO_ROOT)}:{i + 1}: code block never closed"
        text = "\n".join(line[indent:] for line in lines[i + 1 : end])
        yield Block(path, i + 1, fence.group(2), text, end)
        i = end + 1


def _marker_before(lines: list[str], index: int) -> str | None:
    """The not-run reason on the nearest non-blank line above line `index`, if any."""
    j = index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    match = NOT_RUN.search(lines[j]) if j >= 0 else None
    return match.group(1) if match else None


def _indented_examples(lines: list[str]) -> Iterator[tuple[int, str]]:
    """Indented (unfenced) code blocks of commands, outside fences and list items: (index, text)."""
    in_fence, i = False, 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("```"):
            in_fence = not in_fence
        indented = re.match(r"( {4,})\S", line)
        if in_fence or not indented or (i and lines[i - 1].strip()) or _in_list_item(lines, i):
            i += 1
            continue
        end = i
        while end < len(lines) and (lines[end].startswith(indented.group(1)) or not lines[end].strip()):
            end += 1
        text = textwrap.dedent("\n".join(lines[i:end]).rstrip())
        first = next((ln.strip() for ln in text.splitlines() if not ln.strip().startswith("#")), "")
        if COMMANDS.match(first):
            yield i, text
        i = end


def _in_list_item(lines: list[str], i: int) -> bool:
    """An indented paragraph continuing a list item is text, not code (unless it is commands)."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j >= 0 and bool(re.match(r"\s*([*-]|\d+\.) ", lines[j])) and not COMMANDS.match(lines[i].strip())


def parse_docs() -> tuple[list[Example], list[str]]:
    """The examples of every doc, and what is wrong with the docs' code blocks."""
    examples, problems = [], []
    for path in DOCS:
        lines = path.read_text().splitlines()
        for index, text in _indented_examples(lines):
            not_run = _marker_before(lines, index)
            examples.append(Example(path, index + 1, "bash", text, not_run, None))
        blocks = list(_blocks(path, lines))
        for k, block in enumerate(blocks):
            where = f"{path.relative_to(REPO_ROOT)}:{block.line}"
            if block.lang not in EXAMPLE_LANGUAGES + OTHER_LANGUAGES:
                known = ", ".join(EXAMPLE_LANGUAGES + OTHER_LANGUAGES)
                problems.append(f"{where}: a code block must name its language ({known})")
                continue
            first = next((ln.strip() for ln in block.text.splitlines() if ln.strip()), "")
            if block.lang == "text" and COMMANDS.match(first) and not re.match(r"\S+ [\w-]+: ", first):
                problems.append(f"{where}: commands in a text block (tag it ```bash)")
            if block.lang not in EXAMPLE_LANGUAGES:
                continue
            after = blocks[k + 1] if k + 1 < len(blocks) else None
            between = lines[block.end + 1 : after.line - 1] if after else []
            output = (
                after.text if after and after.lang == "text" and not any(s.strip() for s in between) else None
            )
            not_run = _marker_before(lines, block.line - 1)
            examples.append(Example(path, block.line, block.lang, block.text, not_run, output))
    examples.sort(key=lambda e: (DOCS.index(e.path), e.line))
    problems += [
        f"{e.where}: not-run reason {e.not_run!r} is none of gpu, pytorch-checkout, over a minute (...)"
        for e in examples
        if e.not_run is not None and not REASONS.fullmatch(e.not_run)
    ]
    return examples, problems


ALL, PROBLEMS = parse_docs()
RUN = [e for e in ALL if e.not_run is None]


def _reason(example: Example) -> str:
    return (example.not_run or "").split(" (")[0]


def test_the_docs_code_blocks_are_examples_or_say_what_they_are() -> None:
    assert not PROBLEMS, "\n".join(PROBLEMS)


def test_two_thirds_of_the_examples_run_here() -> None:
    marked = collections.Counter(_reason(e) for e in ALL if e.not_run is not None)
    by_reason = ", ".join(f"{reason}: {n}" for reason, n in sorted(marked.items()))
    print(f"\n{len(ALL)} doc examples: {len(RUN)} run here, {sum(marked.values())} not run ({by_reason})")
    assert len(RUN) * 3 >= len(ALL) * 2, f"{len(RUN)} of {len(ALL)} examples run here"


# ------------------------------------------------------------ the examples run here


def definitions_example() -> Example:
    """docs/definitions.md's definitions module: my_benchmarks.py in the sandbox."""
    found = [
        e for e in ALL if e.path.name == "definitions.md" and e.lang == "python" and "BENCHMARKS" in e.text
    ]
    assert found, "docs/definitions.md has no definitions example (a python block setting BENCHMARKS)"
    return found[0]


@pytest.fixture(scope="module")
def sandbox_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with module_dir(tmp_path_factory, "doc-sandbox") as root:
        yield make_sandbox(root / "checkout", {DEFINITIONS_FILE: definitions_example().text})


@pytest.fixture
def sandbox(sandbox_template: Path, tmp_path: Path) -> Path:
    """A fresh copy per example: examples change the history, the results and the site."""
    return Path(shutil.copytree(sandbox_template, tmp_path / "checkout", symlinks=True))


STATUS_MARK = "<<benchkit doc example, exit status:>>"  # printed after each command, then its status


def run_bash(example: Example, sandbox: Path) -> tuple[str, list[int]]:
    """Runs the example's commands in one shell; its output and each command's exit status."""
    script = ["exec 2>&1"]
    for command in example.commands():
        script += [command.line, f"status=$?; echo; echo '{STATUS_MARK}'$status"]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=sandbox,
        env=sandbox_env(sandbox),
        capture_output=True,
        timeout=600,
    )
    printed = done.stdout.decode(errors="replace")  # not text=True: it would turn a lone \r into \n
    marks = re.compile(r"\n?" + re.escape(STATUS_MARK) + r"(\d+)\n")
    statuses = [int(s) for s in marks.findall(printed)]
    return marks.sub("", printed), statuses


def run_python(example: Example, sandbox: Path) -> tuple[str, list[int]]:
    if "BENCHMARKS" in example.text:  # a definitions module: loaded and expanded
        path = sandbox / "example_definitions.py"
        path.write_text(example.text)
        args = ["-m", "benchkit.cli", "list", "--definitions", str(path), "--no-standard"]
    else:
        args = ["-c", example.text]
    done = subprocess.run(
        [sys.executable, *args],
        cwd=sandbox,
        env=sandbox_env(sandbox),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.stdout + done.stderr, [done.returncode]


def run_toml(example: Example, sandbox: Path) -> tuple[str, list[int]]:
    from benchkit.report.gate.check_config import load_check_config

    path = sandbox / "example-check.toml"
    path.write_text(example.text)
    load_check_config(path)  # raises on anything benchkit check would refuse
    return "", [0]


RUNNERS = {"bash": run_bash, "python": run_python, "toml": run_toml}


def expected_pattern(expected: str) -> re.Pattern[str]:
    """The doc's output as a regex: `...` any text (a line of its own: any lines), runs of
    spaces any horizontal space, trailing space ignored."""
    parts = []
    for line in expected.strip("\n").splitlines():
        line = line.rstrip()
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = [re.escape(p) for p in re.split(r"\.\.\.|…", line)]
        text = "[^\n]*?".join(pieces)
        text = re.sub(r"(\\ )+", "[ \t]+", text)
        parts.append("^" + text + "[ \t]*\n")
    return re.compile("".join(parts), re.MULTILINE)


def check_output(example: Example, output: str) -> None:
    if example.output is None:
        return
    # As a terminal shows it: a progress bar's carriage returns leave the line's last text.
    shown = "\n".join(line.rsplit("\r", 1)[-1] for line in output.split("\n"))
    if not expected_pattern(example.output).search(shown.rstrip("\n") + "\n"):
        said = f"--- doc:\n{example.output}\n--- printed:\n{shown}"
        pytest.fail(f"{example.where}: the output differs from the doc's.\n{said}")


def _run_param(example: Example):  # type: ignore[no-untyped-def]
    marks = [pytest.mark.slow] if example.measures else []
    return pytest.param(example, id=example.where, marks=marks)


@pytest.mark.parametrize("example", [_run_param(e) for e in RUN])
def test_example_runs_as_the_doc_says(example: Example, sandbox: Path) -> None:
    output, statuses = RUNNERS[example.lang](example, sandbox)
    expected = [c.status for c in example.commands()] if example.lang == "bash" else [0]
    if statuses != expected:
        said = f"{example.text}\n--- printed:\n{output}"
        pytest.fail(f"{example.where}: exit statuses {statuses}, the doc says {expected}\n{said}")
    check_output(example, output)


def test_a_wrong_output_or_exit_status_fails(sandbox: Path) -> None:
    """The check itself: an example whose doc says another output, or another status, fails."""
    said = Example(REPO_ROOT / "README.md", 0, "bash", "benchkit history head", None, "HEAD -> main: ...")
    output, statuses = run_bash(said, sandbox)
    assert statuses == [0]
    with pytest.raises(pytest.fail.Exception, match="output differs"):
        check_output(said, output)
    check_output(dataclasses.replace(said, output="HEAD -> my-pr: ..."), output)
    wrong = Example(
        REPO_ROOT / "README.md", 0, "bash", "benchkit check main HEAD   # exit status 0", None, None
    )
    assert [c.status for c in wrong.commands()] == [0] != run_bash(wrong, sandbox)[1]


# ------------------------------------------------------------ every command parses


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
    (e.where, re.split(r"\s+(?:\d?>|\||&&)", c.line.split(" #")[0])[0].strip())
    for e in ALL
    for c in e.commands()
    if re.match(r"([A-Z_]+=\S+ )*(benchkit|asv) ", c.line)
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
