"""Differentiating control flow: the bodies of cond and scan, differentiated as graphs.

The VJP rules of cond and scan (graphc/ops/control.py) are written with op functions,
but need their bodies differentiated, which is this layer's work; importing this module
installs the two transforms there. Both are built on `split_backward` and `gradients`,
so a body is differentiated like any graph (and again, for second derivatives).

cond: each branch G (operands -> results) becomes G' (operands, cotangents of the
float results -> cotangents of the float operands that need them), by `gradients`
with seeds. The backward cond picks G' by the same predicate.

scan: the body F (carries, x, consts -> carries', ys) is split by `split_backward`
into a forward that also outputs the values its backward reads ("saved") and that
backward. Saved values that are consts are passed to the backward scan as consts,
saved xs as its xs (the forward's own); every other one is a residual, output per
step as an extra y of the augmented forward F+ and stacked. The backward body B
(ct carries, accumulated const cts, ct ys, residuals, saved xs, saved consts -> ct
carries, accumulated const cts, ct xs) runs in the other direction. Every float carry has a cotangent carry (it flows back through the
steps even when the initial carry needs none); integer carries (a fori_loop's
counter) have none.

A const whose cotangent at each step is a product transpose(p) @ q of two matrices (a
recurrent weight's: the step's input or state, transposed, times its pre-activation's
cotangent) is not accumulated when the loop's length is static (`stack_products`):
the backward body outputs p and q as ys instead, and the const's cotangent is one
product of the two stacks after the loop, (T B, n)^T @ (T B, m). The accumulation
read and wrote the whole n x m cotangent at every step (the RNN of the bench at batch 1:
135 of its 348 us), where the one product is a matrix product at a BLAS's speed. The
sum is the same; its order, and so its rounding, is the product's.

Both transforms are cached per body object and `needs`: bodies are immutable.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.types import TensorType, is_float
from graphc.ops import control
from graphc.ops.custom import inline_body
from graphc.ops.symbolic import Symbol
from graphc.passes.autodiff import differentiate, split_backward
from graphc.passes.dce import eliminate_dead_code


def _is_float(t: TensorType) -> bool:
    return is_float(t.dtype)


# -- cond -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CondGrad:
    then_body: Graph  # (operands..., cts of the float results) -> cts of operands `wrt`
    else_body: Graph
    wrt: tuple[int, ...]  # the operands that get cotangents
    float_results: tuple[int, ...]  # the results whose cotangents the bodies take (the
    # float ones a cotangent arrived for: the others count as zero)


def _branch_gradient(
    body: Graph, wrt: Sequence[int], float_results: Sequence[int], name: str
) -> Graph:
    outputs = [body.outputs[k].name for k in float_results]
    joint = differentiate(body, [body.inputs[i].name for i in wrt], outputs, seeds=True)
    graph = joint.graph
    grad = Graph(name)
    with grad:
        operands = [Symbol(grad.add_placeholder(p.name, p.type)) for p in body.inputs]
        seeds = [graph.node(s) for s in joint.seeds]
        cts = [Symbol(grad.add_placeholder(grad.fresh_name(s.name), s.type)) for s in seeds]
        values = inline_body(graph, operands + cts)
        for value, name_ in zip(values[len(body.outputs) :], joint.grads):
            grad.add_output(value.node, grad.fresh_name(name_))
    return grad


_COND_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cond_gradient(
    then_body: Graph, else_body: Graph, needs: Sequence[bool], arrived: Sequence[bool]
) -> CondGrad | None:
    """`needs`: per operand; `arrived`: per result, whether a cotangent came for it."""
    key = (tuple(needs), tuple(arrived))
    cached = _COND_CACHE.setdefault(then_body, {}).get((id(else_body), key))
    if cached is not None:
        return cached
    wrt = tuple(i for i, p in enumerate(then_body.inputs) if needs[i] and _is_float(p.type))
    float_results = tuple(
        k for k, o in enumerate(then_body.outputs) if arrived[k] and _is_float(o.type)
    )
    if not wrt or not float_results:
        return None
    grad = CondGrad(
        _branch_gradient(then_body, wrt, float_results, f"{then_body.name}_grad"),
        _branch_gradient(else_body, wrt, float_results, f"{else_body.name}_grad"),
        wrt,
        float_results,
    )
    _COND_CACHE[then_body][(id(else_body), key)] = grad
    return grad


# -- scan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanGrad:
    forward: Graph  # (carries, x, consts) -> (carries', ys, residuals)
    backward: Graph  # (ct carries, accs, ct ys, residuals, saved xs, saved consts) -> (ct carries, accs, ct xs)
    float_carries: tuple[int, ...]
    float_ys: tuple[int, ...]
    grad_xs: tuple[int, ...]
    grad_consts: tuple[int, ...]
    saved_xs: tuple[int, ...]  # xs the backward reads, passed as its xs after the residuals
    saved_consts: tuple[int, ...]
    # (k, p, q) for the grad_consts whose cotangent is the product of two stacks rather
    # than an accumulator (no acc carry for them): p and q each ("x", j), the backward
    # scan's xs j (ct ys, residuals, saved xs), or ("y", j), its stacked y j (the ct xs,
    # then the stacked steps')
    products: tuple[tuple[int, tuple[str, int], tuple[str, int]], ...] = ()


_SCAN_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scan_gradient(
    body: Graph,
    num_carry: int,
    num_xs: int,
    needs: Sequence[bool],
    arrived: Sequence[bool],
    stack_products: bool = False,
) -> ScanGrad | None:
    """`needs`: per operand; `arrived`: per y, whether a cotangent came for it (the
    others count as zero and are not differentiated); `stack_products`: whether a
    const's per-step product cotangent may be stacked (the loop's length is static)."""
    key = (num_carry, num_xs, tuple(needs), tuple(arrived), stack_products)
    cached = _SCAN_CACHE.setdefault(body, {}).get(key)
    if cached is None:
        cached = _scan_gradient(body, num_carry, num_xs, needs, arrived, stack_products)
        _SCAN_CACHE[body][key] = cached
    return cached or None


def _step_product(node: Node) -> tuple[Node, Node] | None:
    """(p, q) when `node` is matmul(transpose(p), q) of two float matrices of static
    shapes (rows of either may then be stacked and reshaped), else None."""
    if node.kind != OP or node.op != "matmul":
        return None
    a, q = node.inputs
    if a.kind != OP or a.op != "transpose" or tuple(a.attrs["axes"]) != (1, 0):
        return None
    p = a.inputs[0]
    for v in (p, q):
        if v.type.rank != 2 or not all(isinstance(d, int) for d in v.type.shape):
            return None
    return p, q


def _scan_gradient(
    body: Graph,
    num_carry: int,
    num_xs: int,
    needs: Sequence[bool],
    arrived: Sequence[bool],
    stack_products: bool,
) -> ScanGrad | bool:
    inputs, outputs = body.inputs, body.outputs
    first_const = num_carry + num_xs
    float_carries = tuple(i for i in range(num_carry) if _is_float(inputs[i].type))
    grad_xs = tuple(
        j for j in range(num_xs) if needs[num_carry + j] and _is_float(inputs[num_carry + j].type)
    )
    grad_consts = tuple(
        k
        for k in range(len(inputs) - first_const)
        if needs[first_const + k] and _is_float(inputs[first_const + k].type)
    )
    float_ys = tuple(
        j
        for j in range(len(outputs) - num_carry)
        if arrived[j] and _is_float(outputs[num_carry + j].type)
    )
    wanted = [i for i in float_carries if needs[i]] + list(grad_xs) + list(grad_consts)
    if not wanted or not (float_carries or float_ys):
        return False  # no gradient to give (cached as such)
    wrt = [inputs[i] for i in float_carries]
    wrt += [inputs[num_carry + j] for j in grad_xs] + [inputs[first_const + k] for k in grad_consts]
    differentiated = [outputs[i].name for i in float_carries]
    differentiated += [outputs[num_carry + j].name for j in float_ys]
    fwd, bwd = split_backward(body, [p.name for p in wrt], differentiated, seeds=True)

    saved = bwd.inputs[: len(bwd.inputs) - len(differentiated)]  # then the seeds
    const_position = {p.name: k for k, p in enumerate(inputs[first_const:])}
    x_position = {p.name: j for j, p in enumerate(inputs[num_carry:first_const])}
    saved_consts = tuple(const_position[s.name] for s in saved if s.name in const_position)
    # a saved x is read from the scan's own xs, not stacked again as a residual
    saved_xs = tuple(x_position[s.name] for s in saved if s.name in x_position)
    residuals = [s for s in saved if s.name not in const_position and s.name not in x_position]

    first_grad = len(float_carries) + len(grad_xs)
    stacked = {
        k
        for k, o in zip(grad_consts, bwd.outputs[first_grad:])
        if stack_products and _step_product(o.inputs[0]) is not None
    }

    forward = _augmented(fwd, len(outputs), [s.name for s in residuals], f"{body.name}_fwd")
    backward = Graph(f"{body.name}_bwd")
    with backward:

        def placeholder(name: str, t: TensorType) -> Symbol:
            return Symbol(backward.add_placeholder(backward.fresh_name(name), t))

        ct_carries = [placeholder(f"ct_{outputs[i].name}", inputs[i].type) for i in float_carries]
        accs = {
            k: placeholder(f"acc_{inputs[first_const + k].name}", inputs[first_const + k].type)
            for k in grad_consts
            if k not in stacked
        }
        ct_ys = [
            placeholder(f"ct_{outputs[num_carry + j].name}", outputs[num_carry + j].type)
            for j in float_ys
        ]
        res = {s.name: placeholder(s.name, s.type) for s in residuals}
        kept = {}
        for j in saved_xs:
            p = inputs[num_carry + j]
            kept[p.name] = placeholder(p.name, p.type)
        for k in saved_consts:
            p = inputs[first_const + k]
            kept[p.name] = placeholder(p.name, p.type)
        env = [res[s.name] if s.name in res else kept[s.name] for s in saved]
        grads = inline_body(bwd, env + ct_carries + ct_ys)
        carry_grads = grads[: len(float_carries)]
        x_grads = grads[len(float_carries) : len(float_carries) + len(grad_xs)]
        const_grads = grads[len(float_carries) + len(grad_xs) :]
        for g in carry_grads:
            backward.add_output(g.node, backward.fresh_name("ct_carry"))
        for k, g in zip(grad_consts, const_grads):
            if k in accs:
                backward.add_output((accs[k] + g).node, backward.fresh_name("acc"))
        for g in x_grads:
            backward.add_output(g.node, backward.fresh_name("ct_x"))
        # a stack the backward scan already steps along (a residual, a saved x) or
        # stacks already (a ct x) is read as it is; any other value is output as a y, once
        along = [
            *ct_ys,
            *(res[r.name] for r in residuals),
            *(kept[inputs[num_carry + j].name] for j in saved_xs),
        ]
        xs_index = {v.node: j for j, v in enumerate(along)}
        carries = len(carry_grads) + len(accs)  # the outputs before the ys
        ys_index: dict[Node, int] = {}  # the ys so far (the ct xs first) by their node
        for j, g in enumerate(x_grads):
            ys_index.setdefault(g.node, j)

        def source(v: Node) -> tuple[str, int]:
            if v in xs_index:
                return ("x", xs_index[v])
            if v not in ys_index:
                ys_index[v] = len(backward.outputs) - carries  # the y it is about to be
                backward.add_output(v, backward.fresh_name("step"))
            return ("y", ys_index[v])

        products = []
        for k, g in zip(grad_consts, const_grads):
            if k in stacked:  # (the same match as above, on the inlined copy)
                p, q = _step_product(g.node)  # type: ignore[misc]
                products.append((k, source(p), source(q)))
    if products:  # the per-step products themselves are no output now: not computed
        backward = eliminate_dead_code(backward)
    return ScanGrad(
        forward,
        backward,
        float_carries,
        float_ys,
        grad_xs,
        grad_consts,
        saved_xs,
        saved_consts,
        tuple(products),
    )


def _augmented(fwd: Graph, produced: int, residuals: Sequence[str], name: str) -> Graph:
    """`fwd` (the body's outputs, then saved_* outputs) keeping its first `produced`
    outputs and, after them, the residuals (values of `fwd` by name)."""
    result = Graph(name)
    copies: dict[Node, Node] = {}
    for node in fwd.nodes:
        if node.kind != "output":
            result.append_copy(node, copies)
    for o in fwd.outputs[:produced]:
        result.add_output(copies[o.inputs[0]], o.name)
    for r in residuals:
        result.add_output(copies[fwd.node(r)], result.fresh_name(f"res_{r}"))
    return result


control.set_body_gradients(cond_gradient, scan_gradient)
