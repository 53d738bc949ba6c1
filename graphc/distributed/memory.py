"""How much memory a chunk of `map_batches` holds on a worker, and how many rows fit.

A chunk task holds, on one worker thread: the chunk graph's plan (its arena, which the
worker's cached Executable keeps between tasks, plus the largest scratch one kernel
allocates while it runs), the chunk's blocks of the batch inputs, and the arrays the plan
allocates for its outputs. graphc knows all three from the plan for the chunk's row
count. `ChunkMemory` builds those plans on the client from zero-stride example arrays:
planning allocates nothing, so sizing a chunk of a million rows costs no memory.

A worker's room for one chunk: dask pauses a worker whose process passes the fraction
`distributed.worker.memory.pause` of its memory limit (0.8 by default) and waits for its
memory to fall, which a plan's arena never does (tasks then stall with no error); so the
room is that fraction of the limit, less what the worker process takes before its first
chunk (`PROCESS_BYTES`) and the parameter arrays it holds once, shared out among the
worker's threads, each running one chunk at a time. From it:

- `check_chunk` warns (`MemoryLimitWarning`, once per call) when the largest chunk needs
  more than the smallest room of any worker;
- `auto_rows` (``chunks="auto"``) picks the most rows whose chunk needs at most half that
  room (`AUTO_SHARE`; the other half is for the next chunk's input, read while this one
  runs, and results waiting to be collected). A chunk's bytes are linear in its rows
  (every value either carries the batch dim once or not at all), so two plans give a
  line; one more plan checks the pick, and a bisection finds the rows if it missed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from graphc.distributed.split import BatchSplit
from graphc.ir.errors import GraphcError
from graphc.ir.types import bind_shape
from graphc.runtime.executable import compile
from graphc.runtime.explain import size_text

# a dask worker process that runs graphc, before its first chunk: 82 MiB measured after
# importing graphc (python, numpy, dask, distributed, graphc), and OpenBLAS's work
# buffers, about 27 MiB once a large matmul ran; rounded up
PROCESS_BYTES = 128 * 2**20
AUTO_SHARE = 0.5  # of a worker thread's room, for one chunk (chunks="auto")
_PROBES = (1024, 2048)  # rows of the two plans that give the line


class MemoryLimitWarning(UserWarning):
    """A chunk of map_batches needs more memory than a worker has room for."""


@dataclass(frozen=True)
class ChunkBytes:
    """What one chunk of `rows` rows holds while its task runs, in bytes."""

    rows: int
    plan: int  # the plan's arena and its largest kernel scratch
    inputs: int  # the chunk's blocks of the batch inputs
    outputs: int  # the arrays the plan allocates for its outputs
    cut_from: int | None = None  # rows of the larger source blocks `inputs` counts whole

    @property
    def total(self) -> int:
        return self.plan + self.inputs + self.outputs

    def describe(self) -> str:
        inputs = f"input blocks {size_text(self.inputs)}"
        if self.cut_from is not None:
            inputs = (
                f"the batch inputs' own blocks of {self.cut_from:,} rows, {size_text(self.inputs)}, "
                f"which a worker holds whole while it cuts chunks of {self.rows:,} rows from them"
            )
        parts = f"plan {size_text(self.plan)}, {inputs}, outputs {size_text(self.outputs)}"
        return f"{size_text(self.total)} ({parts})"


@dataclass(frozen=True)
class WorkerMemory:
    """One worker's memory for chunks (or this process's, under dask's local schedulers)."""

    name: str
    limit: int  # bytes
    threads: int
    pause: float  # the fraction of `limit` at which the worker stops running tasks
    reserved: int  # bytes the worker process takes before its first chunk

    def room(self, shared: int) -> int:
        """Bytes for one chunk on one of the worker's threads, when `shared` bytes (the
        parameters) are held once by the worker."""
        return int(self.limit * self.pause - self.reserved - shared) // max(1, self.threads)

    def describe(self, shared: int) -> str:
        return (
            f"worker {self.name} has a memory limit of {size_text(self.limit)} and "
            f"{self.threads} thread(s); it stops running tasks at {self.pause:.0%} of it "
            f"({size_text(self.limit * self.pause)}), and its process ({size_text(self.reserved)}) "
            f"and the parameters ({size_text(shared)}) leave {size_text(max(0, self.room(shared)))} "
            "per thread for chunks"
        )


def cluster_memory() -> list[WorkerMemory] | None:
    """The workers of the current dask.distributed client (`Client.current()`, which dask's
    `compute` uses), with their memory limits; None when there is no client (dask's local
    schedulers run the chunks in this process) or it knows no worker with a limit."""
    distributed = sys.modules.get("distributed")
    if distributed is None:  # never imported: no client can exist
        return None
    try:
        client = distributed.Client.current()
    except ValueError:
        return None
    if client.asynchronous:  # its scheduler_info() is a cache without the workers
        return None
    try:
        reported = client.scheduler_info()["workers"]
    except (OSError, TimeoutError, asyncio.TimeoutError):  # a client losing its scheduler
        return None
    workers = [
        WorkerMemory(
            str(address),
            int(info["memory_limit"]),
            int(info.get("nthreads") or 1),
            pause_fraction(),
            PROCESS_BYTES,
        )
        for address, info in reported.items()
        if info.get("memory_limit")
    ]
    return workers or None


def pause_fraction() -> float:
    """Where dask stops a worker running tasks: its pause fraction, else its terminate
    fraction, else the whole limit (this process's dask config)."""
    import dask

    for key in ("pause", "terminate"):
        value = dask.config.get(f"distributed.worker.memory.{key}", None)
        if value:
            return float(value)
    return 1.0


def local_memory() -> WorkerMemory:
    """This process under dask's local schedulers: the machine's available memory, shared
    by dask's threads."""
    import dask
    import dask.system

    threads = dask.config.get("num_workers", None) or dask.system.CPU_COUNT
    try:
        import psutil

        available = int(psutil.virtual_memory().available)
    except ImportError:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    return WorkerMemory("(this process)", available, int(threads), 1.0, 0)


class ChunkMemory:
    """The bytes a chunk holds, by its row count, from the chunk graph's plans."""

    def __init__(
        self,
        split: BatchSplit,
        opt_level: int,
        bindings: dict[str, int],
        free: dict[str, np.ndarray],
        batch: dict[str, Any],
    ) -> None:
        self.split, self.bindings = split, bindings
        # the plan's layout is the backend's business after planning: numpy's is the same
        self.exe = compile(split.chunk, opt_level=opt_level, backend="numpy")
        self.sizes = split.size_values(bindings)
        self.shared = sum(a.nbytes for a in free.values())  # held once per worker
        # the batch inputs' own blocks (dask arrays, before map_batches rechunks them): a
        # chunk cut from a larger block keeps that block alive (slices are views)
        self.source_rows = max(
            (max(x.chunks[split.batch_inputs[n]], default=0) for n, x in batch.items()), default=0
        )
        self.source_bytes = sum(
            max(x.chunks[split.batch_inputs[n]], default=0) * _row_bytes(x, split.batch_inputs[n])
            for n, x in batch.items()
        )
        self._known: dict[int, ChunkBytes] = {}

    def at(self, rows: int) -> ChunkBytes:
        """What a chunk of `rows` rows holds."""
        if rows not in self._known:
            self._known[rows] = self._plan_bytes(rows)
        return self._known[rows]

    def _plan_bytes(self, rows: int) -> ChunkBytes:
        split = self.split
        dims = {**self.bindings, split.batch_dim: rows}
        examples: list[Any] = []
        inputs = 0
        for p in split.chunk.inputs:
            if p.name in self.sizes:
                examples.append(self.sizes[p.name])
                continue
            shape = bind_shape(p.type.shape, dims)
            examples.append(np.broadcast_to(np.zeros((), p.type.dtype), shape))  # no memory
            if p.name in split.batch_inputs:
                inputs += int(np.prod(shape, dtype=np.int64)) * p.type.dtype.itemsize
        plan = self.exe.plan(*examples)
        scratch = max((step.scratch for step in plan.steps), default=0)
        return ChunkBytes(rows, plan.arena_bytes + scratch, inputs, plan.output_bytes)

    def held(self, rows: int) -> ChunkBytes:
        """What a chunk of `rows` rows holds on a worker, counting the batch inputs' own
        blocks whole where chunks are cut from larger ones."""
        need = self.at(rows)
        if self.source_rows <= rows or self.source_bytes <= need.inputs:
            return need
        return replace(need, inputs=self.source_bytes, cut_from=self.source_rows)

    def rows_within(self, budget: int, most: int) -> int:
        """The most rows, at most `most`, whose chunk holds at most `budget` bytes; 1 when
        not even one row fits."""
        most = max(1, most)
        if self.at(most).total <= budget:
            return most
        low, high = (self.at(r) for r in _PROBES)
        per_row = (high.total - low.total) / (high.rows - low.rows)
        fixed = low.total - per_row * low.rows
        guess = most if per_row <= 0 else int((budget - fixed) // per_row)
        guess = min(max(guess, 1), most)
        if self.at(guess).total <= budget:
            return guess
        fits, over = 1, guess  # the line missed (alignment, a shape-dependent rewrite)
        while over - fits > 1:
            middle = (fits + over) // 2
            if self.at(middle).total <= budget:
                fits = middle
            else:
                over = middle
        return fits


def _row_bytes(x: Any, axis: int) -> int:
    """Bytes of one row (one index along `axis`) of the array `x`."""
    others = [int(d) for a, d in enumerate(x.shape) if a != axis]
    return int(np.prod(others, dtype=np.int64)) * x.dtype.itemsize


def tightest(workers: list[WorkerMemory], shared: int) -> WorkerMemory:
    """The worker with the least room per thread."""
    return min(workers, key=lambda w: w.room(shared))


def auto_rows(memory: ChunkMemory, workers: list[WorkerMemory], total: int) -> int:
    """Rows per chunk for ``chunks="auto"``: the most whose chunk needs at most AUTO_SHARE
    of the tightest worker's room per thread (all `total` rows when they fit)."""
    worker = tightest(workers, memory.shared)
    room = worker.room(memory.shared)
    if room <= 0:
        raise GraphcError(
            "map_batches: chunks='auto' finds no memory for chunks: "
            f"{worker.describe(memory.shared)}; give the workers a larger memory limit"
        )
    return memory.rows_within(int(room * AUTO_SHARE), total)


def check_chunk(memory: ChunkMemory, rows: int, workers: list[WorkerMemory]) -> str | None:
    """Why a chunk of `rows` rows needs more than the tightest worker's room per thread
    (the text of a MemoryLimitWarning), or None when it fits."""
    worker = tightest(workers, memory.shared)
    room = worker.room(memory.shared)
    need = memory.held(rows)
    if need.total <= room:
        return None
    advice = "give the workers more memory"
    if room > 0:
        fits = memory.rows_within(int(room * AUTO_SHARE), max(rows, memory.source_rows))
        if need.cut_from is None:
            advice = f'chunks="auto" would take {fits:,} rows per chunk here'
        else:
            advice = f"make the batch inputs' blocks at most {fits:,} rows"
    return (
        f"map_batches: a chunk of {rows:,} rows needs about {need.describe()}, more than "
        f"a worker has room for: {worker.describe(memory.shared)}. A worker over that "
        f"pauses, and the computation can stall without an error; {advice} "
        '(docs/distributed.md, "Memory limits")'
    )


def warn_chunk(
    memory: ChunkMemory, rows: int, workers: list[WorkerMemory], stacklevel: int
) -> None:
    """One MemoryLimitWarning when a chunk of `rows` rows does not fit (`check_chunk`);
    `stacklevel` as for warnings.warn, counted from this function."""
    message = check_chunk(memory, rows, workers)
    if message is not None:
        warnings.warn(message, MemoryLimitWarning, stacklevel=stacklevel)
