"""The example GitHub Actions workflows run the commands docs/ci.md documents, and each one
parses with the real command line (benchkit's and asv's)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from benchkit.cli import build_parser

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO_ROOT / "examples" / "github-actions").glob("*.yml"))


def workflow_commands(path: Path) -> list[str]:
    """Every `benchkit ...` and `asv ...` command of the workflow's `run:` steps (without `|| ...`)."""
    data = yaml.safe_load(path.read_text())
    commands = []
    for job in data["jobs"].values():
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                line = line.split(" || ")[0].strip()
                if line.startswith(("benchkit ", "asv ")):
                    commands.append(line)
    return commands


def documented_ci_commands() -> list[str]:
    """The `benchkit`/`asv` lines of docs/ci.md's bash blocks, without their comments."""
    text = (REPO_ROOT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(("benchkit ", "asv "))]


def test_there_are_a_nightly_and_a_pr_workflow() -> None:
    assert [p.name for p in WORKFLOWS] == ["nightly.yml", "pr.yml"]


def test_workflows_run_exactly_the_commands_the_docs_document() -> None:
    documented = documented_ci_commands()
    used = [c for path in WORKFLOWS for c in workflow_commands(path)]
    assert documented and used
    assert sorted(used) == sorted(documented)


@pytest.mark.parametrize("command", [c for path in WORKFLOWS for c in workflow_commands(path)])
def test_every_workflow_command_parses(command: str) -> None:
    words = shlex.split(re.sub(r'"\$[A-Z]+"', "X", command))
    if words[0] == "benchkit":
        parser = build_parser()
    else:
        from asv.commands import make_argparser

        parser = make_argparser()[0]
    try:
        parser.parse_args(words[1:])
    except SystemExit as e:
        raise AssertionError(f"{command!r} does not parse") from e
