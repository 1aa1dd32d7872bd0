"""Side by side: `benchkit operators` (its CSV) against the operatorbench reference (its JSON),
or two runs of benchkit against each other.

    python -m lab.gpu_compare --title T --benchkit-csv X.csv --reference-json Y.json \
        [--benchkit-seconds S --reference-seconds S] [--note LINE]
    python -m lab.gpu_compare --title T --benchkit-csv SECOND_REFERENCE.json ...   # A/A
    python -m lab.gpu_compare --title T --benchkit-csv A.csv --second-csv B.csv  # benchkit A/A

A JSON file in place of the CSV compares two runs of the reference: how far the method
moves from one process to the next.

Prints, per operator the reference measured, both median speedups and their difference,
then: operators within 5 %, inputs that failed in benchkit but not in the reference, and
both commands' wall times. Two benchkit CSVs (`--second-csv`): per operator both median
speedups, their difference and whether the two runs timed the same generated kernels (the
CSV's ``kernels`` column), then how many operators agree within 5 % and how many ran the same
kernels. Exit status 0; the figures are for a person to read.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

TOLERANCE = 0.05


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--title", required=True)
    parser.add_argument("--benchkit-csv", type=Path, required=True)
    parser.add_argument("--reference-json", type=Path, help="the reference's JSON")
    parser.add_argument("--second-csv", type=Path, help="a second benchkit CSV: benchkit against itself")
    parser.add_argument("--benchkit-seconds", type=float, help="wall time of the benchkit command")
    parser.add_argument("--reference-seconds", type=float, help="wall time of the reference command")
    parser.add_argument("--note", default="", help="one line printed under the title")
    args = parser.parse_args(argv)
    if (args.reference_json is None) == (args.second_csv is None):
        parser.error("give one of --reference-json and --second-csv")

    print(f"## {args.title}")
    if args.note:
        print(f"\n{args.note}\n")
    if args.second_csv is not None:
        return compare_benchkit_runs(
            args.benchkit_csv, args.second_csv, args.benchkit_seconds, args.reference_seconds
        )
    if not args.benchkit_csv.is_file() or not args.reference_json.is_file():
        missing = f"{args.benchkit_csv.name} or {args.reference_json.name}"
        print(f"- nothing to compare: {missing} was not written\n")
        return 0
    if args.benchkit_csv.suffix == ".json":
        rows = {
            name: {
                "inductor 50th": str(entry["quantiles"][1]),
                "inputs": str(len(entry["speedups"])),
                "failed": "0",
            }
            for name, entry in json.loads(args.benchkit_csv.read_text())["operators"].items()
            if entry["quantiles"]
        }
    else:
        rows = _csv_rows(args.benchkit_csv)
    reference = json.loads(args.reference_json.read_text())["operators"]
    print("| operator | benchkit p50 | reference p50 | difference | benchkit inputs (failed) "
          "| reference inputs |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    compared = within = 0
    lost: list[str] = []
    for name, ref in sorted(reference.items()):
        ref_mid = ref["quantiles"][1] if ref["quantiles"] else None
        row = rows.get(name)
        ours = float(row["inductor 50th"]) if row else None
        failed = int(row["failed"]) if row else None
        if ref_mid is not None and (row is None or failed):
            lost.append(name)
        difference = ""
        if ours is not None and ref_mid is not None:
            compared += 1
            relative = ours / ref_mid - 1
            within += abs(relative) <= TOLERANCE
            difference = f"{relative:+.1%}"
        inputs = f"{row['inputs']} ({failed})" if row else "-"
        print(
            f"| {name} | {ours if ours is None else f'{ours:.3f}'} | "
            f"{ref_mid if ref_mid is None else f'{ref_mid:.3f}'} | {difference} | {inputs} | "
            f"{len(ref['speedups'])} |"
        )
    extra = sorted(set(rows) - set(reference))
    print()
    share = f"{within}/{compared} ({within / compared:.0%})" if compared else "none compared"
    print(
        f"- operators compared: {compared}; median speedup within {TOLERANCE:.0%} of the reference: {share}"
    )
    print(f"- measured by the reference but failed or missing in benchkit: {', '.join(lost) or 'none'}")
    print(f"- measured by benchkit only (the reference skips them): {', '.join(extra) or 'none'}")
    if args.benchkit_seconds is not None and args.reference_seconds is not None:
        print(
            f"- wall time, whole command: benchkit {args.benchkit_seconds:.0f} s, "
            f"reference {args.reference_seconds:.0f} s"
        )
    print()
    return 0


def _csv_rows(path: Path) -> dict[str, dict[str, str]]:
    return {row["Operator"]: row for row in csv.DictReader(path.read_text().splitlines())}


def compare_benchkit_runs(
    first: Path, second: Path, first_seconds: float | None, second_seconds: float | None
) -> int:
    """Two benchkit runs of one log: median speedups and generated kernels per operator."""
    if not first.is_file() or not second.is_file():
        print(f"- nothing to compare: {first} or {second} was not written\n")
        return 0
    a, b = _csv_rows(first), _csv_rows(second)
    print("| operator | first p50 | second p50 | difference | same kernels |")
    print("|---|---:|---:|---:|---|")
    compared = within = same = recorded = 0
    for name in sorted(set(a) & set(b)):
        mid_a, mid_b = float(a[name]["inductor 50th"]), float(b[name]["inductor 50th"])
        relative = mid_b / mid_a - 1
        compared += 1
        within += abs(relative) <= TOLERANCE
        kernels = a[name].get("kernels") or "", b[name].get("kernels") or ""
        if all(kernels):
            recorded += 1
            same += kernels[0] == kernels[1]
            shown = "yes" if kernels[0] == kernels[1] else f"no ({kernels[0]} → {kernels[1]})"
        else:
            shown = "not recorded"
        print(f"| {name} | {mid_a:.3f} | {mid_b:.3f} | {relative:+.1%} | {shown} |")
    print()
    share = f"{within}/{compared} ({within / compared:.0%})" if compared else "none compared"
    agree = f"median speedup within {TOLERANCE:.0%} across the runs: {share}"
    print(f"- operators in both runs: {compared}; {agree}")
    print(f"- the same generated kernels in both runs: {same}/{recorded} operators that recorded them")
    only = sorted(set(a) ^ set(b))
    print(f"- measured in one run only: {', '.join(only) or 'none'}")
    if first_seconds is not None and second_seconds is not None:
        print(f"- wall time, whole command: first {first_seconds:.0f} s, second {second_seconds:.0f} s")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
