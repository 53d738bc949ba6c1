"""graphc: a static-graph compiler and executor for numerical Python, on numpy.

>>> import numpy as np, graphc as gc
>>> g = gc.Graph("affine")
>>> with g:
...     x = gc.placeholder("x", shape=("B", 3))
...     w = gc.placeholder("w", shape=(3, 2))
...     _ = gc.output(gc.relu(x @ w), name="y")
>>> g(np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)).shape
(4, 2)
"""

import numpy as _np

if int(_np.__version__.split(".")[0]) < 2:  # pip keeps the floor; --no-deps installs may not
    raise ImportError(
        f"graphc needs numpy >= 2.0 (its NEP 50 promotion rules are graphc's), found "
        f"{_np.__version__}: pip install 'numpy>=2'"
    )

# isort: split
from graphc import backends as _backends  # noqa: F401 - registers numpy and native
from graphc import frontend as _frontend_call  # noqa: F401
from graphc import passes, viz
from graphc.frontend import (
    TensorSpec,
    constant,
    custom_jvp,
    custom_vjp,
    eval_shape,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jit,
    jvp,
    lifted_feeds,
    lifted_tensors,
    linearize,
    named,
    output,
    placeholder,
    stop_gradient,
    trace,
    value_and_grad,
    vjp,
)
from graphc.frontend import call as _call  # noqa: F401 - makes Graph callable
from graphc.frontend.vmap import vmap
from graphc.ir import errors
from graphc.ir.errors import (
    ArgumentError,
    AutodiffError,
    CycleError,
    DivisionByZeroError,
    DTypeError,
    FeedError,
    GraphcError,
    GraphMismatchError,
    IndexRangeError,
    NumericsError,
    ParseError,
    ShapeError,
    TracingError,
    UnknownOpError,
    VerifyError,
)
from graphc.ir.graph import Graph, Node
from graphc.ir.nx import from_networkx, to_networkx
from graphc.ir.parse import parse
from graphc.ir.scope import name_scope
from graphc.ir.serialize import from_json, load, save, to_json
from graphc.ir.types import TensorType
from graphc.ir.verify import verify
from graphc.ops import *  # noqa: F403 - the op functions are graphc's top-level API
from graphc.ops import Symbol
from graphc.ops import pytree as tree_util  # jax.tree_util's functions, also top-level
from graphc.ops.batching import VmapError
from graphc.passes.autodiff import gradients, split_backward
from graphc.passes.forward import tangents
from graphc.passes.pipeline import optimize
from graphc.runtime.executable import Executable, compile, fuse
from graphc.runtime.reference import run

# isort: split
# gc.map is the frontend's (its batch_size= needs vmap), over ops' map of one slice a step
from graphc.frontend.batched_map import map  # noqa: A004

# isort: split
# nn and optim sit on top of everything above (they use eager, trace, autodiff, runtime)
from graphc import nn, onnx, optim, random
from graphc.optim.train_step import TrainStep, compile_train_step

__version__ = "0.1.0"
