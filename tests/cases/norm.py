"""Op cases: normalization (added to the table of tests/op_cases.py).

References normalize in float64 with numpy, then round to the op's result dtype.
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from graphc.ops.dispatch import bind
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, F, I, _case

_builder = {"table": BUILDER_CASES}


def normalized(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over axes, in float64."""
    x = x.astype(np.float64)
    centered = x - x.mean(axis=axes, keepdims=True)
    return centered / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + eps)


def _layer_norm_ref(axis: int, eps: float = 1e-5) -> object:
    def reference(
        x: np.ndarray, w: np.ndarray | None = None, b: np.ndarray | None = None
    ) -> np.ndarray:
        axes = tuple(range(axis % x.ndim, x.ndim))
        y = normalized(x, axes, eps)
        y = y if w is None else y * w
        y = y if b is None else y + b
        dtype = np.result_type(x.dtype, np.float32, *(v.dtype for v in (w, b) if v is not None))
        return y.astype(dtype)

    return reference


def _layer_norm_grad_ref(axis: int, eps: float = 1e-5) -> object:
    def reference(x: np.ndarray, g: np.ndarray) -> np.ndarray:
        axes = tuple(range(axis % x.ndim, x.ndim))
        x64, g64 = x.astype(np.float64), g.astype(np.float64)
        centered = x64 - x64.mean(axis=axes, keepdims=True)
        rstd = 1 / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + eps)
        xhat = centered * rstd
        inner = g64 - g64.mean(axis=axes, keepdims=True)
        inner -= xhat * (g64 * xhat).mean(axis=axes, keepdims=True)
        return (inner * rstd).astype(np.result_type(x.dtype, g.dtype, np.float32))

    return reference


_case("layer_norm", "affine", gc.layer_norm, [F(4, 6), F(6), F(6)], _layer_norm_ref(-1))
_case("layer_norm", "two_dims", lambda x, w, b: gc.layer_norm(x, w, b, axis=1),
      [F(2, 3, 4), F(3, 4), F(4)], _layer_norm_ref(1))  # fmt: skip
_case("layer_norm", "plain", gc.layer_norm, [F(3, 5)], _layer_norm_ref(-1))
_case("layer_norm", "weight_only", lambda x, w: gc.layer_norm(x, w, eps=0.1),
      [F(2, 2, 5), F(5)], lambda x, w: _layer_norm_ref(-1, 0.1)(x, w))  # fmt: skip
_case("layer_norm", "all_dims", lambda x: gc.layer_norm(x, axis=0), [F(3, 4)],
      _layer_norm_ref(0))  # fmt: skip
_case("layer_norm", "int", gc.layer_norm, [I(3, 4)], _layer_norm_ref(-1))
_case("layer_norm", "f32_f64_weight", gc.layer_norm,
      [Arg((2, 3), "float32"), Arg((3,), "float64"), Arg((3,), "float64")],
      _layer_norm_ref(-1), rtol=1e-6, atol=1e-6)  # fmt: skip
# a constant row: var 0, so (x - mean) = 0 times 1/sqrt(eps)
_case("layer_norm", "constant_row", gc.layer_norm, [Arg((2, 3), FLOAT, "fixed",
      value=[[2.0, 2.0, 2.0], [1.0, -1.0, 0.0]])], _layer_norm_ref(-1), grad=(False,))  # fmt: skip
_case("layer_norm", "empty_rows", gc.layer_norm, [F(0, 4)], _layer_norm_ref(-1))

_case("layer_norm_grad", "last", lambda x, g: bind("layer_norm_grad", x, g, axis=-1, eps=1e-5),
      [F(3, 5), F(3, 5)], _layer_norm_grad_ref(-1))  # fmt: skip
_case("layer_norm_grad", "two_dims",
      lambda x, g: bind("layer_norm_grad", x, g, axis=1, eps=0.01),
      [F(2, 3, 2), F(2, 3, 2)], _layer_norm_grad_ref(1, 0.01))  # fmt: skip
_case("layer_norm_grad", "int", lambda x, g: bind("layer_norm_grad", x, g, axis=-1, eps=1e-5),
      [I(2, 4), F(2, 4)], _layer_norm_grad_ref(-1), grad=(False, True))  # fmt: skip


# -- builders ---------------------------------------------------------------------------------


def _group_norm_ref(groups: int, eps: float = 1e-5) -> object:
    def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        grouped = x.reshape(x.shape[0], groups, -1)
        y = normalized(grouped, (2,), eps).reshape(x.shape)
        shape = (-1,) + (1,) * (x.ndim - 2)
        return (y * w.reshape(shape) + b.reshape(shape)).astype(x.dtype)

    return reference


_case("group_norm", "nchw", lambda x, w, b: gc.group_norm(x, 2, w, b), [F(2, 4, 3, 2), F(4), F(4)],
      _group_norm_ref(2), **_builder)  # fmt: skip
_case("group_norm", "ncl", lambda x, w, b: gc.group_norm(x, 3, w, b), [F(2, 3, 5), F(3), F(3)],
      _group_norm_ref(3), **_builder)  # fmt: skip


def _batch_norm_train(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    axes = (0, *range(2, x.ndim))
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = normalized(x, axes, 1e-5) * w.reshape(shape) + b.reshape(shape)
    return y.astype(x.dtype)


def _batch_norm_eval(x: np.ndarray, m: np.ndarray, v: np.ndarray, w: np.ndarray,
                     b: np.ndarray) -> np.ndarray:  # fmt: skip
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-5) * w.reshape(shape)
    return (y + b.reshape(shape)).astype(x.dtype)


_case("batch_norm", "train_nchw",
      lambda x, w, b: gc.batch_norm(x, weight=w, bias=b, training=True).output,
      [F(4, 3, 2, 2), F(3), F(3)], _batch_norm_train, rtol=1e-5, **_builder)  # fmt: skip
_case("batch_norm", "train_nc", lambda x, w, b: gc.batch_norm(x, None, None, w, b, True).output,
      [F(5, 3), F(3), F(3)], _batch_norm_train, rtol=1e-5, **_builder)  # fmt: skip
_case("batch_norm", "train_stats",
      lambda x: gc.concat(list(gc.batch_norm(x, training=True)[1:])),
      [F(4, 3, 5)],
      lambda x: np.concatenate([x.mean(axis=(0, 2)), x.var(axis=(0, 2), ddof=1)]).astype(x.dtype),
      rtol=1e-5, **_builder)  # fmt: skip
_case("batch_norm", "eval", lambda x, m, v, w, b: gc.batch_norm(x, m, v, w, b).output,
      [F(3, 2, 4), F(2), F(2, kind="positive"), F(2), F(2)], _batch_norm_eval, **_builder)  # fmt: skip

for _ddof in (0, 1):
    _case("std", f"ddof{_ddof}", lambda x, d=_ddof: gc.std(x, axis=1, correction=d), [F(3, 5)],
          lambda x, d=_ddof: np.std(x, axis=1, ddof=d), rtol=1e-5, **_builder)  # fmt: skip
_case("std", "all_keep", lambda x: gc.std(x, keepdims=True), [F(3, 5)],
      lambda x: np.std(x, keepdims=True), rtol=1e-5, **_builder)  # fmt: skip
