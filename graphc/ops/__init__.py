"""The op registry and the op functions (`gc.add`, `gc.matmul`, ...).

Every op is defined once, in one block, in the module of its family. Importing this
package registers them all and the graph-value kind.
"""

from types import ModuleType as _ModuleType

from graphc.ops import constant as _constant  # noqa: F401 - registers the constant op
from graphc.ops import control as _control  # noqa: F401 - registers cond, scan, while_loop
from graphc.ops.activation import *
from graphc.ops.arrays import *
from graphc.ops.bias_products import addbmm, addmm, addmv, addr, baddbmm
from graphc.ops.closeness import *
from graphc.ops.composites import (
    addcdiv,
    addcmul,
    aminmax,
    count_nonzero,
    diag_embed,
    diagflat,
    diff,
    dist,
    frac,
    inner,
    is_floating_point,
    lerp,
    logcumsumexp,
    matrix_power,
    matrix_trace,
    narrow_copy,
    roll,
    rot90,
    tensor_split,
    unflatten,
    vector_norm,
)
from graphc.ops.conv import *
from graphc.ops.creation import *
from graphc.ops.custom import custom_vjp_op  # registers custom_vjp (traced Functions)
from graphc.ops.dispatch import bind, register_value_kind
from graphc.ops.elementwise import *
from graphc.ops.elementwise_composites import (
    deg2rad,
    exp2,
    float_power,
    fmax,
    fmin,
    heaviside,
    hypot,
    isneginf,
    isposinf,
    logit,
    rad2deg,
    sgn,
    sinc,
    xlogy,
)
from graphc.ops.flow import cond, fori_loop, map, scan, switch, while_loop
from graphc.ops.gemm import gemm
from graphc.ops.indexing import (
    gather,
    getitem,
    index_select,
    scatter_add,
    slice_,
    take,
    unslice,
)
from graphc.ops.linalg import dot, matmul, outer, tensordot
from graphc.ops.logical import *
from graphc.ops.methods import unbind
from graphc.ops.nn import cross_entropy, log_softmax, mse_loss, one_hot, softmax
from graphc.ops.norm import *
from graphc.ops.order_statistics import cummax, cummin, kthvalue, median, msort, nanmedian
from graphc.ops.parallel_scan import associative_scan
from graphc.ops.pool import *
from graphc.ops.pytree import (
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    tree_all,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_reduce,
    tree_structure,
    tree_unflatten,
)
from graphc.ops.random import *
from graphc.ops.reduce import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    logsumexp,
    max,
    mean,
    min,
    nanmax,
    nanmean,
    nanmin,
    nansum,
    prod,
    sum,
    var,
)
from graphc.ops.rounding import *
from graphc.ops.scatters import index_add, index_copy, index_fill, scatter
from graphc.ops.selection import (  # clamp and clip: rounding's, which take tensor bounds
    cast,
    eq,
    equal,
    full_like,
    ge,
    greater,
    greater_equal,
    gt,
    isfinite,
    isinf,
    isnan,
    le,
    less,
    less_equal,
    lt,
    nan_to_num,
    ne,
    not_equal,
    ones_like,
    unbroadcast,
    where,
    zeros_like,
)
from graphc.ops.shape import (
    broadcast_to,
    cat,
    concat,
    concatenate,
    expand,
    expand_dims,
    hstack,
    moveaxis,
    permute,
    ravel,
    reshape,
    squeeze,
    stack,
    sum_to,
    swapaxes,
    transpose,
    unsqueeze,
    vstack,
)
from graphc.ops.symbolic import Symbol, register_lifter
from graphc.ops.tuples import results
from graphc.ops.updates import *

__all__ = [
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and not isinstance(value, _ModuleType)
]
