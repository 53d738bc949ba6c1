"""The user-facing ways to make graphs: declaring them, and (later) tracing functions."""

from graphc.frontend.custom import custom_jvp, custom_vjp
from graphc.frontend.declare import constant, output, placeholder
from graphc.frontend.jit import eval_shape, jit
from graphc.frontend.names import named
from graphc.frontend.trace import TensorSpec, lifted_feeds, lifted_tensors, trace
from graphc.frontend.transforms import (
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stop_gradient,
    value_and_grad,
    vjp,
)

__all__ = [
    "constant",
    "eval_shape",
    "custom_jvp",
    "custom_vjp",
    "output",
    "placeholder",
    "stop_gradient",
    "TensorSpec",
    "jit",
    "lifted_feeds",
    "lifted_tensors",
    "named",
    "trace",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "vjp",
    "value_and_grad",
]
