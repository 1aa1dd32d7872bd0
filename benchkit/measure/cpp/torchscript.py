"""TorchScript artifacts for derived JIT variants, built once and cached by content.

Scripting needs the model's source in a real file (TorchScript reads source
through `inspect`), so the model is written to a module file, imported, scripted
and saved. The saved file is keyed by the source and the torch build: every
process and every asv benchmark of one commit reuses it, and a new torch build
gets its own artifact (older serialized models need not load in newer torch or
vice versa).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

from benchkit.define.api import TorchScriptModel
from benchkit.util import atomic_path


class TorchScriptUnavailable(RuntimeError):
    """torch.jit cannot script or save this model in the installed torch."""


def ensure_artifact(model: TorchScriptModel) -> Path:
    """Build the artifact if it is missing; return its path.

    Concurrent builders are harmless: each writes a private temporary file and
    renames it into place, so a reader never sees a partial artifact.
    """
    path = Path(model.path)
    if path.exists():
        return path
    with atomic_path(path.with_suffix(".py")) as module_path:
        module_path.write_text(model.source)
        name = f"benchkit_torchscript_{model.key}"
        loader = importlib.machinery.SourceFileLoader(name, str(module_path))
        spec = importlib.util.spec_from_loader(name, loader)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # torch.jit resolves globals through sys.modules
        try:
            spec.loader.exec_module(module)
            with atomic_path(path) as tmp:
                module.jit_model.save(str(tmp))
        except Exception as e:
            raise TorchScriptUnavailable(f"torch.jit could not script the model: {e}") from e
        finally:
            sys.modules.pop(name, None)
    return path
