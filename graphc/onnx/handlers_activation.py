"""ONNX handlers: activations (Softsign, LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish,
Softplus, PRelu, Mish, Gelu) and Mod, with graphc's ops."""

from __future__ import annotations

import numpy as np

from graphc.onnx.importer import Context, Value, handler
from graphc.ops import elementwise as E
from graphc.ops import selection
from graphc.ops.activation import celu, elu, gelu_exact, hardsigmoid, leaky_relu, softplus, softsign
from graphc.ops.rounding import fmod, remainder

# -- activations and elementwise math ---------------------------------------------------


@handler("Softsign")
def _softsign(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [softsign(inputs[0])]  # a builder: x / (1 + |x|)


@handler("LeakyRelu")
def _leaky_relu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [leaky_relu(inputs[0], float(np.float32(attrs.get("alpha", 0.01))))]


@handler("Elu")
def _elu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [elu(inputs[0], alpha=float(attrs.get("alpha", 1.0)))]


@handler("Selu")
def _selu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    alpha = float(attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(attrs.get("gamma", 1.05070102214813232421875))
    return [elu(inputs[0], alpha=alpha, scale=gamma)]


@handler("Celu", since=12)
def _celu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [celu(inputs[0], alpha=float(attrs.get("alpha", 1.0)))]


@handler("HardSigmoid")
def _hard_sigmoid(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    alpha, beta = attrs.get("alpha", 0.2), attrs.get("beta", 0.5)
    dtype = np.dtype(x.dtype)
    line = E.add(E.mul(x, np.asarray(alpha, dtype)), np.asarray(beta, dtype))
    return [selection.clip(line, 0.0, 1.0)]


@handler("HardSwish", since=14)
def _hard_swish(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [E.mul(inputs[0], hardsigmoid(inputs[0]))]


@handler("Softplus")
def _softplus(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    # ONNX: log(exp(x) + 1) everywhere; graphc's threshold (x itself past 20) is within
    # rounding of it there, and keeps exp from overflowing
    return [softplus(inputs[0])]


@handler("PRelu")
def _prelu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, slope = inputs
    return [selection.where(selection.lt(x, 0), E.mul(x, slope), x)]


@handler("Mish", since=18)
def _mish(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    return [E.mul(x, E.tanh(softplus(x)))]


@handler("Gelu", since=20)
def _gelu(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    approximate = attrs.get("approximate", "none")
    return [E.gelu(inputs[0]) if approximate == "tanh" else gelu_exact(inputs[0])]


@handler("Mod", since=10)
def _mod(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, y = inputs
    # fmod=1: the sign of x (C's fmod); 0: the sign of y (Python's %, floats since opset 23)
    return [fmod(x, y) if attrs.get("fmod", 0) else remainder(x, y)]
