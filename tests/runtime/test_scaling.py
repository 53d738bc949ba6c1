"""Compile time stays linear: structural checks, no timing.

A quadratic compile hides in a scan of the whole graph (users(), inputs, outputs,
str(graph)) repeated per node, in a name allocator that probes from the start, or in
a free list searched in full per step. These tests count such scans and probes, so
they fail on the structure, whatever the machine's speed.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.bench.compile_chain import ladder, ladder_feeds
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Buffer, FreeList
from tests.budget import draws

BIG = 200  # graphs at least this long count as "the graph", not a fused body
SCANS = {
    "inputs": Graph.inputs.fget,
    "outputs": Graph.outputs.fget,
    "op_nodes": Graph.op_nodes.fget,
    "users": Graph.users,
    "str": Graph.__str__,
}


def naive_take(free: list[Buffer], t: TensorType) -> Buffer | None:
    """The planner's former best fit: a scan of every free buffer, first minimum wins."""
    fits = [b for b in free if b.dtype == t.dtype and b.nbytes >= (t.nbytes or 0)]
    if not fits:
        return None
    best = min(fits, key=lambda b: b.nbytes)
    free.remove(best)
    return best


@settings(max_examples=draws(200), deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["float32", "float64"]), st.integers(1, 6)),
        max_size=60,
    )
)
def test_free_list_takes_what_a_full_scan_takes(ops: list[tuple[bool, str, int]]) -> None:
    free, naive = FreeList(), []
    for k, (add, dtype, elements) in enumerate(ops):
        t = TensorType((elements,), dtype)
        if add:
            buffer = Buffer(k, "allocated", t.nbytes or 0, t.dtype)
            free.add(buffer)
            naive.append(buffer)
        else:
            assert free.take(t) is naive_take(naive, t)
        assert len(free) == len(naive)


class CountingSet(set):
    """A set that counts membership probes."""

    probes = 0

    def __contains__(self, item: object) -> bool:
        CountingSet.probes += 1
        return super().__contains__(item)


def test_fresh_names_resume_instead_of_probing_from_the_start() -> None:
    exe = gc.compile(ladder(4), opt_level=0)
    gen = Generator(exe.plan())
    gen._taken = CountingSet(gen._taken)
    CountingSet.probes = 0
    names = [gen.fresh("scratch") for _ in range(500)]
    assert names[:3] == ["scratch", "scratch_1", "scratch_2"] and len(set(names)) == 500
    assert CountingSet.probes <= 2 * 500


def count_whole_graph_scans(monkeypatch, blocks: int) -> dict[str, int]:
    """How often gradients + compile + the first call scan a big graph whole."""
    counts = dict.fromkeys(SCANS, 0)

    def counted(name: str, original):
        def wrapper(self: Graph, *args):
            if len(self.nodes) >= BIG:
                counts[name] += 1
            return original(self, *args)

        return wrapper

    for name in ("inputs", "outputs", "op_nodes"):
        monkeypatch.setattr(Graph, name, property(counted(name, SCANS[name])))
    monkeypatch.setattr(Graph, "users", counted("users", SCANS["users"]))
    monkeypatch.setattr(Graph, "__str__", counted("str", SCANS["str"]))
    graph = gc.gradients(ladder(blocks), wrt=["w", "b"])
    for level in (0, 2):
        gc.compile(graph, opt_level=level)(**ladder_feeds())
    return counts


def test_whole_graph_scans_do_not_grow_with_the_graph(monkeypatch) -> None:
    # (both sizes keep every graph the compile scans past BIG nodes)
    small = count_whole_graph_scans(monkeypatch, 80)
    large = count_whole_graph_scans(monkeypatch, 160)
    assert large == small


def test_long_gradient_graph_compiles_to_the_same_values_at_o0_and_o2() -> None:
    graph = gc.gradients(ladder(200), wrt=["w", "b"])
    o0 = gc.compile(graph, opt_level=0)(**ladder_feeds())
    o2 = gc.compile(graph, opt_level=2)(**ladder_feeds())
    for a, b in zip(o0, o2):
        np.testing.assert_array_equal(a, b)
