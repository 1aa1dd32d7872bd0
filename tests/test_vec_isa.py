"""Inductor's ISA probe paid once per build and machine (`benchkit.measure.vec_isa`), checked
against inductor itself in fresh processes: the decision agrees with inductor's own probe, is
served from the cache afterwards, leaves a user's setting alone, and skipping the probe
generates the same kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchkit.util import REPO_ROOT


def _run(code: str, environ: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], env=environ, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_VEC_ISA_OK"}
    return {
        **base,
        "BENCHKIT_CACHE_DIR": str(tmp_path / "cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }


def _decisions(environ: dict[str, str]) -> list[Path]:
    return sorted((Path(environ["BENCHKIT_CACHE_DIR"]) / "inductor-vec-isa").glob("*.json"))


_COMPILE = """
import json, torch
from torch._inductor import cpu_vec_isa
from torch._inductor.utils import gen_gm_and_inputs
from benchkit.measure import vec_isa
from benchkit.measure.operators.kernels import collecting_output_code, compile_cached
skipped = vec_isa.skip_probe_here() if SKIP else False
x = torch.randn(64, 64)
gm, args = gen_gm_and_inputs(torch.ops.aten.gelu.default, (x,), {})
with collecting_output_code() as output:
    compile_cached(gm, args)(*args)
print(json.dumps([skipped, output.code_hash, [str(i) for i in cpu_vec_isa.valid_vec_isa_list()]]))
"""


def test_the_decision_is_inductors_own_probe_and_skipping_it_generates_the_same_kernel(
    environ: dict[str, str], tmp_path: Path
) -> None:
    skipped_nothing, probed_code, inductors = json.loads(_run(_COMPILE.replace("SKIP", "False"), environ))
    assert skipped_nothing is False and probed_code and _decisions(environ) == []
    cold = {**environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-2")}
    skipped, code, _ = json.loads(_run(_COMPILE.replace("SKIP", "True"), cold))
    [decision] = _decisions(environ)
    found = json.loads(decision.read_text())
    assert found["probed"] == inductors  # the decision is inductor's own probe's outcome
    assert skipped == (bool(inductors) and found["listed"] == inductors)
    if skipped:
        assert code == probed_code  # same ISAs, same choice, same generated code
    # Later processes read the decision instead of probing: a decision that differs is obeyed.
    ask = "from benchkit.measure import vec_isa; print(vec_isa.skip_probe_here())"
    decision.write_text(json.dumps({"probed": ["avx2"], "listed": ["avx512", "avx2"]}))
    assert _run(ask, environ) == "False"
    decision.write_text(json.dumps({"probed": ["avx2"], "listed": ["avx2"]}))
    assert _run(ask, environ) == "True"


def test_a_users_setting_is_kept(environ: dict[str, str]) -> None:
    code = (
        "from benchkit.measure import vec_isa; from torch._inductor import config; "
        "print(vec_isa.skip_probe_here(), config.cpp.vec_isa_ok)"
    )
    assert _run(code, {**environ, "TORCHINDUCTOR_VEC_ISA_OK": "0"}) == "False False"
    assert _decisions(environ) == []
