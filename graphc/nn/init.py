"""Parameter initializers, PyTorch's `torch.nn.init` under the same names.

Each fills a tensor in place (outside the tape) and returns it. Random ones draw
from `generator`: an int seed, a `numpy.random.Generator`, or None for graphc.eager's
global generator (seeded by `graphc.eager.manual_seed`), so a model built after
the same seed has the same parameters. Samples are drawn in float64 and then cast,
so a float32 and a float64 model from one seed hold the same numbers up to rounding.
"""

from __future__ import annotations

import math
import re

import numpy as np

from graphc.eager import Tensor, from_numpy, no_grad, rand
from graphc.ir.errors import GraphcError

Generator = int | np.random.Generator | None


def _uniform01(shape: tuple[int, ...], generator: np.random.Generator | None) -> np.ndarray:
    """U[0, 1) samples in float64 from `generator` (None: graphc.eager's global one)."""
    if generator is None:
        return rand(*shape, dtype="float64").numpy()
    return generator.random(shape, dtype=np.float64)


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        tensor.copy_(from_numpy(values.astype(tensor.dtype)))
    return tensor


def calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel), as torch counts them."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise GraphcError(f"fan in and fan out need a tensor of rank >= 2, got shape {shape}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


# torch's private spelling, which layers copied from torch's reset_parameters call
_calculate_fan_in_and_fan_out = calculate_fan_in_and_fan_out


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (torch.nn.init.calculate_gain)."""
    if nonlinearity in ("linear", "sigmoid", "identity"):
        return 1.0
    if re.fullmatch(r"conv(_transpose)?[123]d", nonlinearity):  # linear maps too
        return 1.0
    if nonlinearity == "selu":
        return 3.0 / 4  # torch's choice for self-normalizing networks
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    raise GraphcError(f"calculate_gain: unknown nonlinearity '{nonlinearity}'")


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator = None) -> Tensor:
    """Fill with samples from U(a, b)."""
    return _fill(tensor, a + (b - a) * _uniform01(tuple(tensor.shape), as_generator(generator)))


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator = None
) -> Tensor:
    """Fill with samples from N(mean, std^2) (Box-Muller on the uniform stream)."""
    shape = tuple(tensor.shape)
    rng = as_generator(generator)  # one stream for both draws (a seed would repeat u1 as u2)
    u1 = _uniform01(shape, rng)
    u2 = _uniform01(shape, rng)
    z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
    return _fill(tensor, mean + std * z)


def constant_(tensor: Tensor, value: float) -> Tensor:
    return _fill(tensor, np.full(tuple(tensor.shape), value, np.float64))


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator = None,
) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., as in torch).

    >>> import graphc.eager as ge
    >>> w = kaiming_uniform_(ge.zeros(4, 16), a=5**0.5, generator=0)
    >>> bool(abs(w).max() <= 16**-0.5)   # with a = sqrt(5) the bound is 1/sqrt(fan_in)
    True
    """
    if mode not in ("fan_in", "fan_out"):
        raise GraphcError(f"kaiming_uniform_: mode must be 'fan_in' or 'fan_out', got '{mode}'")
    if 0 in tuple(tensor.shape):  # nothing to fill (and a fan of 0), as torch's no-op
        return tensor
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound, generator)


def _fan(tensor: Tensor, mode: str, name: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise GraphcError(f"{name}: mode must be 'fan_in' or 'fan_out', got '{mode}'")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator = None,
) -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan) (He et al., as in torch)."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _fan(tensor, mode, "kaiming_normal_")
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator = None,
) -> Tensor:
    """N(mean, std^2) restricted to [a, b] (the bounds in the tensor's units, as torch's),
    as torch's distribution (not its bits: torch inverts the normal's CDF). Drawn by
    rejection from whichever proposal keeps most draws for this window: the normal itself,
    a uniform over the window (a narrow one), or an exponential tail (a window far out in
    a tail, Robert 1995), so no window takes long.

    >>> import graphc.eager as ge
    >>> w = trunc_normal_(ge.zeros(1000, dtype="float64"), std=1.0, a=6.0, b=7.0, generator=0)
    >>> bool(6.0 <= w.min() and w.max() <= 7.0)
    True
    """
    if not a < b:
        raise GraphcError(f"trunc_normal_: the bounds must have a < b, got a={a} and b={b}")
    if not std > 0:
        raise GraphcError(f"trunc_normal_: std must be positive, got {std}")
    size = int(np.prod(tensor.shape))
    low, high = (a - mean) / std, (b - mean) / std  # the window in standard units
    z = _truncated_standard_normal(size, low, high, as_generator(generator))
    return _fill(tensor, np.clip(mean + std * z, a, b).reshape(tuple(tensor.shape)))


def _tail(x: float) -> float:
    """P(Z > x) for a standard normal Z, without cancellation for large x."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def _truncated_standard_normal(
    size: int, low: float, high: float, rng: np.random.Generator | None
) -> np.ndarray:
    """`size` draws of a standard normal restricted to [low, high]."""
    if high <= 0:  # the lower tail is the upper one mirrored
        return -_truncated_standard_normal(size, -high, -low, rng)
    mass = _tail(low) - _tail(high) if low > 0 else 1.0 - _tail(high) - _tail(-low)
    nearest = max(low, 0.0)  # the window's point of highest density
    kept = {"normal": mass}  # the fraction of proposals each method keeps
    if math.isfinite(high) and math.isfinite(low):
        peak = math.exp(-nearest * nearest / 2) / math.sqrt(2 * math.pi)
        kept["uniform"] = mass / ((high - low) * peak)
    if low > 0:  # rate (low + sqrt(low^2 + 4)) / 2, the best for this tail
        rate = (low + math.sqrt(low * low + 4.0)) / 2
        kept["exponential"] = rate * math.exp(rate * low - rate * rate / 2) * math.sqrt(2 * math.pi)
        kept["exponential"] *= mass
    method = max(kept, key=lambda name: kept[name])
    chunks, count = [], 0
    while count < size:
        draws = int(min((size - count) / max(kept[method], 1e-3) * 1.2, 2**24)) + 16
        u1, u2 = _uniform01((draws,), rng), _uniform01((draws,), rng)
        if method == "normal":
            z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
            accept = np.ones(draws, bool)
        elif method == "uniform":
            z = low + (high - low) * u1
            accept = u2 < np.exp((nearest * nearest - z * z) / 2)
        else:
            z = low - np.log1p(-u1) / rate
            accept = u2 < np.exp(-((z - rate) ** 2) / 2)
        z = z[accept & (z >= low) & (z <= high)]
        chunks.append(z)
        count += z.size
    return np.concatenate(chunks)[:size] if chunks else np.empty(0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the diagonal of a 2-D tensor), as torch's."""
    if len(tensor.shape) != 2:
        raise GraphcError(f"eye_: needs a 2-D tensor, got shape {tuple(tensor.shape)}")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """A convolution weight (out, in, *kernel) of 3 to 5 dims that passes its input
    through: in each of `groups` groups, output channel d reads input channel d at the
    kernel's centre (as torch's; the channels beyond the smaller count stay 0).

    >>> import graphc.eager as ge
    >>> dirac_(ge.zeros(2, 2, 3))[:, :, 1].tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5):
        raise GraphcError(f"dirac_: needs a tensor of 3, 4 or 5 dims, got shape {shape}")
    if shape[0] % groups:
        raise GraphcError(f"dirac_: dim 0 ({shape[0]}) must be divisible by groups ({groups})")
    per_group = shape[0] // groups
    values = np.zeros(shape)
    centre = tuple(size // 2 for size in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            values[(g * per_group + d, d, *centre)] = 1.0
    return _fill(tensor, values)


def sparse_(
    tensor: Tensor, sparsity: float, std: float = 0.01, generator: Generator = None
) -> Tensor:
    """A 2-D tensor of N(0, std^2) samples with ceil(sparsity * rows) entries of each
    column, picked at random, set to 0 (Martens; torch's distribution, not its bits).

    >>> import graphc.eager as ge
    >>> w = sparse_(ge.zeros(10, 4), sparsity=0.3, generator=0)
    >>> (w == 0).sum(0).tolist()
    [3, 3, 3, 3]
    """
    shape = tuple(tensor.shape)
    if len(shape) != 2:
        raise GraphcError(f"sparse_: needs a 2-D tensor, got shape {shape}")
    rng = as_generator(generator)
    normal_(tensor, 0.0, std, rng)
    rows, cols = shape
    zeros = math.ceil(sparsity * rows)
    values = tensor.detach().numpy().copy()
    for col in range(cols):  # a random permutation's first rows: argsort of uniforms
        values[np.argsort(_uniform01((rows,), rng))[:zeros], col] = 0
    return _fill(tensor, values)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator = None) -> Tensor:
    """A (semi-)orthogonal matrix of the tensor flattened to (rows, rest), from the QR
    decomposition of a normal one with r's diagonal made positive (Saxe et al., torch's
    method), times gain."""
    if len(tensor.shape) < 2:
        raise GraphcError(f"orthogonal_: needs at least 2 dims, got shape {tuple(tensor.shape)}")
    if 0 in tuple(tensor.shape):
        return tensor
    rows = tensor.shape[0]
    cols = int(np.prod(tensor.shape)) // rows
    flat = normal_(from_numpy(np.zeros((rows, cols))), generator=generator).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, gain * q.reshape(tuple(tensor.shape)))


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator = None) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    if 0 in tuple(tensor.shape):  # nothing to fill, as torch's no-op
        return tensor
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator = None) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    if 0 in tuple(tensor.shape):  # nothing to fill, as torch's no-op
        return tensor
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def as_generator(seed: Generator) -> np.random.Generator | None:
    """A seed made a generator, drawn from once per layer or initializer call, so that
    successive draws (a weight and its bias, normal_'s two uniforms) differ."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(int(seed))


__all__ = [
    "Generator",
    "as_generator",
    "calculate_fan_in_and_fan_out",
    "calculate_gain",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "sparse_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]
