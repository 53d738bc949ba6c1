"""graphc.eager: define-by-run tensors with PyTorch's autograd semantics.

Write `import graphc.eager as torch`-style code: every graphc op works on tensors (as a
function, a method and an operator), and the tape records what backward needs.

>>> import graphc.eager as ge
>>> w = ge.tensor([1.0], requires_grad=True)
>>> x = ge.tensor([2.0], requires_grad=True)
>>> y = ge.mul(ge.add(w, x), ge.add(w, 1))
>>> y.backward()
>>> w.grad, x.grad
(tensor([5.]), tensor([2.]))
"""

import numpy as _np

# every op function also works on tensors; the torch-style names below override some
from graphc.ops import *  # noqa: F403

# isort: split
from graphc.eager import autograd, cuda
from graphc.eager import value_kind as _value_kind  # noqa: F401 - registers the Tensor kind
from graphc.eager.autograd import Function
from graphc.eager.composites import (
    addcdiv,
    addcmul,
    aminmax,
    broadcast_tensors,
    diff,
    lerp,
    masked_select,
    meshgrid,
    roll,
    std_mean,
    trace,
    var_mean,
)
from graphc.eager.counting import bincount, searchsorted, unique
from graphc.eager.creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    initial_seed,
    linspace,
    logspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from graphc.eager.functional import (
    add,
    addmm,
    amax,
    amin,
    argmax,
    argmin,
    argwhere,
    bmm,
    cat,
    clamp,
    clip,
    concat,
    concatenate,
    count_nonzero,
    diagonal,
    div,
    divide,
    equal,
    flatten,
    flip,
    frac,
    gather,
    index_select,
    is_tensor,
    log_softmax,
    logsumexp,
    max,
    mean,
    median,
    min,
    mm,
    movedim,
    mv,
    nansum,
    narrow,
    nonzero,
    norm,
    numel,
    permute,
    prod,
    repeat_interleave,
    reshape,
    softmax,
    squeeze,
    stack,
    std,
    sub,
    subtract,
    sum,
    t,
    tensor_split,
    tile,
    transpose,
    true_divide,
    unsqueeze,
    var,
    where,
)
from graphc.eager.grad_fn import AccumulateGrad, GradFn, HookHandle
from graphc.eager.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from graphc.eager.tensor import Tensor
from graphc.ops.methods import MinMax, unbind

del Symbol, bind, register_lifter, register_value_kind  # noqa: F821 - not eager API

Node = GradFn  # the name before GradFn (PyTorch's torch.autograd.graph.Node)

# dtypes under PyTorch's names; they are numpy dtypes (x.dtype == graphc.eager.float32)
float32 = float = _np.dtype(_np.float32)
float64 = double = _np.dtype(_np.float64)
int32 = int = _np.dtype(_np.int32)
int64 = long = _np.dtype(_np.int64)
bool = _np.dtype(_np.bool_)
float16 = half = _np.dtype(_np.float16)
int8 = _np.dtype(_np.int8)
int16 = short = _np.dtype(_np.int16)
uint8 = _np.dtype(_np.uint8)
uint16 = _np.dtype(_np.uint16)
uint32 = _np.dtype(_np.uint32)
uint64 = _np.dtype(_np.uint64)


def __getattr__(name: str) -> _np.dtype:
    """`bfloat16`, ml_dtypes' (imported only now: it takes half a second)."""
    if name == "bfloat16":
        from graphc.ir.types import bfloat16

        return bfloat16()
    raise AttributeError(f"module 'graphc.eager' has no attribute {name!r}")


def device(name: str = "cpu") -> str:
    """Devices are names only: everything runs on the CPU through numpy."""
    return name
