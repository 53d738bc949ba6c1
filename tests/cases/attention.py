"""Op cases: the `attention` node that fuse_attention makes (added to the table of
tests/op_cases.py). References compose numpy's matmul, where and a stable softmax."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ops.dispatch import bind
from tests.op_cases import B, F, _case


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attention_ref(scale: bool, mask: Any, dropout: bool) -> Any:
    def reference(q: np.ndarray, kt: np.ndarray, v: np.ndarray, *rest: np.ndarray) -> np.ndarray:
        rest_list = list(rest)
        s = q @ kt
        if scale:
            s = s * rest_list.pop(0)
        for step in mask:
            if step == "where":
                s = np.where(rest_list.pop(0), s, rest_list.pop(0))
            elif step == "where_not":
                s = np.where(rest_list.pop(0), rest_list.pop(0), s)
            else:
                s = s + rest_list.pop(0)
        w = _softmax(s)
        if dropout:
            factor, keep, zero = rest_list
            w = np.where(keep, w * factor, zero)
        return (w @ v).astype(np.result_type(q, kt, v))

    return reference


ATTENTION = {
    "scale": ([F(2, 4, 3), F(2, 3, 5), F(2, 5, 2), F()], {"scale": True}),
    "heads_float_mask": (
        [F(2, 3, 4, 3), F(2, 3, 3, 5), F(2, 3, 5, 2), F(), F(4, 5)],
        {"scale": True, "mask": ("add",)},
    ),
    "bool_mask": ([F(4, 3), F(3, 5), F(5, 2), B(4, 5), F()], {"mask": ("where",)}),
    "padding_and_float_mask": (
        [F(2, 3, 4, 3), F(2, 3, 3, 5), F(2, 3, 5, 2), B(2, 1, 1, 5), F(), F(3, 4, 5)],
        {"mask": ("where_not", "add")},
    ),
    "dropout_broadcast_kt": (
        [F(2, 4, 3), F(3, 5), F(2, 5, 2), F(), B(2, 4, 5), F()],
        {"scale": False, "dropout": True},
    ),
}
for _label, (_args, _attrs) in ATTENTION.items():
    _fixed = {"scale": False, "mask": (), "dropout": False, **_attrs}
    _case("attention", _label,
          lambda *v, a=_fixed: bind("attention", *v, **a),
          _args, _attention_ref(**_fixed), rtol=1e-5, atol=1e-5)  # fmt: skip
