"""The native backend's fusion step (runtime/backend.py, `Backend.fusion`): numpy's
passes (backends/numpy/fusion.py), told which ops this backend computes with other bits
than numpy's kernels (its inexact lowerings), and the SGD fold.

- An inexact op (libmvec's exp, graphc's float32 tanh, its own products' summation
  orders) goes into a fused group only where every member is one of `FUSED_OPS` on
  float or bool values, so that this backend's C kernel computes the group and numpy's
  fused kernel never does; nor into an attention chain (none with a product matmul.py
  computes: float32 ones), a conv2d epilogue or a group after a convolution that
  numpy's kernels would run. So every level computes those ops with this backend's
  kernels, as O0 does.
- A scale stays beside an op reading a transposed operand (a kernel reads a transposed
  matrix tile by tile: kernels.py), to fuse with it, instead of moving before the
  transpose as numpy's step moves it.
- `w - s * a @ b` becomes one gemm accumulating into w: at the exact levels where
  matmul.py's product computes it (float32, s of the product's dtype: the same product,
  then the same scale and subtraction in its epilogue, so the same bits); with
  fast_math everywhere, transposes and scales of a and b taken into its flags and alpha
  (BLAS's gemm, blas.py, where matmul.py's product does not compute it).
"""

from __future__ import annotations

from graphc.backends.native import matmul
from graphc.backends.native.cexpr import NATIVE_OPS
from graphc.backends.numpy.fusion.attention import fuse_attention
from graphc.backends.numpy.fusion.conv_epilogue import fuse_conv_body, fuse_conv_epilogue
from graphc.backends.numpy.fusion.elementwise import fuse_elementwise
from graphc.backends.numpy.fusion.epilogue import fuse_matmul_epilogue
from graphc.backends.numpy.fusion.one_hot_pick import fuse_one_hot_pick
from graphc.ir.graph import Node
from graphc.passes.custom import inline_custom_forwards
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.gemm_rules import fold_sgd_updates
from graphc.passes.pipeline import Pass, with_options

# the ops its fused kernels compute (on float and bool values), and "transpose": a
# kernel reads a transposed operand itself
FUSED_OPS = frozenset(op for op, rule in NATIVE_OPS.items() if rule.fuses) | {"transpose"}


def _own_product(gemm: Node) -> bool:
    """Whether matmul.py's product computes `gemm` (native's gemm lowering)."""
    return matmul.gemm_reason(gemm) is None


def passes(inexact: frozenset[str], fast_math: bool) -> tuple[Pass, ...]:
    """The fusion step of a backend whose `inexact` ops its own kernels compute."""
    exact = with_options(fold_sgd_updates, computes=_own_product)
    fold = fold_sgd_updates if fast_math else exact
    return (
        with_options(inline_custom_forwards, keep=inexact),
        fold,
        with_options(fuse_attention, keep=inexact, computes=matmul.inexact_product),
        fuse_matmul_epilogue,
        with_options(fuse_conv_epilogue, keep=inexact),
        fuse_one_hot_pick,
        with_options(fuse_elementwise, keep=inexact, lowered=FUSED_OPS),
        with_options(fuse_conv_body, keep=inexact),
        eliminate_dead_code,
    )
