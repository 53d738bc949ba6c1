"""The LocalCluster the dask tests run on: two worker processes of one thread each."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def local_cluster(set_as_default: bool = True) -> Iterator[Any]:
    """A client of a fresh cluster of two worker processes (1 GiB each), closed on exit."""
    import distributed

    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            memory_limit="1GiB",
        ) as cluster,
        distributed.Client(cluster, set_as_default=set_as_default) as client,
    ):
        yield client
