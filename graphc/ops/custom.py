"""The `custom_vjp` op: a user function with its own backward, kept as one node.

A traced `autograd.Function` or `gc.custom_vjp` becomes this node, so that static
graphs differentiate it by the user's backward, not by its forward's ops. Attrs:

- `forward`: a Graph whose placeholders match the node's inputs 1:1, one output;
- `backward`: a Graph with placeholders (the inputs..., the output, the cotangent)
  and one output per input (that input's cotangent); it may recompute forward
  intermediates, which DCE and CSE clean up once inlined;
- `function`: the display name (the Function's class name);
- `linear`: the backward is linear in the cotangent whatever the user wrote (True for
  `gc.custom_jvp`, whose backward is the transpose of a tangent map), so forward mode,
  which transposes it, may take it; other user backwards (gradient clipping) need not be.

The kernel runs the forward body (as a fused group's does), the type rule re-infers
it, and the VJP rule inlines the backward body through the op functions (`bind`), so
one rule serves symbolic autodiff, split_backward, the eager tape and second
derivatives. Only single-output functions are supported: nodes have one value.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, TracingError
from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import REQUIRED, bound_attrs
from graphc.ir.types import TensorType, is_float, is_symbol
from graphc.ops.body import body_cost, body_types, check_body, evaluate
from graphc.ops.defop import VARIADIC, defop, into
from graphc.ops.dispatch import bind, dtype_of, kind_of
from graphc.ops.symbolic import SYMBOLIC, Symbol, user_location


def _check_attrs(arity: int, forward: Any, backward: Any, function: Any, linear: Any) -> None:
    check_body(forward, arity, op="custom_vjp")
    if not isinstance(backward, Graph):
        raise GraphcError(f"custom_vjp: attr 'backward' must be a Graph, got {type(backward)}")
    if len(backward.inputs) != arity + 2 or len(backward.outputs) != arity:
        raise GraphcError(
            f"custom_vjp: the backward body '{backward.name}' must take {arity + 2} "
            f"placeholders (inputs, output, cotangent) and give {arity} outputs; it has "
            f"{len(backward.inputs)} and {len(backward.outputs)}"
        )
    if not isinstance(function, str):
        raise GraphcError(
            f"custom_vjp: attr 'function' must be a str, got {type(function).__name__}"
        )
    if not isinstance(linear, bool):
        raise GraphcError(f"custom_vjp: attr 'linear' must be a bool, got {type(linear).__name__}")


def _canonicalize(
    *types: TensorType, forward: Graph, backward: Graph, function: str, linear: bool
) -> dict:
    _check_attrs(len(types), forward, backward, function, linear)
    return {"forward": forward, "backward": backward, "function": function, "linear": linear}


def _infer(
    *types: TensorType, forward: Graph, backward: Graph, function: str, linear: bool
) -> TensorType:
    _check_attrs(len(types), forward, backward, function, linear)
    return body_types(forward, types)[check_body(forward, len(types), op="custom_vjp")]


def _kernel(
    *arrays: np.ndarray,
    out: np.ndarray | None = None,
    forward: Graph,
    backward: Graph,
    function: str,
    linear: bool = False,
) -> np.ndarray:
    return into(out, evaluate(forward, arrays)[0])


def inline_body(body: Graph, values: Sequence[Any]) -> list[Any]:
    """Replay `body` on `values` (graph values, tensors or arrays) through `bind`.

    The body's symbolic dims are bound to the values' dims, so shape attrs fit them.
    """
    bindings: dict[str, Any] = {}
    for p, v in zip(body.inputs, values):
        for d, a in zip(p.type.shape, getattr(v, "shape", np.shape(v))):
            if is_symbol(d) and d != a:
                bindings[d] = a  # type: ignore[index]
    env: dict[Node, Any] = dict(zip(body.inputs, values))
    results = []
    for node in body.nodes:
        if node.kind == OP:
            args = [env[x] for x in node.inputs]
            env[node] = bind(node.op, *args, **bound_attrs(node, bindings))
        elif node.kind == OUTPUT:
            results.append(env[node.inputs[0]])
    return results


def _vjp(
    ct: Any,
    out: Any,
    *inputs: Any,
    needs: tuple,
    forward: Graph,
    backward: Graph,
    function: str,
    linear: bool = False,
) -> tuple:
    cts = inline_body(backward, [*inputs, out, ct])
    return tuple(c if need else None for c, need in zip(cts, needs))


def _cost(
    out: TensorType,
    *inputs: TensorType,
    forward: Graph,
    backward: Graph,
    function: str,
    linear: bool = False,
) -> int:
    return body_cost(out, *inputs, body=forward)


custom_vjp_op = defop(
    "custom_vjp",
    inputs=VARIADIC,
    infer=_infer,
    kernel=_kernel,
    attrs={"forward": REQUIRED, "backward": REQUIRED, "function": "custom", "linear": False},
    bodies=("forward", "backward"),
    vjp=_vjp,
    canonicalize=_canonicalize,
    cost=_cost,
    doc="A function with a user-defined backward (autograd.Function, gc.custom_vjp).",
)


def zero_backward(node: Node) -> bool:
    """Is this custom_vjp node's backward zero whatever its cotangent (every gradient it
    gives a fill of zeros: gc.stop_gradient's, or a backward returning None for each
    input)? No gradient flows through such a node."""
    return (
        node.kind == OP
        and node.op == "custom_vjp"
        and all(
            o.inputs[0].kind == OP
            and o.inputs[0].op == "full_like"
            and o.inputs[0].attrs.get("value") == 0
            for o in node.attrs["backward"].outputs
        )
    )


# -- building the bodies ------------------------------------------------------------


def value_type(value: Any) -> TensorType:
    """The TensorType of a graph value, eager tensor or array."""
    if isinstance(value, Symbol):
        return value.type
    return TensorType(
        tuple(np.shape(value) if not hasattr(value, "shape") else value.shape), dtype_of(value)
    )


def is_tensor_arg(value: Any) -> bool:
    """Graph values, eager tensors and arrays are a custom function's tensor inputs."""
    return isinstance(value, np.ndarray) or kind_of(value) is not None


def arg_names(fn: Callable[..., Any], slots: Sequence[int], skip: int = 0) -> list[str]:
    """Body placeholder names for the arguments at `slots`: `fn`'s parameter names
    (after `skip` leading ones, such as ctx), else arg<i>; never "out" or "ct"."""
    try:
        params = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ][skip:]
    except (TypeError, ValueError):  # no signature to read
        params = []
    names = [params[i] if i < len(params) else f"arg{i}" for i in slots]
    return [f"{n}_arg" if n in ("out", "ct") else n for n in names]


def build_body(
    name: str,
    inputs: Sequence[tuple[str, TensorType]],
    fn: Callable[[list[Symbol]], Sequence[Any]],
    output_names: Sequence[str] = (),
) -> Graph:
    """A closed Graph: one placeholder per (name, type), outputs the values `fn` returns.

    Nodes that reach no output are dropped (a backward that recomputes more than it
    uses), so the body holds only what it computes.
    """
    body = Graph(name)
    with body:
        args = [
            Symbol(body.add_placeholder(n, t, meta={"loc": user_location()})) for n, t in inputs
        ]
        results = fn(args)
        for k, value in enumerate(results):
            if value is None:
                raise TracingError(f"{name}: result {k} is None")
            if isinstance(value, (tuple, list)):
                raise TracingError(
                    f"{name}: result {k} is a {type(value).__name__}; a custom function's "
                    "traced forward must return one tensor (several outputs are not supported "
                    "in graphs yet)"
                )
            symbol = value if isinstance(value, Symbol) else SYMBOLIC.lift(value, None, ())
            if symbol.graph is not body:
                raise TracingError(
                    f"{name}: result {k} is value '{symbol.name}' of graph '{symbol.graph.name}'; "
                    "a custom function's body may use only its own arguments (pass outer graph "
                    "values as arguments)"
                )
            out_name = output_names[k] if k < len(output_names) else f"out{k}" if k else "out"
            body.add_output(symbol.node, body.fresh_name(out_name))
    return _prune(body)


def _prune(body: Graph) -> Graph:
    live: set[Node] = set()
    for node in reversed(body.nodes):
        if node.kind in (OUTPUT, PLACEHOLDER) or node in live:
            live.add(node)
            live.update(node.inputs)
    if len(live) == len(body.nodes):
        return body
    pruned = Graph(body.name)
    copies: dict[Node, Node] = {}
    for node in body.nodes:
        if node in live:
            pruned.append_copy(node, copies)
    return pruned


def fit_cotangent(ct: Any, like: Symbol) -> Symbol:
    """`ct` as a cotangent for `like`: zeros for None, summed/broadcast to its shape,
    cast to its dtype (a backward may return a scalar or a broadcast gradient)."""
    if ct is None:
        return bind("full_like", like, value=0)
    ct = ct if isinstance(ct, Symbol) else SYMBOLIC.lift(ct, None, (like,))
    if ct.shape != like.shape:
        ct = bind("sum_to", bind("add", ct, bind("full_like", like, value=0)), shape=like.shape)
    if ct.dtype != like.dtype:
        ct = bind("cast", ct, dtype=like.dtype)
    return ct


def record_custom(
    name: str, args: Sequence[Any], forward: Graph, backward: Graph, linear: bool = False
) -> Any:
    """Apply a custom_vjp node to the tensor `args`, by whichever kind they are (`linear`:
    the backward is linear in the cotangent by construction)."""
    if not args:
        raise TracingError(f"{name}: a custom function needs at least one tensor input")
    return bind(
        "custom_vjp", *args, forward=forward, backward=backward, function=name, linear=linear
    )


def forward_root(forward: Graph) -> Node:
    """The node whose value the forward body outputs."""
    return forward.outputs[0].inputs[0]


def replay(forward: Graph, wanted: Sequence[Node], seeds: dict[Node, Symbol]) -> dict[Node, Symbol]:
    """Values of `wanted` forward-body nodes in the graph being declared: `seeds` give
    some (the inputs, the output); the others are recomputed from them, behind
    stop_gradient as in PyTorch, where forward runs without recording, so a saved
    intermediate is a constant to a second derivative."""
    needed: set[Node] = set()
    stack = [n for n in wanted if n not in seeds]
    while stack:
        node = stack.pop()
        if node in needed or node in seeds:
            continue
        needed.add(node)
        stack.extend(node.inputs)
    env = dict(seeds)
    for node in forward.nodes:
        if node in needed:
            if node.kind != OP:
                raise GraphcError(f"custom_vjp: cannot recompute '{node.name}' ({node.kind})")
            env[node] = bind(node.op, *(env[x] for x in node.inputs), **node.attrs)
    for node in wanted:
        if node not in seeds:
            env[node] = stop_gradient(env[node])
    return env


def stopped(value: Any) -> Any:
    """One value through which no gradient flows, of any kind: a float graph value behind
    `stop_gradient`'s node, an eager tensor detached (as in PyTorch), anything else as it
    is (gc.stop_gradient maps it over a pytree)."""
    if isinstance(value, Symbol):
        return stop_gradient(value) if is_float(value.dtype) else value
    if kind_of(value) is not None and hasattr(value, "detach"):
        return value.detach()
    return value


def stop_gradient(value: Symbol) -> Symbol:
    """`value`, through which no gradient flows: a custom_vjp node whose backward gives
    zeros (named "stop_gradient"), so no op of its own is needed."""
    spec = [("x", value.type)]
    forward = build_body("stop_gradient_forward", spec, lambda xs: xs)
    zeros = build_body(
        "stop_gradient_backward",
        spec + [("out", value.type), ("ct", value.type)],
        lambda xs: [bind("full_like", xs[2], value=0)],
        ["ct_x"],
    )
    return record_custom("stop_gradient", [value], forward, zeros)
