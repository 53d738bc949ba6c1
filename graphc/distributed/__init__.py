"""graphc on dask: compiled graphs over batches too large for one process or one machine.

The batch split (`split.py`, rules in `rules.py`) needs no dask; running it does:
`map_batches` over dask arrays and `DataParallelStep` on a dask.distributed Client
import dask when called (``pip install "graphc[dask]"``). docs/distributed.md.
"""

from graphc.distributed.mapping import map_batches
from graphc.distributed.memory import MemoryLimitWarning
from graphc.distributed.replica import PeerLostError, ReplicaError
from graphc.distributed.split import BatchSplit, BatchSplitError, split_batch
from graphc.distributed.training import DataParallelStep, StepTimeoutError, WorkerLostError
from graphc.distributed.worker import ChunkError

__all__ = [
    "BatchSplit",
    "BatchSplitError",
    "ChunkError",
    "DataParallelStep",
    "MemoryLimitWarning",
    "PeerLostError",
    "ReplicaError",
    "StepTimeoutError",
    "WorkerLostError",
    "map_batches",
    "split_batch",
]
