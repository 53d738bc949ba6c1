"""The numpy backend's fusion step: the passes `gc.compile` runs at O2 on the
backend-free graph of `gc.optimize`, just before planning (runtime/backend.py,
`Backend.fusion`), each in the file of the fused node it makes (nodes/): `elementwise.py`
(fuse_elementwise), `epilogue.py` (fuse_matmul_epilogue, and the chain walks the
convolution's share), `conv_epilogue.py` (fuse_conv_epilogue, fuse_conv_body),
`attention.py` (fuse_attention), `one_hot_pick.py` (fuse_one_hot_pick).

A scale is moved before a transpose (numpy's elementwise loops read their operands
fastest in memory order); custom-gradient nodes give way to their forward ops
(passes/custom.py: every gradient is taken by now); then the attention chain, matmul and conv2d epilogues,
elementwise groups and a group after a convolution become the fused nodes this
backend's lowerings (chunked.py) and the nodes' kernels run; DCE drops constants left
unused outside the bodies they were copied into. Other backends build theirs from these
passes (the native one binds which ops its own kernels must compute).
"""

from __future__ import annotations

from graphc.backends.numpy.fusion.attention import fuse_attention
from graphc.backends.numpy.fusion.conv_epilogue import fuse_conv_body, fuse_conv_epilogue
from graphc.backends.numpy.fusion.elementwise import fuse_elementwise
from graphc.backends.numpy.fusion.epilogue import fuse_matmul_epilogue
from graphc.backends.numpy.fusion.one_hot_pick import fuse_one_hot_pick
from graphc.passes.custom import inline_custom_forwards
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.pipeline import Pass, with_options
from graphc.passes.simplify import scale_before_transposes

FUSION: tuple[Pass, ...] = (
    inline_custom_forwards,
    fuse_attention,
    fuse_matmul_epilogue,
    fuse_conv_epilogue,
    fuse_one_hot_pick,
    fuse_elementwise,
    fuse_conv_body,
    eliminate_dead_code,
)


def fusion(fast_math: bool) -> tuple[Pass, ...]:
    """The passes of this backend's fusion step (value-changing ones with `fast_math`)."""
    return (with_options(scale_before_transposes, fast_math=fast_math), *FUSION)


__all__ = [
    "FUSION",
    "fuse_attention",
    "fuse_conv_body",
    "fuse_conv_epilogue",
    "fuse_elementwise",
    "fuse_matmul_epilogue",
    "fuse_one_hot_pick",
    "fusion",
]
