"""`benchkit export`: each torch build's figures as records of PyTorch's benchmark database.

PyTorch's performance CI uploads JSON records that its benchmark database ingests and the HUD
dashboards read (pytorch/test-infra, table ``oss_ci_benchmark_v3``). A record holds one metric
of one benchmark: ``benchmark`` {name, mode, dtype, extra_info}, ``model`` {name, type, backend,
origins, extra_info}, ``metric`` {name, benchmark_values, target_value, extra_info},
``dependencies`` and ``runners``. The table types every ``extra_info`` as a map of strings,
``benchmark_values`` as floats and ``target_value`` as one float; the uploader adds the
workflow's own columns (timestamp, repo, head_sha, workflow and job ids).

benchkit writes one record per figure with a number: an instruction count, a wall time (the
fastest sample of each asv round, i.e. process), an operator input's eager time, compiled time
and their ratio (one replicate per timing process) and its cold compile time. What inductor
generated and the cache state go into the compile records' ``extra_info``; benchkit's verdict
against the build's predecessor on the history (`benchkit check PREDECESSOR BUILD`) into each
metric's. Failed and skipped figures have no number: they are listed, not written.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchkit.errors import UserError
from benchkit.history.builds.flavour import of_label
from benchkit.history.results.read import LoadedResults, Measurement, ResultSet, resolve_commit
from benchkit.names import BenchmarkName, Metric
from benchkit.report.gate.check import check_config_for, judge_results
from benchkit.report.gate.check_types import Comparison
from benchkit.report.site.data import (
    BenchmarkInfo,
    Build,
    benchmark_infos_by_name,
    operator_names,
    read_builds,
    unquote,
)

BENCHMARK_NAME = "benchkit"
ORIGINS = ["benchkit"]
NO_TARGET = 0.0  # the table's target_value is a float and benchkit sets no target

# benchkit's metrics under the names the records give them (the unit goes into extra_info)
METRIC_NAMES: Mapping[Metric, str] = {
    Metric.INSTRUCTIONS: "instruction_count",
    Metric.WALL_TIME: "wall_time_s",
    Metric.EAGER_SECONDS: "eager_time_s",
    Metric.COMPILED_SECONDS: "compiled_time_s",
    Metric.COMPILED_OVER_EAGER: "compiled_over_eager_time",
    Metric.COMPILE_SECONDS: "compile_time_s",
}
_EAGER = (Metric.EAGER_SECONDS,)


@dataclasses.dataclass(frozen=True)
class BuildExport:
    """One build's records, and what it could not write."""

    commit: str
    records: tuple[dict[str, Any], ...]
    failed: tuple[str, ...]  # figures whose benchmark failed: no number to write
    skipped: int  # figures skipped where they were measured (CUDA without a GPU...)
    against: str | None  # the predecessor whose verdict the records carry
    no_verdict: str  # why the records carry no verdict ("" when they do)
    verdicts: tuple[tuple[str, int], ...] = ()  # (verdict, how many figures) against `against`


@dataclasses.dataclass(frozen=True)
class ExportContext:
    """What every build's records share: the results, their builds, the machine."""

    loaded: LoadedResults
    conf_path: Path
    machine: str
    env: str | None
    builds: Mapping[str, Build]
    infos: Mapping[str, BenchmarkInfo]
    runner: Mapping[str, Any]
    line: tuple[str, ...]  # the history's main line on the machine, oldest first


def runner_of(machine_info: Mapping[str, Any]) -> dict[str, Any]:
    """asv's machine.json as the table's runner: its name, architecture, CPU, cores and memory."""
    ram = str(machine_info.get("ram") or "0")
    cores = str(machine_info.get("num_cpu") or "0")
    return {
        "name": str(machine_info.get("machine") or ""),
        "type": str(machine_info.get("arch") or ""),
        "cpu_info": str(machine_info.get("cpu") or ""),
        "cpu_count": int(cores) if cores.isdigit() else 0,
        "mem_info": "",
        "avail_mem_in_gb": int(ram) // 2**30 if ram.isdigit() else 0,
        "gpu_info": "",
        "gpu_count": 0,
        "gpu_mem_info": "",
        "avail_gpu_mem_in_gb": 0,
        "extra_info": {"os": str(machine_info.get("os") or "")},
    }


def predecessor(ctx: ExportContext, commit: str) -> str | None:
    """The build `commit` is judged against: the one before it on the history's main line, or for
    a build of another branch (a PR) the nearest of its first parents with results."""
    if commit in ctx.line:
        position = ctx.line.index(commit)
        return ctx.line[position - 1] if position else None
    measured = ctx.loaded.sets.get(ctx.machine, {})
    ancestors = subprocess.run(
        ["git", "-C", str(ctx.loaded.conf.repo), "rev-list", "--first-parent", "--max-count=1000", commit],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    return next((c for c in ancestors[1:] if c in measured), None)


def resolve_builds(ctx: ExportContext, names: Sequence[str]) -> list[str]:
    """Full hashes of the builds `names` name (branch, tag, hash or prefix); every build with
    results on the machine when none is named, the history's order first."""
    known = ctx.loaded.sets.get(ctx.machine, {})
    if not names:
        return [*ctx.line, *sorted(set(known) - set(ctx.line))]
    commits = []
    for name in names:
        commit = ctx.loaded.full_commit(ctx.machine, resolve_commit(ctx.loaded.conf, name, ctx.machine))
        if commit is None:
            raise UserError(f"build {name!r} has no results on machine {ctx.machine}: measure it first")
        commits.append(commit)
    return list(dict.fromkeys(commits))


def export_build(ctx: ExportContext, commit: str) -> BuildExport:
    """The records of one build (a full hash with results on the machine)."""
    result_set = ctx.loaded.result_set(commit, ctx.machine, ctx.env)
    against = predecessor(ctx, commit)
    verdicts: Mapping[tuple[str, str], Comparison] = {}
    no_verdict = "" if against else "no earlier build with results: no verdict"
    if against:
        try:
            verdict = judge_results(
                against, commit, ctx.loaded, check_config_for(ctx.conf_path), ctx.machine, ctx.env
            )
            verdicts = {(c.name, c.env): c for c in verdict.comparisons}
        except UserError as e:
            no_verdict = f"no verdict against {against[:8]}: {e}"
    kernels = _kernel_facts(result_set)
    records, failed, skipped = [], [], 0
    for (name, env), measurement in sorted(result_set.measurements.items()):
        parsed = BenchmarkName.parse(name)
        if parsed.metric is not None and parsed.metric.is_record:
            continue
        if not measurement.has_number:
            failed += [f"{name} [{env}]"] if measurement.failed else []
            skipped += measurement.skipped
            continue
        figure = _Figure(name, env, parsed, measurement, ctx.infos.get(name))
        judged = verdicts.get((name, env))
        records.append(_record(ctx, commit, figure, kernels, judged, against))
    judged_against = against if verdicts else None
    counted = collections.Counter(c.status.value for c in verdicts.values())
    return BuildExport(
        commit,
        tuple(records),
        tuple(failed),
        skipped,
        judged_against,
        no_verdict,
        tuple(counted.most_common()),
    )


@dataclasses.dataclass(frozen=True)
class _Figure:
    name: str
    env: str
    parsed: BenchmarkName
    measurement: Measurement
    info: BenchmarkInfo | None

    @property
    def unit(self) -> str:
        unit = (self.info.unit if self.info else None) or self.parsed.fallback_unit()
        return unit or ""

    @property
    def param(self) -> str:
        """The operator input (asv's parameter, unquoted) or ""."""
        return unquote(self.parsed.params or "")


def _kernel_facts(result_set: ResultSet) -> dict[tuple[str, str, str | None], dict[str, str]]:
    """(env, class, input) -> what inductor generated and the cache state of its compile."""
    facts: dict[tuple[str, str, str | None], dict[str, str]] = {}
    for (name, env), m in result_set.measurements.items():
        parsed = BenchmarkName.parse(name)
        if parsed.metric is None or not parsed.metric.is_record or not m.has_number:
            continue
        slot = facts.setdefault((env, parsed.class_name, parsed.params), {})
        if parsed.metric is Metric.KERNEL_HASH:
            slot["generated_kernel"] = f"{int(m.value or 0):012x}"
        elif parsed.metric is Metric.COMPILE_CACHE_HIT:
            slot["inductor_cache"] = "warm" if m.value else "cold"
    return facts


def _values(figure: _Figure) -> tuple[list[float], str]:
    """The figure's values and what they are."""
    m, metric = figure.measurement, figure.parsed.metric
    if metric is not None and metric.replicated and m.samples:
        return [float(v) for v in m.samples], "one per timing process"
    if figure.parsed.asv_timing and m.samples:
        rounds = m.round_logs
        if rounds:
            return [math.exp(v) for v in rounds], "the fastest sample of each asv round (process)"
    return [float(m.value)], "asv's value"  # type: ignore[arg-type]  # has_number: a float


def _verdict_info(judged: Comparison | None, against: str | None) -> dict[str, str]:
    if judged is None or against is None:
        return {}
    info = {"verdict": judged.status.value, "verdict_against": against}
    change, interval = judged.judged_change, judged.interval()
    if change is not None:
        info["verdict_change"] = f"{math.exp(change):.6g}"
    if interval is not None:
        info["verdict_interval"] = f"{interval[0]:.6g}..{interval[1]:.6g}"
    if judged.mdc is not None:
        info["verdict_mdc"] = f"{judged.mdc:.6g}"
    p = judged.p_value()
    if p is not None:
        info["verdict_p"] = f"{p:.3g}"
    if judged.note:
        info["verdict_note"] = judged.note
    return info


def _model(figure: _Figure) -> dict[str, Any]:
    parsed, metric = figure.parsed, figure.parsed.metric
    extra = {"asv_benchmark": figure.name, "environment": figure.env}
    if parsed.device is not None:  # an operator input
        backend = "eager" if metric in _EAGER else "inductor"
        name = operator_names().get(parsed.class_name, parsed.class_name)
        return {"name": name, "type": "aten operator", "backend": backend, "origins": ORIGINS,
                "extra_info": {**extra, "input": figure.param}}  # fmt: skip
    pretty = figure.info.pretty if figure.info else parsed.case
    return {"name": pretty.rsplit(" [", 1)[0], "type": "benchkit case", "backend": "", "origins": ORIGINS,
            "extra_info": extra}  # fmt: skip


def _mode_and_dtype(figure: _Figure) -> tuple[str, str]:
    from benchkit.define.expand import key_runs_backward
    from benchkit.measure.operators.inputs import label_dtype

    if figure.parsed.device is not None:
        return "inference", label_dtype(figure.param) or ""
    backward = key_runs_backward(figure.info.pretty.rsplit(" [", 1)[0]) if figure.info else None
    return {True: "training", False: "inference", None: ""}[backward], ""


def _record(
    ctx: ExportContext,
    commit: str,
    figure: _Figure,
    kernels: Mapping[tuple[str, str, str | None], Mapping[str, str]],
    judged: Comparison | None,
    against: str | None,
) -> dict[str, Any]:
    parsed, metric = figure.parsed, figure.parsed.metric
    values, what = _values(figure)
    build = ctx.builds.get(commit)
    mode, dtype = _mode_and_dtype(figure)
    metric_extra = {"unit": figure.unit, "values": what, "asv_value": repr(figure.measurement.value)}
    if metric in (Metric.COMPILED_SECONDS, Metric.COMPILE_SECONDS, Metric.COMPILED_OVER_EAGER):
        metric_extra.update(kernels.get((figure.env, parsed.class_name, parsed.params), {}))
    torch_version = (build.torch_version if build else None) or ""
    flavour = of_label(torch_version)
    return {
        "benchmark": {
            "name": BENCHMARK_NAME,
            "mode": mode,
            "dtype": dtype,
            "extra_info": {
                "device": parsed.device or "cpu",
                "arch": str(ctx.runner["type"]),
                "suite": parsed.module,
                "machine": ctx.machine,
            },
        },
        "model": _model(figure),
        "metric": {
            "name": METRIC_NAMES.get(metric, parsed.method) if metric else parsed.method,
            "benchmark_values": values,
            "target_value": NO_TARGET,
            "extra_info": {**metric_extra, **_verdict_info(judged, against)},
        },
        "dependencies": {
            "pytorch": {
                "repo": "pytorch/pytorch",
                "branch": "",
                "sha": (build.git_version if build else None) or "",
                "version": torch_version,
                "extra_info": {
                    "flavour": flavour.name() if flavour else "",
                    "history_commit": commit,
                    "tags": ",".join(build.tags) if build else "",
                },
            }
        },
        "runners": [dict(ctx.runner)],
    }


def _builds(conf: Any, commits: set[str]) -> Mapping[str, Build]:
    """The torch build of each commit; none known when the history is not at hand (results
    copied from another machine): the records then name only the history's commit."""
    from asv import util as asv_util
    from asv.repo import get_repo

    try:
        return read_builds(get_repo(conf), commits)
    except (asv_util.UserError, asv_util.ProcessError, OSError, UserError):
        return {}


def load_context(conf_path: Path, machine: str | None, env: str | None, skip_damaged: bool) -> ExportContext:
    """Read the project's results, builds and machine once for every build's export."""
    import json

    from benchkit.history.results.read import load_asv_config, pick_machine, read_results

    conf = load_asv_config(conf_path)
    if not Path(conf.results_dir).is_dir():
        raise UserError(f"no asv results in {conf.results_dir}: run `benchkit main` first")
    machine = pick_machine(conf.results_dir, machine)
    loaded = read_results(conf, [] if skip_damaged else None, (machine,))
    commits = set(loaded.sets.get(machine, {}))
    if not commits:
        raise UserError(f"no results of machine {machine} in {conf.results_dir}: run `benchkit main` first")
    try:
        machine_info = json.loads((Path(conf.results_dir) / machine / "machine.json").read_text())
    except (OSError, ValueError):
        machine_info = {"machine": machine}
    return ExportContext(
        loaded=loaded,
        conf_path=conf_path,
        machine=machine,
        env=env,
        builds=_builds(conf, commits),
        infos=benchmark_infos_by_name(loaded.infos),
        runner=runner_of(machine_info),
        line=tuple(s.commit for s in loaded.history(machine, env)),
    )
