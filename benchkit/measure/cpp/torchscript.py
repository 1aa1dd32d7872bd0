"""TorchScript artifacts for derived JIT variants, built once and cached by content.

Scripting needs the model's source in a real file (TorchScript reads source
through `inspect`), so the model is written to a module file, imported, scripted
and saved. The saved file is keyed by the source and the torch build: every
process and every asv benchmark of one commit reuses it, and a new torch build
gets its own artifact (older serialized models need not load in newer torch or
vice versa).

An artifact's bytes depend on the model and the torch build alone, never on where,
when or in which process it was made, because what a TorchScript case loads moves what
its process allocates, and with that, by up to 0.1 %, its instruction counts:

* scripting walks sets of names (a module's constants), whose order follows Python's
  per-process hash seed, so the models are scripted in a child Python with a fixed
  seed; a model's parameters are drawn after ``torch.manual_seed(0)``;
* `torch.jit.save` names the archive's folder after the file it writes, keeps the
  absolute path of every scripted source file (torch's own, in its installation
  folder) in its ``.debug_pkl`` records, and writes a random serialization id. So the
  archive is saved to memory (its folder is then ``archive``) and stored without its
  debug records, with an id made from its records and fixed entry dates; TorchScript
  then reports errors against the archive's own code records.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from benchkit.define.api import TorchScriptModel
from benchkit.util import atomic_write_bytes

# Debug records: source ranges into the scripted files, by absolute path.
_DEBUG_RECORD_SUFFIX = ".debug_pkl"
# A random number per save (40 decimal digits), which loading keeps as a string.
_SERIALIZATION_ID_RECORD = ".data/serialization_id"
# zipfile's earliest date: entries carry no date of their making.
_ENTRY_DATE = (1980, 1, 1, 0, 0, 0)

# The child: for each {"module": path, "name": ..., "out": path} line of its stdin, import
# the module, save its ``jit_model`` with `torch.jit.save` into memory and write that to
# "out"; one JSON line per model on stdout, with the error if there was one. Standard
# library and torch only: the child may run in any environment that has torch.
_SCRIPTING_CHILD = r"""
import importlib.machinery, importlib.util, io, json, sys, traceback
import torch
for line in sys.stdin:
    job = json.loads(line)
    error = None
    try:
        loader = importlib.machinery.SourceFileLoader(job["name"], job["module"])
        spec = importlib.util.spec_from_loader(job["name"], loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[job["name"]] = module  # torch.jit resolves globals through sys.modules
        torch.manual_seed(0)  # a model's initial parameters are part of the artifact
        spec.loader.exec_module(module)
        buffer = io.BytesIO()
        torch.jit.save(module.jit_model, buffer)
        with open(job["out"], "wb") as out:
            out.write(buffer.getvalue())
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    print(json.dumps({"name": job["name"], "error": error}), flush=True)
"""
# Any fixed value: the same order of every set in every build of the artifacts.
_HASH_SEED = "0"
# Importing torch and scripting a few small models: seconds.
_CHILD_TIMEOUT_SECONDS = 600


# Models this process found unscriptable, by path, with the reason: asked again (wall time
# builds the suite's artifacts, then prepares one case), they fail without another child.
_UNAVAILABLE: dict[str, str] = {}


class TorchScriptUnavailable(RuntimeError):
    """torch.jit cannot script or save this model in the installed torch."""


def ensure_artifact(model: TorchScriptModel) -> Path:
    """Build the artifact if it is missing; return its path (see `ensure_artifacts`)."""
    errors = ensure_artifacts([model])
    if model.path in errors:
        raise TorchScriptUnavailable(errors[model.path])
    return Path(model.path)


def ensure_artifacts(models: Sequence[TorchScriptModel]) -> dict[str, str]:
    """Build every missing artifact, all in one child Python; returns an error per path
    of the models torch.jit could not script or save.

    Concurrent builders are harmless: each writes private temporary files and
    renames them into place, so a reader never sees a partial artifact.
    """
    known = {model.path: _UNAVAILABLE[model.path] for model in models if model.path in _UNAVAILABLE}
    todo = {model.path: model for model in models if model.path not in known}
    missing = [model for model in todo.values() if not Path(model.path).exists()]
    if not missing:
        return known
    jobs, written = [], {}
    for model in missing:
        path = Path(model.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        module = path.with_suffix(".py")
        if not module.exists():
            atomic_write_bytes(module, model.source.encode())
        stem = f".{path.name}.{os.getpid()}"
        written[model.path] = path.with_name(f"{stem}.saved")
        name = f"benchkit_torchscript_{model.key}"
        jobs.append(json.dumps({"module": str(module), "name": name, "out": str(written[model.path])}))
    errors = _run_scripting_child(jobs, [model.path for model in missing])
    for model in missing:
        saved = written[model.path]
        if model.path not in errors:
            try:
                atomic_write_bytes(model.path, place_free_archive(saved.read_bytes()))
            except (OSError, zipfile.BadZipFile) as e:
                errors[model.path] = f"the saved archive could not be read: {e}"
        saved.unlink(missing_ok=True)
    for path, error in errors.items():
        _UNAVAILABLE[path] = f"torch.jit could not script the model: {error}"
    return {**known, **{path: _UNAVAILABLE[path] for path in errors}}


def _run_scripting_child(jobs: list[str], paths: list[str]) -> dict[str, str]:
    """The child's error per path; every path fails alike if the child itself does."""
    env = {**os.environ, "PYTHONHASHSEED": _HASH_SEED}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPTING_CHILD],
            input="".join(f"{job}\n" for job in jobs),
            capture_output=True,
            text=True,
            env=env,
            timeout=_CHILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return dict.fromkeys(paths, f"scripting took over {_CHILD_TIMEOUT_SECONDS} s")
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(replies) != len(paths):
        detail = done.stderr.strip()[-2000:] or f"exit code {done.returncode}"
        return dict.fromkeys(paths, f"the scripting process failed: {detail}")
    return {path: reply["error"] for path, reply in zip(paths, replies, strict=True) if reply["error"]}


def place_free_archive(archive: bytes) -> bytes:
    """The archive's records in their order, without debug records, with fixed dates and
    a serialization id of the same form made from the other records."""
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        records = [
            (entry.filename, source.read(entry))
            for entry in source.infolist()
            if not entry.filename.endswith(_DEBUG_RECORD_SUFFIX)
        ]
    digest = hashlib.sha256()
    for name, data in records:
        if not name.endswith(_SERIALIZATION_ID_RECORD):
            digest.update(b"%d %s %d\0" % (len(name), name.encode(), len(data)) + data)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for name, data in records:
            if name.endswith(_SERIALIZATION_ID_RECORD):
                data = str(int(digest.hexdigest(), 16)).encode()[: len(data)].rjust(len(data), b"0")
            target.writestr(zipfile.ZipInfo(name, date_time=_ENTRY_DATE), data)
    return out.getvalue()
