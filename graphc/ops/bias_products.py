"""torch's products added to a bias: `addmm`, `addmv`, `addr`, `baddbmm` and `addbmm`,
each beta * x + alpha * (a product of two operands), as op functions over graph values,
eager tensors and arrays alike (so the Tensor methods `bias.addmm(m1, m2)` trace).

As in torch, with beta = 0 the bias is not read (a nan in it does not reach the
result), and alpha or beta of 1 applies no multiplication. addmm is one `gemm` node
(which the native backend fuses); the others are a matmul, an outer product or a sum of
batched products, then the scaling and the add.

>>> import numpy as np, graphc as gc
>>> gc.addmv(np.ones(2), np.eye(2), np.array([3.0, 4.0]), beta=2).tolist()
[5.0, 6.0]
"""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import ShapeError
from graphc.ir.types import format_shape
from graphc.ops import elementwise as E
from graphc.ops import linalg
from graphc.ops import reduce as R
from graphc.ops.gemm import gemm

__all__ = ["addbmm", "addmm", "addmv", "addr", "baddbmm"]


def _check_ranks(op: str, **operands: tuple[Any, int]) -> None:
    for name, (value, rank) in operands.items():
        if len(value.shape) != rank:
            kind = {1: "a vector", 2: "a matrix", 3: "a batch of matrices"}[rank]
            raise ShapeError(
                f"{op}: {name} must be {kind} (rank {rank}), got shape {format_shape(value.shape)}"
            )


def _biased(x: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """beta * x + alpha * product, x unread when beta is 0 (torch's)."""
    scaled = product if alpha == 1 else E.mul(product, alpha)
    if beta == 0:
        return scaled
    return E.add(x if beta == 1 else E.mul(x, beta), scaled)


def addmm(x: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * x + alpha * mat1 @ mat2 (torch.addmm): one `gemm` node."""
    _check_ranks("addmm", mat1=(mat1, 2), mat2=(mat2, 2))
    return gemm(mat1, mat2, x, alpha=alpha, beta=beta)


def addmv(x: Any, mat: Any, vec: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * x + alpha * mat @ vec (torch.addmv)."""
    _check_ranks("addmv", mat=(mat, 2), vec=(vec, 1))
    return _biased(x, linalg.matmul(mat, vec), beta, alpha)


def addr(x: Any, vec1: Any, vec2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * x + alpha * the outer product of vec1 and vec2 (torch.addr)."""
    _check_ranks("addr", vec1=(vec1, 1), vec2=(vec2, 1))
    return _biased(x, linalg.outer(vec1, vec2), beta, alpha)


def baddbmm(x: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * x + alpha * batch1 @ batch2, matrix by matrix (torch.baddbmm)."""
    _check_ranks("baddbmm", batch1=(batch1, 3), batch2=(batch2, 3))
    return _biased(x, linalg.matmul(batch1, batch2), beta, alpha)


def addbmm(x: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * x + alpha * the sum over the batch of batch1[i] @ batch2[i] (torch.addbmm)."""
    _check_ranks("addbmm", batch1=(batch1, 3), batch2=(batch2, 3))
    return _biased(x, R.sum(linalg.matmul(batch1, batch2), axis=0), beta, alpha)
