"""The numpy backend's fusion step: the passes `gc.compile` runs at O2 on the
backend-free graph of `gc.optimize`, just before planning (runtime/backend.py,
`Backend.fusion`).

A scale is moved before a transpose (numpy's elementwise loops read their operands
fastest in memory order); then the attention chain, matmul and conv2d epilogues,
elementwise groups and a group after a convolution become the fused nodes this
backend's lowerings (fused.py) and the ops' kernels run; DCE drops constants left
unused outside the bodies they were copied into. Other backends build theirs from these
passes (the native one binds which ops its own kernels must compute).
"""

from __future__ import annotations

from graphc.passes.attention import fuse_attention
from graphc.passes.conv_epilogue import fuse_conv_body, fuse_conv_epilogue
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.epilogue import fuse_matmul_epilogue
from graphc.passes.fuse import fuse_elementwise
from graphc.passes.pipeline import Pass, with_options
from graphc.passes.simplify import scale_before_transposes

FUSION: tuple[Pass, ...] = (
    fuse_attention,
    fuse_matmul_epilogue,
    fuse_conv_epilogue,
    fuse_elementwise,
    fuse_conv_body,
    eliminate_dead_code,
)


def fusion(fast_math: bool) -> tuple[Pass, ...]:
    """The passes of this backend's fusion step (value-changing ones with `fast_math`)."""
    return (with_options(scale_before_transposes, fast_math=fast_math), *FUSION)
