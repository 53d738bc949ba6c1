"""The reference a backend that declares inexact kernels is held to.

`declared_reference(graph, feeds, backend)` runs `graph` node by node as the reference
interpreter does (each op's numpy kernel on fresh C-ordered arrays), but at each node the
backend declares inexact (`register_lowering(..., inexact=...)` and its `Inexact.covers`)
it also runs that node alone on the backend, as a one-node graph at O0 on the same input
values, checks that value within the declaration's bound of numpy's, and carries the
backend's value on. A plan compiled on the backend must then give the outputs bit for
bit: its exact ops give numpy's bits on whatever values reach them, and each inexact node
the bits it gives alone (the backend's levels agree bit for bit: tests/native_checks.py).
So every difference from numpy is traced to the one node it comes from and held to that
node's declared bound, not to a tolerance on an output, which after a cancellation or a
comparison would say nothing about the kernels. A node whose body holds inexact nodes
(a loop, a branch, a custom forward) gives, run alone on the backend, numpy's bits (its
body ran on numpy's kernels) or those of its kernel with the body evaluated as here.

The bound of each declaration (graphc/backends/native/__init__.py):
- `bound` ulp (the elementwise functions, softmax): within that many ulp of numpy's, nan
  and inf where numpy has them; gelu as tests/native_checks.py reads its bound (absolute
  where its 1 + tanh(u) cancels);
- log_softmax's, in its declared unit eps (1 + |result|);
- a summation order (the products, the convolutions): the bound of any order of a sum
  of k products, 2 (k + 2) eps sum |a b| plus the products' underflow;
- layer_norm's sums in lanes: tests/backends/test_native_norm.py's bound,
  (n / 16 + log2 n + 8) eps times twice the output's scale.
A node of an op declared inexact whose bound this file cannot state fails, saying so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import graphc as gc
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import bound_attrs, get_op
from graphc.ir.types import TensorType, TupleType, is_float
from graphc.ops import control, custom
from graphc.ops.body import dims_of
from graphc.runtime.backend import Backend, get_backend
from graphc.runtime.feeds import check_feeds
from tests.edge_values import bits_differ

# the ops whose declaration names a summation order: the products and convolutions
SUMS = frozenset({"matmul", "contract_rows", "gemm", "conv2d", "conv_transpose2d"})
LANES = frozenset({"layer_norm", "layer_norm_grad"})

# one-node executables by (backend, the node's graph text): hypothesis draws the same
# nodes again and again, and a compile costs milliseconds even with its kernel built
_ALONE: dict[tuple[str, str], gc.Executable] = {}
_ALONE_LIMIT = 512


def _declared(backend: Backend, node: Node) -> Any:
    if node.kind != OP:
        return None
    declared = backend.inexact_lowerings.get(node.op)
    return declared if declared is not None and declared.covers(node) else None


def _holds_inexact(backend: Backend, node: Node) -> bool:
    """Whether a body of `node` (a loop's, a branch's, a custom forward's) holds a node
    `backend` declares inexact, at any depth."""
    bodies = [v for v in node.attrs.values() if isinstance(v, Graph)]
    return any(
        _declared(backend, n) is not None or _holds_inexact(backend, n)
        for body in bodies
        for n in body.nodes
    )


def declared_reference(
    graph: Graph, feeds: Mapping[str, np.ndarray], backend: str
) -> list[np.ndarray]:
    """`graph`'s outputs on `feeds` with each node `backend` declares inexact computed
    alone there (and checked within its declared bound), every other node by numpy."""
    # (laid out as the reference interpreter lays them: numpy's dot rounds a reversed
    # operand otherwise)
    arrays, bindings = check_feeds(graph, feeds)
    return _evaluate(graph, arrays, bindings, backend)


def _evaluate(
    graph: Graph, arrays: Sequence[np.ndarray], bindings: Mapping[str, int] | None, backend: str
) -> list[np.ndarray]:
    """graphc.ops.body.evaluate, but for the nodes `backend` declares inexact: those are
    its own values, each checked within its declared bound of numpy's."""
    chosen = get_backend(backend)
    bindings = dims_of(graph, arrays) if bindings is None else bindings
    values: dict[Node, Any] = dict(zip(graph.inputs, arrays))
    results = []
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            continue
        if node.kind == OUTPUT:
            results.append(np.array(values[node.inputs[0]], copy=True, order="C"))
            continue
        inputs = [values[x] for x in node.inputs]
        attrs = bound_attrs(node, bindings)
        value = _kernel(node, inputs, attrs)
        declared = _declared(chosen, node)
        if declared is not None and isinstance(node.type, TensorType):
            alone = _alone(backend, node, inputs)[0]
            why = beyond_bound(node, declared, inputs, attrs, alone, value)
            assert why is None, (
                f"{backend}'s {node.describe()} alone, beyond its declared bound "
                f"({declared.why}): {why}\n{graph}"
            )
            value = alone
        elif _holds_inexact(chosen, node):
            value = _with_bodies(backend, node, inputs, attrs, value)
        values[node] = value
    return results


def _kernel(node: Node, inputs: list[Any], attrs: dict[str, Any]) -> Any:
    """numpy's value of `node`, laid out as the reference interpreter lays it out."""
    opdef = get_op(node.op)
    try:
        with np.errstate(all="ignore"):
            value = opdef.kernel(*inputs, **attrs)
    except gc.GraphcError as exc:
        exc.node = exc.node or node.name
        raise
    if isinstance(node.type, TupleType):
        return tuple(np.asarray(v, order="C") for v in value)
    return np.asarray(value) if opdef.permutes else np.asarray(value, order="C")


def _with_bodies(
    backend: str, node: Node, inputs: list[Any], attrs: dict[str, Any], numpys: Any
) -> Any:
    """The backend's value of a node whose body holds inexact nodes: it runs the body
    either on numpy's kernels (then numpy's bits) or on its own, each body node as it
    runs alone (then the bits of the op's kernel with its bodies evaluated as here:
    each inexact node of theirs within its declared bound)."""
    alone = _alone(backend, node, inputs)
    wanted = list(numpys) if isinstance(numpys, tuple) else [numpys]
    if all(bits_differ(a, w) is None for a, w in zip(alone, wanted)):
        return numpys
    saved = control.evaluate, custom.evaluate

    def declared(body: Graph, arrays: Sequence[np.ndarray], *rest: Any, **named: Any) -> Any:
        return _evaluate(body, arrays, None, backend)

    if node.op == "fused":  # (its kernel walks the body itself): the body's value
        value = np.asarray(_evaluate(node.attrs["body"], inputs, None, backend)[0], order="C")
    else:
        control.evaluate = custom.evaluate = declared
        try:
            value = _kernel(node, inputs, attrs)
        finally:
            control.evaluate, custom.evaluate = saved
    hybrid = list(value) if isinstance(value, tuple) else [value]
    for k, (a, h) in enumerate(zip(alone, hybrid)):
        why = bits_differ(a, h)
        assert why is None, (
            f"{backend}'s {node.describe()} alone, result {k}: neither numpy's bits nor its "
            f"body's nodes' own (each within its declared bound): {why}"
        )
    return value


def _alone(backend: str, node: Node, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`node` computed by itself on `backend` (a graph of the node on placeholders): its
    value, or its results."""
    operands = list(dict.fromkeys(node.inputs))
    g = Graph(f"{node.op}_alone")
    copies = {x: g.add_placeholder(f"in{k}", x.type) for k, x in enumerate(operands)}
    value = g.add_op(node.op, [copies[x] for x in node.inputs], node.attrs, node.type, "value")
    if isinstance(node.type, TupleType):
        for k, item in enumerate(node.type.items):
            g.add_output(g.add_op("result", [value], {"index": k}, item, f"result{k}"))
    else:
        g.add_output(value, "out")
    key = (backend, str(g))
    exe = _ALONE.get(key)
    if exe is None:
        if len(_ALONE) >= _ALONE_LIMIT:
            _ALONE.pop(next(iter(_ALONE)))
        exe = _ALONE[key] = gc.compile(g, opt_level=0, backend=backend)
    feeds = {f"in{k}": inputs[node.inputs.index(x)] for k, x in enumerate(operands)}
    with np.errstate(all="ignore"):
        got = exe(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    return [np.array(a, copy=True, order="C") for a in got]


def beyond_bound(
    node: Node,
    declared: Any,
    inputs: list[np.ndarray],
    attrs: dict[str, Any],
    got: np.ndarray,
    want: np.ndarray,
) -> str | None:
    """Why `got` (the backend's value of `node`) is not within the declared bound of
    `want` (numpy's on the same `inputs`), or None."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"type {got.dtype}{list(got.shape)} vs numpy's {want.dtype}{list(want.shape)}"
    if bits_differ(got, want) is None:
        return None
    if not is_float(want.dtype):
        return f"other values of an exact dtype: {bits_differ(got, want)}"
    # a sum whose terms' magnitudes pass the dtype's range may overflow in one order and
    # not in another (a fused multiply-add keeps a product that overflows alone): there
    # any value is the order's own
    magnitude = _sum_magnitude(node.op, inputs, attrs) if node.op in SUMS else None
    checked = np.ones(want.shape, bool)
    if magnitude is not None:
        checked = magnitude <= float(np.finfo(want.dtype).max)
    if not np.array_equal(np.isnan(got) & checked, np.isnan(want) & checked):
        return "nan in other places than numpy's"
    infinite = (np.isinf(got) | np.isinf(want)) & checked
    if not np.array_equal(got[infinite], want[infinite]):
        return "inf in other places than numpy's"
    finite = np.isfinite(want) & np.isfinite(got) & checked
    with np.errstate(all="ignore"):
        if magnitude is not None:
            far = _beyond_sum(node.op, inputs, attrs, magnitude, got, want)
        elif node.op in LANES:
            far = _beyond_lanes(node.op, inputs, attrs, got, want)
        elif node.op == "log_softmax" and declared.bound is not None:
            eps = float(np.finfo(want.dtype).eps)
            err = np.abs(got.astype(np.float64) - want)
            far = err > declared.bound * eps * (1 + np.abs(want.astype(np.float64)))
        elif declared.bound is not None:
            far = _beyond_ulps(node.op, declared.bound, inputs, got, want)
        else:
            return f"no bound stated for '{node.op}' that tests/declared_reference.py knows"
    bad = finite & far
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (
        f"{int(bad.sum())} of {bad.size} elements beyond the bound, first at {at}: "
        f"{got[at]!r} vs numpy's {want[at]!r}"
    )


def _beyond_ulps(
    op: str, bound: int, inputs: list[np.ndarray], got: np.ndarray, want: np.ndarray
) -> np.ndarray:
    # (imported here: tests/native_checks.py imports tests/differential.py, which imports
    # this file)
    from tests.native_checks import gelu_allowance

    if op == "gelu":
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return err > gelu_allowance(np.broadcast_to(inputs[0], want.shape), want)
    return _ulp_distance(got, want) > bound


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many floats of their dtype lie between a and b, per element (+0.0 and -0.0
    one apart), as float64: the bits read as sign and magnitude. Any float width
    (tests/native_checks.py's ulp_distance takes float32 and float64)."""
    int_type = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    sign = np.int64(np.iinfo(int_type).min)  # the sign bit, as a negative number
    ia, ib = (np.asarray(v).view(int_type).astype(np.int64) for v in (a, b))
    mag_a, mag_b = ia & ~sign, ib & ~sign
    # the same sign: exact in int64; across zero, up to 2**64 apart, so in float64
    apart = mag_a.astype(np.float64) + mag_b.astype(np.float64) + 1.0
    return np.where((ia < 0) == (ib < 0), np.abs(mag_a - mag_b).astype(np.float64), apart)


def _sum_magnitude(op: str, inputs: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """The sums of |a b| the op adds up per output: its own kernel on |inputs| in float64
    (inf and nan as 0: their results are numpy's in any order)."""
    magnitudes = [np.nan_to_num(np.abs(x.astype(np.float64)), nan=0.0, posinf=0.0) for x in inputs]
    with np.errstate(all="ignore"):
        return get_op(op).kernel(*magnitudes, **_positive(attrs))


def _positive(attrs: dict[str, Any]) -> dict[str, Any]:
    """gemm's alpha and beta as magnitudes."""
    return {k: abs(v) if k in ("alpha", "beta") else v for k, v in attrs.items()}


def _beyond_sum(
    op: str,
    inputs: list[np.ndarray],
    attrs: dict[str, Any],
    magnitude: np.ndarray,
    got: np.ndarray,
    want: np.ndarray,
) -> np.ndarray:
    """Beyond 2 (k + 2) eps sum |a b| + 2 k tiny: two orders of a sum of k products (each
    within (k + 1) eps of the exact sum of |a b|), and the products' underflow; k is the
    op's kernel on ones."""
    ones = [np.ones(x.shape, np.float64) for x in inputs]
    terms = float(np.max(get_op(op).kernel(*ones, **_positive(attrs)), initial=1.0))
    finfo = np.finfo(want.dtype)
    eps, tiny = float(finfo.eps), float(finfo.smallest_subnormal)
    bound = 2 * (terms + 2) * eps * magnitude + 2 * terms * tiny
    return np.abs(got.astype(np.float64) - want) > bound


def _beyond_lanes(
    op: str, inputs: list[np.ndarray], attrs: dict[str, Any], got: np.ndarray, want: np.ndarray
) -> np.ndarray:
    """Beyond 2 (n / 16 + log2 n + 8) eps times the output's scale, per row of n: for
    layer_norm (|xhat| + 1) |w| + max |b|, for its gradient rstd max|g| (1 + |xhat|)
    (1 + max |xhat|) (tests/backends/test_native_norm.py derives it)."""
    x = inputs[0]
    axis = attrs.get("axis", -1) % x.ndim
    rows = math.prod(x.shape[:axis])
    n = max(math.prod(x.shape[axis:]), 1)
    x2 = x.astype(np.float64).reshape(rows, n)
    mean = x2.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x2 - mean) ** 2).mean(axis=1, keepdims=True) + attrs.get("eps", 1e-5))
    xhat = np.abs((x2 - mean) * rstd)
    if op == "layer_norm":
        w = np.broadcast_to(np.abs(inputs[1].astype(np.float64)), x.shape[axis:]).reshape(1, n)
        scale = (xhat + 1) * w + float(np.max(np.abs(inputs[2].astype(np.float64)), initial=0))
    else:
        g2 = np.abs(inputs[1].astype(np.float64)).reshape(rows, n)
        top = xhat.max(axis=1, keepdims=True, initial=0.0)
        scale = rstd * g2.max(axis=1, keepdims=True, initial=0.0) * (1 + xhat) * (1 + top)
    units = 2 * (n / 16 + math.log2(n) + 8) * float(np.finfo(want.dtype).eps)
    err = np.abs(got.astype(np.float64) - want).reshape(rows, n)
    return (err > units * scale).reshape(want.shape)
