"""Through real asv: on a runner with no ``~/.asv-machine.json`` and no terminal, a plain
``asv run`` in a project naming benchkit's plugin records the machine and measures; without
the plugin asv stops at its machine questions; at a terminal asv still asks them.

The project is the smallest asv project there is (one no-op benchmark, ``--python=same``), so
each asv command takes about a second: the plugin is what is under test, not torch.
"""

from __future__ import annotations

import json
import os
import platform
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchkit.history.builds.build_step import ASV_PLUGIN, history_project_config

REPO_ROOT = Path(__file__).resolve().parent.parent
ASKED = "Run asv at the console the first time to generate one, or run `asv machine --yes`."


def test_benchkit_configs_name_the_plugin() -> None:
    from asv.config import Config

    assert Config.load(str(REPO_ROOT / "asv.conf.json")).plugins == [ASV_PLUGIN]
    assert history_project_config(str(REPO_ROOT), "env")["plugins"] == [ASV_PLUGIN]


def test_benchkit_configs_leave_asvs_regression_search_out() -> None:
    # benchkit's Regressions page replaces it; asv reads null as "skip this benchmark".
    from asv.config import Config

    assert Config.load(str(REPO_ROOT / "asv.conf.json")).regressions_first_commits == {".*": None}
    assert history_project_config(str(REPO_ROOT), "env")["regressions_first_commits"] == {".*": None}


def make_project(root: Path, plugins: list[str]) -> tuple[Path, dict[str, str], str]:
    """An asv project in `root` (config, a one-commit git repo, one benchmark), an environment
    with an empty HOME, and the commit to record results under."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    (root / "bench").mkdir()
    (root / "bench" / "__init__.py").write_text("def time_noop():\n    pass\n")
    config = {
        "version": 1,
        "project": "probe",
        "repo": "repo",
        "branches": ["main"],
        "environment_type": "virtualenv",
        "benchmark_dir": "bench",
        "results_dir": "results",
        "html_dir": "html",
        "plugins": plugins,
    }
    (root / "asv.conf.json").write_text(json.dumps(config))
    home = root / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    return root, env, commit.stdout.strip()


def asv_run(root: Path, env: dict[str, str], commit: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`asv run` of the one benchmark with stdin and stdout not a terminal (as in CI)."""
    command = [sys.executable, "-m", "asv", "run", "--python=same", "--quick", "--set-commit-hash", commit]
    return subprocess.run(
        [*command, "-b", "time_noop", *extra],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("machine", [None, "ci-runner"])
def test_a_run_without_a_terminal_records_the_machine(tmp_path: Path, machine: str | None) -> None:
    root, env, commit = make_project(tmp_path, [ASV_PLUGIN])
    done = asv_run(root, env, commit, *(["--machine", machine] if machine else []))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    name = machine or platform.node()
    assert f"benchkit: no terminal to ask asv's machine questions at: machine {name!r} recorded" in output
    recorded = json.loads((root / "home" / ".asv-machine.json").read_text())[name]
    assert recorded["machine"] == name and recorded["num_cpu"] == str(os.cpu_count())
    assert list((root / "results" / name).glob(f"{commit[:8]}-*.json")), output  # measured
    again = asv_run(root, env, commit, *(["--machine", machine] if machine else []))
    assert again.returncode == 0 and "benchkit:" not in again.stdout + again.stderr  # once only


def test_without_the_plugin_asv_stops_at_its_questions(tmp_path: Path) -> None:
    root, env, commit = make_project(tmp_path, [])
    done = asv_run(root, env, commit)
    assert done.returncode == 1
    assert ASKED in done.stdout + done.stderr
    assert not (root / "results").exists()


def test_at_a_terminal_asv_asks_its_questions(tmp_path: Path) -> None:
    """A pty for stdin and stdout: the plugin records nothing, asv asks; Enter six times takes
    asv's defaults and the run goes on."""
    root, env, commit = make_project(tmp_path, [ASV_PLUGIN])
    command = [sys.executable, "-m", "asv", "run", "--python=same", "--quick", "--set-commit-hash", commit]
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*command, "-b", "time_noop"], cwd=root, env=env, stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    os.write(controller, b"\n" * 6)  # the line discipline holds the answers until asv reads them
    output = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([controller], [], [], 1)[0]:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: asv exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    os.close(controller)
    assert process.wait(timeout=60) == 0, output.decode(errors="replace")
    text = output.decode(errors="replace")
    assert "I will now ask you some questions about this machine" in text
    assert "benchkit:" not in text
    assert list((root / "results" / platform.node()).glob(f"{commit[:8]}-*.json")), text


def test_a_failure_to_record_is_one_line_and_asv_decides(tmp_path: Path) -> None:
    """HOME is a file: the plugin cannot save; it says so in one line and asv goes on to its own
    message (the plugin never stops an asv command by itself)."""
    root, env, commit = make_project(tmp_path, [ASV_PLUGIN])
    (root / "not-a-home").write_text("")
    done = asv_run(root, {**env, "HOME": str(root / "not-a-home")}, commit)
    output = done.stdout + done.stderr
    [line] = [x for x in output.splitlines() if x.startswith("benchkit:")]
    assert line.startswith("benchkit: asv's machine defaults not recorded (NotADirectoryError")
    assert done.returncode == 1 and ASKED in output
