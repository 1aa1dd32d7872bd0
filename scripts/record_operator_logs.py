"""Record the bundled operator-input logs from benchkit's small models.

    python scripts/record_operator_logs.py [--out DIR] [MODEL ...]
    python scripts/record_operator_logs.py --gpu [--out DIR]

Writes ``benchkit/measure/operators/logs/<model>.txt`` (see
`benchkit.measure.operators.models`), or with ``--gpu`` the CUDA default set's
``logs/gpu/<model>_<dtype>.txt`` (see `benchkit.measure.operators.gpu_models`, recorded on
the meta device); run it after changing a model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit.measure.operators.gpu_models import GPU_LOG_DIR, GPU_MODELS, RECORDED_DTYPES, record_gpu_model
from benchkit.measure.operators.models import BUNDLED_LOG_DIR, MODELS, record_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the bundled operator-input logs.")
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--gpu", action="store_true", help="record the CUDA default set's models instead")
    parser.add_argument("models", nargs="*", default=list(MODELS), help=f"models ({', '.join(MODELS)})")
    args = parser.parse_args(argv)
    if args.gpu:
        out = args.out or GPU_LOG_DIR
        out.mkdir(parents=True, exist_ok=True)
        for name, spec in GPU_MODELS.items():
            for dtype in RECORDED_DTYPES:
                path = out / f"{name}_{dtype}.txt"
                record_gpu_model(spec, dtype).write(path)
                print(f"wrote {path}")
        return 0
    args.out = args.out or BUNDLED_LOG_DIR
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
