"""verify(graph): each IR invariant, broken on purpose by building Node objects directly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings

import graphc as gc
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.types import TensorType
from tests.budget import draws
from tests.strategies import random_graphs

F3 = TensorType((3,), "float32")
F23 = TensorType((2, 3), "float32")


def base() -> tuple[Graph, Node, Node]:
    """x -> exp -> output y, all valid."""
    g = Graph("g")
    x = g.add_placeholder("x", F3)
    e = g.add_op("exp", [x], {}, F3)
    g.add_output(e, "y")
    return g, x, e


def force(g: Graph, node: Node, at: int | None = None) -> Node:
    """Put `node` into `g` without the checks of Graph.append."""
    node.graph = g
    g.nodes.insert(len(g.nodes) if at is None else at, node)
    g._by_name.setdefault(node.name, node)
    return node


def test_valid_graphs_pass() -> None:
    g, _, _ = base()
    assert gc.verify(g) is None


@settings(max_examples=draws(15))
@given(random_graphs(min_ops=5, max_ops=20))
def test_random_graphs_verify(g: gc.Graph) -> None:
    assert gc.verify(g) is None, str(g)


def use_before_definition(g: Graph, x: Node, e: Node) -> None:
    force(g, Node("late", OP, "neg", (x,), {}, F3), at=len(g.nodes))
    e.inputs = (g.node("late"),)


def cycle(g: Graph, x: Node, e: Node) -> None:
    n = force(g, Node("neg", OP, "neg", (e,), {}, F3), at=2)
    e.inputs = (n,)


def duplicate_name(g: Graph, x: Node, e: Node) -> None:
    force(g, Node("exp", OP, "neg", (x,), {}, F3), at=2)


def arity(g: Graph, x: Node, e: Node) -> None:
    e.inputs = (x, x)


def foreign_node(g: Graph, x: Node, e: Node) -> None:
    e.graph = Graph("other")


def orphan_input(g: Graph, x: Node, e: Node) -> None:
    e.inputs = (Node("ghost", PLACEHOLDER, None, (), {}, F3),)


def output_two_inputs(g: Graph, x: Node, e: Node) -> None:
    g.node("y").inputs = (e, e)


def output_wrong_type(g: Graph, x: Node, e: Node) -> None:
    g.node("y").type = F23


def wrong_type(g: Graph, x: Node, e: Node) -> None:
    e.type = TensorType((3,), "float64")


def type_rule_fails(g: Graph, x: Node, e: Node) -> None:
    w = force(g, Node("w", PLACEHOLDER, None, (), {}, F23), at=0)
    force(g, Node("mm", OP, "matmul", (x, w), {}, F3), at=3)  # (3,) @ (2, 3)


def missing_attr(g: Graph, x: Node, e: Node) -> None:
    force(g, Node("s", OP, "sum", (x,), {"axis": None}, TensorType(())), at=2)


def unknown_attr(g: Graph, x: Node, e: Node) -> None:
    e.attrs["colour"] = "red"


def unknown_op(g: Graph, x: Node, e: Node) -> None:
    e.op = "frobnicate"


def unknown_kind(g: Graph, x: Node, e: Node) -> None:
    e.kind = "input"


def placeholder_with_inputs(g: Graph, x: Node, e: Node) -> None:
    force(g, Node("p", PLACEHOLDER, None, (x,), {}, F3), at=1)


def constant_not_array(g: Graph, x: Node, e: Node) -> None:
    force(g, Node("c", OP, "constant", (), {"value": [1.0, 2.0]}, TensorType((2,))), at=1)


def name_table_out_of_step(g: Graph, x: Node, e: Node) -> None:
    g.nodes[1] = Node("exp", OP, "exp", (x,), {}, F3, graph=g)


def output_is_not_output_kind(g: Graph, x: Node, e: Node) -> None:
    force(g, Node("o", OUTPUT, "neg", (e,), {}, F3))


VIOLATIONS: dict[str, tuple[Callable[[Graph, Node, Node], None], type, str]] = {
    "use before definition": (
        use_before_definition,
        gc.VerifyError,
        "node 'exp' (op exp): input 0",
    ),
    "cycle": (cycle, gc.CycleError, "cycle: exp -> neg -> exp"),
    "duplicate name": (duplicate_name, gc.VerifyError, "'exp' is used twice"),
    "arity": (arity, gc.VerifyError, "node 'exp' (op exp): op 'exp' takes 1 input(s), got 2"),
    "node of another graph": (foreign_node, gc.VerifyError, "belongs to graph 'other'"),
    "input not in graph": (orphan_input, gc.VerifyError, "placeholder 'ghost') is not a node"),
    "output with two inputs": (
        output_two_inputs,
        gc.VerifyError,
        "output 'y': an output has exactly one input",
    ),
    "output type": (output_wrong_type, gc.VerifyError, "output 'y': declared type f32[2,3]"),
    "wrong type": (wrong_type, gc.VerifyError, "node 'exp' (op exp): declared type f64[3]"),
    "type rule fails": (type_rule_fails, gc.VerifyError, "node 'mm' (op matmul): the type rule"),
    "missing attr": (missing_attr, gc.VerifyError, "node 's' (op sum): op 'sum' expects attrs"),
    "unknown attr": (unknown_attr, gc.VerifyError, "unknown ['colour']"),
    "unknown op": (unknown_op, gc.VerifyError, "unknown op 'frobnicate'"),
    "unknown kind": (unknown_kind, gc.VerifyError, "unknown kind 'input'"),
    "placeholder with inputs": (placeholder_with_inputs, gc.VerifyError, "placeholder 'p'"),
    "constant not array": (
        constant_not_array,
        gc.VerifyError,
        "node 'c' (op constant): a constant's value must be an array",
    ),
    "name table out of step": (
        name_table_out_of_step,
        gc.VerifyError,
        "not the node graph 'g' knows",
    ),
    "output with an op": (output_is_not_output_kind, gc.VerifyError, "output 'o'"),
}


@pytest.mark.parametrize("name", list(VIOLATIONS))
def test_verify_catches_and_names(name: str) -> None:
    breaker, error, expected = VIOLATIONS[name]
    g, x, e = base()
    breaker(g, x, e)
    with pytest.raises(error) as info:
        gc.verify(g)
    assert expected in str(info.value), str(info.value)


def test_cycle_error_is_a_verify_error() -> None:
    g, x, e = base()
    cycle(g, x, e)
    with pytest.raises(gc.VerifyError):
        gc.verify(g)


def test_long_chains_verify_without_recursion_limits() -> None:
    g = Graph("chain")
    value = g.add_placeholder("x", F3)
    for _ in range(3000):
        value = g.add_op("neg", [value], {}, F3)
    g.add_output(value, "y")
    gc.verify(g)
    first = g.nodes[1]
    first.inputs = (value,)  # the first neg now depends on the last: a 3000-node cycle
    with pytest.raises(gc.CycleError):
        gc.verify(g)


def test_declared_graphs_and_constants_verify() -> None:
    g = gc.Graph("declared")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        c = gc.constant(np.ones(3, np.float32))
        gc.output(gc.softmax(x * c, axis=-1), name="p")
    assert gc.verify(g) is None
