"""TorchScript artifacts and the C++ shards that load them are the same bytes wherever they
are made: a path or a random number in them moves the instruction counts of the cases that
load them from one checkout, cache or run to the next."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import torch

from benchkit.define.api import GroupedSetup, GroupedStmts, TorchScriptModel
from benchkit.define.expand import materialize
from benchkit.measure.cpp.shards import CppSuite
from benchkit.measure.cpp.torchscript import TorchScriptUnavailable, ensure_artifact, ensure_artifacts

# BatchNorm2d: constants scripted from a set of names (their order follows the hash seed)
# and parameters drawn at random; a user-defined module: its source file's path.
_MODEL = """import torch
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(3)
        self.conv = torch.nn.Conv2d(3, 3, 1)

    def forward(self, x):
        return self.conv(self.norm(x))
model = Block().eval()
jit_model = torch.jit.script(model)
"""


def test_an_artifact_is_the_same_bytes_in_any_folder(tmp_path: Path) -> None:
    near = tmp_path / "a" / "m.pt"
    far = tmp_path / "a much longer folder name" / "elsewhere" / "m.pt"
    built = [ensure_artifact(TorchScriptModel(_MODEL, str(path))).read_bytes() for path in (near, far)]
    assert built[0] == built[1]
    with zipfile.ZipFile(io.BytesIO(built[0])) as archive:
        names = archive.namelist()
    assert names and all(name.startswith("archive/") for name in names)
    assert not any(name.endswith(".debug_pkl") for name in names)
    torch_folder = str(Path(torch.__file__).parent).encode()
    assert str(tmp_path).encode() not in built[0] and torch_folder not in built[0]
    loaded = torch.jit.load(str(far))
    x = torch.ones(1, 3, 4, 4)
    assert torch.equal(loaded(x), torch.jit.load(str(near))(x))


def test_unscriptable_models_fail_alone_with_torchs_reason(tmp_path: Path) -> None:
    bad = TorchScriptModel(
        "import torch\njit_model = torch.jit.script(lambda x: x.numpy())\n", str(tmp_path / "b.pt")
    )
    good = TorchScriptModel(_MODEL, str(tmp_path / "g.pt"))
    errors = ensure_artifacts([bad, good])
    assert list(errors) == [bad.path]
    assert "torch.jit could not script the model" in errors[bad.path]
    assert Path(good.path).is_file() and not Path(bad.path).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no half-written files
    with pytest.raises(TorchScriptUnavailable, match="could not script"):
        ensure_artifact(bad)


def test_a_shard_loading_an_artifact_names_no_folder(tmp_path: Path) -> None:
    def cpp_jit_case(folder: str) -> object:
        setup = GroupedSetup("x = torch.ones(3)", "auto x = torch::ones({3});")
        cases = materialize(
            {"ts": GroupedStmts("y = x + 1", "auto y = x + 1;", setup, "f(x) -> y", torchscript=True)}
        )
        (case,) = [c for c in cases if c.timer_args.torchscript and c.timer_args.language.name == "CPP"]
        artifact = case.timer_args.torchscript
        moved = TorchScriptModel(artifact.source, str(Path(folder) / Path(artifact.path).name))
        args = case.timer_args
        return type(args)(
            **{**args.__dict__, "setup": args.setup.replace(artifact.path, moved.path), "torchscript": moved}
        )

    shards = [CppSuite([cpp_jit_case(str(tmp_path / name))]).shards[0] for name in ("x", "a longer folder")]
    assert shards[0].source == shards[1].source and shards[0].name == shards[1].name
    assert str(tmp_path) not in shards[0].source
    assert str(Path(torch.__file__).parent) not in shards[0].source
