"""Models at the sizes a GPU trains, whose operator inputs make the CUDA default set.

The logs in ``benchkit/measure/operators/logs/gpu/`` are recorded from one
training step (forward, loss, backward) of each model here, in float16 (the
whole model in half precision, as a BERT fp16 training log is) and in
float32. Recording runs on PyTorch's ``meta`` device: only shapes, strides and
dtypes are computed, so a BERT-base-sized step records in seconds on any
machine, and the dtypes are the ones the CUDA kernels produce (layer norm's
mean and rstd stay float32 for half inputs, as on the GPU; on the CPU they
would be half). Attention is written out (matmul, softmax), as BERT's eager
implementation does, rather than a fused kernel whose choice depends on the
device.

Regenerate the logs after changing a model::

    python scripts/record_operator_logs.py --gpu   # writes benchkit/measure/operators/logs/gpu/*.txt
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GPU_LOG_DIR = Path(__file__).resolve().parent / "logs" / "gpu"
RECORDED_DTYPES = ("float16", "float32")


@dataclass(frozen=True)
class GpuModelSpec:
    name: str
    description: str
    build: Callable[[], tuple[Any, Any, Any]]  # -> (module, inputs, targets), on the meta device


def _bert_like() -> tuple[Any, Any, Any]:
    """Two BERT-base encoder layers with a masked-LM head: hidden 768, 12 heads, FFN 3072,
    vocabulary 30522, batch 32 x 128 tokens (layers beyond two repeat the same calls)."""
    import torch
    from torch import nn

    hidden, heads, ffn, vocab, batch, tokens = 768, 12, 3072, 30522, 32, 128

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(3))
            self.out = nn.Linear(hidden, hidden)
            self.norm = nn.LayerNorm(hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            def split(t: torch.Tensor) -> torch.Tensor:
                return t.view(batch, tokens, heads, hidden // heads).transpose(1, 2)

            q, k, v = (split(layer(x)) for layer in self.qkv)
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hidden // heads)
            context = torch.matmul(scores.softmax(dim=-1), v)
            context = context.transpose(1, 2).reshape(batch, tokens, hidden)
            return self.norm(self.out(context) + x)

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = SelfAttention()
            self.up = nn.Linear(hidden, ffn)
            self.down = nn.Linear(ffn, hidden)
            self.norm = nn.LayerNorm(hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.attention(x)
            return self.norm(self.down(nn.functional.gelu(self.up(x))) + x)

    class MaskedLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.embed_norm = nn.LayerNorm(hidden)
            self.layers = nn.Sequential(Layer(), Layer())
            self.transform = nn.Linear(hidden, hidden)
            self.head_norm = nn.LayerNorm(hidden)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.layers(self.embed_norm(self.embed(ids)))
            x = self.head_norm(nn.functional.gelu(self.transform(x)))
            return self.decoder(x).view(batch * tokens, vocab)

    ids = torch.zeros(batch, tokens, dtype=torch.long, device="meta")
    targets = torch.zeros(batch * tokens, dtype=torch.long, device="meta")
    return MaskedLM(), ids, targets


def _resnet_like() -> tuple[Any, Any, Any]:
    """A ResNet-50 first stage at batch 64 on 224 x 224 images: stem conv, batch norm, ReLU,
    max-pool, one bottleneck block (64 -> 256 channels), pooled linear head."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(64, 64, 1, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(),
                nn.Conv2d(64, 256, 1, bias=False),
                nn.BatchNorm2d(256),
            )
            self.shortcut = nn.Sequential(nn.Conv2d(64, 256, 1, bias=False), nn.BatchNorm2d(256))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.body(x) + self.shortcut(x))

    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        Bottleneck(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, 1000),
    )
    images = torch.zeros(64, 3, 224, 224, device="meta")
    targets = torch.zeros(64, dtype=torch.long, device="meta")
    return model, images, targets


GPU_MODELS: dict[str, GpuModelSpec] = {
    spec.name: spec
    for spec in (
        GpuModelSpec(
            "bert",
            "two BERT-base encoder layers + masked-LM head, batch 32 x 128 tokens",
            _bert_like,
        ),
        GpuModelSpec("resnet", "ResNet-50 stem and first bottleneck, batch 64 x 3 x 224 x 224", _resnet_like),
    )
}


def record_gpu_model(spec: GpuModelSpec, dtype: str) -> Any:
    """The recorder after one training step of ``spec`` in ``dtype``, on the meta device."""
    import torch

    from benchkit.measure.operators.recorder import record

    model, inputs, targets = spec.build()
    model = model.to(device="meta", dtype=getattr(torch, dtype)).train()
    if inputs.is_floating_point():
        inputs = inputs.to(getattr(torch, dtype))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()

    return record(step)


def gpu_log_path(name: str, dtype: str) -> Path:
    return GPU_LOG_DIR / f"{name}_{dtype}.txt"
