"""`map_batches`: a graph over dask arrays, chunk by chunk along its batch dim, lazily.

The graph is split once (split.py), or in passes over the data when its rows need
statistics of the whole batch (stages.py: each pass one split, run as below, its
results free inputs of the next). Each chunk of the batch inputs becomes one task
running the chunk graph; its mapped outputs become that chunk's blocks of the result
arrays, and its partials are merged in a tree of tasks (`split_every` at a time) and
finished by one task running the combine graph. Every graph travels as a `Program`
(JSON text) that is a single node of the dask graph, like every parameter array, so
a worker receives each once however many chunks it runs.

A chunk task's key is ``("<graph>_chunk-<token>", index)``, and it checks its blocks and
results against the shapes declared here (worker.run_chunk). Before building anything,
the chunks are sized against the workers' memory limits (memory.py): ``chunks="auto"``
picks the rows, and a chunk too large for a worker gets a MemoryLimitWarning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.distributed.deps import require
from graphc.distributed.memory import (
    ChunkMemory,
    auto_rows,
    cluster_memory,
    local_memory,
    warn_chunk,
)
from graphc.distributed.split import BatchSplit
from graphc.distributed.stages import split_stages
from graphc.distributed.worker import (
    ChunkSpec,
    Program,
    check_options,
    merge_partials,
    run_chunk,
    run_graph,
)
from graphc.ir.errors import FeedError, GraphcError
from graphc.ir.graph import Graph
from graphc.ir.types import bind_shape, format_shape
from graphc.runtime.executable import Executable
from graphc.runtime.feeds import as_feed_array, bind_dims, check_names, collect_feeds


def map_batches(
    fn: Executable | Graph,
    *arrays: Any,
    batch_dim: str = "B",
    chunks: int | str | None = None,
    opt_level: int | None = None,
    backend: str | None = None,
    split_every: int = 8,
    **named: Any,
) -> Any:
    """Run a compiled graph (or a graph) over dask arrays chunked along `batch_dim`.

    Placeholders carrying `batch_dim` take dask arrays (or numpy arrays); the others take
    arrays sent once to every worker. `chunks` rows per chunk (None: the first batch
    input's chunking; "auto": as many rows as fit the workers' memory limits, see
    docs/distributed.md, "Memory limits"). Outputs that keep the batch dim come back as
    dask arrays chunked like the inputs; outputs that reduce it (a loss, a mean, the
    gradient of a batch-summed loss) are combined from per-chunk partials. One output
    gives one dask array; several, a tuple. Nothing runs until `.compute()`. Rows that
    need a statistic of the whole batch (x - mean(x, axis=0)) are computed in passes
    over the data (stages.py). A graph that cannot be split raises `BatchSplitError`;
    a chunk larger than a worker has room for, a `MemoryLimitWarning`; an error in a
    chunk's task, a `ChunkError` naming the chunk.

    >>> import numpy as np, dask.array as da, graphc as gc
    >>> from graphc.distributed import map_batches
    >>> g = gc.Graph("score")
    >>> with g:
    ...     x = gc.placeholder("x", shape=("B", 3), dtype="float64")
    ...     w = gc.placeholder("w", shape=(3,), dtype="float64")
    ...     _ = gc.output(x @ w, name="y")
    ...     _ = gc.output(gc.mean(x @ w), name="m")
    >>> y, m = map_batches(g, da.ones((10, 3), chunks=4), np.arange(3.0))
    >>> y.compute()[:3], float(m.compute())
    (array([3., 3., 3.]), 3.0)
    """
    da = require("dask.array", "map_batches")
    _check_chunks(chunks)
    graph, level, chosen, flags = _source(fn, opt_level, backend)
    check_options(level, chosen)
    stages = split_stages(graph, batch_dim)
    axes = _batch_axes(graph, batch_dim)
    feeds = collect_feeds(graph, arrays, named)
    check_names(graph, feeds)
    batch, free, bindings = _prepare(graph, axes, feeds, da)
    batch = _chunked(stages[-1].split, axes, batch, free, bindings, level, chunks)
    given: dict[str, Any] = dict(free)  # and each stage's feedback values, for the next
    for stage in stages:
        split = stage.split
        job = _Job(split, level, chosen, bindings, split_every, flags)
        names = {p.name for p in split.graph.inputs}
        values = job.build(
            {n: x for n, x in batch.items() if n in split.batch_inputs},
            {n: x for n, x in given.items() if n in names},
        )
        for output, placeholder in stage.feeds.items():  # one block each: a reduced value
            given[placeholder] = values[output].to_delayed().ravel()[0]
    outputs = [values[o.name] for o in graph.outputs]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _batch_axes(graph: Graph, batch_dim: str) -> dict[str, int]:
    """The batch inputs: the placeholders with the batch dim, and its axis."""
    return {
        p.name: p.type.shape.index(batch_dim) for p in graph.inputs if batch_dim in p.type.shape
    }


def _check_chunks(chunks: Any) -> None:
    if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
        return
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise GraphcError(
            f"map_batches: chunks must be a number of rows >= 1, 'auto' or None, got {chunks!r}"
        )


def _source(
    fn: Executable | Graph, opt_level: int | None, backend: str | None
) -> tuple[Graph, int, str, dict[str, bool]]:
    """The graph to split and how to compile its parts: an Executable's own options
    (its check_numerics and fast_math too), or the defaults of gc.compile."""
    if isinstance(fn, Executable):
        return (
            fn.graph,
            fn.opt_level if opt_level is None else opt_level,
            backend or fn.backend.name,
            {"check_numerics": fn.check_numerics, "fast_math": fn.fast_math},
        )
    if isinstance(fn, Graph):
        return fn, 2 if opt_level is None else opt_level, backend or "auto", {}
    raise GraphcError(
        f"map_batches: expected a gc.Graph or the Executable gc.compile returns, got "
        f"{type(fn).__name__}"
    )


def _prepare(
    graph: Graph, axes: dict[str, int], feeds: dict[str, Any], da: Any
) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, int]]:
    """Batch feeds as dask arrays (a numpy array as one chunk), free feeds as numpy
    arrays, each checked against its placeholder; the symbolic dims' sizes."""
    bindings: dict[str, int] = {}
    batch: dict[str, Any] = {}
    free: dict[str, np.ndarray] = {}
    for p in graph.inputs:
        value = feeds[p.name]
        if p.name in axes:
            axis = axes[p.name]
            if not isinstance(value, da.Array):  # by the executable's rule: a list may
                value = as_feed_array(p, value)  # take the dtype, an array must have it
                value = da.from_array(value, chunks={axis: -1} if value.ndim > axis else -1)
            known = value.chunks[axis] if value.ndim > axis else ()
            if any(np.isnan(c) for c in known if isinstance(c, float)):
                raise FeedError(
                    f"placeholder '{p.name}': the dask array's chunk sizes are unknown; "
                    "call compute_chunk_sizes() first"
                )
            batch[p.name] = value
        else:
            value = free[p.name] = as_feed_array(p, value)
        if value.dtype != p.type.dtype:
            raise FeedError(
                f"placeholder '{p.name}' expects dtype {p.type.dtype}, got an array of dtype "
                f"{value.dtype} (cast it with .astype)"
            )
        bind_dims(p.name, p.type, tuple(value.shape), bindings)
    return batch, free, bindings


def _chunked(
    split: BatchSplit,
    axes: dict[str, int],
    batch: dict[str, Any],
    free: dict[str, np.ndarray],
    bindings: dict[str, int],
    opt_level: int,
    chunks: int | str | None,
) -> dict[str, Any]:
    """The batch feeds rechunked to `chunks` rows (None, a number or "auto"), sized
    against the current client's workers' memory: one MemoryLimitWarning when a chunk
    does not fit (memory.py). `split` is the one sized: the last pass over the data
    when there are several (stages.py), whose chunks hold the mapped outputs."""
    auto = isinstance(chunks, str)  # "auto", the only string _check_chunks lets through
    rows = None if auto else chunks
    workers = cluster_memory()
    if not workers and not auto:
        return _aligned(axes, batch, rows)
    mine = {n: x for n, x in batch.items() if n in split.batch_inputs}
    memory = ChunkMemory(split, opt_level, bindings, free, mine)
    if auto:
        rows = auto_rows(memory, workers or [local_memory()], bindings[split.batch_dim])
    aligned = _aligned(axes, batch, rows)
    if workers:
        first = next(iter(aligned))
        largest = max(aligned[first].chunks[axes[first]], default=0)
        warn_chunk(memory, largest, workers, stacklevel=4)  # at map_batches' caller
    return aligned


def _aligned(axes: dict[str, int], batch: dict[str, Any], chunks: int | None) -> dict[str, Any]:
    """The batch feeds sharing one chunking of the batch axis, `chunks` rows each (None:
    the first one's), and one chunk along every other axis."""
    first = next(iter(batch))
    rows = batch[first].chunks[axes[first]]
    # no empty chunks (a filtered array's blocks): a chunk of no rows has no max or min
    rows = tuple(n for n in rows if n) or rows[:1]
    aligned = {}
    for name, value in batch.items():
        want = {a: -1 for a in range(value.ndim)}
        want[axes[name]] = chunks if chunks else rows
        aligned[name] = value.rechunk(want)
    return aligned


def _block_shape(x: Any, axis: int, rows: int) -> tuple[int, ...]:
    """The shape dask declares for a block of `rows` rows of `x`, chunked along `axis` only."""
    return tuple(rows if a == axis else int(c[0]) for a, c in enumerate(x.chunks))


class _Job:
    """The dask graph of one map_batches call, built from delayed calls."""

    def __init__(
        self,
        split: BatchSplit,
        opt_level: int,
        backend: str,
        bindings: dict[str, int],
        split_every: int,
        flags: dict[str, bool],
    ) -> None:
        if split_every < 2:
            raise GraphcError(f"map_batches: split_every must be at least 2, got {split_every}")
        self.dask = require("dask", "map_batches")
        self.da = require("dask.array", "map_batches")
        self.split, self.bindings, self.split_every = split, bindings, split_every
        delayed = self.dask.delayed
        self.programs = {
            role: delayed(Program.of(g, opt_level, backend, **flags), pure=True, traverse=False)
            for role, g in (
                ("chunk", split.chunk),
                ("merge", split.merge),
                ("combine", split.combine),
            )
        }
        self.sizes = split.size_values(bindings)

    def build(self, batch: dict[str, Any], free: dict[str, Any]) -> dict[str, Any]:
        """The split graph's outputs as dask arrays, by name; `free` holds numpy arrays
        and delayed values (an earlier pass's results)."""
        delayed = self.dask.delayed
        split = self.split
        params = {
            n: a if self.dask.is_dask_collection(a) else delayed(a, pure=True, traverse=False)
            for n, a in free.items()
        }
        blocks = {n: list(x.to_delayed().ravel()) for n, x in batch.items()}
        first = next(iter(batch))
        rows = batch[first].chunks[split.batch_inputs[first]]
        results = []
        if split.chunk.outputs:
            program = self.programs["chunk"]
            token = self.dask.base.tokenize(program, params, blocks)
            name = f"{split.chunk.name}-{token}"
            run = delayed(run_chunk, pure=True)  # one task per chunk, its result a tuple
            for i, spec in enumerate(self._chunk_specs(batch, rows)):
                feeds = {**params, **self.sizes, **{n: b[i] for n, b in blocks.items()}}
                args = [feeds[p.name] for p in split.chunk.inputs]
                results.append(run(program, spec, *args, dask_key_name=(name, i)))
        return {**self._mapped(results, rows), **self._combined(results, params)}

    def _chunk_specs(self, batch: dict[str, Any], rows: Sequence[int]) -> list[ChunkSpec]:
        """What each chunk task checks: its blocks' shapes as dask declares them, and its
        results' shapes from the chunk graph's types at the chunk's rows."""
        split = self.split
        positions = {p.name: k for k, p in enumerate(split.chunk.inputs)}
        specs = []
        start = 0
        for i, n in enumerate(rows):
            blocks = tuple(
                (positions[name], name, _block_shape(x, split.batch_inputs[name], n), x.dtype)
                for name, x in batch.items()
                if name in positions
            )
            dims = {**self.bindings, split.batch_dim: n}
            results = tuple(
                (o.name, tuple(bind_shape(o.type.shape, dims)), o.type.dtype)
                for o in split.chunk.outputs
            )
            specs.append(
                ChunkSpec(split.graph.name, i, start, start + n, sum(rows), blocks, results)
            )
            start += n
        return specs

    def _mapped(self, results: list[Any], rows: Sequence[int]) -> dict[str, Any]:
        split, da = self.split, self.da
        arrays = {}
        for j, o in enumerate(split.chunk.outputs):
            plan = next((p for p in split.outputs if p.name == o.name and p.mapped), None)
            if plan is None:
                continue
            pieces = []
            for i, n in enumerate(rows):
                shape = bind_shape(o.type.shape, {**self.bindings, split.batch_dim: n})
                pieces.append(da.from_delayed(results[i][j], shape=shape, dtype=o.type.dtype))
            arrays[o.name] = da.concatenate(pieces, axis=plan.axis)
        return arrays

    def _merged(self, results: list[Any]) -> dict[str, Any]:
        """Every partial merged over all chunks, by a tree of merge tasks."""
        split = self.split
        if not split.partials:
            return {}
        index = {o.name: j for j, o in enumerate(split.chunk.outputs)}
        picks: tuple[int, ...] | None = tuple(index[p.name] for p in split.partials)
        merge = self.dask.delayed(merge_partials, pure=True)
        level = results
        while picks is not None or len(level) > 1:  # the chunks' results merged at least once
            level = [
                merge(self.programs["merge"], picks, *level[k : k + self.split_every])
                for k in range(0, len(level), self.split_every)
            ]
            picks = None
        return {p.name: level[0][k] for k, p in enumerate(split.partials)}

    def _combined(self, results: list[Any], params: dict[str, Any]) -> dict[str, Any]:
        split, delayed = self.split, self.dask.delayed
        if not split.combine.outputs:
            return {}
        merged = self._merged(results)
        feeds = {**params, **self.sizes, **merged}
        outs = split.combine.outputs
        run = delayed(run_graph, pure=True, nout=len(outs))
        final = run(self.programs["combine"], *(feeds[p.name] for p in split.combine.inputs))
        arrays = {}
        for j, o in enumerate(outs):
            shape = bind_shape(o.type.shape, self.bindings)
            if any(isinstance(d, str) for d in shape):
                raise GraphcError(
                    f"map_batches: output '{o.name}' has shape {format_shape(o.type.shape)} "
                    "with a dim no input binds"
                )
            arrays[o.name] = self.da.from_delayed(final[j], shape=shape, dtype=o.type.dtype)
        return arrays
