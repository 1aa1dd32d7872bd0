"""benchkit.settings: read from an environment, validated, rendered back, recorded beside results."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from benchkit import settings, settings_record
from benchkit.errors import UserError
from benchkit.measure import selection as asv_selection
from benchkit.settings import Selection, SelectionSource, Var


def test_an_empty_environment_gives_the_defaults() -> None:
    assert settings.read({}) == settings.Settings()
    assert settings.to_environ(settings.Settings()) == {}


def test_every_setting_is_read_and_rendered_back() -> None:
    environ = {
        "BENCHKIT_CACHE_DIR": "/c",
        "BENCHKIT_WALL_ROUNDS": "4",
        "BENCHKIT_ASV_MACHINE": "box",
        "BENCHKIT_ASV_RESULTS_DIR": "/r",
        "BENCHKIT_ASV_SELECTION": '{"command": "run-1", "bench": ["Linear", "ReLU$"]}',
        "BENCHKIT_INDUCTOR_COLD": "1",
        "BENCHKIT_OPERATOR_PROCESSES": "2",
        "BENCHKIT_OPERATOR_ROUNDS": "5",
        "BENCHKIT_COMPILE_REPLICATES": "2",
        "BENCHKIT_OPERATOR_REPLICATES": "8",
        "BENCHKIT_OPERATORS_JSON": "/o.json",
        "BENCHKIT_OPERATOR_LOGS": os.pathsep.join(["/a", "/b"]),
        "BENCHKIT_RECOUNT": "1",
        "BENCHKIT_COUNTING_SLOT": "07",
        "BENCHKIT_NO_PCH": "1",
        "BENCHKIT_COMPILE_TIMEOUT": "12.5",
        "BENCHKIT_SIDE_BY_SIDE": "0",
        "BENCHKIT_DEFINITIONS": os.pathsep.join(["d1.py", "d2.py"]),
        "BENCHKIT_STANDARD": "0",
        "BENCHKIT_WHEELHOUSE": "/w",
        "BENCHKIT_TORCH_WHEEL": "/t.whl",
        "BENCHKIT_SOURCE_BUILD": "0",
    }
    assert {var.value for var in Var} == set(environ)
    read = settings.read(environ)
    assert read.asv.wall_rounds == 4 and read.asv.machine == "box"
    assert read.asv.selection == Selection(SelectionSource.GIVEN, "run-1", ("Linear", "ReLU$"))
    assert read.measure.operator_logs == (Path("/a"), Path("/b")) and read.measure.compile_timeout == 12.5
    assert read.measure.counting_slot == 7 and not read.measure.side_by_side
    assert read.measure.operator_replicates == 8
    assert read.define == settings.DefineSettings((Path("d1.py"), Path("d2.py")), standard=False)
    assert not read.history.source_build and read.history.torch_wheel == Path("/t.whl")
    assert settings.read(settings.to_environ(read)) == read
    # The other variables of a child's environment stay; benchkit's are replaced.
    child = settings.child_environ(settings.Settings(), {"PATH": "/bin", "BENCHKIT_RECOUNT": "1"})
    assert child == {"PATH": "/bin"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BENCHKIT_WALL_ROUNDS", "0"),
        ("BENCHKIT_WALL_ROUNDS", "twelve"),
        ("BENCHKIT_OPERATOR_PROCESSES", "-1"),
        ("BENCHKIT_OPERATOR_ROUNDS", "2.5"),
        ("BENCHKIT_COMPILE_TIMEOUT", "soon"),
        ("BENCHKIT_COMPILE_TIMEOUT", "0"),
        ("BENCHKIT_COUNTING_SLOT", "100"),
        ("BENCHKIT_COUNTING_SLOT", "-1"),
        ("BENCHKIT_INDUCTOR_COLD", "maybe"),
        ("BENCHKIT_STANDARD", "2"),
        ("BENCHKIT_ASV_SELECTION", "Linear"),
        ("BENCHKIT_ASV_SELECTION", '{"command": "", "bench": null}'),
        ("BENCHKIT_ASV_SELECTION", '{"command": "x", "bench": [1]}'),
    ],
)
def test_a_bad_value_names_the_variable_and_the_value(name: str, value: str) -> None:
    with pytest.raises(UserError, match=f"^{name}={value!r}".replace("[", r"\[").replace("(", r"\(")):
        settings.read({name: value})


def test_zero_operator_processes_is_kept_through_a_child_environment() -> None:
    """0 timing processes (nothing timed: the operator suite's setup fails) is a value, not the default."""
    read = settings.read({"BENCHKIT_OPERATOR_PROCESSES": "0"})
    assert read.measure.operator_processes == 0
    assert settings.to_environ(read)["BENCHKIT_OPERATOR_PROCESSES"] == "0"


def test_selection_from_the_settings_before_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asv_selection, "command_line_invocation", lambda: pytest.fail("read /proc"))
    given = Selection(SelectionSource.GIVEN, "run-1", ("Linear",))
    assert asv_selection.current_invocation(given) == asv_selection.AsvInvocation("run-1", ("Linear",))
    everything = Selection(SelectionSource.GIVEN, "run-2", None)
    assert asv_selection.current_invocation(everything) == asv_selection.AsvInvocation("run-2", None)
    assert asv_selection.current_invocation(Selection(SelectionSource.ALL)) is None
    monkeypatch.setenv(str(Var.ASV_SELECTION), "all")
    assert asv_selection.current_invocation() is None


def test_a_run_record_is_written_and_read_back(tmp_path: Path) -> None:
    config = settings.read({"BENCHKIT_INDUCTOR_COLD": "1", "BENCHKIT_DEFINITIONS": "/x/mine.py"})
    config = dataclasses.replace(
        config, asv=settings.AsvRunSettings(selection=Selection(SelectionSource.GIVEN, "r", ("Linear",)))
    )
    record = settings_record.RunRecord.of(config, "box", 4, 3)
    assert record.definitions == ("mine.py",) and record.selection == ("Linear",) and record.inductor_cold
    commit = "0123456789abcdef" * 2 + "01234567"
    path = settings_record.record_path(tmp_path, "box", commit, "virtualenv-py3.11")
    settings_record.write_record(path, record, commit, "virtualenv-py3.11")
    assert path == tmp_path / "box" / "benchkit-settings" / "01234567-virtualenv-py3.11.settings"
    assert settings_record.records_of(tmp_path, "box", commit) == {"virtualenv-py3.11": record}
    assert "4 rounds x 3 samples" in record.describe() and "inductor cold" in record.describe()
    path.write_text("{not json")
    assert settings_record.records_of(tmp_path, "box", commit) == {}


def test_the_main_run_compiles_twice_unless_told_otherwise() -> None:
    """`benchkit main`'s main run: two timing processes that both compile; the user's process
    count is kept (none at all still names a valid count for the benchmark processes)."""
    from benchkit.operator_rounds import main_run_settings

    def main_run(environ: dict[str, str]) -> tuple[int | None, int | None]:
        measure = main_run_settings(settings.read(environ)).measure
        settings.read(settings.to_environ(main_run_settings(settings.read(environ))))  # reads back
        return measure.operator_processes, measure.compile_replicates

    assert main_run({}) == (2, 2)
    assert main_run({"BENCHKIT_OPERATOR_PROCESSES": "3"}) == (3, 2)
    assert main_run({"BENCHKIT_OPERATOR_PROCESSES": "0"}) == (0, 1)
    assert main_run({"BENCHKIT_COMPILE_REPLICATES": "3", "BENCHKIT_OPERATOR_PROCESSES": "3"}) == (3, 3)
