"""benchkit's settings: typed, read and validated in one place, rendered back for child processes.

Users set ``BENCHKIT_*`` environment variables (`Var` names every one of them); `read` turns an
environment mapping into a frozen `Settings`, raising `UserError` that names the variable and
its bad value, and `to_environ` renders settings back into variables. The environment stays
the carrier between processes because that is how asv hands anything to its benchmark
processes (and how Dask workers inherit a client's setup); no other module spells a
variable's name or reads one from ``os.environ``.

asv's own variables for a benchmark process (``ASV_CONF_DIR``, ``ASV_COMMIT``,
``ASV_ENV_NAME``) are read here too (`AsvProcess`), never rendered: asv sets them.

What shaped a run's numbers is recorded beside asv's results (`benchkit.settings_record`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from collections.abc import Mapping
from pathlib import Path

from benchkit.errors import UserError

# How many counting places (``/tmp/benchkit-counting-00`` to ``-99``) a host offers a user's
# Callgrind batches (`benchkit.measure.callgrind.place`); `Var.COUNTING_SLOT` names one of them.
COUNTING_PLACES = 100


class Var(enum.Enum):
    """Every environment variable benchkit reads, by the setting it carries."""

    CACHE_DIR = "BENCHKIT_CACHE_DIR"
    # what benchkit's main job tells asv's benchmark processes
    WALL_ROUNDS = "BENCHKIT_WALL_ROUNDS"
    ASV_MACHINE = "BENCHKIT_ASV_MACHINE"
    ASV_RESULTS_DIR = "BENCHKIT_ASV_RESULTS_DIR"
    ASV_SELECTION = "BENCHKIT_ASV_SELECTION"
    # measurement
    INDUCTOR_COLD = "BENCHKIT_INDUCTOR_COLD"
    OPERATOR_PROCESSES = "BENCHKIT_OPERATOR_PROCESSES"
    OPERATOR_ROUNDS = "BENCHKIT_OPERATOR_ROUNDS"
    COMPILE_REPLICATES = "BENCHKIT_COMPILE_REPLICATES"
    OPERATOR_REPLICATES = "BENCHKIT_OPERATOR_REPLICATES"
    OPERATORS_JSON = "BENCHKIT_OPERATORS_JSON"
    OPERATOR_LOGS = "BENCHKIT_OPERATOR_LOGS"
    RECOUNT = "BENCHKIT_RECOUNT"
    COUNTING_SLOT = "BENCHKIT_COUNTING_SLOT"
    NO_PCH = "BENCHKIT_NO_PCH"
    COMPILE_TIMEOUT = "BENCHKIT_COMPILE_TIMEOUT"
    SIDE_BY_SIDE = "BENCHKIT_SIDE_BY_SIDE"
    # the suite's definitions
    DEFINITIONS = "BENCHKIT_DEFINITIONS"
    STANDARD = "BENCHKIT_STANDARD"
    # torch builds
    WHEELHOUSE = "BENCHKIT_WHEELHOUSE"
    TORCH_WHEEL = "BENCHKIT_TORCH_WHEEL"
    SOURCE_BUILD = "BENCHKIT_SOURCE_BUILD"

    def __str__(self) -> str:
        return self.value


class SelectionSource(enum.Enum):
    """Where a benchmark process learns which benchmarks its asv command selected."""

    ASV_COMMAND_LINE = "command line"  # unset: read the asv command's ``-b`` (a user's ``asv run``)
    ALL = "all"  # ``all``: the whole suite, no asking
    GIVEN = "given"  # benchkit's main job says it (JSON: the command's id and its regexes)


@dataclasses.dataclass(frozen=True)
class Selection:
    source: SelectionSource = SelectionSource.ASV_COMMAND_LINE
    command: str = ""  # GIVEN: unique per asv command; its rounds share work under this id
    regexes: tuple[str, ...] | None = None  # GIVEN: the ``-b`` regexes; None: the whole suite


@dataclasses.dataclass(frozen=True)
class AsvRunSettings:
    """What benchkit's main job tells the asv benchmark processes it starts."""

    wall_rounds: int | None = None  # None: the suite's own (`benchkit.measure.walltime.timing`)
    machine: str | None = None  # the asv machine results are recorded for
    results_dir: Path | None = None  # asv's results folder (asv tells benchmarks neither)
    selection: Selection = Selection()


@dataclasses.dataclass(frozen=True)
class MeasureSettings:
    inductor_cold: bool = False
    operator_processes: int | None = None  # None: the suite's default for the device
    operator_rounds: int | None = None
    # How many of the timing processes compile, each in the first one's cache state (a cold
    # one in an empty cache of its own): their compile times are the replicates that measure
    # the compile's noise (`benchkit.report.gate.noise.compile_spread`). None: only the first.
    compile_replicates: int | None = None
    # The main job's interleaved operator replicates per build and pair
    # (`benchkit.operator_rounds`); None: `benchkit.rounds_policy.OPERATOR_ROUNDS`.
    operator_replicates: int | None = None
    operators_json: Path | None = None  # a file that also receives the operator timing
    operator_logs: tuple[Path, ...] = ()  # empty: the default operator set
    recount: bool = False  # ignore (and replace) stored instruction counts
    # The one counting place every Callgrind batch uses, waiting while another holds it
    # (`benchkit.measure.callgrind.place.claim_place`); None: the first free one.
    counting_slot: int | None = None
    no_pch: bool = False  # no precompiled header for C++ shards
    compile_timeout: float | None = None  # seconds; None: `benchkit.measure.cpp.shards`'s default
    # The builds of a wall-time round or operator replicate measured at once, one core each
    # (`benchkit.measure.side_by_side`); False: one after the other.
    side_by_side: bool = True


@dataclasses.dataclass(frozen=True)
class DefineSettings:
    definitions: tuple[Path, ...] = ()  # user definition modules beside the standard suite
    standard: bool = True


@dataclasses.dataclass(frozen=True)
class HistorySettings:
    wheelhouses: tuple[Path, ...] = ()  # checked for existence where used
    torch_wheel: Path | None = None
    source_build: bool = True


@dataclasses.dataclass(frozen=True)
class AsvProcess:
    """What asv tells a benchmark process about its run (asv's own variables)."""

    conf_dir: Path
    commit: str
    env_name: str


@dataclasses.dataclass(frozen=True)
class Settings:
    cache_dir: Path | None = None  # None: ~/.cache/benchkit
    asv: AsvRunSettings = AsvRunSettings()
    measure: MeasureSettings = MeasureSettings()
    define: DefineSettings = DefineSettings()
    history: HistorySettings = HistorySettings()
    asv_process: AsvProcess | None = None  # set only inside an asv benchmark process


# -- reading ---------------------------------------------------------------------------

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _text(environ: Mapping[str, str], var: Var) -> str:
    return environ.get(var.value, "").strip()


def _flag(environ: Mapping[str, str], var: Var, default: bool) -> bool:
    text = _text(environ, var).lower()
    if not text:
        return default
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise UserError(f"{var}={environ[var.value]!r}: expected 1 or 0")


def _optional(value: int | None) -> str | None:
    return None if value is None else str(value)


def _count(environ: Mapping[str, str], var: Var, what: str, least: int = 1) -> int | None:
    text = _text(environ, var)
    if not text:
        return None
    if not text.isdigit() or int(text) < least:
        raise UserError(f"{var}={environ[var.value]!r}: expected a whole number of {what} >= {least}")
    return int(text)


def _slot(environ: Mapping[str, str]) -> int | None:
    text = _text(environ, Var.COUNTING_SLOT)
    if not text:
        return None
    if not text.isdigit() or int(text) >= COUNTING_PLACES:
        raise UserError(
            f"{Var.COUNTING_SLOT}={environ[Var.COUNTING_SLOT.value]!r}: expected the number of a "
            f"counting place, 0 to {COUNTING_PLACES - 1}"
        )
    return int(text)


def _path(environ: Mapping[str, str], var: Var) -> Path | None:
    text = _text(environ, var)
    return Path(text).expanduser() if text else None


def _paths(environ: Mapping[str, str], var: Var) -> tuple[Path, ...]:
    return tuple(
        Path(p.strip()).expanduser() for p in environ.get(var.value, "").split(os.pathsep) if p.strip()
    )


def _seconds(environ: Mapping[str, str], var: Var) -> float | None:
    text = _text(environ, var)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UserError(f"{var}={environ[var.value]!r} is not a number of seconds")
    return value


def _selection(environ: Mapping[str, str]) -> Selection:
    var = Var.ASV_SELECTION
    text = _text(environ, var)
    if not text:
        return Selection()
    if text == SelectionSource.ALL.value:
        return Selection(SelectionSource.ALL)
    try:
        data = json.loads(text)
        command, bench = data["command"], data["bench"]
        ok = (
            isinstance(command, str)
            and command
            and (bench is None or (isinstance(bench, list) and all(isinstance(b, str) for b in bench)))
        )
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        raise UserError(f'{var}={text!r}: expected "all" or {{"command": ID, "bench": [REGEX, ...] or null}}')
    return Selection(SelectionSource.GIVEN, command, None if bench is None else tuple(bench))


def _asv_process(environ: Mapping[str, str]) -> AsvProcess | None:
    conf_dir, commit, env_name = (environ.get(n) for n in ("ASV_CONF_DIR", "ASV_COMMIT", "ASV_ENV_NAME"))
    if not (conf_dir and commit and env_name):
        return None
    return AsvProcess(Path(conf_dir), commit, env_name)


def read(environ: Mapping[str, str]) -> Settings:
    """The settings an environment carries; `UserError` names any variable with a bad value."""
    return Settings(
        cache_dir=_path(environ, Var.CACHE_DIR),
        asv=AsvRunSettings(
            wall_rounds=_count(environ, Var.WALL_ROUNDS, "rounds"),
            machine=_text(environ, Var.ASV_MACHINE) or None,
            results_dir=_path(environ, Var.ASV_RESULTS_DIR),
            selection=_selection(environ),
        ),
        measure=MeasureSettings(
            inductor_cold=_flag(environ, Var.INDUCTOR_COLD, False),
            # 0 times nothing: the operator suite's setup fails, every operator benchmark with it.
            operator_processes=_count(environ, Var.OPERATOR_PROCESSES, "processes", least=0),
            operator_rounds=_count(environ, Var.OPERATOR_ROUNDS, "rounds"),
            compile_replicates=_count(environ, Var.COMPILE_REPLICATES, "compiling processes"),
            operator_replicates=_count(environ, Var.OPERATOR_REPLICATES, "replicates"),
            operators_json=_path(environ, Var.OPERATORS_JSON),
            operator_logs=_paths(environ, Var.OPERATOR_LOGS),
            recount=_flag(environ, Var.RECOUNT, False),
            counting_slot=_slot(environ),
            no_pch=_flag(environ, Var.NO_PCH, False),
            compile_timeout=_seconds(environ, Var.COMPILE_TIMEOUT),
            side_by_side=_flag(environ, Var.SIDE_BY_SIDE, True),
        ),
        define=DefineSettings(
            definitions=tuple(
                Path(p.strip()) for p in environ.get(Var.DEFINITIONS.value, "").split(os.pathsep) if p.strip()
            ),
            standard=_flag(environ, Var.STANDARD, True),
        ),
        history=HistorySettings(
            wheelhouses=_paths(environ, Var.WHEELHOUSE),
            torch_wheel=_path(environ, Var.TORCH_WHEEL),
            source_build=_flag(environ, Var.SOURCE_BUILD, True),
        ),
        asv_process=_asv_process(environ),
    )


def current() -> Settings:
    """This process's settings (read afresh: tests and `benchkit backfill` change the environment)."""
    return read(os.environ)


# -- rendering -------------------------------------------------------------------------


def _join(paths: tuple[Path, ...]) -> str:
    return os.pathsep.join(map(str, paths))


def to_environ(settings: Settings) -> dict[str, str]:
    """The variables that carry `settings` (a default is left unset, as a user would leave it)."""
    asv, measure, define, history = settings.asv, settings.measure, settings.define, settings.history
    selection = asv.selection
    if selection.source is SelectionSource.GIVEN:
        bench = None if selection.regexes is None else list(selection.regexes)
        selection_text: str | None = json.dumps({"command": selection.command, "bench": bench})
    else:
        selection_text = "all" if selection.source is SelectionSource.ALL else None
    values: dict[Var, str | None] = {
        Var.CACHE_DIR: str(settings.cache_dir) if settings.cache_dir else None,
        Var.WALL_ROUNDS: str(asv.wall_rounds) if asv.wall_rounds else None,
        Var.ASV_MACHINE: asv.machine,
        Var.ASV_RESULTS_DIR: str(asv.results_dir) if asv.results_dir else None,
        Var.ASV_SELECTION: selection_text,
        Var.INDUCTOR_COLD: "1" if measure.inductor_cold else None,
        Var.OPERATOR_PROCESSES: _optional(measure.operator_processes),
        Var.OPERATOR_ROUNDS: str(measure.operator_rounds) if measure.operator_rounds else None,
        Var.COMPILE_REPLICATES: _optional(measure.compile_replicates),
        Var.OPERATOR_REPLICATES: _optional(measure.operator_replicates),
        Var.OPERATORS_JSON: str(measure.operators_json) if measure.operators_json else None,
        Var.OPERATOR_LOGS: _join(measure.operator_logs) or None,
        Var.RECOUNT: "1" if measure.recount else None,
        Var.COUNTING_SLOT: _optional(measure.counting_slot),
        Var.NO_PCH: "1" if measure.no_pch else None,
        Var.COMPILE_TIMEOUT: repr(measure.compile_timeout) if measure.compile_timeout else None,
        Var.SIDE_BY_SIDE: None if measure.side_by_side else "0",
        Var.DEFINITIONS: _join(define.definitions) or None,
        Var.STANDARD: None if define.standard else "0",
        Var.WHEELHOUSE: _join(history.wheelhouses) or None,
        Var.TORCH_WHEEL: str(history.torch_wheel) if history.torch_wheel else None,
        Var.SOURCE_BUILD: None if history.source_build else "0",
    }
    return {var.value: text for var, text in values.items() if text is not None}


def child_environ(settings: Settings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment by default) with its benchkit variables replaced
    by those of `settings`: what a child process must see to run with these settings."""
    base = os.environ if base is None else base
    names = {var.value for var in Var}
    return {**{k: v for k, v in base.items() if k not in names}, **to_environ(settings)}
