"""The numpy backend's own tests: their graphs compile on the numpy backend by default,
also in a run of the suite on native (`GRAPHC_BACKEND=native python -m pytest`), since
what they check (its fusion passes, its scalar plans, its chunked kernels) is the numpy
backend's."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def numpy_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHC_BACKEND", "numpy")
