"""What runs on a dask worker: graphs arrive as graphc's JSON text, plans are cached.

A `Program` is a graph's JSON text, the options to compile it with, and a key (a
hash of both) computed once by the client. Tasks receive the Program as a dependency
(sent once per worker, never re-sent per chunk); the worker compiles it on first use
and keeps the Executable in a module-level cache under that key, so later tasks with
the same key, on any chunk, reuse it and its per-shape plans. Nothing here imports
dask and no code travels: loading the JSON never runs code.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.graph import Graph
from graphc.ir.serialize import from_json, to_json
from graphc.runtime.executable import Executable, compile

CACHE_SIZE = 16  # programs per worker process; each keeps its own per-shape plans


@dataclass(frozen=True)
class Program:
    """A graph to run on workers: its JSON text and how to compile it."""

    key: str
    text: str
    opt_level: int
    backend: str

    @classmethod
    def of(cls, graph: Graph, opt_level: int, backend: str) -> Program:
        text = to_json(graph, indent=None)
        digest = hashlib.sha256(f"{opt_level}|{backend}|{text}".encode()).hexdigest()
        return cls(f"{graph.name}-{digest[:32]}", text, opt_level, backend)

    def __repr__(self) -> str:  # dask shows task arguments; the text can be megabytes
        return f"Program({self.key!r}, {len(self.text)} chars, O{self.opt_level}, {self.backend})"


_cache: OrderedDict[str, Executable] = OrderedDict()
_lock = threading.Lock()
_compiles = 0


def executable(program: Program) -> Executable:
    """The program's Executable in this process, compiled on first use only."""
    global _compiles
    with _lock:
        exe = _cache.get(program.key)
        if exe is not None:
            _cache.move_to_end(program.key)
            return exe
        exe = compile(from_json(program.text), opt_level=program.opt_level, backend=program.backend)
        _compiles += 1
        _cache[program.key] = exe
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
        return exe


def run_graph(program: Program, *arrays: Any) -> tuple[np.ndarray, ...]:
    """Run the program on arrays in its placeholders' order; every output, as a tuple."""
    result = executable(program)(*arrays)
    return result if isinstance(result, tuple) else (result,)


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
