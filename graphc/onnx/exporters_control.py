"""ONNX forms of graphc's control flow: cond as If, scan and while_loop as Loop.

Bodies become subgraphs that read outer values by name. A scan's Loop reads its xs
slice by the iteration number (Gather) and stacks its ys as Loop's scan outputs; a
while_loop's Loop evaluates the condition once before the loop and again at the end
of each body.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.graph import Node
from graphc.onnx.exporters import INT64_MIN
from graphc.onnx.writer import Writer, exporter

# -- control flow ---------------------------------------------------------------------


@exporter("result")
def _result(w: Writer, node: Node, ins: list[str]) -> list[str]:
    values = w.names[node.inputs[0]]
    return [values[node.attrs["index"]]]  # type: ignore[index]


@exporter("cond")
def _cond(w: Writer, node: Node, ins: list[str]) -> list[str]:
    branches = []
    for key in ("then_body", "else_body"):
        body = node.attrs[key]
        graph, _ = w.body(body, dict(zip(body.inputs, ins[1:])))
        branches.append(graph)
    return w.emit(
        "If", [ins[0]], len(node.type.items), then_branch=branches[0], else_branch=branches[1]
    )


def _loop_body(
    w: Writer, name: str, carries: list[Node], fill: Any, out_types: list[Any]
) -> tuple[Any, Writer]:
    """A Loop body: inputs (iteration, condition, carries...); `fill(sub)` writes the
    rest and returns the output names (condition out, carries..., scan outputs...),
    whose types after the condition are `out_types`."""
    from onnx import TensorProto, helper

    from graphc.onnx.writer import value_info

    sub = Writer(w.opset, outer=w, prefix=f"{name}_")
    iteration, condition = sub.fresh("i"), sub.fresh("cond_in")
    infos = [
        helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
        helper.make_tensor_value_info(condition, TensorProto.BOOL, []),
    ]
    for p in carries:
        carry = sub.fresh(p.name)
        sub.bind(p, carry)
        infos.append(value_info(carry, p.type))
    outputs = fill(sub, iteration, condition)
    out_infos = []
    for k, value in enumerate(outputs):
        name_ = sub.one("Identity", [value])
        if k == 0:
            out_infos.append(helper.make_tensor_value_info(name_, TensorProto.BOOL, []))
        else:
            out_infos.append(value_info(name_, out_types[k - 1]))
    return helper.make_graph(sub.nodes, sub.fresh("loop_body"), infos, out_infos), sub


@exporter("scan")
def _scan(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    body, nc, nx = a["body"], a["num_carry"], a["num_xs"]
    length = a["length"]
    carries, xs, consts = body.inputs[:nc], body.inputs[nc : nc + nx], body.inputs[nc + nx :]
    outer_xs = ins[nc : nc + nx]

    def fill(sub: Writer, iteration: str, condition: str) -> list[str]:
        index = iteration
        if a["reverse"]:  # step s reads slice length - 1 - s
            last = sub.one("Sub", [sub.dim(length), sub.const(np.asarray(1, np.int64))])
            index = sub.one("Sub", [last, iteration])
        bound = dict(zip(consts, ins[nc + nx :]))
        for p, x in zip(xs, outer_xs):
            bound[p] = sub.one("Gather", [x, index], axis=0)
        outs = sub.write(body, bound)
        return [sub.one("Identity", [condition]), *outs]

    types = [o.type for o in body.outputs]
    graph, _ = _loop_body(w, node.name, list(carries), fill, types)
    results = w.emit("Loop", [w.dim(length), "", *ins[:nc]], len(body.outputs), body=graph)
    if a["reverse"]:  # Loop stacks in step order: put ys[t] back at t
        results[nc:] = [
            w.one("Slice", [y, w.ints([-1]), w.ints([INT64_MIN]), w.ints([0]), w.ints([-1])])
            for y in results[nc:]
        ]
    return results


@exporter("while_loop")
def _while(w: Writer, node: Node, ins: list[str]) -> list[str]:
    a = node.attrs
    test, body, nc, k = a["cond_body"], a["body"], a["num_carry"], a["num_cond_consts"]
    cond_consts, body_consts = ins[nc : nc + k], ins[nc + k :]
    first = w.write(test, dict(zip(test.inputs, [*ins[:nc], *cond_consts])))[0]

    def fill(sub: Writer, iteration: str, condition: str) -> list[str]:
        new = sub.write(body, dict(zip(body.inputs[nc:], body_consts)))
        again = sub.write(test, dict(zip(test.inputs, [*new, *cond_consts])))[0]
        return [again, *new]

    types = [p.type for p in body.inputs[:nc]]
    graph, _ = _loop_body(w, node.name, list(body.inputs[:nc]), fill, types)
    return w.emit("Loop", ["", first, *ins[:nc]], nc, body=graph)
