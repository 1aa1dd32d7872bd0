"""Record the operator inputs of one real BERT training step as an operator-input log.

    python scripts/record_bert_log.py --out bert_fp16.txt [--dtype float16] [--batch 64] [--seq 128]

The model is transformers' ``BertForMaskedLM`` built from ``BertConfig()`` (bert-base's
sizes: 12 layers, hidden 768, vocabulary 30522; random weights, nothing downloaded), the
whole model in ``--dtype`` on the GPU, with its eager attention (matmuls and softmax,
the operators inductor generates code for). One step: forward with masked-LM labels,
backward. Without transformers, benchkit's own BERT-base-sized model
(`benchkit.measure.operators.gpu_models`) is recorded instead, and the script says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtype", choices=("float16", "float32", "bfloat16"), default="float16")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)

    import torch

    from benchkit.measure.operators.recorder import record

    dtype = getattr(torch, args.dtype)
    try:
        from transformers import BertConfig, BertForMaskedLM
    except ImportError:
        from benchkit.measure.operators.gpu_models import GPU_MODELS, record_gpu_model

        print("record_bert_log: transformers is not installed; recording benchkit's BERT-sized model")
        record_gpu_model(GPU_MODELS["bert"], args.dtype).write(args.out)
        return 0
    torch.manual_seed(0)
    config = BertConfig()
    config._attn_implementation = "eager"
    model = BertForMaskedLM(config).to(device=args.device, dtype=dtype).train()
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=args.device)

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()

    step()  # first step outside the recording: lazy initialisation is not training
    model.zero_grad(set_to_none=True)
    recorder = record(step)
    recorder.write(args.out)
    calls = sum(sum(counter.values()) for counter in recorder.calls.values())
    print(f"record_bert_log: {len(recorder.calls)} operators, {calls} calls -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
