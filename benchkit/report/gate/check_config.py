"""The gate's reviewed configuration: default thresholds per metric and per-benchmark
overrides by regular expression, each with a reason (``benchkit-check.toml``/``.json``)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path

from benchkit.errors import UserError
from benchkit.names import MetricKind

METRICS = tuple(MetricKind)
# wall_time and ratio 0: each benchmark's own minimum detectable change (`benchkit.report.gate.check`).
DEFAULT_THRESHOLDS = {MetricKind.INSTRUCTIONS: 0.005, MetricKind.WALL_TIME: 0.0, MetricKind.RATIO: 0.0}
DEFAULT_CONFIG_NAMES = ("benchkit-check.toml", "benchkit-check.json")
METRIC_LABELS = {kind: kind.label for kind in MetricKind}


@dataclasses.dataclass(frozen=True)
class Override:
    pattern: re.Pattern[str]
    reason: str
    threshold: float | None = None
    metric: MetricKind | None = None
    ignore: bool = False


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    thresholds: Mapping[str, float]
    overrides: tuple[Override, ...] = ()
    source: str = "built-in defaults"

    def with_wall_factor(self, factor: float | None) -> CheckConfig:
        if factor is None:
            return self
        if factor < 1:
            raise UserError(f"--factor {factor}: must be at least 1 (1.10 means 10% slower)")
        return dataclasses.replace(
            self,
            thresholds={**self.thresholds, MetricKind.WALL_TIME: factor - 1},
            source=f"{self.source}, wall-time factor {factor:g} from --factor",
        )

    def rule_for(self, name: str, default_metric: MetricKind) -> tuple[MetricKind, float, Override | None]:
        """(metric, relative threshold, override that applied) for one benchmark."""
        for override in self.overrides:
            if override.pattern.search(name):
                metric = override.metric or default_metric
                threshold = override.threshold if override.threshold is not None else self.thresholds[metric]
                return metric, threshold, override
        return default_metric, self.thresholds[default_metric], None


def _check_threshold(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 100:
        raise UserError(f"{where}: threshold must be a number such as 0.005 (0.5%), got {value!r}")
    return float(value)


def parse_check_config(data: object, source: str) -> CheckConfig:
    """Validate a config document; every mistake names the file and the entry."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a table of settings at the top level")
    unknown = set(data) - {"thresholds", "override"}
    if unknown:
        raise UserError(
            f"{source}: unknown setting(s) {', '.join(sorted(unknown))} (known: thresholds, override)"
        )
    thresholds = dict(DEFAULT_THRESHOLDS)
    table = data.get("thresholds", {})
    if not isinstance(table, dict):
        raise UserError(f"{source}: [thresholds] must be a table of metric = number")
    for metric, value in table.items():
        if metric not in METRICS:
            raise UserError(f"{source}: [thresholds] {metric}: unknown metric (known: {', '.join(METRICS)})")
        thresholds[metric] = _check_threshold(value, f"{source}: [thresholds] {metric}")
    overrides = []
    entries = data.get("override", [])
    if not isinstance(entries, list):
        raise UserError(f"{source}: override must be a list of tables ([[override]] in TOML)")
    for index, entry in enumerate(entries, 1):
        where = f"{source}: override #{index}"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: expected a table")
        extra = set(entry) - {"match", "reason", "threshold", "metric", "ignore"}
        if extra:
            raise UserError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        match, reason = entry.get("match"), entry.get("reason")
        if not isinstance(match, str) or not match:
            raise UserError(f'{where}: needs match = "<regular expression over benchmark names>"')
        if not isinstance(reason, str) or not reason.strip():
            raise UserError(f"{where} ({match!r}): needs a reason, so reviewers know why it is exempt")
        try:
            pattern = re.compile(match)
        except re.error as e:
            raise UserError(f"{where}: invalid regular expression {match!r}: {e}") from None
        metric = entry.get("metric")
        if metric is not None and metric not in METRICS:
            raise UserError(f"{where}: unknown metric {metric!r} (known: {', '.join(METRICS)})")
        threshold = entry.get("threshold")
        ignore = entry.get("ignore", False)
        if not isinstance(ignore, bool):
            raise UserError(f"{where}: ignore must be true or false")
        overrides.append(
            Override(
                pattern=pattern,
                reason=reason.strip(),
                threshold=None if threshold is None else _check_threshold(threshold, where),
                metric=None if metric is None else MetricKind(metric),
                ignore=ignore,
            )
        )
    return CheckConfig(thresholds=thresholds, overrides=tuple(overrides), source=source)


def load_check_config(path: Path) -> CheckConfig:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"check config {path}: {e.strerror}") from None
    if path.suffix == ".json":
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise UserError(f"{path}: invalid JSON: {e}") from None
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            raise UserError(f"{path}: reading TOML needs Python 3.11; use a .json config instead") from None
        try:
            data = tomllib.loads(raw.decode())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise UserError(f"{path}: invalid TOML: {e}") from None
    else:
        raise UserError(f"{path}: check config must end in .toml or .json")
    return parse_check_config(data, str(path))
