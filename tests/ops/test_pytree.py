"""Pytrees (graphc/ops/pytree.py): JAX's flattening order and containers, registered
types and dataclasses, tree_map, and the mismatch messages the control-flow errors use.
Compared with jax.tree_util where jax is installed."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

import numpy as np
import pytest

import graphc as gc
from graphc.ops.pytree import LEAF, mismatch, num_leaves, show_tree


class Point(NamedTuple):
    x: Any
    y: Any


def nested() -> Any:
    return {
        "b": [1, (2, None)],
        "a": Point(3, {"z": 4, "k": 5}),
        "c": collections.OrderedDict([("q", 6), ("p", 7)]),
        "d": None,
        "e": (),
    }


def test_jax_order_dicts_sorted_ordered_dicts_in_insertion_order() -> None:
    leaves, tree = gc.tree_flatten(nested())
    assert leaves == [3, 5, 4, 1, 2, 6, 7]
    rebuilt = gc.tree_unflatten(tree, leaves)
    assert rebuilt == nested()
    assert type(rebuilt["a"]) is Point and type(rebuilt["c"]) is collections.OrderedDict
    assert list(rebuilt["c"]) == ["q", "p"]
    assert show_tree(tree) == (
        "{'a': Point(x=x, y={'k': x, 'z': x}), 'b': [x, (x, None)], "
        "'c': OrderedDict({'q': x, 'p': x}), 'd': None, 'e': ()}"
    )


def test_same_leaves_as_jax() -> None:
    jax = pytest.importorskip("jax")
    for value in (nested(), [None, (1,)], Point([1, 2], None), 7, None, {"x": {}}):
        assert gc.tree_leaves(value) == jax.tree_util.tree_leaves(value), value
        assert num_leaves(gc.tree_structure(value)) == len(gc.tree_leaves(value))


def test_a_namedtuple_is_rebuilt_from_its_fields_not_a_generator() -> None:
    leaves, tree = gc.tree_flatten(Point(1.0, Point(2.0, 3.0)))
    assert gc.tree_unflatten(tree, ["a", "b", "c"]) == Point("a", Point("b", "c"))


def test_defaultdict_keeps_its_factory() -> None:
    d = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, tree = gc.tree_flatten(d)
    assert leaves == [2, 1]
    out = gc.tree_unflatten(tree, [20, 10])
    assert isinstance(out, collections.defaultdict) and out.default_factory is list
    assert out == {"a": 20, "b": 10}


def test_unregistered_classes_and_container_subclasses_are_leaves_as_in_jax() -> None:
    class MyList(list):
        pass

    @dataclasses.dataclass
    class Plain:
        v: Any

    for value in (MyList([1, 2]), Plain(1), "text", 3.5):
        leaves, tree = gc.tree_flatten(value)
        assert leaves == [value] and tree == LEAF


def test_registered_class_flattens_with_aux_data_in_the_structure() -> None:
    class Box:
        def __init__(self, items: list, label: str) -> None:
            self.items, self.label = items, label

    gc.register_pytree_node(
        Box, lambda b: (b.items, b.label), lambda label, items: Box(list(items), label)
    )
    leaves, tree = gc.tree_flatten(Box([1, (2, 3)], "L"))
    assert leaves == [1, 2, 3]
    out = gc.tree_unflatten(tree, [4, 5, 6])
    assert isinstance(out, Box) and out.items == [4, (5, 6)] and out.label == "L"
    assert gc.tree_structure(Box([1, (2, 3)], "M")) != tree
    assert "aux data 'L' vs 'M'" in mismatch(tree, gc.tree_structure(Box([1, (2, 3)], "M")))
    with pytest.raises(gc.GraphcError, match="Box is already a pytree container"):
        gc.register_pytree_node(Box, lambda b: ([], None), lambda a, c: Box([], ""))
    with pytest.raises(gc.GraphcError, match="tuple is already"):
        gc.register_pytree_node(tuple, lambda b: ([], None), lambda a, c: ())


def test_registered_class_matches_jax() -> None:
    jax = pytest.importorskip("jax")

    class Pair:
        def __init__(self, a: Any, b: Any) -> None:
            self.a, self.b = a, b

    flat = (lambda p: ((p.b, p.a), "aux"), lambda aux, ch: Pair(ch[1], ch[0]))
    gc.register_pytree_node(Pair, *flat)
    jax.tree_util.register_pytree_node(Pair, *flat)
    value = {"p": Pair([1, 2], {"u": 3, "t": 4}), "o": 0}
    assert gc.tree_leaves(value) == jax.tree_util.tree_leaves(value) == [0, 4, 3, 1, 2]
    doubled = gc.tree_map(lambda v: v * 2, value)
    assert doubled["p"].a == [2, 4] and doubled["p"].b == {"u": 6, "t": 8}


def test_register_dataclass_infers_fields_and_static_metadata() -> None:
    @gc.register_dataclass
    @dataclasses.dataclass
    class State:
        pos: Any
        vel: Any
        steps: int = dataclasses.field(default=1, metadata={"static": True})

    leaves, tree = gc.tree_flatten(State(pos=1.0, vel=(2.0, 3.0), steps=4))
    assert leaves == [1.0, 2.0, 3.0]
    assert gc.tree_unflatten(tree, [7, 8, 9]) == State(pos=7, vel=(8, 9), steps=4)
    assert gc.tree_structure(State(1.0, (2.0, 3.0), steps=5)) != tree  # meta is structure


def test_register_dataclass_with_explicit_fields_and_drop_fields_matches_jax() -> None:
    jax = pytest.importorskip("jax")

    @dataclasses.dataclass
    class Params:
        w: Any
        b: Any
        name: str

    gc.register_dataclass(Params, data_fields=["b", "w"], meta_fields=["name"])
    value = Params(w=[1, 2], b=3, name="layer")
    jax.tree_util.register_dataclass(Params, data_fields=["b", "w"], meta_fields=["name"])
    assert gc.tree_leaves(value) == jax.tree_util.tree_leaves(value) == [3, 1, 2]

    @dataclasses.dataclass
    class Dropped:
        keep: Any
        cache: Any = None

    gc.register_dataclass(Dropped, drop_fields=["cache"])
    assert gc.tree_leaves(Dropped(keep=1, cache=2)) == [1]
    assert gc.tree_unflatten(gc.tree_structure(Dropped(1, 2)), [5]) == Dropped(5, None)


def test_register_dataclass_mistakes() -> None:
    class NotData:
        pass

    with pytest.raises(gc.GraphcError, match="NotData is not a dataclass"):
        gc.register_dataclass(NotData)
    with pytest.raises(gc.GraphcError, match="give both data_fields= and meta_fields="):
        gc.register_dataclass(NotData, data_fields=["a"])


def test_tree_map_over_several_trees_and_is_leaf() -> None:
    a = {"x": (1, 2), "y": [3]}
    b = {"x": (10, 20), "y": [30]}
    assert gc.tree_map(lambda u, v: u + v, a, b) == {"x": (11, 22), "y": [33]}
    pairs = gc.tree_map(lambda t: sum(t), [(1, 2), (3, 4)], is_leaf=lambda v: isinstance(v, tuple))
    assert pairs == [3, 7]
    with pytest.raises(gc.GraphcError, match=r"tree 1 differs from the first at \['y'\]: "):
        gc.tree_map(lambda u, v: u + v, a, {"x": (1, 2), "y": [3, 4]})


def test_is_leaf_is_asked_about_none_too() -> None:
    is_none = lambda v: v is None  # noqa: E731
    assert gc.tree_leaves([None, 1], is_leaf=is_none) == [None, 1]
    assert gc.tree_leaves(None, is_leaf=is_none) == [None]
    assert gc.tree_map(lambda v: 0 if v is None else v, [None, 1], is_leaf=is_none) == [0, 1]
    jax = pytest.importorskip("jax")
    for value in ([None, 1], None, {"a": None, "b": (None, 2)}):
        want = jax.tree_util.tree_leaves(value, is_leaf=is_none)
        assert gc.tree_leaves(value, is_leaf=is_none) == want


def test_mismatch_names_the_first_difference_by_path() -> None:
    def where(a: Any, b: Any) -> str | None:
        return mismatch(gc.tree_structure(a), gc.tree_structure(b), "carry")

    assert where({"a": 1, "b": 2}, {"a": 1}) == "carry: dict keys ['a', 'b'] vs ['a']"
    assert where((1, [2, 3]), (1, [2])) == "carry[1]: list of 2 vs list of 1"
    assert where(Point(1, (2,)), Point(1, 2)) == "carry.y: tuple of 1 vs a leaf"
    assert where({"k": [1, None]}, {"k": [1, 2]}) == "carry['k'][1]: None vs a leaf"
    assert where((1,), [1]) == "carry: tuple of 1 vs list of 1"
    assert where((1, {"a": 2}), (1, {"a": 2})) is None


def test_unflatten_with_the_wrong_number_of_leaves_and_unsortable_keys() -> None:
    tree = gc.tree_structure((1, [2]))
    with pytest.raises(gc.GraphcError, match=r"structure \(x, \[x\]\) has 2 leaves, got 3"):
        gc.tree_unflatten(tree, [1, 2, 3])
    with pytest.raises(gc.GraphcError, match="keys of a dict must be sortable"):
        gc.tree_flatten({1: "a", "b": 2})


def test_tree_util_namespace_holds_the_top_level_functions() -> None:
    """`gc.tree_util` spells jax.tree_util's module path (code ported from JAX) and holds
    the same functions as the top-level names."""
    for name in ("tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "tree_structure"):
        assert getattr(gc.tree_util, name) is getattr(gc, name), name
    assert gc.tree_util.register_pytree_node is gc.register_pytree_node
    assert gc.tree_util.tree_map(lambda v: v + 1, {"b": 1, "a": [2]}) == {"a": [3], "b": 2}


def test_tree_reduce_tree_all_and_self_flattening_classes_as_jax() -> None:
    jax = pytest.importorskip("jax")
    tree = {"b": [1, 2], "a": (3, None, 4)}
    assert gc.tree_reduce(lambda x, y: x * 10 + y, tree) == jax.tree_util.tree_reduce(
        lambda x, y: x * 10 + y, tree
    )
    assert gc.tree_reduce(max, [], 0) == 0
    with pytest.raises(gc.GraphcError, match="needs an initializer"):
        gc.tree_reduce(max, [])
    assert gc.tree_all([1, (True, 2)]) and not gc.tree_all({"x": 0}) and gc.tree_all([])

    def make(register):
        @register
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b

            def tree_flatten(self):
                return (self.a, self.b), "tag"

            @classmethod
            def tree_unflatten(cls, aux, children):
                assert aux == "tag"
                return cls(*children)

        return Pair

    ours, theirs = (
        make(gc.tree_util.register_pytree_node_class),
        make(jax.tree_util.register_pytree_node_class),
    )
    assert gc.tree_leaves(ours(1, [2, 3])) == jax.tree_util.tree_leaves(theirs(1, [2, 3]))
    doubled = gc.jit(lambda p: gc.tree_map(lambda v: v * 2, p))(ours(np.ones(2), np.ones(3)))
    np.testing.assert_array_equal(doubled.b, np.full(3, 2.0))
    with pytest.raises(gc.GraphcError, match="has no tree_flatten"):
        gc.tree_util.register_pytree_node_class(type("Plain", (), {}))


# -- key paths, transpose, Partial and the treedef's methods (the JAX hunt's list) -------------


@dataclasses.dataclass
class Cell:
    w: Any
    b: Any


gc.register_dataclass(Cell)


def test_key_paths_transpose_and_treedef_methods_are_jaxs() -> None:
    jax = pytest.importorskip("jax")
    jax.tree_util.register_dataclass(Cell, data_fields=["w", "b"], meta_fields=[])
    for value in (nested(), [None, (1,)], Point([1, 2], None), 7, {"x": {}}, Cell(1, [2, 3])):
        ours, tree = gc.tree_util.tree_flatten_with_path(value)
        theirs, jtree = jax.tree_util.tree_flatten_with_path(value)
        assert [(gc.tree_util.keystr(p), leaf) for p, leaf in ours] == [
            (jax.tree_util.keystr(p), leaf) for p, leaf in theirs
        ], value
        if tree not in (LEAF, None):
            assert tree.num_nodes == jtree.num_nodes, value
            assert tree.unflatten(range(tree.num_leaves)) == jtree.unflatten(
                range(jtree.num_leaves)
            )
        mapped = gc.tree_util.tree_map_with_path(lambda p, v: (gc.tree_util.keystr(p), v), value)
        want = jax.tree_util.tree_map_with_path(lambda p, v: (jax.tree_util.keystr(p), v), value)
        assert mapped == want, value
    outer, inner = gc.tree_structure([0, 0, 0]), gc.tree_structure({"a": 0, "b": (0, None)})
    grid = [{"a": k, "b": (10 * k, None)} for k in range(3)]
    assert gc.tree_util.tree_transpose(outer, inner, grid) == jax.tree_util.tree_transpose(
        jax.tree_util.tree_structure([0, 0, 0]),
        jax.tree_util.tree_structure({"a": 0, "b": (0, None)}),
        grid,
    )
    assert gc.tree_structure((1, [2])).flatten_up_to(("p", ["q"])) == ["p", "q"]
    assert gc.tree_util.all_leaves([1, np.ones(2)]) and not gc.tree_util.all_leaves([(1,)])


def test_partial_is_a_pytree_through_transformations() -> None:
    """jax.tree_util.Partial: the bound arguments are leaves, the function is structure,
    so a Partial goes through gc.jit and tree_map as an argument."""
    scale = gc.tree_util.Partial(lambda a, x, shift=0.0: a * x + shift, 3.0, shift=1.0)
    assert scale(2.0) == 7.0
    assert gc.tree_leaves(scale) == [3.0, 1.0]
    doubled = gc.tree_map(lambda v: v * 2, scale)
    assert isinstance(doubled, gc.tree_util.Partial) and doubled(2.0) == 14.0
    run = gc.jit(lambda f, x: f(x))
    np.testing.assert_allclose(run(scale, np.array([1.0, 2.0])), [4.0, 7.0])
