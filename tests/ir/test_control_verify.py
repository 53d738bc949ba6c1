"""Malformed bodies and tuple-typed values: each caught with a named error, four ways.

Each case builds a graph through the low-level API (Graph.add_op checks nothing), then
`gc.verify` must raise a VerifyError, and the loaders, which check every node as they
read it, must refuse the same graph written out: `gc.parse(str(g))` and
`gc.from_json(gc.to_json(g))` with a ParseError, `gc.from_networkx(gc.to_networkx(g))`
with a VerifyError. Every message names the node (or output) and says what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import graphc as gc
from graphc.ir.graph import Graph, Node
from graphc.ir.types import TensorType, TupleType

F3 = TensorType((3,), "float32")
F23 = TensorType((2, 3), "float32")
F33 = TensorType((3, 3), "float32")
SCALAR = TensorType((), "float32")
BOOL = TensorType((), "bool")


def body(text: str) -> Graph:
    return gc.parse(text)


CARRY = body("graph step(%c: f32[3], %x: f32[3]) {\n  %add: f32[3] = add(%c, %x)\n"
             "  output %c2 = %add\n  output %y = %c\n}")  # fmt: skip
TWICE = body("graph twice(%a: f32[3]) {\n  %add: f32[3] = add(%a, %a)\n  output %o = %add\n}")
NEG = body("graph negate(%a: f32[3]) {\n  %neg: f32[3] = neg(%a)\n  output %o = %neg\n}")
TEST = body("graph test(%a: f32[3]) {\n  %sum: f32[] = sum(%a, axis=None, keepdims=False)\n"
            "  %c: f32[] = constant(value=1.0)\n  %lt: bool[] = lt(%sum, %c)\n"
            "  output %o = %lt\n}")  # fmt: skip


def scan_graph(
    operands: list[TensorType], declared: Any, reads: int = 1, **attrs: Any
) -> tuple[Graph, Node]:
    """Placeholders x0.. -> scan(...) -> result(s) -> outputs."""
    settings = {"body": CARRY, "length": 2, "reverse": False, "num_carry": 1, "num_xs": 1}
    settings.update(attrs)
    return op_graph("scan", operands, declared, reads, settings)


def op_graph(
    op: str, operands: list[TensorType], declared: Any, reads: int, attrs: dict
) -> tuple[Graph, Node]:
    g = Graph("bad")
    xs = [g.add_placeholder(f"x{i}", t) for i, t in enumerate(operands)]
    node = g.add_op(op, xs, attrs, declared, name=op)
    items = declared.items if isinstance(declared, TupleType) else ()
    for k in range(min(reads, len(items))):
        g.add_output(g.add_op("result", [node], {"index": k}, items[k], name=f"r{k}"), f"y{k}")
    return g, node


def good_scan() -> Graph:
    return scan_graph([F3, F23], TupleType([F3, F23]), reads=2)[0]


def cond_graph(pred: TensorType, then_body: Any, else_body: Any, declared: Any) -> Graph:
    attrs = {"then_body": then_body, "else_body": else_body}
    return op_graph("cond", [pred, F3], declared, 1, attrs)[0]


def while_graph(cond_body: Any, step: Any, declared: Any, **counts: Any) -> Graph:
    attrs = {"cond_body": cond_body, "body": step, "num_carry": 1, "num_cond_consts": 0}
    attrs.update(counts)
    return op_graph("while_loop", [F3], declared, 1, attrs)[0]


def tuple_as_output() -> Graph:
    g, scan = scan_graph([F3, F23], TupleType([F3, F23]), reads=0)
    g.add_output(scan, "y")
    return g


def tuple_into_neg() -> Graph:
    g, scan = scan_graph([F3, F23], TupleType([F3, F23]), reads=0)
    g.add_output(g.add_op("neg", [scan], {}, F3, name="neg"), "y")
    return g


def result_of_a_tensor() -> Graph:
    g = Graph("bad")
    x = g.add_placeholder("x", F3)
    g.add_output(g.add_op("result", [x], {"index": 0}, F3, name="r0"), "y")
    return g


def body_with_tuple_output() -> Graph:
    inner = Graph("inner")
    c, x = inner.add_placeholder("c", F3), inner.add_placeholder("x", F3)
    nested = inner.add_op(
        "scan",
        [c],
        {"body": TWICE, "length": 2, "reverse": False, "num_carry": 1, "num_xs": 0},
        TupleType([F3]),
        name="scan",
    )
    inner.add_output(nested, "c2")
    inner.add_output(x, "y")
    return scan_graph([F3, F23], TupleType([F3, F23]), body=inner)[0]


def body_with_bad_node() -> Graph:
    inner = Graph("inner")
    c, x = inner.add_placeholder("c", F3), inner.add_placeholder("x", F3)
    inner.add_output(inner.add_op("add", [c, x], {}, SCALAR, name="add"), "c2")
    inner.add_output(x, "y")
    return scan_graph([F3, F23], TupleType([F3, F23]), body=inner)[0]


def free_dim_body() -> Graph:
    inner = Graph("inner")
    c, x = inner.add_placeholder("c", F3), inner.add_placeholder("x", F3)
    spread = inner.add_op(
        "broadcast_to", [c], {"shape": ("T", 3)}, TensorType(("T", 3), "float32"), name="b"
    )
    total = inner.add_op("sum", [spread], {"axis": (0,), "keepdims": False}, F3, name="s")
    inner.add_output(total, "c2")
    inner.add_output(x, "y")
    return scan_graph([F3, F23], TupleType([F3, F23]), body=inner)[0]


def extra_placeholder() -> Graph:
    two = body("graph step(%c: f32[3], %x: f32[3], %z: f32[3]) {\n  output %c2 = %c\n"
               "  output %y = %x\n}")  # fmt: skip
    return scan_graph([F3, F23], TupleType([F3, F23]), body=two)[0]


def missing_placeholder() -> Graph:
    return scan_graph([F3, F23], TupleType([F3, F23]), body=TWICE)[0]


def carry_changes_type() -> Graph:
    shrink = body("graph step(%c: f32[3], %x: f32[3]) {\n"
                  "  %sum: f32[] = sum(%c, axis=None, keepdims=False)\n"
                  "  output %c2 = %sum\n  output %y = %x\n}")  # fmt: skip
    return scan_graph([F3, F23], TupleType([F3, F23]), body=shrink)[0]


def too_few_results() -> Graph:
    none = body("graph step(%c: f32[3], %x: f32[3], %d: f32[3]) {\n  output %c2 = %c\n}")
    return scan_graph([F3, F3, F23], TupleType([F3, F3]), num_carry=2, body=none)[0]


CASES: dict[str, tuple[Callable[[], Graph], str, str]] = {
    # name: (graph, the node or output named, what the message says)
    "extra body placeholder": (extra_placeholder, "scan", "has 3 placeholders for 2 operands"),
    "missing body placeholder": (missing_placeholder, "scan", "has 1 placeholders for 2"),
    "body dtype mismatch": (
        lambda: scan_graph([F3, TensorType((2, 3), "float64")], TupleType([F3, F23]))[0],
        "scan",
        "has dtype float64, the body 'step' expects float32",
    ),
    "body shape mismatch": (
        lambda: scan_graph([TensorType((4,), "float32"), F23], TupleType([F3, F23]))[0],
        "scan",
        "body placeholder 'c' has shape (4,), the body 'step' expects (3,)",
    ),
    "carry changes type": (carry_changes_type, "scan", "carry 0 enters the body 'step' as f32[3]"),
    "fewer results than carries": (too_few_results, "scan", "gives 1 results for 2 carries"),
    "xs leading dim differs from length": (
        lambda: scan_graph([F3, F23], TupleType([F3, TensorType((5, 3), "float32")]), length=5)[0],
        "scan",
        "xs[0] has shape (2, 3), but a scan of length 5",
    ),
    "declared type differs": (
        lambda: scan_graph([F3, F23], TupleType([F3, F33]))[0],
        "scan",
        "declared type (f32[3], f32[3,3])",
    ),
    "num_carry out of range": (
        lambda: scan_graph([F3, F23], TupleType([F3, F23]), num_carry=3)[0],
        "scan",
        "attr 'num_carry' is 3, but the node has 2 operand(s)",
    ),
    "num_xs out of range": (
        lambda: scan_graph([F3, F23], TupleType([F3, F23]), num_xs=2)[0],
        "scan",
        "attr 'num_xs' is 2",
    ),
    "num_carry not an int": (
        lambda: scan_graph([F3, F23], TupleType([F3, F23]), num_carry=1.0)[0],
        "scan",
        "attr 'num_carry' must be an int",
    ),
    "reverse not a bool": (
        lambda: scan_graph([F3, F23], TupleType([F3, F23]), reverse=1)[0],
        "scan",
        "attr 'reverse' must be a bool",
    ),
    "body not a graph": (
        lambda: scan_graph([F3, F23], TupleType([F3, F23]), body="step")[0],
        "scan",
        "attr 'body' must be a Graph, got str",
    ),
    "free dim in a body": (free_dim_body, "scan", "symbolic dim"),
    "bad node inside a body": (
        body_with_bad_node,
        "add",  # verify names the scan too: node 'scan' (op scan), attr 'body': node 'add'
        "declared type f32[] but the type rule of 'add' gives f32[3]",
    ),
    "tuple output inside a body": (body_with_tuple_output, "scan", "output one of them"),
    "branches give different types": (
        lambda: cond_graph(
            BOOL,
            TWICE,
            body("graph s(%a: f32[3]) {\n  output %o = %a\n  output %p = %a\n}"),
            TupleType([F3]),
        ),
        "cond",
        "the true branch 'twice' gives (f32[3]), the false branch 's' gives (f32[3], f32[3])",
    ),
    "non-scalar predicate": (
        lambda: cond_graph(TensorType((3,), "bool"), TWICE, NEG, TupleType([F3])),
        "cond",
        "the predicate must be a scalar, got shape (3,)",
    ),
    "non-bool predicate": (
        lambda: cond_graph(SCALAR, TWICE, NEG, TupleType([F3])),
        "cond",
        "the predicate must be a bool scalar, got f32[]",
    ),
    "branch not a graph": (
        lambda: cond_graph(BOOL, TWICE, 3, TupleType([F3])),
        "cond",
        "attr 'else_body' must be a Graph, got int",
    ),
    "while carry changes type": (
        lambda: while_graph(
            TEST,
            body(
                "graph b(%a: f32[3]) {\n  %s: f32[] = sum(%a, axis=None, "
                "keepdims=False)\n  output %o = %s\n}"
            ),
            TupleType([F3]),
        ),
        "while_loop",
        "each carry must keep its type",
    ),
    "while condition not bool": (
        lambda: while_graph(TWICE, NEG, TupleType([F3])),
        "while_loop",
        "the predicate must be a scalar",
    ),
    "num_cond_consts out of range": (
        lambda: while_graph(TEST, NEG, TupleType([F3]), num_cond_consts=1),
        "while_loop",
        "attr 'num_cond_consts' is 1, but the node has 0 operand(s)",
    ),
    "result index out of range": (
        lambda: scan_graph([F3, F23], TupleType([F3, F23]), reads=0)[0],
        "r5",
        "index 5 is out of range for 2 results",
    ),
    "result of a tensor": (result_of_a_tensor, "r0", "must have several results"),
    "tuple used by neg": (tuple_into_neg, "neg", "has several results (f32[3], f32[2,3])"),
    "tuple as a graph output": (tuple_as_output, "y", "an output returns one tensor"),
}


def build(name: str) -> Graph:
    g = CASES[name][0]()
    if name == "result index out of range":
        scan = g.node("scan")
        g.add_output(g.add_op("result", [scan], {"index": 5}, F3, name="r5"), "y5")
    return g


def test_the_well_formed_scan_passes_everywhere() -> None:
    g = good_scan()
    gc.verify(g)
    for copy in (gc.parse(str(g)), gc.from_json(gc.to_json(g))):
        assert str(copy) == str(g)
    assert str(gc.from_networkx(gc.to_networkx(g))) == str(g)


@pytest.mark.parametrize("name", list(CASES))
def test_verify_names_the_node_and_the_problem(name: str) -> None:
    g = build(name)
    _, node, expected = CASES[name]
    with pytest.raises(gc.VerifyError) as info:
        gc.verify(g)
    message = str(info.value)
    assert f"'{node}'" in message and expected in message, message


@pytest.mark.parametrize("name", list(CASES))
def test_the_loaders_refuse_it_too(name: str) -> None:
    g = build(name)
    _, node, expected = CASES[name]
    for how, load in (
        ("text", lambda: gc.parse(str(g))),
        ("json", lambda: gc.from_json(gc.to_json(g))),
    ):
        with pytest.raises(gc.ParseError) as info:
            load()
        message = str(info.value)
        assert f"'{node}'" in message and expected in message, f"{how}: {message}"
    with pytest.raises(gc.VerifyError) as info:
        gc.from_networkx(gc.to_networkx(g))
    assert f"{node!r}" in str(info.value) and expected in str(info.value), str(info.value)


def test_a_body_holding_its_own_graph_is_named_not_a_recursion_error() -> None:
    g, scan = scan_graph([F3, F23], TupleType([F3, F23]))
    scan.attrs["body"] = g
    with pytest.raises(gc.VerifyError, match=r"node 'scan'.*holds itself as a body"):
        gc.verify(g)


def self_holding_cond() -> tuple[Graph, Graph]:
    """'outer' holds 'inner' as a cond's branches, and 'inner' holds 'outer' back."""
    graphs = []
    for name in ("outer", "inner"):
        g = Graph(name)
        pred, x = g.add_placeholder("p", BOOL), g.add_placeholder("x", F3)
        attrs = {"then_body": NEG, "else_body": NEG}
        node = g.add_op("cond", [pred, x], attrs, TupleType([F3]), name=f"{name}_cond")
        g.add_output(g.add_op("result", [node], {"index": 0}, F3, name="r"), "y")
        graphs.append(g)
    outer, inner = graphs
    outer.node("outer_cond").attrs["then_body"] = inner
    inner.node("inner_cond").attrs["else_body"] = outer
    return outer, inner


@pytest.mark.parametrize("held", ["itself", "through another"])
def test_a_graph_holding_itself_prints_once_and_is_not_saved(held: str, tmp_path: Any) -> None:
    outer, inner = self_holding_cond()
    if held == "itself":
        outer.node("outer_cond").attrs["then_body"] = outer
    node = "outer_cond" if held == "itself" else "inner_cond"
    text = str(outer)
    assert "<recursive: outer>" in text and text.count("graph outer(") == 1, text
    with pytest.raises(gc.ParseError, match="'<'"):  # the text is no graph to load back
        gc.parse(text)
    said = rf"node '{node}' \(op cond\), attr '\w+_body': graph 'outer' holds itself as a body"
    for write in (gc.to_json, lambda g: gc.save(g, tmp_path / "g.json")):
        with pytest.raises(gc.VerifyError, match=said):
            write(outer)
    assert not (tmp_path / "g.json").exists()
    with pytest.raises(gc.VerifyError, match=said):
        gc.verify(outer)


def test_a_shared_body_is_not_a_cycle() -> None:
    g = Graph("shared")
    x = g.add_placeholder("x", F3)
    attrs = {"body": TWICE, "length": 2, "reverse": False, "num_carry": 1, "num_xs": 0}
    first = g.add_op("scan", [x], attrs, TupleType([F3]), name="first")
    second = g.add_op("scan", [x], attrs, TupleType([F3]), name="second")
    for k, node in enumerate((first, second)):
        g.add_output(g.add_op("result", [node], {"index": 0}, F3, name=f"r{k}"), f"y{k}")
    gc.verify(g)


@pytest.mark.parametrize("name", list(CASES))
def test_compile_refuses_it_with_a_verify_error(name: str) -> None:
    g = build(name)
    with pytest.raises(gc.VerifyError):
        gc.compile(g)
