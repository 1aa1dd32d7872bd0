"""Record the bundled operator-input logs from benchkit's small models.

    python scripts/record_operator_logs.py [--out DIR] [MODEL ...]

Writes ``benchkit/measure/operators/logs/<model>.txt`` (see
`benchkit.measure.operators.models`); run it after changing a model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit.measure.operators.models import BUNDLED_LOG_DIR, MODELS, record_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the bundled operator-input logs.")
    parser.add_argument("--out", type=Path, default=BUNDLED_LOG_DIR, help="output directory")
    parser.add_argument("models", nargs="*", default=list(MODELS), help=f"models ({', '.join(MODELS)})")
    args = parser.parse_args(argv)
    for name in args.models:
        if name not in MODELS:
            print(f"unknown model {name!r}; choose from {', '.join(MODELS)}", file=sys.stderr)
            return 2
        recorder = record_model(MODELS[name])
        path = args.out / f"{name}.txt"
        recorder.write(path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
