"""Recording operator inputs of a real model run into the log format (`record`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit.measure.operators.inputs import _COUNT_PREFIX, _OPERATOR_PREFIX, _Unserializable, format_call
from benchkit.util import atomic_write_text


def is_non_compute_operator(operator: Any) -> bool:
    """True for constructors, ``*_like`` and pure views: nothing for a compiler to speed up.

    Mutating ops are kept (in-place updates do compute); ops returning several
    tensors are kept because they cannot be a single aliasing view.
    """
    schema = operator._schema

    def holds_tensor(type_: Any) -> bool:
        return "Tensor" in str(type_)

    if not any(holds_tensor(argument.type) for argument in schema.arguments):
        return True
    if "_like" in operator.name():
        return True
    if schema.is_mutable:
        return False
    tensor_outputs = [r for r in schema.returns if str(r.type) == "Tensor"]
    if len(tensor_outputs) != 1 or tensor_outputs[0].alias_info is None:
        return False
    written = tensor_outputs[0].alias_info.after_set
    return any(
        argument.alias_info is not None and argument.alias_info.before_set & written
        for argument in schema.arguments
        if str(argument.type) == "Tensor"
    )


def _contains_tensor(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_tensor(v) for v in value.values())
    return False


def _build_recorder_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class OperatorInputRecorder(TorchDispatchMode):
        """``TorchDispatchMode`` that logs every aten call with tensor inputs and outputs.

        Use as a context manager around any model run (forward and backward)::

            with OperatorInputRecorder() as recorder:
                model(x).sum().backward()
            recorder.write("my_model.txt")  # then: benchkit operators --inp-file my_model.txt

        ``write`` drops constructors, ``*_like`` ops and pure views unless
        ``skip_non_compute=False``. Calls whose arguments cannot be written in
        the format (e.g. a Generator) are counted in ``unserializable``.
        """

        def __init__(self) -> None:
            super().__init__()
            self.calls: dict[str, Counter[str]] = {}
            self.operators: dict[str, Any] = {}
            self.unserializable: Counter[str] = Counter()

        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            kwargs = kwargs or {}
            output = func(*args, **kwargs)
            if _contains_tensor((args, kwargs)) and _contains_tensor(output):
                name = str(func)
                try:
                    text = format_call(args, kwargs)
                except _Unserializable as e:
                    self.unserializable[f"{name}: {e}"] += 1
                else:
                    self.calls.setdefault(name, Counter())[text] += 1
                    self.operators[name] = func
            return output

        def to_text(self, *, skip_non_compute: bool = True) -> str:
            lines: list[str] = []
            for name in sorted(self.calls):
                if skip_non_compute and is_non_compute_operator(self.operators[name]):
                    continue
                lines.append(f"{_OPERATOR_PREFIX}{name}")
                lines.extend(f"{_COUNT_PREFIX}{n}, {text}" for text, n in self.calls[name].items())
            return "".join(line + "\n" for line in lines)

        def write(self, path: str | Path, *, skip_non_compute: bool = True) -> None:
            atomic_write_text(path, self.to_text(skip_non_compute=skip_non_compute))

    return OperatorInputRecorder


_recorder_class: type | None = None


def __getattr__(name: str) -> Any:
    # The recorder subclasses a torch class; build it on first use so that
    # parsing logs never imports torch.
    global _recorder_class
    if name == "OperatorInputRecorder":
        if _recorder_class is None:
            _recorder_class = _build_recorder_class()
        return _recorder_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record(run: Callable[[], Any]) -> Any:
    """Run ``run()`` under a fresh OperatorInputRecorder and return the recorder."""
    recorder_class = __getattr__("OperatorInputRecorder")
    with recorder_class() as recorder:
        run()
    return recorder
