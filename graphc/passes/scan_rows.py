"""Scan: the rows a body reads at its step counter become xs.

A `for` loop written with an explicit counter (ONNX's Loop and its iteration number, a
`fori_loop` whose body indexes an array with `i`) reaches graphc as a scan with an
integer carry that starts at 0 and adds 1 at every step, and body ops
``take(x, i, axis=0)`` on a const `x` of `length` rows. Each such take copies a row at
every step; a scan's xs are sliced by the loop without copying. `rows_as_xs` passes
such an `x` as an xs instead, and the take's readers read the slice.

Exact: at step s the counter holds s, and ``take(x, s, axis=0)`` is ``x[s]``, the slice
the loop gives the body. The counter itself is unchanged, so its other readers and its
final result see the same values (simplify_control_flow drops it when nothing reads it
any longer). Only forward scans, only an `x` of exactly `length` rows, and only a
counter whose dtype holds ``length - 1`` (an int64 one, for a symbolic length): then
every index the take would have read is in range, and no error it would have raised is
lost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphc.ir.graph import OP, OUTPUT, Graph, Node


def _is_int_scalar(node: Node, value: int) -> bool:
    return (
        node.is_constant
        and node.type.rank == 0
        and np.dtype(node.type.dtype).kind in "iu"
        and int(node.value) == value
    )


def _counters(body: Graph, inputs: Sequence[Node], nc: int, length: object) -> set[Node]:
    """The body's carry placeholders that start at 0 and add 1 at every step."""
    found = set()
    for k in range(nc):
        carry, init = body.inputs[k], inputs[k]
        if not _is_int_scalar(init, 0):
            continue
        top = np.iinfo(np.dtype(carry.type.dtype)).max
        last = length - 1 if isinstance(length, int) else 2**63 - 1  # symbolic: any
        if last > top:
            continue
        step = body.outputs[k].inputs[0]
        if step.kind != OP or step.op != "add" or carry not in step.inputs:
            continue
        other = step.inputs[1] if step.inputs[0] is carry else step.inputs[0]
        if _is_int_scalar(other, 1) and other.type.dtype == carry.type.dtype:
            found.add(carry)
    return found


def rows_as_xs(
    node: Node, body: Graph, inputs: list[Node], nc: int, nx: int
) -> tuple[Graph, list[Node], int] | None:
    """The scan `node` (its `body` and operands `inputs`, `nc` carries and `nx` xs) with
    the rows its body takes at its counter passed as new xs: the new body, operands and
    number of xs; None when there are none."""
    length = node.attrs["length"]
    if node.attrs["reverse"]:
        return None
    counters = _counters(body, inputs, nc, length)
    if not counters:
        return None
    consts = {p: i for i, p in enumerate(body.inputs) if i >= nc + nx}
    taken: dict[Node, list[Node]] = {}  # const placeholder -> its takes at a counter
    for n in body.op_nodes:
        if (
            n.op == "take"
            and n.attrs["axis"] == 0
            and n.inputs[1] in counters
            and n.inputs[0] in consts
            and inputs[consts[n.inputs[0]]].type.shape[0] == length
        ):
            taken.setdefault(n.inputs[0], []).append(n)
    if not taken:
        return None
    new = Graph(body.name)
    copies: dict[Node, Node] = {}
    for p in body.inputs[: nc + nx]:
        new.append_copy(p, copies)
    for takes in taken.values():
        row = new.add_placeholder(takes[0].name, takes[0].type)  # the take's name is free
        for t in takes:
            copies[t] = row
    for p in body.inputs[nc + nx :]:
        new.append_copy(p, copies)
    for n in body.nodes:
        if (n.kind == OP and n not in copies) or n.kind == OUTPUT:
            new.append_copy(n, copies)
    rows = [inputs[consts[p]] for p in taken]
    operands = inputs[: nc + nx] + rows + inputs[nc + nx :]
    return new, operands, nx + len(rows)
