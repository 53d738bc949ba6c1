"""The numpy backend's fused nodes: ops only its fusion step makes (backends/numpy/fusion/),
each declaring the "fusion" property, so they carry no gradient, ONNX or batch-split
rule. The native backend's fusion step makes the same nodes and lowers most of them in C.

`fused` (fused.py: a group of elementwise ops, run chunk by chunk into reused buffers),
`matmul_epilogue` (epilogue.py: bias and activation after a product), `conv2d_epilogue`
(conv_epilogue.py) and `conv2d_fused` (conv_fused.py: a convolution and the elementwise
group after it, per chunk of images), `attention` (attention.py: the scores-to-output
chain, a block of whole matrices at a time), `one_hot_pick` (one_hot_pick.py: the entry
at each label that sum(where(one_hot(labels), x, 0)) picks, as cross-entropy does).
Importing this package registers them.
"""

from graphc.backends.numpy.nodes import (
    attention,
    conv_epilogue,
    conv_fused,
    epilogue,
    fused,
    one_hot_pick,
)

__all__ = ["attention", "conv_epilogue", "conv_fused", "epilogue", "fused", "one_hot_pick"]
