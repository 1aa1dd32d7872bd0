"""Function-level profiles: stored beside asv's results, loaded, and diffed.

The representative test diffs two real profiles from the shared valgrind batch
of support.callgrind ("x + 1" against "x + 1; x.mul(2)"); the rest exercise
storage, lookup and the command line on small profiles.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from support.callgrind import count, needs_valgrind, real_batch

from benchkit.callgrind_track import BatchResult, CaseCount
from benchkit.errors import UserError
from benchkit.history.results import read as results_read
from benchkit.measure.callgrind import profiles
from benchkit.report import diff as profile_diff
from benchkit.settings import Var

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCHKIT = [sys.executable, "-m", "benchkit.cli"]
KEY = "group/case | Python | explicit | explicit | 1 thread(s)"
OTHER = "group/other | C++ | explicit | explicit | 1 thread(s)"


def batch(functions: dict[str, int], number: int = 10, other: float = 500.0) -> BatchResult:
    total = sum(functions.values())
    counts = {
        KEY: CaseCount(KEY, "ok", total / number, number, (total, total + 7, total - 3), total, functions),
        OTHER: CaseCount(
            OTHER, "ok", other, 1, (int(other),) * 3, int(other), {"Python/ceval.c:f": int(other)}
        ),
    }
    return BatchResult(counts, {"cpu_capability_under_valgrind": "AVX2"}, 1.0)


BASE = {"Python/ceval.c:_PyEval_EvalFrameDefault": 5_000, "aten/add.cpp:add": 3_000, "malloc.c:malloc": 2_000}
HEAD = {"Python/ceval.c:_PyEval_EvalFrameDefault": 5_000, "aten/add.cpp:add": 3_400, "malloc.c:malloc": 1_900}


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    path = profiles.save_profile(tmp_path / "p.json.gz", batch(BASE), commit="abc123", env_name="py3.11")
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # compressed
    loaded = profiles.load_profile(path)
    assert loaded.commit == "abc123" and loaded.env_name == "py3.11"
    assert loaded.metadata["cpu_capability_under_valgrind"] == "AVX2"
    case = loaded.cases[KEY]
    assert case.functions == BASE and case.number == 10 and case.instructions == 1_000.0
    assert case.per_execution()["aten/add.cpp:add"] == 300.0
    # the same batch gives the same bytes (no timestamps inside)
    again = profiles.save_profile(tmp_path / "q.json.gz", batch(BASE), commit="abc123", env_name="py3.11")
    assert again.read_bytes() == path.read_bytes()


def test_diff_reports_total_and_functions_both_ways() -> None:
    base = profiles.Profile(profiles.cases_from_document(profiles.profile_document(batch(BASE))), {})
    head = profiles.Profile(profiles.cases_from_document(profiles.profile_document(batch(HEAD))), {})
    diffs = profile_diff.diff_profiles(base, head)
    changed = diffs[0]
    assert changed.key == KEY and changed.status == "changed"
    assert changed.base == 1_000.0 and changed.head == 1_030.0
    assert changed.relative == pytest.approx(0.03)
    assert [(d.function, d.delta) for d in changed.increases] == [("aten/add.cpp:add", 40.0)]
    assert [(d.function, d.delta) for d in changed.decreases] == [("malloc.c:malloc", -10.0)]
    assert diffs[1].key == OTHER and diffs[1].status == "unchanged"
    text = profile_diff.format_diff(diffs, "base", "head")
    assert "1,000.0 -> 1,030.0  (+30.0, +3.000%)" in text
    assert "+40.0  aten/add.cpp:add" in text and "-10.0  malloc.c:malloc" in text
    assert OTHER not in text and "1 changed, 1 unchanged" in text
    assert [d.key for d in profile_diff.diff_profiles(base, head, pattern="C\\+\\+")] == [OTHER]
    with pytest.raises(UserError, match="not a valid regular expression"):
        profile_diff.diff_profiles(base, head, pattern="(")


@needs_valgrind
def test_diff_of_real_profiles_names_the_added_work() -> None:
    """Head runs `x + 1; x.mul(2)` where base ran `x + 1`: the diff must point at mul."""
    document = profiles.profile_document(real_batch())
    cases = profiles.cases_from_document(document)
    base_case, head_case = cases[count("add").key], cases[count("add and mul").key]
    base = profiles.Profile({"x": base_case}, {})
    head = profiles.Profile({"x": dataclass_replace_key(head_case, base_case.key)}, {})
    (diff,) = profile_diff.diff_profiles(base, head, top=15)
    assert diff.delta == pytest.approx(count("add and mul").instructions - count("add").instructions)
    assert diff.relative > 0.3
    # The second op's machinery (TensorIterator, allocation) moves most ...
    assert any("TensorIterator" in d.function for d in diff.increases[:15]), diff.increases
    # ... and the functions that only head runs are mul's own.
    moved = profile_diff.diff_case(base_case, dataclass_replace_key(head_case, base_case.key), top=10**6)
    only_head = {d.function for d in moved.increases if d.base == 0}
    assert any("THPVariable_mul" in f for f in only_head) and any("mul_kernel" in f for f in only_head)
    assert not any("add_kernel" in f for f in only_head)
    # function deltas add up to the change of the total (exclusive counts partition it)
    assert sum(d.delta for d in (*moved.increases, *moved.decreases)) == pytest.approx(diff.delta)


def dataclass_replace_key(case: profiles.CaseProfile, key: str) -> profiles.CaseProfile:
    import dataclasses

    return dataclasses.replace(case, key=key)


def test_failed_and_missing_cases_are_reported() -> None:
    base_batch = batch(BASE)
    head_batch = batch(HEAD)
    head_batch.counts[KEY] = CaseCount(KEY, "failed", error="Traceback...\nRuntimeError: broke")
    del head_batch.counts[OTHER]
    base = profiles.Profile(profiles.cases_from_document(profiles.profile_document(base_batch)), {})
    head = profiles.Profile(profiles.cases_from_document(profiles.profile_document(head_batch)), {})
    by_key = {d.key: d for d in profile_diff.diff_profiles(base, head)}
    assert by_key[KEY].status == "failed" and "RuntimeError: broke" in by_key[KEY].note
    assert by_key[OTHER].status == "removed"


def test_load_rejects_what_is_not_a_profile(tmp_path: Path) -> None:
    pickled = tmp_path / "evil.json.gz"
    pickled.write_bytes(gzip.compress(pickle.dumps({"format": profiles.FORMAT})))
    with pytest.raises(UserError, match="not a benchkit profile"):
        profiles.load_profile(pickled)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(UserError, match="not a benchkit profile"):
        profiles.load_profile(other)
    with pytest.raises(UserError, match="cannot read profile"):
        profiles.load_profile(tmp_path / "missing.json.gz")


ASV_CONF = """{
    // comments as asv allows them, and a URL that must survive comment stripping
    "version": 1,
    "project": "torch",
    "project_url": "https://pytorch.org/",
    "repo": "history",
    "results_dir": "my-results",
    "branches": ["main"]
}
"""


def test_asv_location_from_asv_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "asv.conf.json").write_text(ASV_CONF)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1, "box": {"machine": "box"}}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(str(Var.ASV_MACHINE), raising=False)
    monkeypatch.setenv("ASV_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setenv("ASV_ENV_NAME", "virtualenv-py3.11-numpy")
    path = profiles.save_asv_profile(batch(BASE))
    assert path == (
        tmp_path / "my-results" / "box" / "benchkit-profiles"
        / "0123456789abcdef0123456789abcdef01234567-virtualenv-py3.11-numpy.json.gz"
    )  # fmt: skip
    assert profiles.load_profile(path).machine == "box"
    monkeypatch.setenv(str(Var.ASV_MACHINE), "override")
    assert profiles.asv_profile_path().parent.parent.name == "override"
    # benchkit's main job says the results folder too: the config is not read then.
    monkeypatch.setenv(str(Var.ASV_RESULTS_DIR), str(tmp_path / "told"))
    (tmp_path / "asv.conf.json").write_text("not json")
    assert profiles.asv_profile_path().parent.parent == tmp_path / "told" / "override"
    monkeypatch.delenv("ASV_COMMIT")
    with pytest.raises(UserError, match="not inside an asv benchmark run"):
        profiles.asv_profile_path()


def _stored(tmp_path: Path) -> Path:
    """An asv project folder with profiles of two commits."""
    (tmp_path / "asv.conf.json").write_text(ASV_CONF)
    store = tmp_path / "my-results" / "box" / "benchkit-profiles"
    profiles.save_profile(store / f"{'a' * 40}-env.json.gz", batch(BASE), commit="a" * 40, env_name="env")
    profiles.save_profile(store / f"{'b' * 40}-env.json.gz", batch(HEAD), commit="b" * 40, env_name="env")
    return tmp_path / "asv.conf.json"


def test_resolve_by_commit_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _stored(tmp_path)
    found = profile_diff.find_profiles(tmp_path / "my-results")
    assert [(p.machine, p.commit[:1], p.env_name) for p in found] == [
        ("box", "a", "env"),
        ("box", "b", "env"),
    ]
    reads: list[Path] = []
    load = results_read.load_asv_config
    monkeypatch.setattr(results_read, "load_asv_config", lambda path: reads.append(path) or load(path))
    found_a, found_b = profile_diff.resolve_profiles(["aaaa", "bbbb"], config)
    assert found_a.name.startswith("a" * 40) and found_b.name.startswith("b" * 40)
    assert reads == [config]  # asv's config read once for both
    assert profile_diff.resolve_profiles([str(found_a)], tmp_path / "absent.json") == [found_a]
    with pytest.raises(UserError, match="no stored profile"):
        profile_diff.resolve_profiles(["aaaa"], config, env="other-env")


def test_diff_command_line(tmp_path: Path) -> None:
    config = _stored(tmp_path)
    out = tmp_path / "diff.json"
    done = subprocess.run(
        [*BENCHKIT, "diff", "aaaa", "bbbb", "--asv-config", str(config), "--json", str(out), "-b", "case"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert KEY in done.stdout and "+40.0  aten/add.cpp:add" in done.stdout
    assert json.loads(out.read_text())[KEY]["delta"] == 30.0
    bad = subprocess.run(
        [*BENCHKIT, "diff", "cccc", "bbbb", "--asv-config", str(config)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "'cccc'" in bad.stderr


@needs_valgrind
@pytest.mark.slow
def test_asv_run_stores_counts_and_profiles(tmp_path: Path, worker_asv_envs: Path) -> None:
    """A real asv run in a virtualenv: track_instructions values and the stored profile."""
    from support.asv_project import MACHINE, make_project
    from support.wheels import LOCAL_WHEEL

    definitions = tmp_path / "defs.py"
    definitions.write_text(
        "from benchkit.define.api import TimerArgs\n"
        "BENCHMARKS = {'mine': {'add': TimerArgs('x + 1', 'x = torch.ones(4, 4)'),\n"
        "    'cpp add': TimerArgs('x + 1;', 'auto x = torch::ones({4, 4});', language='cpp')}}\n"
    )
    project = make_project(tmp_path / "project", worker_asv_envs)
    env = {**project.env, "BENCHKIT_STANDARD": "0", "BENCHKIT_DEFINITIONS": str(definitions)}
    project = type(project)(project.root, project.history, env)
    init = project.benchkit("history", "init", "--repo", str(project.history), str(LOCAL_WHEEL))
    assert init.returncode == 0, init.stderr
    project.asv("run", "ALL", "-b", "track_instructions", "--machine", MACHINE, "--show-stderr")
    (result_file,) = (project.root / "results" / MACHINE).glob("*-*.json")
    results = json.loads(result_file.read_text())
    values = {
        name: value for name, value in results["results"].items() if name.endswith("track_instructions")
    }
    assert len(values) == 2 and all(3_000 < v[0][0] < 100_000 for v in values.values()), values
    commit = results["commit_hash"]
    (stored,) = profile_diff.find_profiles(project.root / "results", MACHINE)
    assert stored.commit == commit and stored.env_name == results["env_name"]
    profile = profiles.load_profile(stored.path)
    assert {k.split(" |")[0] for k in profile.cases} == {"mine/add", "mine/cpp add"}
    assert all(c.status == "ok" and c.functions for c in profile.cases.values())
    diff = project.benchkit("diff", commit[:8], commit[:8], "--asv-config", str(project.config), "--all")
    assert diff.returncode == 0 and "2 unchanged" in diff.stdout, diff.stdout + diff.stderr
    assert os.path.isdir(project.root / "results")
