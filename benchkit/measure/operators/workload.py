"""What to measure: operators and their logged inputs (bundled sets, model logs, a file)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit import settings
from benchkit.errors import UserError
from benchkit.measure.operators.gpu_models import GPU_LOG_DIR
from benchkit.measure.operators.index_inputs import has_rule
from benchkit.measure.operators.inputs import OperatorInput
from benchkit.measure.operators.log_format import OperatorLog, load_log, load_logs
from benchkit.measure.operators.models import BUNDLED_LOG_DIR, MODELS

# The operator set measured per commit (asv) and by `--suite default`: ops from
# the bundled model logs that inductor generates code for (no fallbacks, no
# convolutions), covering pointwise, reductions, normalizations, pooling and
# matmuls, forward and backward.
DEFAULT_OPERATORS: tuple[str, ...] = (
    "aten._log_softmax.default",
    "aten._log_softmax_backward_data.default",
    "aten.add.Tensor",
    "aten.addmm.default",
    "aten.clone.default",
    "aten.div.Scalar",
    "aten.gelu.default",
    "aten.gelu_backward.default",
    "aten.max_pool2d_with_indices.default",
    "aten.max_pool2d_with_indices_backward.default",
    "aten.mean.dim",
    "aten.mm.default",
    "aten.native_batch_norm.default",
    "aten.native_batch_norm_backward.default",
    "aten.native_layer_norm.default",
    "aten.native_layer_norm_backward.default",
    "aten.relu.default",
    "aten.select_backward.default",
    "aten.sum.dim_IntList",
    "aten.threshold_backward.default",
)
# Per operator, the default set keeps the inputs the models call most often,
# then the largest (most work): the calls whose speed matters.
DEFAULT_INPUTS_PER_OPERATOR = 3

# The operator set the asv suite measures on CUDA (`--suite cuda-default`): the same kinds
# of operator, on inputs of the sizes a GPU trains (`gpu_models`: a BERT-base encoder
# with its 30522-word head, a ResNet-50 first stage at batch 64), recorded in float16
# and float32.
CUDA_DEFAULT_OPERATORS: tuple[str, ...] = (
    "aten._log_softmax.default",
    "aten._log_softmax_backward_data.default",
    "aten._softmax.default",
    "aten._softmax_backward_data.default",
    "aten.add.Tensor",
    "aten.addmm.default",
    "aten.bmm.default",
    "aten.gelu.default",
    "aten.gelu_backward.default",
    "aten.max_pool2d_with_indices_backward.default",
    "aten.mean.dim",
    "aten.mm.default",
    "aten.native_batch_norm.default",
    "aten.native_batch_norm_backward.default",
    "aten.native_layer_norm.default",
    "aten.native_layer_norm_backward.default",
    "aten.relu.default",
    "aten.sum.dim_IntList",
    "aten.threshold_backward.default",
)


# Ops whose random inputs are not valid (index tensors, targets): operatorbench's list.
OPERATORBENCH_INPUT_GENERATOR_NYI = (
    "aten.gather.default",
    "nll_loss",
    "aten.index",
    "aten.scatter_",
    "masked_fill_.Scalar",
    "embedding",
)
SUITE_NAMES = ("default", "cuda-default", "models", *MODELS)
_PYTORCH_SUITES = ("timm", "huggingface", "torchbench")


@dataclass(frozen=True)
class Workload:
    """Inputs to benchmark, per operator, and the name used for the CSV file."""

    name: str
    log: OperatorLog
    operators: tuple[str, ...]  # the operators `--op all` means, in run order
    inputs_per_operator: int | None = None  # cap applied by the default suite
    # The cap applies per dtype of the call (the CUDA set: the top input in float16 and in float32).
    per_dtype: bool = False

    def inputs(
        self, operator: str, *, start_idx: int = 0, max_samples: int | None = None
    ) -> list[OperatorInput]:
        items = self.log.inputs_for(operator)
        if self.inputs_per_operator is not None:
            ranked = rank_inputs(items)
            if self.per_dtype:
                kept: dict[str, int] = {}
                items = []
                for item in ranked:
                    dtype = _main_dtype(item)
                    if kept.get(dtype, 0) < self.inputs_per_operator:
                        kept[dtype] = kept.get(dtype, 0) + 1
                        items.append(item)
            else:
                items = ranked[: self.inputs_per_operator]
        end = None if max_samples is None else start_idx + max_samples
        return items[start_idx:end]


def rank_inputs(items: Sequence[OperatorInput]) -> list[OperatorInput]:
    """Most-called first, then most elements; stable, so ties keep log order."""

    def elements(item: OperatorInput) -> int:
        return sum(math.prod(t.shape) for t in item.tensors)

    return sorted(items, key=lambda item: (-item.count, -elements(item)))


def _main_dtype(item: OperatorInput) -> str:
    """The dtype of the call's first tensor: what a float16 or float32 recording made it."""
    tensors = item.tensors
    return getattr(tensors[0], "dtype", "") if tensors else ""


def input_labels(items: Sequence[OperatorInput]) -> list[str]:
    """Readable, unique labels (asv parameter values): the input's label, numbered if repeated."""
    labels: list[str] = []
    for item in items:
        label = item.label
        count = sum(1 for existing in labels if existing == label or existing.startswith(f"{label} #"))
        labels.append(label if count == 0 else f"{label} #{count + 1}")
    return labels


def bundled_logs() -> list[Path]:
    return sorted(BUNDLED_LOG_DIR.glob("*.txt"))


def load_suite(suite: str) -> Workload:
    """A bundled suite name, or a directory of logs (e.g. PyTorch's operator_inp_logs/timm_train)."""
    if suite in ("default", "cuda-default", "models"):
        gpu = suite == "cuda-default"
        log = load_logs(sorted(GPU_LOG_DIR.glob("*.txt")) if gpu else bundled_logs())
        if suite == "models":
            return Workload(suite, log, tuple(sorted(log.operators)))
        operators = CUDA_DEFAULT_OPERATORS if gpu else DEFAULT_OPERATORS
        missing = [op for op in operators if not log.inputs_for(op)]
        if missing:
            raise UserError(
                f"{suite} operator set: no bundled inputs for {', '.join(missing)} (regenerate the logs "
                f"with `python scripts/record_operator_logs.py{' --gpu' if gpu else ''}`)"
            )
        if gpu:  # the most-called input in each recorded dtype
            return Workload(suite, log, operators, 1, per_dtype=True)
        return Workload(suite, log, operators, DEFAULT_INPUTS_PER_OPERATOR)
    if suite in MODELS:
        log = load_log(BUNDLED_LOG_DIR / f"{suite}.txt")
        return Workload(suite, log, tuple(sorted(log.operators)))
    path = Path(suite)
    if path.is_dir():
        log = load_logs(log_files(path, f"--suite {suite}"))
        return Workload(path.name, log, tuple(sorted(log.operators)))
    hint = ""
    if suite in _PYTORCH_SUITES:
        hint = (
            f"; PyTorch's {suite} logs are not bundled: pass their directory, e.g. --suite "
            "pytorch/benchmarks/dynamo/microbenchmarks/operator_inp_logs/timm_train"
        )
    raise UserError(
        f"--suite {suite!r}: not a bundled suite ({', '.join(SUITE_NAMES)}) nor a directory of logs{hint}"
    )


def log_files(folder: Path, what: str) -> list[Path]:
    """Every ``*.txt`` log below `folder`, nested folders included (PyTorch's
    ``operator_inp_logs/{hf_train,timm_train,torchbench_train}/``), in path order."""
    files = sorted(p for p in folder.rglob("*.txt") if p.is_file())
    if not files:
        raise UserError(f"{what}: {folder} holds no *.txt operator-input logs (searched its subfolders too)")
    return files


def asv_workload(device: str = "cpu") -> Workload:
    """What the asv operator suite measures on ``device``: its default set (``default`` on
    the CPU, ``cuda-default`` on CUDA), or the logs named by ``BENCHKIT_OPERATOR_LOGS``
    (files or folders, separated by ``os.pathsep``) on every device.

    A user's logs are measured like the default set: every logged operator, its
    ``DEFAULT_INPUTS_PER_OPERATOR`` most-called (then largest) inputs.
    """
    logs, var = settings.current().measure.operator_logs, settings.Var.OPERATOR_LOGS
    if not logs:
        return load_suite("cuda-default" if device == "cuda" else "default")
    files: list[Path] = []
    for path in logs:
        if path.is_dir():
            files += log_files(path, str(var))
        elif path.is_file():
            files.append(path)
        else:
            raise UserError(
                f"{settings.Var.OPERATOR_LOGS}: {path} is neither a log file nor a folder of logs"
            )
    log = load_logs(files)
    return Workload("logs", log, tuple(sorted(log.operators)), DEFAULT_INPUTS_PER_OPERATOR)


def load_input_file(path: str | Path) -> Workload:
    log = load_log(path)
    return Workload(Path(path).stem, log, tuple(sorted(log.operators)))


def resolve_operator(name: str) -> Any:
    """``aten.add.Tensor`` -> ``torch.ops.aten.add.Tensor`` by attribute lookup (never eval)."""
    import torch

    parts = name.split(".")
    if len(parts) != 3 or not all(part.isidentifier() for part in parts):
        raise UserError(f"operator {name!r}: expected namespace.name.overload, e.g. aten.add.Tensor")
    namespace, packet_name, overload_name = parts
    try:
        packet = getattr(getattr(torch.ops, namespace), packet_name)
        overload = getattr(packet, overload_name)
    except (AttributeError, RuntimeError):
        raise UserError(f"operator {name!r} does not exist in this torch build") from None
    if not isinstance(overload, torch._ops.OpOverload):
        raise UserError(f"operator {name!r} is not an operator overload")
    return overload


def select_operators(workload: Workload, requested: Sequence[str]) -> list[str]:
    """Expand --op values: 'all', full overload names, or a packet name (every logged overload)."""
    if not requested or "all" in requested:
        return list(workload.operators)
    chosen: list[str] = []
    logged = workload.log.operators
    for name in requested:
        if name in logged:
            matches = [name]
        else:
            matches = [op for op in logged if op.rsplit(".", 1)[0] == name]
        if not matches:
            if name.count(".") == 2:
                resolve_operator(name)  # a typo gets the "does not exist" message
            shown = ", ".join(sorted(logged)[:12]) + (", ..." if len(logged) > 12 else "")
            raise UserError(f"--op {name}: no inputs logged for it in {workload.name} (logged: {shown})")
        chosen.extend(op for op in matches if op not in chosen)
    return chosen


def skip_reason(operator: Any) -> str | None:
    """Why an operator is not worth (or not possible) to benchmark, or None.

    Mirrors operatorbench: inputs the random generator cannot make valid (unless
    `index_inputs` has a rule for the operator's indices),
    non-compute ops, ops inductor has no lowering or decomposition for, and
    convolutions; plus ops inductor lowers only to a fallback (aten) kernel.
    """
    import torch
    from torch._inductor.decomposition import decompositions
    from torch._inductor.lowering import lowerings

    name = str(operator)
    if any(pattern in name for pattern in OPERATORBENCH_INPUT_GENERATOR_NYI) and not has_rule(operator):
        return "input generator NYI: random data is not a valid input (indices/targets)"
    if operator == torch.ops.aten._unsafe_view.default:
        return "non-compute operator (a view)"
    if "empty" in operator.overloadpacket.__name__:
        return "non-compute operator (allocates uninitialized memory)"
    implementations = [operator, operator.overloadpacket]
    if all(op not in decompositions and op not in lowerings for op in implementations):
        return "no inductor lowering or decomposition"
    if "convolution" in name:
        return "convolution: inductor calls the aten kernel (skipped as in operatorbench)"
    fallbacks = getattr(torch._inductor.lowering, "fallbacks", ())
    if operator in fallbacks:
        return "inductor only falls back to the aten kernel"
    return None
