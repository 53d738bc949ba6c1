"""What runs on a dask worker: graphs arrive as graphc's JSON text, plans are cached.

A `Program` is a graph's JSON text, the options to compile it with, and a key (a
hash of both) computed once by the client. Tasks receive the Program as a dependency
(sent once per worker, never re-sent per chunk); the worker compiles it on first use
and keeps the Executable in a module-level cache under that key, so later tasks with
the same key, on any chunk, reuse it and its per-shape plans. Nothing here imports
dask and no code travels: loading the JSON never runs code.

A chunk task of `map_batches` runs through `run_chunk`, which checks the blocks it gets
against the shapes dask declared for them (a block with more rows than declared would
otherwise be summed into a partial and divided by the declared count) and its results
against the shapes the graph gives the chunk, and turns any error into a `ChunkError`
naming the chunk's index and rows while keeping the original error's class and message.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import FeedError, GraphcError, ShapeError
from graphc.ir.graph import Graph
from graphc.ir.serialize import from_json, to_json
from graphc.runtime import forks
from graphc.runtime.backend import get_backend
from graphc.runtime.executable import Executable, compile

CACHE_SIZE = 16  # programs per worker process; each keeps its own per-shape plans


@dataclass(frozen=True)
class Program:
    """A graph to run on workers: its JSON text and how to compile it."""

    key: str
    text: str
    opt_level: int
    backend: str
    check_numerics: bool = False  # as gc.compile's: the caller's Executable's, carried over
    fast_math: bool = False

    @classmethod
    def of(
        cls,
        graph: Graph,
        opt_level: int,
        backend: str,
        check_numerics: bool = False,
        fast_math: bool = False,
    ) -> Program:
        check_options(opt_level, backend)
        text = to_json(graph, indent=None)
        flags = f"{opt_level}|{backend}|{int(check_numerics)}|{int(fast_math)}"
        digest = hashlib.sha256(f"{flags}|{text}".encode()).hexdigest()
        return cls(
            f"{graph.name}-{digest[:32]}",
            text,
            opt_level,
            backend,
            bool(check_numerics),
            bool(fast_math),
        )

    def __repr__(self) -> str:  # dask shows task arguments; the text can be megabytes
        flags = "".join(
            f", {name}" for name in ("check_numerics", "fast_math") if getattr(self, name)
        )
        return (
            f"Program({self.key!r}, {len(self.text)} chars, O{self.opt_level}, "
            f"{self.backend}{flags})"
        )


def check_options(opt_level: int, backend: str) -> None:
    """Refuse on the client what every worker's compile would refuse, each chunk on its
    own, once the computation runs: an opt level or a backend name that does not exist.
    ("auto" stays for each worker to resolve; whether a named backend can run there is
    the worker's business.)"""
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2):
        raise GraphcError(f"opt_level must be 0, 1 or 2, got {opt_level!r}")
    if backend != "auto":
        get_backend(backend)  # a GraphcError naming the backends there are


_cache: OrderedDict[str, Executable] = OrderedDict()
_lock = forks.lock()
_compiles = 0


def executable(program: Program) -> Executable:
    """The program's Executable in this process, compiled on first use only."""
    global _compiles
    with _lock:
        exe = _cache.get(program.key)
        if exe is not None:
            _cache.move_to_end(program.key)
            return exe
        exe = compile(
            from_json(program.text),
            opt_level=program.opt_level,
            backend=program.backend,
            check_numerics=program.check_numerics,
            fast_math=program.fast_math,
        )
        _compiles += 1
        _cache[program.key] = exe
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
        return exe


def run_graph(program: Program, *arrays: Any) -> tuple[np.ndarray, ...]:
    """Run the program on arrays in its placeholders' order; every output, as a tuple."""
    result = executable(program)(*arrays)
    return result if isinstance(result, tuple) else (result,)


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk task of map_batches: which rows of the batch it runs, the shape and dtype
    dask declared for each of its blocks, and the shape and dtype of each result."""

    graph: str  # the name of the graph map_batches runs, for messages
    index: int
    start: int
    stop: int
    total: int  # rows in the whole batch
    blocks: tuple[tuple[int, str, tuple[int, ...], np.dtype], ...]  # (position, name, shape, dtype)
    results: tuple[tuple[str, tuple[int, ...], np.dtype], ...]  # (output, shape, dtype)
    job: str = "map_batches"  # what ran the chunk, for messages ("step 3 of DataParallelStep")

    def describe(self) -> str:
        return f"chunk {self.index} (rows {self.start}:{self.stop} of {self.total})"


def run_chunk(program: Program, chunk: ChunkSpec, *arrays: Any) -> tuple[np.ndarray, ...]:
    """`run_graph` for one chunk, its blocks and results checked against `chunk`; any
    error raised comes out as a ChunkError naming the chunk (see `chunk_error`)."""
    try:
        for position, name, shape, dtype in chunk.blocks:
            got = arrays[position]
            got_shape, got_dtype = np.shape(got), np.asarray(got).dtype
            if got_shape != shape or got_dtype != dtype:
                raise FeedError(
                    f"placeholder '{name}' got a block of shape {got_shape} and dtype "
                    f"{got_dtype} where dask declared shape {shape} and dtype {dtype} (the "
                    "dask array's chunks do not describe its blocks: a from_delayed or "
                    "map_blocks with a wrong shape or dtype?)"
                )
        results = run_graph(program, *arrays)
        for (name, shape, dtype), got in zip(chunk.results, results, strict=True):
            got_shape, got_dtype = np.shape(got), np.asarray(got).dtype
            if got_shape != shape or got_dtype != dtype:
                raise ShapeError(
                    f"output '{name}' came out with shape {got_shape} and dtype {got_dtype}, "
                    f"expected shape {shape} and dtype {dtype} for the chunk's rows"
                )
        return results
    except Exception as exc:
        raise chunk_error(exc, chunk) from exc


class ChunkError(GraphcError, RuntimeError):
    """A chunk of map_batches (or of a DataParallelStep's step) failed. The message names
    the chunk's index and rows, then the original error's class and message; `index`, `rows` and `cause` (the
    original's class) say the same as attributes. Raised as an instance of a subclass
    that also derives from the original's class where Python allows it, so
    ``except FeedError`` (or ``IndexError``, ...) still catches a chunk's error."""

    def __init__(
        self,
        message: str,
        *,
        index: int,
        rows: tuple[int, int],
        cause: type[BaseException],
        node: str | None = None,
    ) -> None:
        super().__init__(message, node=node)
        self.index, self.rows, self.cause = index, rows, cause

    def __str__(self) -> str:  # a KeyError cause would quote the message
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple:  # the class may be made on the fly: rebuild it by its cause
        return _rebuild, (self.cause, self.args[0], self.index, self.rows, self.node)


def chunk_error(exc: BaseException, chunk: ChunkSpec) -> ChunkError:
    """`exc`, raised running `chunk`, as a ChunkError that names the chunk."""
    message = (
        f"{chunk.describe()} of {chunk.job} over graph '{chunk.graph}': {type(exc).__name__}: {exc}"
    )
    node = exc.node if isinstance(exc, GraphcError) else None
    return _rebuild(type(exc), message, chunk.index, (chunk.start, chunk.stop), node)


def _rebuild(
    cause: type[BaseException],
    message: str,
    index: int,
    rows: tuple[int, int],
    node: str | None,
) -> ChunkError:
    try:
        return _error_class(cause)(message, index=index, rows=rows, cause=cause, node=node)
    except TypeError:  # the cause's own __init__ wants other arguments
        return ChunkError(message, index=index, rows=rows, cause=cause, node=node)


@functools.cache
def _error_class(cause: type[BaseException]) -> type[ChunkError]:
    """ChunkError and `cause` in one class (as Ray's task errors derive from their cause's
    class), made once per cause; ChunkError alone where the two cannot be combined."""
    if issubclass(cause, ChunkError) or not issubclass(cause, Exception):
        return ChunkError
    try:
        return type(f"ChunkError({cause.__name__})", (ChunkError, cause), {})
    except TypeError:  # instance layouts that cannot be combined (two C-level bases)
        return ChunkError


def merge_partials(
    program: Program, picks: tuple[int, ...] | None, *partials: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, ...]:
    """Merge several chunks' (or merges') partials: stacked per partial, then the merge
    graph reduces the stacking axis. `picks` takes the partials out of whole chunk
    results (their positions among the chunk graph's outputs), so a chunk's result
    needs no task per partial; None when `partials` are merges' results already."""
    if picks is not None:
        partials = tuple(tuple(result[k] for k in picks) for result in partials)
    if len(partials) == 1:
        return partials[0]
    stacked = [np.stack(group) for group in zip(*partials)]
    return run_graph(program, *stacked)


def cache_info() -> dict[str, Any]:
    """This process's compiled programs and their plans (for tests and diagnostics)."""
    with _lock:
        return {
            "compiles": _compiles,
            "programs": {key: exe.plans_built for key, exe in _cache.items()},
        }


def clear_cache() -> None:
    global _compiles
    with _lock:
        _cache.clear()
        _compiles = 0
