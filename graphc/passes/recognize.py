"""Recognizing softmax and layer norm spelled out in primitive ops, as their fused ops.

    exp(x - max(x, a, keepdims)) / sum(that, a, keepdims)            -> softmax(x, axis=a)
    (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)                 -> layer_norm(x, 1, 0)
        (also var(x), d*d for d^2, d * rsqrt(.), d * reciprocal(sqrt(.)))
    layer_norm(x, 1, 0) * g -> layer_norm(x, g, 0);  layer_norm(x, w, 0) + b -> layer_norm(x, w, b)

The last line absorbs the affine step torch's TorchScript ONNX export of LayerNorm
(opset < 17: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add) ends
with. Means and the max reduce over the same axes with keepdims; a layer norm's axes are
the trailing dims (layer_norm's `axis` on), softmax's one axis. Inputs are floating.

Each recognition is a rule for the rewrite driver (rewrite.py) whose pattern is a
focused match over a few nodes (`Spelled`), since the nodes must hang together: the
same x under the max and the sub, the same exp under the division and the sum (a copy
CSE has not merged yet counts as the same). A match is taken only when no matched
intermediate is used outside it (else the spelled-out nodes stay alive and the fused
op would be extra work).

Exactness (docs/trust.md), measured by tests/passes/test_recognize.py: softmax's kernel
makes the very calls the spelled-out form makes (a subtraction of the max, exp, a sum,
one division), so `recognize_softmax` is EXACT and runs at O2 before fusion. The one
difference: over an empty axis the spelled-out max raises, softmax gives the empty
result. Not for 16-bit floats, which the fused kernels compute in float32 and round
once where every spelled-out op rounds: a float16 or bfloat16 softmax (or affine step)
stays spelled out. layer_norm's kernel computes the variance as a dot product and multiplies by
1 / sqrt(var + eps) instead of dividing: other last bits, so `recognize_layer_norm` is
VALUE-CHANGING and runs only with fast_math (after `simplify_fast_math`), its core rule
tagged `[fast_math]` in the report; absorbing the affine step is exact (the kernel
multiplies and adds as the graph did), so those two rules are tagged exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.types import is_float, is_half
from graphc.passes.patterns import Bindings, Pattern, uniform_value
from graphc.passes.report import PassLog
from graphc.passes.rewrite import Match, Rule, rewrite, rule

Find = Callable[[Node], Bindings | None]


class Spelled(Pattern):
    """A pattern over several nodes, matched by `find(node)`: the bindings, with the
    matched intermediates as "interior", or None."""

    def __init__(self, root: str, text: str, find: Find) -> None:
        self._root = root
        self.text = text
        self.find = find

    @property
    def root_op(self) -> str:
        return self._root

    def match(self, node: Node, bound: Bindings) -> bool:
        if node.kind != OP or node.op != self._root:
            return False
        found = self.find(node)
        if found is None:
            return False
        bound.update(found)
        return True

    def __str__(self) -> str:
        return self.text


def _is(node: Node, op: str) -> bool:
    return node.kind == OP and node.op == op


def _same(a: Node, b: Node, depth: int = 4) -> bool:
    """a is b, or a copy of it (same op, attrs and inputs) that CSE has not merged."""
    if a is b:
        return True
    if depth == 0 or a.kind != OP or b.kind != OP or a.is_constant or b.is_constant:
        return False
    return (
        a.op == b.op
        and a.attrs == b.attrs
        and len(a.inputs) == len(b.inputs)
        and all(_same(x, y, depth - 1) for x, y in zip(a.inputs, b.inputs))
    )


def _copies(a: Node, b: Node) -> list[Node]:
    """The nodes of `a` that are copies of b's, for a with `_same(a, b)`."""
    if a is b:
        return []
    return [a, *(n for x, y in zip(a.inputs, b.inputs) for n in _copies(x, y))]


def _kept(node: Node, op: str) -> bool:
    """A reduction `op` with keepdims."""
    return _is(node, op) and node.attrs["keepdims"] is True


def _float(x: Node, *nodes: Node) -> bool:
    """x is floating and every node has its exact type (no broadcast, no promotion)."""
    return is_float(x.type.dtype) and all(n.type == x.type for n in nodes)


def _rounds_alike(x: Node) -> bool:
    """Whether a fused op on x's dtype rounds where the spelled-out ops do: not a 16-bit
    float, which the fused kernels compute in float32 and round once (ops/defop.py's
    `in_float32`) where each spelled-out op rounds its own result."""
    return not is_half(x.type.dtype)


def _closed(m: Match) -> bool:
    """No matched intermediate has a user outside the match."""
    interior = set(m.interior)
    inside = Counter(x for n in (m.node, *interior) for x in n.inputs)
    return all(m.uses(n) == inside[n] for n in interior)


# -- softmax -------------------------------------------------------------------------------


def _softmax_axis(x: Node, axes: tuple[int, ...] | None) -> int | None:
    """softmax's axis for reductions over `axes`, if they are one axis."""
    if axes is None:
        return 0 if x.type.rank == 1 else None
    return axes[0] if len(axes) == 1 else None


def _find_softmax(div: Node) -> Bindings | None:
    e, s = div.inputs
    if not (_is(e, "exp") and _kept(s, "sum") and _same(s.inputs[0], e)):
        return None
    d = e.inputs[0]
    if not _is(d, "sub"):
        return None
    x, peak = d.inputs
    if not (_kept(peak, "max") and _same(peak.inputs[0], x)):
        return None
    if peak.attrs["axis"] != s.attrs["axis"] or not _float(x, d, e, div) or not _rounds_alike(x):
        return None
    axis = _softmax_axis(x, s.attrs["axis"])
    if axis is None:
        return None
    interior = [e, s, d, peak, *_copies(s.inputs[0], e), *_copies(peak.inputs[0], x)]
    return {"x": x, "axis": axis, "interior": interior}


SOFTMAX_RULES: tuple[Rule, ...] = (
    # exp(x - max(x)) / sum(exp(x - max(x))) -> softmax(x), the kernel's own calls
    rule(
        Spelled("div", "exp(x - max(x)) / sum(exp(x - max(x))) -> softmax", _find_softmax),
        lambda m: m.emit("softmax", m.x, axis=m.axis),
        when=_closed,
    ),
)


# -- layer norm ----------------------------------------------------------------------------


def _norm_axis(x: Node, axes: tuple[int, ...] | None) -> int | None:
    """layer_norm's axis for means over `axes`, if they are the trailing dims."""
    rank = x.type.rank
    if axes is None:
        return 0 if rank else None
    if not axes:  # a mean over no axis is the identity, not a normalization
        return None
    return axes[0] if axes == tuple(range(axes[0], rank)) else None


def _eps(add: Node) -> tuple[Node, float] | None:
    """(v, eps) for add(v, eps) with eps a one-element constant >= 0 keeping v's type."""
    for v, c in (add.inputs, add.inputs[::-1]):
        floating = c.is_constant and is_float(np.asarray(c.value).dtype)
        if floating and c.value.size == 1 and add.type == v.type:
            # the shortest decimal that rounds to the constant again: 1e-05, not the
            # float32 1e-05's 9.999999747378752e-06 (the kernel rounds it back)
            eps = float(str(c.value.reshape(())[()]))
            if np.isfinite(eps) and eps >= 0:
                return v, eps
    return None


def _root_of(scale: Node, quotient: bool) -> tuple[Node, list[Node]] | None:
    """The add(var, eps) under sqrt (a divisor), or under 1/sqrt spelled rsqrt or
    reciprocal of sqrt (a factor), with the nodes in between."""
    if quotient:
        return (scale.inputs[0], [scale]) if _is(scale, "sqrt") else None
    if _is(scale, "rsqrt"):
        return scale.inputs[0], [scale]
    if _is(scale, "reciprocal") and _is(scale.inputs[0], "sqrt"):
        return scale.inputs[0].inputs[0], [scale, scale.inputs[0]]
    return None


def _squares(sq: Node, d: Node) -> list[Node] | None:
    """The deviations sq squares, when they are d (or copies of it): d*d or pow(d, 2)."""
    if _is(sq, "mul") and all(_same(x, d) for x in sq.inputs):
        return list(sq.inputs)
    if _is(sq, "pow") and _same(sq.inputs[0], d) and uniform_value(sq.inputs[1]) == 2:
        return [sq.inputs[0]]
    return None


def _find_norm(node: Node) -> Bindings | None:
    """(x - mean(x)) / sqrt(var + eps) or (x - mean(x)) * rsqrt(var + eps)."""
    if node.op == "div":
        orders = [node.inputs]
    else:
        orders = [node.inputs, node.inputs[::-1]]
    for d, scale in orders:
        found = _root_of(scale, quotient=node.op == "div")
        if found is None or not _is(d, "sub") or not _is(found[0], "add"):
            continue
        eps = _eps(found[0])
        if eps is None:
            continue
        var, between = eps[0], [found[0], *found[1]]
        x, mu = d.inputs
        if not (_kept(mu, "mean") and _same(mu.inputs[0], x)):
            continue
        if not (_kept(var, "mean") and var.attrs["axis"] == mu.attrs["axis"]):
            continue
        squared = _squares(var.inputs[0], d)
        axis = _norm_axis(x, mu.attrs["axis"])
        if squared is None or axis is None or not _float(x, d, node):
            continue
        # the deviations squared may be a copy of d (gc.var makes its own) before CSE
        copies = [n for c in squared for n in _copies(c, d)] + _copies(mu.inputs[0], x)
        interior = [d, mu, var, var.inputs[0], *between, *copies]
        return {"x": x, "axis": axis, "eps": eps[1], "interior": interior}
    return None


def _spelled_norm(m: Match) -> Node:
    one, zero = (m.constant(np.array(v, m.x.type.dtype)) for v in (1, 0))
    return m.emit("layer_norm", m.x, one, zero, axis=m.axis, eps=m.eps)


def _find_affine(node: Node, weight: bool) -> Bindings | None:
    """layer_norm(x, 1, 0) * g (weight) or layer_norm(x, w, 0) + b: the layer_norm and
    the other operand, of the same dtype (a wider one would widen the whole kernel).

    The kernel skips a one-element bias equal to 0, where adding +0.0 would turn -0.0
    into +0.0: so the layer_norm's bias must be one such (skipped, as the graph's own
    add is not there), and a new bias must have more than one element (a +0.0 there
    would be skipped where the graph added it)."""
    for norm, other in (node.inputs, node.inputs[::-1]):
        if not _is(norm, "layer_norm") or other.type.dtype != norm.type.dtype:
            continue
        if not _rounds_alike(norm):  # the exact rules: the fused kernel must round alike
            continue
        _, w, b = norm.inputs
        if b.type.size != 1 or uniform_value(b) != 0:
            continue
        if weight and uniform_value(w) == 1:
            return {"norm": norm, "other": other, "interior": [norm]}
        if not weight and (other.type.size or 1) > 1:
            return {"norm": norm, "other": other, "interior": [norm]}
    return None


def _absorbed(m: Match, weight: bool) -> Node:
    x, w, b = m.norm.inputs
    w, b = (m.other, b) if weight else (w, m.other)
    return m.emit("layer_norm", x, w, b, **m.norm.attrs)


LAYER_NORM_RULES: tuple[Rule, ...] = (
    # (x - mean(x)) / sqrt(var(x) + eps) -> layer_norm(x): the kernel's variance is a
    # dot product and it multiplies by 1/sqrt: other last bits
    rule(
        Spelled("div", "(x - mean(x)) / sqrt(var(x) + eps) -> layer_norm", _find_norm),
        _spelled_norm,
        when=_closed,
        exact=False,
    ),
    rule(
        Spelled("mul", "(x - mean(x)) * rsqrt(var(x) + eps) -> layer_norm", _find_norm),
        _spelled_norm,
        when=_closed,
        exact=False,
    ),
    # layer_norm(x, 1, 0) * g -> layer_norm(x, g, 0): the kernel's own multiplication
    rule(
        Spelled("mul", "layer_norm(x, 1, 0) * g", lambda n: _find_affine(n, weight=True)),
        lambda m: _absorbed(m, weight=True),
        when=_closed,
    ),
    # layer_norm(x, w, 0) + b -> layer_norm(x, w, b): the kernel's own addition
    rule(
        Spelled("add", "layer_norm(x, w, 0) + b", lambda n: _find_affine(n, weight=False)),
        lambda m: _absorbed(m, weight=False),
        when=_closed,
    ),
)


def recognize_softmax(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with softmax spelled out in primitives replaced by the `softmax` op. Exact.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2,5]) {
    ...   %m: f32[2,1] = max(%x, axis=(1,), keepdims=True)
    ...   %d: f32[2,5] = sub(%x, %m)
    ...   %e: f32[2,5] = exp(%d)
    ...   %s: f32[2,1] = sum(%e, axis=(1,), keepdims=True)
    ...   %y: f32[2,5] = div(%e, %s)
    ...   output %out = %y
    ... }''')
    >>> [n.op for n in gc.passes.recognize_softmax(g).op_nodes]
    ['softmax']
    """
    return rewrite(graph, SOFTMAX_RULES, log)


def recognize_layer_norm(graph: Graph, log: PassLog | None = None) -> Graph:
    """`graph` with layer norm spelled out in primitives (and its affine step) replaced
    by the `layer_norm` op. Value-changing in the last bits: fast_math only.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2,4]) {
    ...   %m: f32[2,1] = mean(%x, axis=(1,), keepdims=True)
    ...   %d: f32[2,4] = sub(%x, %m)
    ...   %q: f32[2,4] = mul(%d, %d)
    ...   %v: f32[2,1] = mean(%q, axis=(1,), keepdims=True)
    ...   %eps: f32[] = constant(value=1e-05)
    ...   %a: f32[2,1] = add(%v, %eps)
    ...   %r: f32[2,1] = sqrt(%a)
    ...   %y: f32[2,4] = div(%d, %r)
    ...   output %out = %y
    ... }''')
    >>> [n.op for n in gc.passes.recognize_layer_norm(g).op_nodes]
    ['constant', 'constant', 'layer_norm']
    """
    return rewrite(graph, LAYER_NORM_RULES, log)
