"""A LocalCluster of two worker processes for the dask tests (one per test module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.distributed.clusters import local_cluster


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    pytest.importorskip("distributed")
    with local_cluster() as client:
        yield client
