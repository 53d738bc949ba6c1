"""One differential check: O0, O1, O2 and the reference interpreter agree bit for bit.

`check_levels(graph, feed_sets, backend=...)` runs the reference on each feed set,
compiles the graph at every level on the backend (by default the one `gc.compile`
chooses) and calls each executable on every feed set in turn (the second call runs on
reused buffers), and holds every result to the reference's dtype, shape and bits (any
NaN equals any NaN). On a backend that declares some of its kernels inexact (native:
`register_lowering(..., inexact=...)`) the reference is the level's graph run by numpy
with each such node's value the backend's own, checked within that declaration's bound
(tests/declared_reference.py): so exact ops are still held to numpy's bits, and each
inexact one to its stated bound where it occurs. Where the reference raises a graphc error the
executable must raise one too (at compile or call time). It also checks that the
caller's feeds are never written (a last feed set is the first one in odd layouts,
negative strides or Fortran order, read-only) and that an array returned by one call
is not changed by the next. One error may vanish: that of a node the level's
optimizations removed (no output needs its value; docs/trust.md): then the outcome
must be the reference's on the optimized graph. `check_round_trip` does the same for
the graph read back from its text and its JSON. Failure messages carry the graph text,
the feeds and the level, enough for a repro.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np

import graphc as gc
from graphc.ops.body import dims_of
from graphc.runtime.backend import get_backend, resolve
from graphc.runtime.executable import optimize
from graphc.runtime.specialize import bound_graph, specialize
from tests.declared_reference import declared_reference
from tests.edge_values import bits_differ

LEVELS = (0, 1, 2)
Feeds = Mapping[str, np.ndarray]


@contextmanager
def quiet() -> Iterator[None]:
    """Overflow and invalid-value warnings are expected here: nan and inf are results."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def describe_feeds(feeds: Feeds) -> str:
    """The feeds as Python source, for a repro."""
    with np.printoptions(threshold=100, floatmode="unique"):
        items = (f"    {name!r}: np.{np.array_repr(a)}," for name, a in feeds.items())
        return "{\n" + "\n".join(items) + "\n}"


def _outcome(fn: object) -> list[np.ndarray] | gc.GraphcError:
    try:
        result = fn()  # type: ignore[operator]
    except gc.GraphcError as exc:
        return exc
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _compare(got: object, want: object, where: str, graph: gc.Graph, feeds: Feeds) -> None:
    context = f"{where}\n{graph}\nfeeds = {describe_feeds(feeds)}"
    if isinstance(want, gc.GraphcError):
        assert isinstance(got, gc.GraphcError), (
            f"the reference raised {type(want).__name__}: {want}, but {where} gave results\n"
            f"{context}"
        )
        return
    assert not isinstance(got, gc.GraphcError), (
        f"{where} raised {type(got).__name__}: {got}, the reference did not\n{context}"
    )
    assert len(got) == len(want), f"{len(got)} results vs {len(want)}\n{context}"
    for k, (g, w) in enumerate(zip(got, want)):
        why = bits_differ(g, w)
        assert why is None, f"output {k} ({graph.outputs[k].name!r}): {why}\n{context}"


def dropped_error(want: object, optimized: gc.Graph) -> bool:
    """Whether `want` is a graphc error raised by a node `optimized` no longer has."""
    return isinstance(want, gc.GraphcError) and want.node is not None and want.node not in optimized


def _planned(exe: gc.Executable, feeds: Feeds) -> gc.Graph:
    """The graph `exe` planned for these feeds: a graph with symbolic dims is optimized
    again once they are bound, so a node read only for its type (full_like) can fold
    and leave its producer dead there though `exe.optimized` still has it."""
    try:
        return exe.plan(**feeds).graph
    except gc.GraphcError:
        return exe.optimized


def odd_layout(feeds: Feeds) -> dict[str, np.ndarray]:
    """The same values in memory a caller might hand over: each array with negative
    strides (reversed twice, a view of a reversed copy) or in Fortran order, read-only,
    so that a write into a caller's array raises."""
    odd = {}
    for k, (name, value) in enumerate(feeds.items()):
        value = np.asarray(value)
        if not value.ndim:
            view = value.copy()
        elif k % 2 == 0:
            view = np.flip(np.flip(value).copy())
        else:
            view = np.array(value, order="F")
        view.flags.writeable = False
        odd[name] = view
    return odd


def _copies(results: object) -> object:
    if isinstance(results, gc.GraphcError):
        return results
    return [np.array(r, copy=True) for r in results]


def _level_graph(graph: gc.Graph, level: int, feeds: Feeds) -> gc.Graph:
    """The graph a plan at `level` is made of for these feeds, before the backend's
    fusion: gc.optimize's result, of the graph with its symbolic dims bound where it has
    any (as Executable._graph_for does)."""
    if level <= 0:
        return graph
    arrays = [np.asarray(feeds[p.name]) for p in graph.inputs]
    bindings = dims_of(graph, arrays)
    optimized = optimize(graph, level)
    if not bindings:
        return optimized
    concrete = optimize(bound_graph(graph, specialize(graph, bindings)), level)
    interface = [(n.kind, n.name) for n in concrete.inputs + concrete.outputs]
    same = interface == [(n.kind, n.name) for n in optimized.inputs + optimized.outputs]
    return concrete if same else optimized


def _backend_reference(graph: gc.Graph, level: int, feeds: Feeds, backend: str) -> object:
    """The outcome `backend` owes at `level` on these feeds (tests/declared_reference.py);
    a node beyond its declared bound fails here, with the feeds for a repro."""
    try:
        return _outcome(
            lambda: declared_reference(_level_graph(graph, level, feeds), feeds, backend)
        )
    except AssertionError as exc:
        raise AssertionError(f"O{level}: {exc}\nfeeds = {describe_feeds(feeds)}") from None


def check_levels(
    graph: gc.Graph,
    feed_sets: Sequence[Feeds],
    levels: Sequence[int] = LEVELS,
    backend: str | None = None,
) -> None:
    """Every level's executable on `backend` (None: gc.compile's default) equals the
    reference on every feed set: bit for bit, but for the nodes the backend declares
    inexact, each within its declared bound (tests/declared_reference.py)."""
    backend = resolve(backend).name
    # (the level's graph may hold an inexact op the declared one has not: a rewrite
    # making x / (1 + exp(-x)) a sigmoid)
    inexact = bool(get_backend(backend).inexact_lowerings)
    # the first feed set again as a caller may hand it over, strided and read-only: a plan
    # reads a caller's array where it lies or copies it, and never writes into it (numpy's
    # matmul and sums round a strided operand otherwise: the reference runs it too)
    feed_sets = [*feed_sets, odd_layout(feed_sets[0])]
    with quiet():
        wants = [_outcome(lambda f=f: gc.run(graph, f)) for f in feed_sets]
        for level in levels:
            try:
                exe = gc.compile(graph, opt_level=level, backend=backend)
            except gc.GraphcError as exc:
                for feeds, want in zip(feed_sets, wants):
                    _compare(exc, want, f"gc.compile(opt_level={level})", graph, feeds)
                continue
            kept = []
            for call, (feeds, want) in enumerate(zip(feed_sets, wants)):
                before = {k: np.array(v, copy=True) for k, v in feeds.items()}
                got = _outcome(lambda f=feeds, e=exe: e(**f))
                optimized = _planned(exe, feeds)
                if dropped_error(want, optimized) and not dropped_error(got, optimized):
                    # the failing node is gone: the optimized graph's own outcome stands
                    # (a level may still report the removed node, as got does otherwise)
                    want = _outcome(lambda f=feeds, o=optimized: gc.run(o, f))
                if inexact and not isinstance(want, gc.GraphcError):
                    want = _backend_reference(graph, level, feeds, backend)
                _compare(got, want, f"{backend} O{level}, call {call + 1}", graph, feeds)
                for name, value in feeds.items():
                    assert bits_differ(value, before[name]) is None, (
                        f"O{level} wrote into the caller's feed {name!r}\n{graph}"
                    )
                kept.append((got, _copies(got), feeds))
            for call, (got, copy, feeds) in enumerate(kept):
                _compare(
                    got, copy, f"O{level}: call {call + 1}'s result after later calls", graph, feeds
                )


def check_round_trip(graph: gc.Graph, feed_sets: Sequence[Feeds]) -> None:
    """The graph read back from its text and from its JSON prints and runs the same."""
    text = str(graph)
    for how, again in (
        ("gc.parse(str(g))", lambda: gc.parse(text)),
        ("gc.from_json(gc.to_json(g))", lambda: gc.from_json(gc.to_json(graph))),
    ):
        copy = again()
        assert str(copy) == text, f"{how} prints differently:\n{text}\n---\n{copy}"
        with quiet():
            for feeds in feed_sets:
                want = _outcome(lambda f=feeds: gc.run(graph, f))
                got = _outcome(lambda f=feeds, c=copy: gc.run(c, f))
                _compare(got, want, f"the reference on {how}", graph, feeds)
