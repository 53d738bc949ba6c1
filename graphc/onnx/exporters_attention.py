"""The ONNX form of the `attention` node (made by fuse_attention): its members, in order —
MatMul, Mul (the scale), Where or Add (each mask step), Softmax over the last axis, Mul and
Where (dropout), MatMul. ONNX has no blockwise form to keep; the values are the same."""

from __future__ import annotations

import numpy as np

from graphc.ir.graph import Node
from graphc.onnx.writer import Writer, exporter


@exporter("attention")
def _attention(w: Writer, node: Node, ins: list[str]) -> list[str]:
    attrs = node.attrs
    types = [x.type.dtype for x in node.inputs]
    scores = np.result_type(types[0], types[1])

    def operand(i: int, dtype: np.dtype = scores) -> str:
        return w.cast(ins[i], types[i], dtype)

    s = w.one("MatMul", [operand(0), operand(1)])
    arg = 3
    if attrs["scale"]:
        s = w.one("Mul", [s, operand(arg)])
        arg += 1
    for step in attrs["mask"]:
        if step == "add":
            s = w.one("Add", [s, operand(arg)])
            arg += 1
            continue
        condition, fill = operand(arg, np.dtype(np.bool_)), operand(arg + 1)
        branches = [s, fill] if step == "where" else [fill, s]
        s = w.one("Where", [condition, *branches])
        arg += 2
    s = w.one("Softmax", [s], axis=-1)
    if attrs["dropout"]:
        s = w.one("Mul", [s, operand(arg)])
        s = w.one("Where", [operand(arg + 1, np.dtype(np.bool_)), s, operand(arg + 2)])
    out = node.type.dtype
    return [w.one("MatMul", [w.cast(s, scores, out), operand(2, out)])]
