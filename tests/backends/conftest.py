"""Fixtures the native backend's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from graphc.backends.native import toolchain


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Kernels built into an empty directory, none of this process's libraries reused."""
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(tmp_path / "cache"))
    toolchain.reset(loaded=True)
    yield
    toolchain.reset(loaded=True)
