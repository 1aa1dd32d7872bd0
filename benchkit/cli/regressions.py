"""`benchkit regressions`: steps over the whole history (see `benchkit.report.steps.changepoints`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchkit.cli.cases import add_bench_option
from benchkit.cli.options import add_damage_option
from benchkit.report.steps import changepoints


def _cmd_regressions(args: argparse.Namespace) -> int:
    from benchkit.cli.cases import asv_bench, nothing_matched
    from benchkit.errors import UserError
    from benchkit.history.results.read import (
        DamagedFile,
        benchmark_units,
        load_asv_config,
        load_history,
        pick_machine,
    )
    from benchkit.report.gate.check import check_config_for, metric_judge, selected
    from benchkit.util import atomic_write_json

    conf = load_asv_config(args.asv_config)
    config = check_config_for(args.asv_config, args.config)
    machine = pick_machine(conf.results_dir, args.machine)
    damaged: list[DamagedFile] | None = [] if args.skip_damaged else None
    history = load_history(conf, machine, args.env, damaged)
    for file in damaged or ():
        print(f"benchkit regressions: --skip-damaged: left out {file.describe()}", file=sys.stderr)
    if not history:
        raise UserError(
            f"no results of any commit for machine {machine} in {conf.results_dir}: nothing to scan"
        )
    bench = asv_bench(args.bench)
    if bench:
        history = [selected(result_set, bench) for result_set in history]
        if not any(r.measurements for r in history):
            raise UserError(nothing_matched(args.bench).replace("benchmark case", "benchmark result"))
    metric_of = metric_judge(benchmark_units(conf, damaged), config)
    found = changepoints.history_steps(
        history,
        metric_of,
        lambda name: config.rule_for(name, metric_of(name))[1],
        config.thresholds["instructions"],
    )
    steps = found.steps
    print(f"# {len(steps)} step(s) over {len(history)} commit(s) on machine {machine}")
    sys.stdout.write(changepoints.format_table(steps))
    for disturbed in found.disturbed:
        print(f"# wall time of build {disturbed.commit[:8]} left out: {disturbed.describe()}")
    for commit, shift in found.shifted:
        print(f"# wall time of build {commit[:8]} is environment-shifted: {shift}")
    meanings = changepoints.legend(steps, disturbed=bool(found.disturbed))
    if meanings:
        print("# labels:")
        for label, meaning in meanings.items():
            print(f"#   {label}: {meaning}")
    if args.json:
        atomic_write_json(
            args.json,
            {
                "machine": machine,
                "commits": [r.commit for r in history],
                "interval_level": changepoints.INTERVAL_LEVEL,
                "steps": [
                    {
                        **s.as_json(),
                        "judged": changepoints.judged(s),
                        "shown_label": changepoints.shown_label(s),
                    }
                    for s in steps
                ],
                "labels": changepoints.LABEL_MEANINGS,
                "shifted_builds": [{"commit": c, "shift": text} for c, text in found.unreliable()],
            },
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "regressions",
        help="steps over the whole history per benchmark, tested against its noise, labelled per case",
        description=changepoints.__doc__.split("\n\n")[0],  # type: ignore[union-attr]
    )
    parser.add_argument(
        "--asv-config", type=Path, default=Path("asv.conf.json"), help="default: ./asv.conf.json"
    )
    parser.add_argument(
        "--config", type=Path, help="thresholds (default: benchkit-check.toml by asv.conf.json)"
    )
    parser.add_argument("--machine", help="asv machine name (needed when results hold several machines)")
    parser.add_argument("--env", help="only this asv environment")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the steps as JSON to OUT")
    add_bench_option(
        parser, "only benchmarks matching REGEX (repeatable; asv's name or a case's readable key)"
    )
    add_damage_option(parser)
    parser.set_defaults(func=_cmd_regressions)
