"""Structured control flow: `cond`, `scan` and `while_loop`, ops whose attrs hold bodies.

Each body is a closed Graph: its placeholders are explicit (values a branch or loop
body reads from outside were captured as extra operands when it was traced), so a
node is self-contained in text, JSON and passes. Closed in its dims too: every
symbolic dim a body uses is one of its placeholders' (the operands bind it when the
node runs), so a body reading an outer dim (`broadcast_to(v, xs.shape)`) captures a
value that has it; the type rules refuse a body with a free dim. Every one has
several results (a `TupleType`, read by `result` nodes), even when there is one. Operand order puts
the captured values last, since tracing discovers them last:

- ``cond(pred, *operands, then_body=G, else_body=G)``: `pred` a bool scalar; both
  bodies take the operands and give results of the same types; the node gives the
  taken branch's results.
- ``scan(*carries, *xs, *consts, body=G, length=T, reverse=False, num_carry=c,
  num_xs=k)``: the body maps (carries, one slice of each x, consts) to (new carries,
  ys); the node gives the final carries, then each y stacked along a new leading
  axis of size `length` (JAX's `lax.scan`; with `reverse` the steps run from the last
  slice to the first, and ys[t] still belongs to xs[t]). A carry keeps its type.
  `length` may be a symbolic dim.
- ``while_loop(*carries, *cond_consts, *body_consts, cond_body=G, body=G,
  num_carry=c, num_cond_consts=k)``: `cond_body` maps (carries, cond_consts) to a bool
  scalar, `body` maps (carries, body_consts) to new carries; the node gives the carries
  once the condition is false.

Each also has a "stepwise" rule: the Python control flow it stands for, on values that
are computed as they go (eager tensors, whose tape then records every step that ran),
its bodies run by a `run_body(body, values)` the caller gives (graphc/frontend/call.py
inlines them).

The kernels here are the reference semantics: they evaluate the bodies with
`graphc.ops.body.evaluate` step by step. The compiled runtime plans the bodies once
and runs them on preallocated buffers (backends/numpy/control.py).

Gradients. The VJP rules are written with the op functions, like every other rule,
but they need the bodies differentiated, and symbolic differentiation is a pass
(graphc.passes.autodiff), above this layer: graphc.passes.control_ad installs the
body transforms here (`set_body_gradients`), as upper layers install handlers in the
IR. cond's VJP is a cond of the branches' gradient bodies. scan's VJP runs the scan
again with a body that also outputs, per step, the values its gradient needs
(residuals, stacked like ys), then a scan in the other direction over those
residuals and the ys' cotangents, carrying the carries' cotangents and summing the
consts'. (gc.gradients then takes the forward scan's results from that augmented
scan, so the forward runs once.) while_loop has no VJP: its trip count is known only
at run time, as in JAX; fori_loop with static bounds is a scan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import AutodiffError, DTypeError, GraphcError, ShapeError
from graphc.ir.graph import Graph
from graphc.ir.registry import REQUIRED, register_rule
from graphc.ir.types import Dim, TensorType, TupleType, as_dim, format_shape, is_symbol
from graphc.ops import shape as S
from graphc.ops.body import evaluate, output_types
from graphc.ops.defop import VARIADIC, defop
from graphc.ops.dispatch import bind, kind_of
from graphc.ops.tuples import results


def _graph_attr(value: Any, op: str, key: str) -> Graph:
    if not isinstance(value, Graph):
        raise GraphcError(f"{op}: attr '{key}' must be a Graph, got {type(value).__name__}")
    return value


def _count(value: Any, op: str, key: str, limit: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise GraphcError(f"{op}: attr '{key}' must be an int, got {value!r}")
    if not 0 <= value <= limit:
        raise GraphcError(f"{op}: attr '{key}' is {value}, but the node has {limit} operand(s)")
    return int(value)


def _show(types: Sequence[TensorType]) -> str:
    return "(" + ", ".join(map(str, types)) + ")"


def store(out: tuple | None, values: Sequence[np.ndarray]) -> tuple:
    """The results as a tuple, copied into the buffers of `out` where it gives one."""
    if out is None:
        return tuple(values)
    stored = []
    for buffer, value in zip(out, values):
        if buffer is None:
            stored.append(value)
        else:
            np.copyto(buffer, value)
            stored.append(buffer)
    return tuple(stored)


# -- gradients: body transforms installed by graphc.passes.control_ad -----------------

_BODY_GRADIENTS: dict[str, Callable[..., Any]] = {}


def set_body_gradients(cond_grad: Callable[..., Any], scan_grad: Callable[..., Any]) -> None:
    _BODY_GRADIENTS["cond"] = cond_grad
    _BODY_GRADIENTS["scan"] = scan_grad


def _body_gradient(op: str) -> Callable[..., Any]:
    if op not in _BODY_GRADIENTS:
        raise AutodiffError(
            f"{op}: differentiating control flow needs graphc.passes (import graphc)"
        )
    return _BODY_GRADIENTS[op]


def _zeros_like(value: Any) -> Any:
    return bind("full_like", value, value=0)


# -- cond ---------------------------------------------------------------------------


def check_predicate(pred: TensorType, op: str = "cond") -> None:
    if pred.shape != ():
        raise ShapeError(
            f"{op}: the predicate must be a scalar, got shape {format_shape(pred.shape)} "
            "(reduce it first, e.g. gc.sum(x) > 0, or choose elementwise with gc.where)"
        )
    if pred.dtype != np.bool_:
        raise DTypeError(
            f"{op}: the predicate must be a bool scalar, got {pred} (compare it, e.g. x > 0)"
        )


def cond_types(
    pred: TensorType, operands: Sequence[TensorType], then_body: Graph, else_body: Graph
) -> list[TensorType]:
    check_predicate(pred)
    taken = output_types(then_body, operands, "cond", "operand")
    other = output_types(else_body, operands, "cond", "operand")
    if taken != other:
        raise ShapeError(
            f"cond: the branches give results of different types: the true branch "
            f"'{then_body.name}' gives {_show(taken)}, the false branch '{else_body.name}' "
            f"gives {_show(other)}"
        )
    return taken


def _cond_canon(pred: TensorType, *operands: TensorType, then_body: Any, else_body: Any) -> dict:
    return {
        "then_body": _graph_attr(then_body, "cond", "then_body"),
        "else_body": _graph_attr(else_body, "cond", "else_body"),
    }


def _cond_kernel(
    pred: np.ndarray,
    *operands: np.ndarray,
    out: tuple | None = None,
    then_body: Graph,
    else_body: Graph,
) -> tuple:
    body = then_body if bool(pred) else else_body
    return store(out, evaluate(body, operands))


def _cond_vjp(
    ct: tuple, out: Any, pred: Any, *operands: Any, needs: tuple, then_body: Graph, else_body: Graph
) -> tuple:
    arrived = tuple(c is not None for c in ct)  # results without a cotangent count as zero
    grad = _body_gradient("cond")(then_body, else_body, needs[1:], arrived)
    if grad is None:  # nothing differentiable flows through
        return (None,) * (1 + len(operands))
    cts = [ct[k] for k in grad.float_results]
    node = bind("cond", pred, *operands, *cts, then_body=grad.then_body, else_body=grad.else_body)
    grads: list[Any] = [None] * (1 + len(operands))
    for value, i in zip(results(node), grad.wrt):
        grads[1 + i] = value
    return tuple(grads)


cond_op = defop(
    "cond",
    inputs=VARIADIC,
    infer=lambda pred, *ops, then_body, else_body: TupleType(
        cond_types(pred, ops, then_body, else_body)
    ),
    kernel=_cond_kernel,
    vjp=_cond_vjp,
    attrs={"then_body": REQUIRED, "else_body": REQUIRED},
    bodies=("then_body", "else_body"),
    canonicalize=_cond_canon,
    doc="The results of then_body or else_body on the operands, by a bool scalar (gc.cond).",
)


# the "stepwise" rules' signature: (attrs, inputs, result types, run_body) -> results
RunBody = Callable[[Graph, Sequence[Any]], list[Any]]


def _cond_stepwise(attrs: dict, inputs: list[Any], types: list, run_body: RunBody) -> tuple:
    pred, *operands = inputs
    return tuple(run_body(attrs["then_body"] if bool(pred) else attrs["else_body"], operands))


register_rule("cond", "stepwise", _cond_stepwise)


# -- scan ---------------------------------------------------------------------------


def scan_parts(n: int, num_carry: int, num_xs: int) -> tuple[slice, slice, slice]:
    """Where the carries, the xs and the consts sit among a scan's n operands."""
    return slice(0, num_carry), slice(num_carry, num_carry + num_xs), slice(num_carry + num_xs, n)


def scan_types(
    types: Sequence[TensorType],
    body: Graph,
    length: Dim,
    num_carry: int,
    num_xs: int,
) -> tuple[list[TensorType], list[TensorType]]:
    """The scan's final carries' types and its stacked ys' types."""
    carries, xs, consts = (list(types[s]) for s in scan_parts(len(types), num_carry, num_xs))
    slices = []
    for k, x in enumerate(xs):
        if x.rank == 0 or x.shape[0] != length:
            raise ShapeError(
                f"scan: xs[{k}] has shape {format_shape(x.shape)}, but a scan of length "
                f"{length} steps along a leading axis of that size"
            )
        slices.append(x.with_shape(x.shape[1:]))
    outs = output_types(body, carries + slices + consts, "scan", "operand")
    if len(outs) < num_carry:
        raise GraphcError(
            f"scan: the body '{body.name}' gives {len(outs)} results for {num_carry} carries"
        )
    for k, (before, after) in enumerate(zip(carries, outs)):
        if before != after:
            raise ShapeError(
                f"scan: carry {k} enters the body '{body.name}' as {before} but leaves it as "
                f"{after}; a carry must keep its type (cast or reshape it in the body)"
            )
    ys = [TensorType((length, *y.shape), y.dtype) for y in outs[num_carry:]]
    return carries, ys


def _scan_canon(
    *types: TensorType, body: Any, length: Any, reverse: Any, num_carry: Any, num_xs: Any
) -> dict:
    num_carry = _count(num_carry, "scan", "num_carry", len(types))
    num_xs = _count(num_xs, "scan", "num_xs", len(types) - num_carry)
    if not isinstance(reverse, (bool, np.bool_)):
        raise GraphcError(f"scan: attr 'reverse' must be a bool, got {reverse!r}")
    return {
        "body": _graph_attr(body, "scan", "body"),
        "length": as_dim(length),
        "reverse": bool(reverse),
        "num_carry": num_carry,
        "num_xs": num_xs,
    }


def _scan_infer(
    *types: TensorType, body: Graph, length: Dim, reverse: bool, num_carry: int, num_xs: int
) -> TupleType:
    carries, ys = scan_types(types, body, length, num_carry, num_xs)
    return TupleType(carries + ys)


def _scan_kernel(
    *arrays: np.ndarray,
    out: tuple | None = None,
    body: Graph,
    length: int,
    reverse: bool,
    num_carry: int,
    num_xs: int,
) -> tuple:
    if is_symbol(length):
        raise ShapeError(
            f"scan: length {length!r} has no size: no input of the graph running it has that dim"
        )
    carry_part, xs_part, const_part = scan_parts(len(arrays), num_carry, num_xs)
    carry, xs, consts = list(arrays[carry_part]), arrays[xs_part], list(arrays[const_part])
    _, ys_types = scan_types([TensorType.of(a) for a in arrays], body, length, num_carry, num_xs)
    stacks = [np.empty(t.shape, t.dtype) for t in ys_types]
    for step in range(length):
        t = length - 1 - step if reverse else step
        outs = evaluate(
            body, carry + [x[t, ...] for x in xs] + consts
        )  # [t, ...]: 0-d rows stay arrays
        carry = outs[:num_carry]
        for stack, y in zip(stacks, outs[num_carry:]):
            stack[t] = y
    return store(out, [np.array(c, copy=True) for c in carry] + stacks)


def _scan_vjp(
    ct: tuple,
    out: Any,
    *inputs: Any,
    needs: tuple,
    body: Graph,
    length: Dim,
    reverse: bool,
    num_carry: int,
    num_xs: int,
) -> tuple:
    arrived = tuple(c is not None for c in ct[num_carry:])  # ys without one count as zero
    static = isinstance(length, int)  # then per-step products may be stacked (control_ad)
    grad = _body_gradient("scan")(body, num_carry, num_xs, needs, arrived, static)
    if grad is None:
        return (None,) * len(inputs)
    _, _, const_part = scan_parts(len(inputs), num_carry, num_xs)
    consts = inputs[const_part]
    forward = bind(
        "scan",
        *inputs,
        body=grad.forward,
        length=length,
        reverse=reverse,
        num_carry=num_carry,
        num_xs=num_xs,
    )
    if hasattr(forward, "node") and hasattr(out, "node"):  # graph values: see autodiff
        forward.node.meta["augments"] = out.node.name
    values = results(forward)
    produced = len(body.outputs)
    residuals = values[produced:]

    # a final carry without a cotangent starts the backward carry at zero (of its
    # initial value's type: reading the forward result would keep it alive)
    ct_carries = [
        ct[i] if ct[i] is not None else _zeros_like(inputs[i]) for i in grad.float_carries
    ]
    stacked = {k for k, _, _ in grad.products}
    accumulated = [k for k in grad.grad_consts if k not in stacked]
    accumulators = [_zeros_like(consts[k]) for k in accumulated]
    ct_ys = [ct[num_carry + j] for j in grad.float_ys]
    along = [*ct_ys, *residuals, *(inputs[num_carry + j] for j in grad.saved_xs)]
    backward = bind(
        "scan",
        *ct_carries,
        *accumulators,
        *along,
        *(consts[k] for k in grad.saved_consts),
        body=grad.backward,
        length=length,
        reverse=not reverse,
        num_carry=len(ct_carries) + len(accumulators),
        num_xs=len(ct_ys) + len(residuals) + len(grad.saved_xs),
    )
    back = results(backward)
    grads: list[Any] = [None] * len(inputs)
    for value, i in zip(back, grad.float_carries):
        grads[i] = value if needs[i] else None
    for value, k in zip(back[len(ct_carries) :], accumulated):
        grads[const_part.start + k] = value
    ys = back[len(ct_carries) + len(accumulators) :]
    for value, j in zip(ys, grad.grad_xs):
        grads[num_carry + j] = value
    stacks = {"x": along, "y": ys}
    for k, (kind_p, p), (kind_q, q) in grad.products:  # the steps' p^T q: one product
        rows_p, rows_q = (
            bind("reshape", v, shape=(-1, v.shape[-1]))
            for v in (stacks[kind_p][p], stacks[kind_q][q])
        )
        grads[const_part.start + k] = bind("matmul", bind("transpose", rows_p, axes=(1, 0)), rows_q)
    return tuple(grads)


scan_op = defop(
    "scan",
    inputs=VARIADIC,
    infer=_scan_infer,
    kernel=_scan_kernel,
    vjp=_scan_vjp,
    attrs={"body": REQUIRED, "length": REQUIRED, "reverse": False, "num_carry": 0, "num_xs": 0},
    bodies=("body",),
    canonicalize=_scan_canon,
    shape_attrs=("length",),
    doc="A loop carrying values through body, stepping along xs, stacking ys (gc.scan).",
)


def _scan_stepwise(attrs: dict, inputs: list[Any], types: list, run_body: RunBody) -> tuple:
    count, num_xs = attrs["num_carry"], attrs["num_xs"]
    carry = inputs[:count]
    xs, consts = inputs[count : count + num_xs], inputs[count + num_xs :]
    steps = int(attrs["length"])
    ys: list[list[Any]] = [[] for _ in range(steps)]
    for t in reversed(range(steps)) if attrs["reverse"] else range(steps):
        outs = run_body(attrs["body"], [*carry, *(x[t] for x in xs), *consts])
        carry, ys[t] = outs[:count], outs[count:]
    if steps:
        stacked = [S.stack([step[k] for step in ys], axis=0) for k in range(len(ys[0]))]
    else:  # no step ran: empty ys of the node's types, of the inputs' kind
        kind = next(kind_of(v) for v in inputs if kind_of(v) is not None)
        stacked = [kind.lift(np.zeros(t.shape, t.dtype), None, ()) for t in types[count:]]
    return (*carry, *stacked)


register_rule("scan", "stepwise", _scan_stepwise)


# -- while_loop ---------------------------------------------------------------------


def while_types(
    types: Sequence[TensorType],
    cond_body: Graph,
    body: Graph,
    num_carry: int,
    num_cond_consts: int,
) -> list[TensorType]:
    carries = list(types[:num_carry])
    cond_consts = list(types[num_carry : num_carry + num_cond_consts])
    body_consts = list(types[num_carry + num_cond_consts :])
    test = output_types(cond_body, carries + cond_consts, "while_loop", "operand")
    if len(test) != 1:
        raise GraphcError(
            f"while_loop: the condition '{cond_body.name}' must give one bool scalar, "
            f"gives {_show(test)}"
        )
    check_predicate(test[0], "while_loop")
    outs = output_types(body, carries + body_consts, "while_loop", "operand")
    if outs != carries:
        raise ShapeError(
            f"while_loop: the body '{body.name}' takes carries {_show(carries)} but gives "
            f"{_show(outs)}; each carry must keep its type"
        )
    return carries


def _while_canon(
    *types: TensorType, cond_body: Any, body: Any, num_carry: Any, num_cond_consts: Any
) -> dict:
    num_carry = _count(num_carry, "while_loop", "num_carry", len(types))
    limit = len(types) - num_carry
    return {
        "cond_body": _graph_attr(cond_body, "while_loop", "cond_body"),
        "body": _graph_attr(body, "while_loop", "body"),
        "num_carry": num_carry,
        "num_cond_consts": _count(num_cond_consts, "while_loop", "num_cond_consts", limit),
    }


def _while_kernel(
    *arrays: np.ndarray,
    out: tuple | None = None,
    cond_body: Graph,
    body: Graph,
    num_carry: int,
    num_cond_consts: int,
) -> tuple:
    carry = [np.array(a, copy=True) for a in arrays[:num_carry]]
    cond_consts = list(arrays[num_carry : num_carry + num_cond_consts])
    body_consts = list(arrays[num_carry + num_cond_consts :])
    while bool(evaluate(cond_body, carry + cond_consts)[0]):
        carry = evaluate(body, carry + body_consts)
    return store(out, carry)


def _while_vjp(ct: tuple, out: Any, *inputs: Any, needs: tuple, **attrs: Any) -> tuple:
    raise AutodiffError(
        "while_loop cannot be differentiated: its trip count is decided at run time, so "
        "reverse mode has no fixed number of steps to store (as in JAX); for a loop of "
        "known length use gc.fori_loop with int bounds, or gc.scan"
    )


while_loop_op = defop(
    "while_loop",
    inputs=VARIADIC,
    infer=lambda *types, cond_body, body, num_carry, num_cond_consts: TupleType(
        while_types(types, cond_body, body, num_carry, num_cond_consts)
    ),
    kernel=_while_kernel,
    vjp=_while_vjp,
    attrs={"cond_body": REQUIRED, "body": REQUIRED, "num_carry": 0, "num_cond_consts": 0},
    bodies=("cond_body", "body"),
    canonicalize=_while_canon,
    doc="Run body on the carries while cond_body holds (gc.while_loop); forward only.",
)


def _while_stepwise(attrs: dict, inputs: list[Any], types: list, run_body: RunBody) -> tuple:
    count, num_cond = attrs["num_carry"], attrs["num_cond_consts"]
    carry = inputs[:count]
    cond_consts, body_consts = inputs[count : count + num_cond], inputs[count + num_cond :]
    while bool(run_body(attrs["cond_body"], [*carry, *cond_consts])[0]):
        carry = run_body(attrs["body"], [*carry, *body_consts])
    return tuple(carry)


register_rule("while_loop", "stepwise", _while_stepwise)
