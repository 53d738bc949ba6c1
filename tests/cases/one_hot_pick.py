"""Op cases: the `one_hot_pick` node that fuse_one_hot_pick makes (added to the table of
tests/op_cases.py). The reference is the chain it replaces: numpy's sum of a where over
one-hot rows, with the +0.0 the fusion requires as the fill."""

from __future__ import annotations

import numpy as np

from graphc.ops.dispatch import bind
from tests.op_cases import FLOAT, Arg, F, I, _case

ZERO = Arg((), FLOAT, "fixed", value=0.0)


def _pick_ref(num_classes: int, keepdims: bool = False, ignore_index: int | None = None) -> object:
    def reference(x: np.ndarray, labels: np.ndarray, zero: np.ndarray) -> np.ndarray:
        hot = np.eye(num_classes, dtype=bool)[labels]
        if ignore_index is not None:
            hot &= (labels != ignore_index)[..., None]
        return np.where(hot, x, zero).sum(axis=-1, keepdims=keepdims)

    return reference


PICKS = {
    "rows": ([F(5, 4), I(5, low=0, high=4), ZERO], {"num_classes": 4}),
    "keepdims_broadcast_column": (
        [F(5, 1), I(5, low=0, high=3), ZERO],
        {"num_classes": 3, "keepdims": True},
    ),
    "batched_labels": ([F(2, 3, 6), I(2, 3, low=0, high=6), ZERO], {"num_classes": 6}),
    "one_class": ([F(4, 1), I(4, low=0, high=1), ZERO], {"num_classes": 1}),
    "ignored_labels": (
        [F(6, 4), I(6, low=-1, high=4), ZERO],
        {"num_classes": 4, "ignore_index": -1},
    ),
    "ignored_class": ([F(6, 3), I(6, low=0, high=3), ZERO], {"num_classes": 3, "ignore_index": 2}),
}
for _label, (_args, _attrs) in PICKS.items():
    _case("one_hot_pick", _label,
          lambda *v, a=_attrs: bind("one_hot_pick", *v, **a),
          _args, _pick_ref(**_attrs))  # fmt: skip
