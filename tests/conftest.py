"""Shared test setup: one cache directory per test session.

Every test (and every subprocess it starts) shares BENCHKIT_CACHE_DIR, so a
C++ shard or TorchScript artifact built by one test is reused by the next, and
nothing leaks into the user's own cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

if "BENCHKIT_TEST_KEEP_CACHE" not in os.environ:
    _SESSION_CACHE = tempfile.mkdtemp(prefix="benchkit-test-cache-")
    os.environ["BENCHKIT_CACHE_DIR"] = _SESSION_CACHE
else:  # reuse compiled shards across local test runs
    os.environ.setdefault("BENCHKIT_CACHE_DIR", str(REPO_ROOT / ".benchkit" / "test-cache"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if "BENCHKIT_TEST_KEEP_CACHE" not in os.environ:
        shutil.rmtree(os.environ["BENCHKIT_CACHE_DIR"], ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("BENCHKIT_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow end-to-end check: run with BENCHKIT_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
