"""Small real models whose operator inputs ship with benchkit.

The bundled logs in ``benchkit/measure/operators/logs/`` are recorded from one
training step (forward, loss, backward) of each model here, in float32 on the
CPU, with `benchkit.measure.operators.recorder.OperatorInputRecorder`. Sizes are chosen so the
ops are realistic building blocks (an MLP, a ResNet-style CNN block, a
transformer encoder layer) yet small enough to compile and time on a laptop.

Regenerate the logs after changing a model::

    python scripts/record_operator_logs.py   # writes benchkit/measure/operators/logs/*.txt
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUNDLED_LOG_DIR = Path(__file__).resolve().parent / "logs"


@dataclass(frozen=True)
class ModelSpec:
    """How to build a model and one batch of training data for it."""

    name: str
    description: str
    build: Callable[[], tuple[Any, Any, Any]]  # -> (module, inputs, targets)


def _mlp() -> tuple[Any, Any, Any]:
    import torch
    from torch import nn

    model = nn.Sequential(
        nn.Linear(256, 512),
        nn.GELU(),
        nn.LayerNorm(512),
        nn.Linear(512, 1024),
        nn.GELU(),
        nn.Linear(1024, 768),
        nn.GELU(),
        nn.Linear(768, 256),
        nn.ReLU(),
        nn.Linear(256, 10),
    )
    return model, torch.randn(64, 256), torch.randint(0, 10, (64,))


class _ConvNet:
    """Two ResNet-style stages (conv-bn-relu, residual block, max-pool) and a pooled linear head."""

    @staticmethod
    def build() -> tuple[Any, Any, Any]:
        import torch
        from torch import nn

        class Residual(nn.Module):
            def __init__(self, channels: int) -> None:
                super().__init__()
                self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                self.bn1 = nn.BatchNorm2d(channels)
                self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                self.bn2 = nn.BatchNorm2d(channels)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                y = torch.relu(self.bn1(self.conv1(x)))
                return torch.relu(self.bn2(self.conv2(y)) + x)

        def stage(inputs: int, outputs: int) -> nn.Module:
            return nn.Sequential(
                nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),
                nn.BatchNorm2d(outputs),
                nn.ReLU(),
                Residual(outputs),
                nn.MaxPool2d(2),
            )

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.stages = nn.Sequential(stage(3, 16), stage(16, 32))
                self.head = nn.Linear(32, 10)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.head(self.stages(x).mean(dim=(2, 3)))

        return Net(), torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))


class _EncoderClassifier:
    """One pre-norm transformer encoder layer with a mean-pooled classification head."""

    @staticmethod
    def build() -> tuple[Any, Any, Any]:
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                # dropout=0 keeps the step deterministic; the recorded ops are the same otherwise.
                self.layer = nn.TransformerEncoderLayer(
                    d_model=128, nhead=4, dim_feedforward=512, dropout=0.0, batch_first=True, norm_first=True
                )
                self.head = nn.Linear(128, 10)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.head(self.layer(x).mean(dim=1))

        return Encoder(), torch.randn(8, 64, 128), torch.randint(0, 10, (8,))


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("mlp", "5-layer MLP with GELU, LayerNorm and ReLU, batch 64 x 256", _mlp),
        ModelSpec(
            "cnn",
            "two ResNet-style conv stages with BatchNorm and max-pooling, batch 8 x 3 x 32 x 32",
            _ConvNet.build,
        ),
        ModelSpec(
            "transformer",
            "pre-norm transformer encoder layer (d=128, 4 heads), batch 8 x 64 tokens",
            _EncoderClassifier.build,
        ),
    )
}


def training_step(spec: ModelSpec) -> Callable[[], None]:
    """One forward + cross-entropy + backward pass, seeded so the recording is reproducible."""
    import torch

    torch.manual_seed(0)
    model, inputs, targets = spec.build()
    model.train()

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()

    return step


def record_model(spec: ModelSpec) -> Any:
    """Record the operator inputs of one training step of ``spec``."""
    from benchkit.measure.operators.recorder import record

    step = training_step(spec)
    return record(step)


def bundled_log_path(name: str) -> Path:
    return BUNDLED_LOG_DIR / f"{name}.txt"
