"""Side by side: `benchkit operators` (its CSV) against the operatorbench reference (its JSON).

    python scripts/gpu_compare.py --title T --benchkit-csv X.csv --reference-json Y.json \
        [--benchkit-seconds S --reference-seconds S] [--note LINE]
    python scripts/gpu_compare.py --title T --benchkit-csv SECOND_REFERENCE.json ...   # A/A

A JSON file in place of the CSV compares two runs of the reference: how far the method
moves from one process to the next.

Prints, per operator the reference measured, both median speedups and their difference,
then: operators within 5 %, inputs that failed in benchkit but not in the reference, and
both commands' wall times. Exit status 0; the figures are for a person to read.
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
    parser.add_argument("--reference-json", type=Path, required=True)
    parser.add_argument("--benchkit-seconds", type=float, help="wall time of the benchkit command")
    parser.add_argument("--reference-seconds", type=float, help="wall time of the reference command")
    parser.add_argument("--note", default="", help="one line printed under the title")
    args = parser.parse_args(argv)

    print(f"## {args.title}")
    if args.note:
        print(f"\n{args.note}\n")
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
        rows = {row["Operator"]: row for row in csv.DictReader(args.benchkit_csv.read_text().splitlines())}
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


if __name__ == "__main__":
    sys.exit(main())
