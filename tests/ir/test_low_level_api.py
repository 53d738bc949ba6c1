"""Graphs built node by node with Graph.add_placeholder / add_op / add_output."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.ir.types import TensorType

T3 = TensorType((3,))


def test_an_input_that_is_no_node_is_named() -> None:
    # add_op(..., ["x"]) and add_output("x") were AttributeErrors on 'str'
    g = gc.Graph("h")
    g.add_placeholder("x", T3)
    with pytest.raises(gc.VerifyError, match="node 'exp' .*input 0 is a str, not a Node"):
        g.add_op("exp", ["x"], {}, T3)
    with pytest.raises(gc.VerifyError, match="output 'o'.* a str, not a Node"):
        g.add_output("x", "o")  # type: ignore[arg-type]
    assert [n.name for n in g.nodes] == ["x"]


def test_notebook_display_summarizes_big_constants() -> None:
    # the text/plain of a notebook's display was the whole base64 of every constant
    values = np.arange(100_000, dtype=np.float32)
    g = gc.Graph("big")
    with g:
        x = gc.placeholder("x", shape=(100_000,))
        gc.output(x + gc.constant(values, name="w"), name="y")
    shown = g._repr_mimebundle_()["text/plain"]
    assert len(shown) < 1000
    assert f"<{values.size} values in [0, " in shown
    assert gc.parse(str(g)).node("w").value.tobytes() == values.tobytes()  # str is whole
