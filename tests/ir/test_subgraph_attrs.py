"""Graph-valued attributes (a fused node's body): printed, parsed, saved and verified."""

from __future__ import annotations

import json

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import Graph

FUSED = """\
graph g(%x: f32[B,3], %w: f32[3]) {
  %fused: f32[B,3] = fused(%x, %w, body=graph body(%a: f32[B,3], %b: f32[3]) {
    %mul: f32[B,3] = mul(%a, %b)
    %tanh: f32[B,3] = tanh(%mul)
    output %out = %tanh
  })
  output %y = %fused
}"""


def test_nested_block_round_trips_and_computes() -> None:
    g = gc.parse(FUSED)
    assert str(g) == FUSED
    body = g.node("fused").attrs["body"]
    assert isinstance(body, Graph) and [n.name for n in body.inputs] == ["a", "b"]
    gc.verify(g)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(g(x, w), np.tanh(x * w), rtol=1e-6)


def test_nested_block_through_json_and_networkx() -> None:
    g = gc.parse(FUSED)
    assert str(gc.from_json(gc.to_json(g))) == FUSED
    assert str(gc.from_networkx(gc.to_networkx(g))) == FUSED


@pytest.mark.parametrize(
    "old, new, line, expected",
    [
        ("mul(%a, %b)", "mul(%a, %c)", 3, "unknown value '%c'"),
        ("%tanh: f32[B,3]", "%tanh: f64[B,3]", 4, "node 'tanh': declared type f64[B,3]"),
        ("  })\n", "  }\n", 6, "expected ',' or ')' in the arguments"),
        ("  })", "  }, body=1)", 6, "'body' is given twice"),
        ("%fused: f32[B,3]", "%fused: f32[B,4]", 2, "node 'fused': declared type f32[B,4]"),
    ],
)
def test_errors_inside_nested_blocks_name_the_line(
    old: str, new: str, line: int, expected: str
) -> None:
    text = FUSED.replace(old, new)
    assert text != FUSED
    with pytest.raises(gc.ParseError) as info:
        gc.parse(text)
    message = str(info.value)
    assert message.startswith(f"line {line}:") and expected in message, message


def test_json_errors_inside_nested_documents_name_the_path() -> None:
    doc = json.loads(gc.to_json(gc.parse(FUSED)))
    body = doc["nodes"][2]["attrs"]["body"]["graph"]
    body["nodes"][2]["inputs"] = ["nope", "b"]
    with pytest.raises(gc.ParseError, match=r"nodes\[2\].attrs.body.graph.nodes\[2\].inputs\[0\]"):
        gc.from_json(json.dumps(doc))


def test_verify_checks_the_body() -> None:
    g = gc.parse(FUSED)
    body = g.node("fused").attrs["body"]
    body.node("mul").attrs["colour"] = "red"
    with pytest.raises(gc.VerifyError, match="node 'fused' .*attr 'body'.*node 'mul'.*colour"):
        gc.verify(g)
