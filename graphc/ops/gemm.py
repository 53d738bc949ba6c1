"""gemm, ONNX's Gemm and BLAS's: alpha * op(a) @ op(b) + beta * c, on matrices.

op(a) is a.T when `trans_a` (so a is (K, M)), else a; the same for b. c is optional and
broadcasts into the (M, N) result. With beta == 0, c is not read (as BLAS and
torch.addmm: a nan in c does not reach the result); alpha's product is always computed,
in IEEE arithmetic (alpha = 0 times an inf is nan). float32 and float64, one dtype for
all operands.

Made by `fold_update` (graphc/passes/gemm_rules.py; fast_math, on a backend with a
gemm of its own): the SGD step `w - lr * g.T @ x` as one gemm accumulating into w's
buffer (beta = 1), which the planner may give the gemm as its output when w dies there
(`inplace_inputs`). The native backend lowers it to one cblas_sgemm/dgemm call
(graphc/backends/native/blas.py); this numpy kernel is the reference. ONNX's Gemm
exports from it; the importer spells Gemm out as matmul and add, which the epilogue
fusion picks up.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.types import TensorType, broadcast_shapes, format_shape
from graphc.ops import selection as Sel
from graphc.ops.defop import VARIADIC, defop
from graphc.ops.dispatch import bind

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _number(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise GraphcError(f"gemm: {name} must be a number, got {value!r}")
    return float(value)


def _flag(value: Any, name: str) -> bool:
    if value not in (0, 1):  # True, False, 0, 1 (ONNX's transA is an int)
        raise GraphcError(f"gemm: {name} must be a bool (or 0/1), got {value!r}")
    return bool(value)


def _canon(*types: TensorType, alpha: Any, beta: Any, trans_a: Any, trans_b: Any) -> dict:
    if len(types) not in (2, 3):
        raise GraphcError(f"gemm: takes a, b and an optional c, got {len(types)} input(s)")
    return {
        "alpha": _number(alpha, "alpha"),
        "beta": _number(beta, "beta"),
        "trans_a": _flag(trans_a, "trans_a"),
        "trans_b": _flag(trans_b, "trans_b"),
    }


def _infer(
    *types: TensorType, alpha: float, beta: float, trans_a: bool, trans_b: bool
) -> TensorType:
    _canon(*types, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    a, b = types[0], types[1]
    for name, t in zip("ab", (a, b)):
        if t.rank != 2:
            raise ShapeError(f"gemm: {name} must be a matrix, got shape {format_shape(t.shape)}")
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1 or a.dtype not in FLOAT_DTYPES:
        shown = ", ".join(str(t.dtype) for t in types)
        raise DTypeError(f"gemm: operands must all be float32 or all float64, got ({shown})")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    k_b, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != k_b:
        raise ShapeError(
            f"gemm: inner dims differ: op(a) is {format_shape((m, k))} "
            f"(a {format_shape(a.shape)}, trans_a={trans_a}), op(b) is "
            f"{format_shape((k_b, n))} (b {format_shape(b.shape)}, trans_b={trans_b})"
        )
    result = (m, n)
    if len(types) == 3:
        c = types[2]
        fits = c.rank <= 2
        if fits:
            try:
                fits = broadcast_shapes(c.shape, result, op="gemm") == result
            except ShapeError:
                fits = False
        if not fits:
            raise ShapeError(
                f"gemm: c of shape {format_shape(c.shape)} does not broadcast to the "
                f"product's {format_shape(result)}"
            )
    return TensorType(result, a.dtype)


def _scale(array: np.ndarray, factor: float) -> None:
    if factor != 1.0:
        np.multiply(array, factor, out=array)


def _kernel(
    a: np.ndarray,
    b: np.ndarray,
    *c: np.ndarray,
    out: np.ndarray | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> np.ndarray:
    """The product into `out` (numpy passes the transposed views to BLAS as trans flags),
    scaled by alpha, plus beta * c. Given c's own buffer as `out` (the planner does that
    when c dies here), the product needs a temporary: numpy's matmul cannot accumulate.
    Either way the bits are those of matmul, then * alpha, then + (c * beta); a negative
    alpha scales by |alpha| and subtracts, which IEEE rounds identically (x + (-y) is
    x - y), saving a pass in the SGD update w - lr * g."""
    x = a.T if trans_a else a
    y = b.T if trans_b else b
    addend = c[0] if c and beta != 0.0 else None
    if out is None:
        out = np.empty((x.shape[0], y.shape[1]), a.dtype)
    magnitude = -alpha if alpha < 0 else alpha  # not abs(): alpha = -0.0 keeps its sign
    if addend is not None and np.may_share_memory(out, addend):
        product = np.matmul(x, y)
        _scale(product, magnitude)
        _scale(out, beta)  # out is c here: the planner shares only a c of out's type
        (np.subtract if alpha < 0 else np.add)(out, product, out=out)
        return out
    np.matmul(x, y, out=out)
    if addend is None:
        _scale(out, alpha)
        return out
    _scale(out, magnitude)
    scaled = addend if beta == 1.0 else np.multiply(addend, beta)
    if alpha < 0:
        np.subtract(scaled, out, out=out)
    else:
        np.add(out, scaled, out=out)
    return out


def _vjp(
    ct: Any, out: Any, *inputs: Any, needs: tuple, alpha: float, beta: float,
    trans_a: bool, trans_b: bool,
) -> tuple:  # fmt: skip
    # y = alpha P Q + beta c with P = op(a), Q = op(b): ct_P = alpha ct Q^T, ct_Q = alpha P^T ct;
    # a = P^T when trans_a, so ct_a = ct_P^T = alpha Q ct^T (and likewise for b). Each is
    # one gemm on the operands as they lie, with the transposes as flags
    a, b = inputs[0], inputs[1]
    ct_a = ct_b = ct_c = None
    if needs[0]:
        if trans_a:
            ct_a = gemm(b, ct, alpha=alpha, trans_a=trans_b, trans_b=True)
        else:
            ct_a = gemm(ct, b, alpha=alpha, trans_b=not trans_b)
    if needs[1]:
        if trans_b:
            ct_b = gemm(ct, a, alpha=alpha, trans_a=True, trans_b=trans_a)
        else:
            ct_b = gemm(a, ct, alpha=alpha, trans_a=not trans_a)
    if len(inputs) == 3 and needs[2]:
        c = inputs[2]
        if beta == 0.0:  # c is not read
            ct_c = Sel.zeros_like(c)
        else:
            ct_c = Sel.unbroadcast(ct if beta == 1.0 else ct * beta, c)
    return (ct_a, ct_b) if len(inputs) == 2 else (ct_a, ct_b, ct_c)


def _cost(out: TensorType, *inputs: TensorType, alpha: float, beta: float, **flags: Any) -> int:
    a = inputs[0]
    k = a.shape[0] if flags["trans_a"] else a.shape[1]
    size = out.size or 0
    extra = (alpha != 1.0) + (len(inputs) == 3 and beta != 0.0) * (1 + (beta != 1.0))
    return 2 * size * (k if isinstance(k, int) else 1) + size * extra


defop(
    "gemm",
    inputs=VARIADIC,
    infer=_infer,
    kernel=_kernel,
    attrs={"alpha": 1.0, "beta": 1.0, "trans_a": False, "trans_b": False},
    canonicalize=_canon,
    vjp=_vjp,
    inplace_inputs=(2,),
    cost=_cost,
    doc="alpha * op(a) @ op(b) + beta * c (ONNX's Gemm); gc.gemm(a, b, c, alpha, beta, "
    "trans_a, trans_b).",
)


def gemm(
    a: Any,
    b: Any,
    c: Any = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Any:
    """alpha * op(a) @ op(b) + beta * c, op(a) = a.T when `trans_a` (ONNX's Gemm).

    >>> import numpy as np, graphc as gc
    >>> a, b = np.ones((3, 2), np.float32), np.ones((3, 4), np.float32)
    >>> gc.gemm(a, b, np.zeros(4, np.float32), alpha=0.5, trans_a=True)[0]
    array([1.5, 1.5, 1.5, 1.5], dtype=float32)
    """
    inputs = (a, b) if c is None else (a, b, c)
    return bind("gemm", *inputs, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
