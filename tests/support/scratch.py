"""Scratch folders that module-scoped fixtures remove when the module is done.

pytest removes a passing test's ``tmp_path`` at once (``tmp_path_retention_policy``), but
folders made with ``tmp_path_factory`` live until the session ends. The slow modules keep
asv projects with installed torch environments there (gigabytes each), so they remove their
own when their last test has run: the suite's peak disk use stays that of one module.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def module_dir(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    path = factory.mktemp(name)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
