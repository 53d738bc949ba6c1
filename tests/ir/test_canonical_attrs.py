"""verify (and so every loader) accepts only the attrs the op's own canonicalization gives.

A non-canonical spelling such as ``axis=(-1,)`` used to type-check to one type and
run to another; ``keepdims=1`` or ``axis=1.0`` slipped through as lookalikes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import all_ops
from graphc.ir.types import TensorType, TupleType
from tests.budget import sample
from tests.op_cases import all_cases, build_graph


def text_of(node_line: str, inputs: str = "%x: f32[2,3]") -> str:
    return f"graph g({inputs}) {{\n{node_line}\n  output %o = %r\n}}"


# (node line, the attr named in the error, its canonical form as the message shows it)
NON_CANONICAL = {
    "negative axis": ("  %r: f32[2,3] = sum(%x, axis=(-1,), keepdims=False)", "axis", "(1,)"),
    "negative axis typed as reduced": (
        "  %r: f32[2] = sum(%x, axis=(-1,), keepdims=False)",
        "axis",
        "(1,)",
    ),
    "all axes listed": ("  %r: f32[] = mean(%x, axis=(0, 1), keepdims=False)", "axis", "None"),
    "unsorted axes": ("  %r: f32[] = max(%x, axis=(1, 0), keepdims=False)", "axis", "None"),
    "int keepdims": ("  %r: f32[2] = sum(%x, axis=(1,), keepdims=0)", "keepdims", "False"),
    "float axis of argmax": ("  %r: i64[2] = argmax(%x, axis=1.0, keepdims=False)", "axis", ""),
    "negative softmax axis": ("  %r: f32[2,3] = softmax(%x, axis=-1)", "axis", "1"),
    "bool softmax axis": ("  %r: f32[2,3] = softmax(%x, axis=True)", "axis", ""),
    "slice with leading zero": ('  %r: f32[3] = slice(%x, index="01")', "index", "'1'"),
    "slice with blanks": ('  %r: f32[1,3] = slice(%x, index=" 1:2")', "index", "'1:2'"),
    "slice with empty step": ('  %r: f32[1,3] = slice(%x, index="1:2:")', "index", "'1:2'"),
    "slice with underscores": ('  %r: f32[3] = slice(%x, index="0_0")', "index", "'0'"),
    "dtype as a string": ('  %r: f64[2,3] = cast(%x, dtype="float64")', "dtype", "dtype"),
    "transpose axes negative": ("  %r: f32[3,2] = transpose(%x, axes=(-1, 0))", "axes", "(1, 0)"),
    "reshape with -1": ("  %r: f32[6] = reshape(%x, shape=(-1,))", "shape", "(6,)"),
    "one_hot classes as a float": (
        "  %r: f32[2,3] = one_hot(%x, num_classes=3.0, dtype=f32)",
        "num_classes",
        "",
    ),
    "clip bound as a list": ("  %r: f32[2,3] = clip(%x, a_min=[0.0], a_max=None)", "a_min", ""),
    "epilogue bias as an int": (
        "  %r: f32[2,2] = matmul_epilogue(%x, %w, bias=0, activation=None)",
        "bias",
        "False",
    ),
}


@pytest.mark.parametrize("name", list(NON_CANONICAL))
def test_text_with_non_canonical_attrs_is_rejected(name: str) -> None:
    line, attr, canonical = NON_CANONICAL[name]
    inputs = "%x: f32[2,3]"
    if "one_hot" in line:
        inputs = "%x: i64[2]"
    if "matmul_epilogue" in line:
        inputs = "%x: f32[2,3], %w: f32[3,2]"
    with pytest.raises(gc.ParseError) as info:
        gc.parse(text_of(line, inputs))
    message = str(info.value)
    assert message.startswith("line 2: node 'r'"), message
    assert f"'{attr}'" in message or attr in message, message
    assert canonical in message, message


def test_concat_with_a_negative_axis_and_the_nonsense_type_it_used_to_verify() -> None:
    # the type rule read axis=-1 as an index into shape[:axis] + ... + shape[axis+1:],
    # so f32[2,6,2,3] verified for two f32[2,3]; the kernel gave f32[2,6]
    text = (
        "graph g(%x: f32[2,3], %y: f32[2,3]) {\n"
        "  %c: f32[2,6,2,3] = concat(%x, %y, axis=-1)\n"
        "  output %o = %c\n}"
    )
    with pytest.raises(gc.ParseError, match=r"attr 'axis' is -1, but its canonical form .* is 1"):
        gc.parse(text)
    with pytest.raises(gc.ParseError, match="canonical form"):
        gc.parse(text.replace("f32[2,6,2,3]", "f32[2,6]"))
    assert gc.parse(text.replace("f32[2,6,2,3]", "f32[2,6]").replace("-1", "1"))


def test_the_message_names_the_node_the_attr_the_value_and_the_canonical_form() -> None:
    g = Graph("g")
    x = g.add_placeholder("x", TensorType((2, 3)))
    g.add_output(g.add_op("sum", [x], {"axis": (-1,), "keepdims": False}, TensorType((2,))))
    with pytest.raises(gc.VerifyError) as info:
        gc.verify(g)
    assert str(info.value) == (
        "node 'sum' (op sum): attr 'axis' is (-1,), but its canonical form for inputs "
        "(f32[2,3]) is (1,)"
    )


@pytest.mark.parametrize(
    "attrs, shown",
    [
        ({"axis": (np.int64(1),), "keepdims": False}, "int64"),  # a numpy int, not an int
        ({"axis": (1,), "keepdims": np.True_}, "bool"),
        ({"axis": [1], "keepdims": False}, "list"),
        ({"axis": (2**64,), "keepdims": False}, "does not fit int64"),
        ({"axis": (1,), "keepdims": 1}, "is 1, but its canonical form"),
    ],
)
def test_attrs_of_the_wrong_python_type_fail_verify(attrs: dict, shown: str) -> None:
    g = Graph("g")
    x = g.add_placeholder("x", TensorType((2, 3)))
    shape = (2, 1) if attrs["keepdims"] else (2,)
    g.add_output(g.add_op("sum", [x], attrs, TensorType(shape)))
    with pytest.raises(gc.VerifyError, match="node 'sum'") as info:
        gc.verify(g)
    assert shown in str(info.value)


class Sneaky:
    """An attr value whose conversions would run code."""

    def __index__(self) -> int:
        raise AssertionError("verify ran the attr's own code")

    __int__ = __index__


def test_attr_values_of_foreign_types_are_refused_before_any_rule_sees_them() -> None:
    g = Graph("g")
    x = g.add_placeholder("x", TensorType((2, 3)))
    g.add_output(g.add_op("softmax", [x], {"axis": Sneaky()}, TensorType((2, 3))))
    with pytest.raises(gc.VerifyError, match="attr 'axis' cannot hold a value of type Sneaky"):
        gc.verify(g)


def test_full_like_value_is_a_scalar() -> None:
    g = Graph("g")
    x = g.add_placeholder("x", TensorType((2, 3)))
    g.add_output(g.add_op("full_like", [x], {"value": "zero"}, TensorType((2, 3))))
    with pytest.raises(gc.VerifyError, match="full_like"):
        gc.verify(g)


@pytest.mark.parametrize("axis", [1.0, True, "1", np.float64(1)])
def test_op_functions_refuse_axes_that_are_not_ints(axis: Any) -> None:
    with pytest.raises(gc.ShapeError, match="an axis must be an int"):
        gc.sum(np.ones((2, 3), np.float32), axis=axis)


@pytest.mark.parametrize("case", sample(all_cases()), ids=lambda c: c.id)
def test_graphs_built_by_every_op_case_hold_canonical_attrs(case: Any) -> None:
    g = build_graph(case)
    gc.verify(g)
    again = gc.parse(str(g))
    gc.verify(again)
    assert str(again) == str(g)


def test_canonicalization_is_idempotent_for_every_op_case() -> None:
    for case in all_cases():
        for node in build_graph(case).nodes:
            if node.kind != OP:
                continue
            opdef = all_ops()[node.op]
            if opdef.canonicalize is None or any(
                isinstance(x.type, TupleType) for x in node.inputs
            ):
                continue  # (a `result`'s input, with several results, is no placeholder)
            types = [x.type for x in node.inputs]
            again = opdef.canonicalize(*types, **node.attrs)
            assert set(again) == set(node.attrs), node
            # verify's own comparison (types and float bits)
            assert gc.verify(_single(node)) is None


def _single(node: Node) -> Graph:
    g = Graph("one")
    copies = {x: g.add_placeholder(x.name, x.type) for x in dict.fromkeys(node.inputs)}
    copy = g.add_op(node.op, [copies[x] for x in node.inputs], node.attrs, node.type)
    if isinstance(node.type, TupleType):  # several results: one output each
        for k, t in enumerate(node.type.items):
            g.add_output(g.add_op("result", [copy], {"index": k}, t))
    else:
        g.add_output(copy)
    return g


def test_a_graph_name_that_is_not_a_string_fails_verify() -> None:
    g = Graph(("not", "a", "name"))  # type: ignore[arg-type]
    g.add_output(g.add_placeholder("x", TensorType((2,))), "y")
    with pytest.raises(gc.VerifyError, match="a graph's name must be a string"):
        gc.verify(g)


@pytest.mark.parametrize("dtype", ["float16", "int64", "uint64"])
def test_full_like_refuses_an_int_a_graph_attribute_cannot_hold(dtype: str) -> None:
    """An int past int64 (uint64's 2**64 - 1) cannot be a graph attribute: refused when
    the node is built, on arrays, tensors and graph values alike (it used to build a
    graph that compiling, saving and verifying refused, and numpy's kernel raised a raw
    OverflowError on float16); the largest int64 and the cast spelling still work."""
    x = np.zeros(2, dtype)
    spec = gc.TensorSpec((2,), dtype)
    for call in (
        lambda: gc.full_like(x, 2**64 - 1),
        lambda: gc.full_like(ge.tensor(x), 2**64 - 1),
        lambda: gc.trace(lambda v: gc.full_like(v, 2**64 - 1), spec),
        lambda: gc.full_like(x, -(2**63) - 1),
    ):
        with pytest.raises(gc.GraphcError, match=r"full_like: value -?\d+ does not fit int64"):
            call()
    g = gc.trace(lambda v: gc.full_like(v, 2**63 - 1), spec)
    np.testing.assert_array_equal(gc.compile(g)(x), np.full_like(x, 2**63 - 1))
    wrapped = gc.cast(gc.full_like(np.zeros(2, np.int64), -1), "uint64")
    np.testing.assert_array_equal(wrapped, np.full(2, 2**64 - 1, np.uint64))


def test_pad_refuses_an_int_a_graph_attribute_cannot_hold() -> None:
    """pad's constant_values 2**64 - 1 on uint64 fits the dtype but not a graph's int64
    attributes: refused when the node is built, by name (it used to build a node that
    only verify after a pass refused, found by the hostile-graph differential test); the
    hint's spelling gives numpy's result."""
    x = np.array([3, 4], np.uint64)
    spec = gc.TensorSpec((2,), "uint64")
    for call in (
        lambda: gc.pad(x, ((1, 0),), constant_values=2**64 - 1),
        lambda: gc.pad(ge.tensor(x), ((1, 0),), constant_values=2**63),
        lambda: gc.trace(lambda v: gc.pad(v, ((1, 0),), constant_values=2**64 - 1), spec),
    ):
        with pytest.raises(gc.GraphcError, match=r"pad: constant_values \d+ does not fit int64"):
            call()
    value = 2**64 - 1
    spelled = gc.cast(
        gc.pad(gc.cast(x, "int64"), ((1, 0),), constant_values=value - 2**64), "uint64"
    )
    np.testing.assert_array_equal(spelled, np.pad(x, ((1, 0),), constant_values=value))


@pytest.mark.parametrize(
    ("dtype", "a_min", "a_max"),
    [
        ("float32", 2**70, None),
        ("float64", None, -(2**80)),
        ("float16", 2**70, None),  # rounds to inf, as numpy's kernel rounds it
        ("uint64", None, 2**64 - 1),  # limits nothing: dropped
        ("int64", -(2**70), None),
        # a float bound makes the result float64: an int bound past every int16 value
        # is then a float64 bound, not the "past every value" error of an int result
        ("int16", 0.5, -(2**63)),
        ("int32", 2**70, -1e30),
    ],
)
def test_clip_keeps_a_graph_bound_past_int64_as_numpy_reads_it(dtype: str, a_min, a_max) -> None:
    """A Python int bound past int64 is what numpy's clip reads: rounded to a float
    result's dtype, or a bound limiting nothing on an int x; a graph keeps it so (it used
    to fail verify with 'cannot hold the int', and an int x with a float bound refused an
    int bound past its range though numpy clips in float64)."""
    x = (
        np.array([1e4, -3, 0, 7], dtype)
        if dtype != "uint64"
        else np.array([0, 5, 2**64 - 1], dtype)
    )
    with np.errstate(over="ignore"):
        try:
            expected = np.clip(x, a_min, a_max)
        except OverflowError:  # numpy 2.0 refuses an int bound past x's range, 2.1 skips it
            assert np.lib.NumpyVersion(np.__version__) < "2.1.0" and a_max is None
            expected = x.copy()  # a lower bound below every int64: x itself
        g = gc.trace(lambda v: gc.clip(v, a_min, a_max), gc.TensorSpec(x.shape, dtype))
    gc.verify(g)
    got = gc.compile(g)(x)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_building_a_node_refuses_an_attr_verify_would_refuse() -> None:
    """An attr that the op's own rule lets through but a graph cannot hold is refused
    when the node is recorded, naming the op and the attr, not later by verify after
    some pass: clip's a_min 2**63 limits a uint64 array, and is past int64."""
    spec = gc.TensorSpec((2,), "uint64")
    with pytest.raises(
        gc.GraphcError, match=r"op 'clip': attr 'a_min' cannot hold the int 9223372036854775808"
    ):
        gc.trace(lambda v: gc.clip(v, 2**63, None), spec)
    x = np.array([0, 2**64 - 1], np.uint64)
    np.testing.assert_array_equal(
        gc.clip(x, 2**63, None), np.clip(x, 2**63, None)
    )  # eager: numpy's
