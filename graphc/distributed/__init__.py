"""graphc on dask: compiled graphs over batches too large for one process or one machine.

The batch split (`split.py`, rules in `rules.py`) needs no dask; running it does:
`map_batches` over dask arrays and `DataParallelStep` on a dask.distributed Client
import dask when called (``pip install "graphc[dask]"``). docs/distributed.md.
"""

from graphc.distributed.mapping import map_batches
from graphc.distributed.split import BatchSplit, BatchSplitError, split_batch
from graphc.distributed.training import DataParallelStep

__all__ = ["BatchSplit", "BatchSplitError", "DataParallelStep", "map_batches", "split_batch"]
