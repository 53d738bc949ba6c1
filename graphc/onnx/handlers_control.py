"""ONNX handlers: If, Loop and Scan, as graphc's cond, scan and while_loop.

A body reads the enclosing graphs' values by name; it is read (graphc/onnx/reader.py
`read_body`) inside the function gc.cond / gc.scan / gc.while_loop traces, so the
outer values it uses become the body's captures, as in a traced Python closure.
Known values fold: an If on a known condition is its branch, inline.

A Loop becomes a `scan` when its trip count is known at import and its body passes the
condition through unchanged (or makes it a constant true), which is how exporters
write `for` loops (graphc's own, torch's): then it can be differentiated and its scan
outputs are stacked. A for loop whose body needs its counter known at import (a Slice
at the counter) is unrolled instead, up to UNROLL_LIMIT trips. Otherwise it is a
`while_loop` (forward only), and scan outputs, whose length is known only at run time,
are refused by name. A Scan is a `scan`; opset 8's, whose values carry a batch axis, is
one scan per example.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.graph import active_graph
from graphc.ir.types import is_symbol
from graphc.onnx.importer import (
    Context,
    OnnxError,
    Value,
    handler,
    is_dims,
    known,
    needs_known,
    symbolic_hint,
    tensor_value,
)
from graphc.onnx.reader import read_body
from graphc.ops import elementwise as E
from graphc.ops import selection
from graphc.ops.flow import cond, scan, while_loop
from graphc.ops.indexing import getitem
from graphc.ops.shape import reshape, stack, transpose


@handler("If")
def _if(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    test = inputs[0]
    then_body, else_body = attrs["then_branch"], attrs["else_branch"]
    if known(test):  # decided at import: the branch, read in place
        if np.asarray(test).size != 1:
            raise ctx.error(f"If's condition must have one element, got shape {test.shape}")
        return read_body(ctx, then_body if bool(np.asarray(test).reshape(())) else else_body, [])
    if test.type.size != 1:
        raise ctx.error(f"If's condition must have one element, got shape {test.shape}")
    out = cond(
        reshape(test, ()),
        lambda: tuple(read_body(ctx, then_body, [])),
        lambda: tuple(read_body(ctx, else_body, [])),
    )
    return list(out)


def _passes_condition_through(ctx: Context, body: Any) -> bool:
    """Whether the Loop body's condition output is its condition input (maybe through
    Identity nodes) or a constant true: a loop that only its trip count ends."""
    made = {o: n for n in body.node for o in n.output}
    name = body.output[0].name
    while True:
        if name == body.input[1].name:
            return True
        node = made.get(name)
        if node is None:
            return False
        if node.op_type == "Identity":
            name = node.input[0]
            continue
        if (
            node.op_type == "Constant"
            and len(node.attribute) == 1
            and node.attribute[0].name == "value"
        ):
            where = f"the Constant '{node.name}' in body '{body.name}' of {ctx.where()}"
            value = tensor_value(node.attribute[0].t, where, ctx.base_dir)
            return value.size == 1 and bool(value.reshape(()))
        return False


@handler("Loop")
def _loop(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    trips, first, *carries = inputs
    body = attrs["body"]
    n_carry = len(carries)
    n_scan = len(body.output) - 1 - n_carry
    if len(body.input) != 2 + n_carry or n_scan < 0:
        raise ctx.error(
            f"the Loop body has {len(body.input)} inputs and {len(body.output)} outputs for "
            f"{n_carry} loop-carried values (expected {2 + n_carry} inputs and at least "
            f"{1 + n_carry} outputs)"
        )
    if trips is not None and is_dims(trips):  # a dim of a shape: the symbol's own size
        trips = str(np.asarray(trips).reshape(()))  # (graphc's exporter writes a scan so)
    elif trips is not None and known(trips):
        trips = int(np.asarray(trips).reshape(()))
    if first is not None and known(first) and not bool(np.asarray(first).reshape(())):
        if n_scan:  # no iteration: the scan outputs are empty, of types the body decides
            raise ctx.error("a Loop that runs no iteration and has scan outputs is not supported")
        return list(carries)
    runs_to_count = first is None or known(first)
    if isinstance(trips, (int, str)) and runs_to_count and _passes_condition_through(ctx, body):
        graph = active_graph() or ctx.graph
        mark = len(graph.nodes)
        try:
            return _loop_as_scan(ctx, body, trips, carries, n_scan)
        except OnnxError as exc:
            if not exc.needs_counter:
                raise
            if isinstance(trips, str):
                raise OnnxError(
                    f"{exc} (a for loop is unrolled for it when its trip count is known; "
                    f"this one runs the symbolic dim '{trips}' times{symbolic_hint([np.asarray([trips], object)])})"
                ) from None
            if trips > UNROLL_LIMIT:
                raise OnnxError(
                    f"{exc} (a for loop is unrolled for it up to {UNROLL_LIMIT} trips; this "
                    f"one has {trips})"
                ) from None
            # what the abandoned scan recorded (its lifted initial counter) is dead
            graph.discard_since(mark)
            return _loop_unrolled(ctx, body, trips, carries, n_scan)
    if isinstance(trips, str):  # a while loop's bound is data: a symbolic dim is none
        raise ctx.error(
            f"a Loop that may stop early runs at most the symbolic dim '{trips}' times, "
            f"which graphc cannot compute as a value{symbolic_hint([np.asarray([trips], object)])}"
        )
    if n_scan and trips is not None and _passes_condition_through(ctx, body):
        # a for loop, but its count or first condition is fed: the caller may fix them
        if not isinstance(trips, int):
            raise needs_known(ctx, trips, "the trip count of a Loop with scan outputs")
        raise needs_known(ctx, first, "the condition of a Loop with scan outputs")
    if n_scan:
        raise ctx.error(
            "a Loop with scan outputs needs a trip count known at import and a body that "
            "passes its condition through (a for loop); this one may stop early"
        )
    return _loop_as_while(ctx, body, trips, first, carries)


def _loop_as_scan(
    ctx: Context, body: Any, trips: int | str, carries: list[Value], n_scan: int
) -> list[Value]:
    true = np.asarray(True)

    def step(carry: tuple, _: Any) -> tuple:
        i, *values = carry
        outs = read_body(ctx, body, [i, true, *values])
        new = outs[1 : 1 + len(values)]
        return (E.add(i, np.int64(1)), *new), tuple(outs[1 + len(values) :])

    length, counter = max(trips, 0) if isinstance(trips, int) else trips, np.int64(0)
    if isinstance(trips, str):  # (a scan of a symbolic length is recorded, never computed)
        counter = ctx.symbol(counter)
    (_, *final), ys = scan(step, (counter, *carries), length=length)
    return [*final, *ys]


UNROLL_LIMIT = 64


def _loop_unrolled(
    ctx: Context, body: Any, trips: int, carries: list[Value], n_scan: int
) -> list[Value]:
    """A for loop whose body needs its counter known (a Slice at the counter, a static
    graph's bounds), of at most UNROLL_LIMIT trips: the body read once per trip with the
    counter a constant; its scan outputs stacked."""
    true, values, ys = np.asarray(True), list(carries), []
    for i in range(trips):
        outs = read_body(ctx, body, [np.int64(i), true, *values])
        values = outs[1 : 1 + len(values)]
        ys.append(outs[1 + len(values) :])
    if n_scan and not ys:
        raise ctx.error("a Loop that runs no iteration and has scan outputs is not supported")
    return [*values, *(stack([step[k] for step in ys], axis=0) for k in range(n_scan))]


def _loop_as_while(
    ctx: Context, body: Any, trips: Any, first: Any, carries: list[Value]
) -> list[Value]:
    if trips is not None and not isinstance(trips, int):
        trips = reshape(trips, ())
    going = np.asarray(True) if first is None else reshape(first, ())

    def test(carry: tuple) -> Any:
        i, ok, *_ = carry
        return ok if trips is None else E.mul(ok, selection.lt(i, trips))  # and, on bools

    def step(carry: tuple) -> tuple:
        i, ok, *values = carry
        outs = read_body(ctx, body, [i, ok, *values])
        return (E.add(i, np.int64(1)), reshape(outs[0], ()), *outs[1:])

    _, _, *final = while_loop(test, step, (np.int64(0), going, *carries))
    return list(final)


@handler("Scan", since=9)
def _scan(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    body = attrs["body"]
    n_in = attrs["num_scan_inputs"]
    states, xs = inputs[: len(inputs) - n_in], inputs[len(inputs) - n_in :]
    n_out = len(body.output) - len(states)
    in_axes = list(attrs.get("scan_input_axes", [0] * n_in))
    in_dirs = list(attrs.get("scan_input_directions", [0] * n_in))
    out_axes = list(attrs.get("scan_output_axes", [0] * n_out))
    out_dirs = list(attrs.get("scan_output_directions", [0] * n_out))
    fronts = []
    for x, axis, backwards in zip(xs, in_axes, in_dirs):
        x = _to_front(x, axis)
        fronts.append(_flip(x) if backwards else x)
    sizes = {x.shape[0] for x in fronts}
    if len(sizes) > 1:
        raise ctx.error(f"the scan inputs have different lengths {sorted(map(str, sizes))}")

    def step(carry: tuple, x: tuple) -> tuple:
        outs = read_body(ctx, body, [*carry, *x])
        return tuple(outs[: len(states)]), tuple(outs[len(states) :])

    final, ys = scan(step, tuple(states), tuple(fronts))
    outs = []
    for y, axis, backwards in zip(ys, out_axes, out_dirs):
        y = _flip(y) if backwards else y
        outs.append(_from_front(y, axis))
    return [*final, *outs]


@handler("Scan", since=8)
def _scan_batched(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    """Opset 8's Scan: states and scan inputs carry a batch axis first (scan inputs
    (batch, sequence, ...)), and the body sees one example. Each example is one scan
    (the batch must be known); sequence_lens, when given, must be the whole sequence."""
    body = attrs["body"]
    lens, rest = inputs[0], inputs[1:]
    n_in = attrs["num_scan_inputs"]
    states, xs = rest[: len(rest) - n_in], rest[len(rest) - n_in :]
    directions = list(attrs.get("directions", [0] * n_in))
    if not xs:
        raise ctx.error("a Scan with no scan inputs is not supported")
    batch = xs[0].shape[0]
    if is_symbol(batch) or batch == 0:
        raise ctx.error(f"Scan (opset 8) over a batch of {batch!r} is not supported (known, > 0)")
    if lens is not None:
        if not known(lens):
            raise needs_known(ctx, lens, "Scan's sequence_lens")
        if any(is_symbol(x.shape[1]) for x in xs) or np.any(np.asarray(lens) != xs[0].shape[1]):
            raise ctx.error("Scan with sequence_lens shorter than the sequence is not supported")

    def step(carry: tuple, x: tuple) -> tuple:
        outs = read_body(ctx, body, [*carry, *x])
        return tuple(outs[: len(states)]), tuple(outs[len(states) :])

    examples = []
    for b in range(batch):
        fronts = [getitem(x, b) for x in xs]
        fronts = [_flip(x) if backwards else x for x, backwards in zip(fronts, directions)]
        final, ys = scan(step, tuple(getitem(v, b) for v in states), tuple(fronts))
        examples.append([*final, *ys])
    return [stack([example[k] for example in examples], axis=0) for k in range(len(examples[0]))]


def _to_front(x: Value, axis: int) -> Value:
    rank = len(x.shape)
    axis %= rank
    if axis == 0:
        return x
    return transpose(x, (axis, *[a for a in range(rank) if a != axis]))


def _from_front(y: Value, axis: int) -> Value:
    rank = len(y.shape)
    axis %= rank
    if axis == 0:
        return y
    order = list(range(1, rank))
    order.insert(axis, 0)
    return transpose(y, tuple(order))


def _flip(x: Value) -> Value:
    if is_symbol(x.shape[0]) or x.shape[0] > 0:
        return getitem(x, slice(None, None, -1))
    return x


__all__: list[str] = []
