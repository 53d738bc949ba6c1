"""graphc.nn.functional: PyTorch's torch.nn.functional spellings (conv2d, max_pool2d,
layer_norm, dropout, ...), on eager tensors and graph values alike. An op that is one
of these functions needs no Tensor method (as in PyTorch)."""

from graphc.nn.functional import (
    activation,
    affine,
    arrays,
    attention,
    bags,
    conv,
    distance,
    loss,
    margin_loss,
    norm,
    patches,
    pool,
    resize,
    shuffle,
    stochastic,
)
from graphc.nn.functional.activation import *
from graphc.nn.functional.affine import *
from graphc.nn.functional.arrays import *
from graphc.nn.functional.attention import *
from graphc.nn.functional.bags import *
from graphc.nn.functional.conv import *
from graphc.nn.functional.distance import *
from graphc.nn.functional.loss import *
from graphc.nn.functional.margin_loss import *
from graphc.nn.functional.norm import *
from graphc.nn.functional.patches import *
from graphc.nn.functional.pool import *
from graphc.nn.functional.resize import *
from graphc.nn.functional.shuffle import *
from graphc.nn.functional.stochastic import *

# every module: `from graphc.nn.functional import *` missed resize's interpolate
_MODULES = (activation, affine, arrays, attention, bags, conv, distance, loss, margin_loss,
            norm, patches, pool, resize, shuffle, stochastic)  # fmt: skip
__all__ = [name for module in _MODULES for name in module.__all__]
