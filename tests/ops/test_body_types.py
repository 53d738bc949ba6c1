"""A body's value types (graphc/ops/body.py): read from the body on its own types,
inferred by the type rules on others, and the two agree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import graphc as gc
from graphc.ir.errors import GraphcError
from graphc.ops.body import body_types, inferred_types
from tests.budget import draws
from tests.strategies import random_graphs


@settings(max_examples=draws(40))
@given(random_graphs(min_ops=5, max_ops=20, symbolic=True))
def test_on_its_own_types_a_body_gives_what_its_rules_give(g: gc.Graph) -> None:
    """The shortcut (the types the body holds) equals running every rule, node by node,
    on random graphs with symbolic dims."""
    own = [p.type for p in g.inputs]
    held = body_types(g, own)
    assert list(held) == g.nodes
    assert held == inferred_types(g, own), str(g)


def test_other_types_are_inferred() -> None:
    """A symbolic body on concrete operands: every type follows the operands, none is
    the body's own."""
    g = gc.parse("""
    graph g(%x: f32[B,3]) {
      %s: f32[B] = sum(%x, axis=(1,), keepdims=False)
      %e: f32[B] = exp(%s)
      output %y = %e
    }""")
    typed = body_types(g, [gc.TensorType((5, 3), "float32")])
    assert [str(typed[n]) for n in g.nodes] == ["f32[5,3]", "f32[5]", "f32[5]", "f32[5]"]


def test_the_count_of_types_is_checked_before_the_shortcut() -> None:
    g = gc.parse(
        "graph g(%x: f32[3], %w: f32[3]) {\n  %a: f32[3] = add(%x, %w)\n  output %y = %a\n}"
    )
    with pytest.raises(GraphcError, match="2 placeholders for 1 input"):
        body_types(g, [g.inputs[0].type])
