"""Recurrent layers with PyTorch's names, parameters and equations: RNN, GRU, LSTM, and
their one-step cells RNNCell, GRUCell, LSTMCell (the same equations, one time step).

Each layer and direction is one `gc.scan` over time, so a traced model holds one loop
node per layer and direction however long the sequence (eagerly, the scan is a Python
loop on the tape). The input projections x_t W_ih^T + b_ih do not depend on the
carried state, so they are computed for all steps at once, before the loop, as one
matmul; the loop body is the recurrent part only.

Parameters, as torch: `weight_ih_l{k}` (gates*hidden, input), `weight_hh_l{k}`
(gates*hidden, hidden), `bias_ih_l{k}`, `bias_hh_l{k}`, with the suffix `_reverse` for
the second direction (and an LSTM's `weight_hr_l{k}` (proj_size, hidden) with
`proj_size`, projecting h); all drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)). Gate
order as torch: GRU (r, z, n), LSTM (i, f, g, o). `dropout` drops the outputs of every
layer but the last while training, as torch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.eager import zeros
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import init
from graphc.nn.functional.stochastic import dropout
from graphc.nn.module import Module
from graphc.ops import concat, relu, sigmoid, stack, swapaxes, tanh, zeros_like
from graphc.ops.flow import scan

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]

Step = Callable[[Any, Any, Any, Any], Any]  # (carry, projected x_t, w_hh, b_hh) -> carry


class _Recurrent(Module):
    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if num_layers < 1 or hidden_size < 1:
            raise GraphcError(
                f"{name}: num_layers and hidden_size must be positive, got "
                f"{num_layers} and {hidden_size}"
            )
        if isinstance(dropout, bool) or not 0.0 <= dropout <= 1.0:
            raise GraphcError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if proj_size and (name != "LSTM" or not 0 < proj_size < hidden_size):
            raise GraphcError(
                f"{name}: proj_size must be 0, or (LSTM only) between 0 and hidden_size "
                f"({hidden_size}), got {proj_size!r}"
            )
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.bias = num_layers, bias
        self.batch_first, self.bidirectional = batch_first, bidirectional
        self.dropout, self.proj_size = float(dropout), proj_size
        dtype = as_dtype(dtype)
        rng = init.as_generator(generator)
        bound = 1.0 / math.sqrt(hidden_size)
        rows = self.gates * hidden_size
        out = self.output_size  # h's size: the projection's, if any
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            fan_in = input_size if layer == 0 else out * directions
            for suffix in ("", "_reverse")[:directions]:
                shapes = {"weight_ih": (rows, fan_in), "weight_hh": (rows, out)}
                if bias:
                    shapes.update(bias_ih=(rows,), bias_hh=(rows,))
                if proj_size:
                    shapes.update(weight_hr=(proj_size, hidden_size))
                for name, shape in shapes.items():
                    tensor = zeros(*shape, dtype=dtype, requires_grad=True)
                    init.uniform_(tensor, -bound, bound, generator=rng)
                    setattr(self, f"{name}_l{layer}{suffix}", tensor)

    @property
    def output_size(self) -> int:
        """The size of h: proj_size with a projection (LSTM), else hidden_size."""
        return self.proj_size or self.hidden_size

    # -- the cell of each kind -------------------------------------------------------

    def step(self, carry: Any, x: Any, w_hh: Any, b_hh: Any) -> Any:
        raise NotImplementedError

    def initial(self, hx: Any, x: Any) -> list[Any]:
        """Per layer and direction, the initial carry (x: the input, time first)."""
        raise NotImplementedError

    def final(self, carries: list[Any]) -> Any:
        raise NotImplementedError

    # -- running ---------------------------------------------------------------------

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002 - torch's name
        if input.ndim not in (2, 3):
            raise ShapeError(
                f"{type(self).__name__}: input must be (seq, batch, features) (or batch "
                f"first), or unbatched (seq, features); got shape {tuple(input.shape)}"
            )
        time_axis = 1 if self.batch_first and input.ndim == 3 else 0
        if input.shape[time_axis] == 0:  # as torch: an empty sequence has no final state
            raise ShapeError(
                f"{type(self).__name__}: the input has no time steps (shape "
                f"{tuple(input.shape)}); expected a sequence length of at least 1"
            )
        unbatched = input.ndim == 2
        x = input
        if unbatched:
            x = x.reshape((x.shape[0], 1, x.shape[1]))
            hx = None if hx is None else self._batch_state(hx)
        elif self.batch_first:
            x = swapaxes(x, 0, 1)
        if x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: input has {x.shape[-1]} features, expected "
                f"{self.input_size}"
            )
        carries = self.initial(hx, x)
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                final, ys = self._direction(x, carries[k], layer, suffix, reverse=d == 1)
                finals.append(final)
                outputs.append(ys)
            x = outputs[0] if directions == 1 else concat(outputs, axis=-1)
            if layer < self.num_layers - 1:  # torch's dropout between layers, when training
                x = dropout(x, self.dropout, self.training)
        output = x
        if unbatched:
            output = output.reshape((output.shape[0], output.shape[2]))
        elif self.batch_first:
            output = swapaxes(output, 0, 1)
        state = self.final(finals)
        if unbatched:
            state = self._unbatch_state(state)
        return output, state

    def _direction(self, x: Any, carry: Any, layer: int, suffix: str, reverse: bool) -> tuple:
        w_ih = getattr(self, f"weight_ih_l{layer}{suffix}")
        w_hh = getattr(self, f"weight_hh_l{layer}{suffix}")
        projected = x @ w_ih.T  # all steps at once: (seq, batch, gates*hidden)
        b_hh = None
        if self.bias:
            projected = projected + getattr(self, f"bias_ih_l{layer}{suffix}")
            b_hh = getattr(self, f"bias_hh_l{layer}{suffix}")

        w_hr = getattr(self, f"weight_hr_l{layer}{suffix}") if self.proj_size else None

        def body(c: Any, xp: Any) -> tuple[Any, Any]:
            new = self.step(c, xp, w_hh, b_hh)
            if w_hr is not None:  # LSTM's projection of h: h W_hr^T
                new = (new[0] @ w_hr.T, new[1])
            return new, (new[0] if isinstance(new, tuple) else new)

        return scan(body, carry, projected, reverse=reverse)

    def _recurrent(self, h: Any, w_hh: Any, b_hh: Any) -> Any:
        r = h @ w_hh.T
        return r if b_hh is None else r + b_hh

    def _zeros(self, x: Any, size: int) -> Any:
        """Zeros of shape (batch, size) made from x, so that a traced model gets them
        from its input (any batch size) rather than as an extra placeholder."""
        return zeros_like(x[0, :, :1]) + np.zeros(size, x.dtype)

    def _layers_of(self, state: Any, name: str, x: Any, size: int) -> list[Any]:
        count = self.num_layers * (2 if self.bidirectional else 1)
        want = (count, x.shape[1], size)
        if len(state.shape) != 3 or any(
            not isinstance(d, str) and not isinstance(w, str) and d != w
            for d, w in zip(state.shape, want)
        ):
            raise ShapeError(
                f"{type(self).__name__}: {name} must have shape ({count}, batch, {size}) "
                f"for an input of batch {x.shape[1]}, got {tuple(state.shape)}"
            )
        return [state[k] for k in range(count)]

    def _batch_state(self, hx: Any) -> Any:
        if isinstance(hx, tuple):
            return tuple(h.reshape((h.shape[0], 1, h.shape[1])) for h in hx)
        return hx.reshape((hx.shape[0], 1, hx.shape[1]))

    def _unbatch_state(self, state: Any) -> Any:
        if isinstance(state, tuple):
            return tuple(s.reshape((s.shape[0], s.shape[2])) for s in state)
        return state.reshape((state.shape[0], state.shape[2]))

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class _SingleState(_Recurrent):
    def initial(self, hx: Any, x: Any) -> list[Any]:
        if hx is None:
            count = self.num_layers * (2 if self.bidirectional else 1)
            return [self._zeros(x, self.hidden_size) for _ in range(count)]
        return self._layers_of(hx, "hx", x, self.hidden_size)

    def final(self, carries: list[Any]) -> Any:
        return stack(carries, axis=0)


class RNN(_SingleState):
    """h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu (torch.nn.RNN).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> out, h = nn.RNN(3, 4, generator=0)(ge.ones(5, 2, 3))
    >>> out.shape, h.shape
    ((5, 2, 4), (1, 2, 4))
    """

    def __init__(self, *args: Any, nonlinearity: str = "tanh", **kwargs: Any) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise GraphcError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(*args, **kwargs)
        self.nonlinearity = nonlinearity

    def step(self, h: Any, x: Any, w_hh: Any, b_hh: Any) -> Any:
        act = tanh if self.nonlinearity == "tanh" else relu
        return act(x + self._recurrent(h, w_hh, b_hh))


class GRU(_SingleState):
    """torch.nn.GRU: r, z = sigmoid(...), n = tanh(x_n + r * (h W_hn^T + b_hn)),
    h_t = (1 - z) * n + z * h_{t-1}."""

    gates = 3

    def step(self, h: Any, x: Any, w_hh: Any, b_hh: Any) -> Any:
        size = self.hidden_size
        rec = self._recurrent(h, w_hh, b_hh)
        r = sigmoid(x[..., :size] + rec[..., :size])
        z = sigmoid(x[..., size : 2 * size] + rec[..., size : 2 * size])
        n = tanh(x[..., 2 * size :] + r * rec[..., 2 * size :])
        return (1.0 - z) * n + z * h


class LSTM(_Recurrent):
    """torch.nn.LSTM: gates i, f, g, o; c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t).
    The state is the pair (h, c), in and out."""

    gates = 4

    def initial(self, hx: Any, x: Any) -> list[Any]:
        count = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return [
                (self._zeros(x, self.output_size), self._zeros(x, self.hidden_size))
                for _ in range(count)
            ]
        if not isinstance(hx, tuple) or len(hx) != 2:
            raise GraphcError("LSTM: hx must be a pair (h_0, c_0)")
        h = self._layers_of(hx[0], "h_0", x, self.output_size)
        return list(zip(h, self._layers_of(hx[1], "c_0", x, self.hidden_size)))

    def step(self, carry: Any, x: Any, w_hh: Any, b_hh: Any) -> Any:
        h, c = carry
        size = self.hidden_size
        gates = x + self._recurrent(h, w_hh, b_hh)
        i = sigmoid(gates[..., :size])
        f = sigmoid(gates[..., size : 2 * size])
        g = tanh(gates[..., 2 * size : 3 * size])
        o = sigmoid(gates[..., 3 * size :])
        c = f * c + i * g
        return o * tanh(c), c

    def final(self, carries: list[Any]) -> Any:
        return stack([h for h, _ in carries], axis=0), stack([c for _, c in carries], axis=0)


class _Cell(Module):
    """One time step of a recurrent layer: torch's RNNCell, GRUCell and LSTMCell, whose
    parameters are `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh` (no layer suffix)."""

    gates = 1
    nonlinearity = "tanh"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        if input_size < 0 or hidden_size < 1:
            raise GraphcError(
                f"{type(self).__name__}: input_size must be >= 0 and hidden_size positive, "
                f"got {input_size} and {hidden_size}"
            )
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rng = init.as_generator(generator)
        bound = 1.0 / math.sqrt(hidden_size)
        rows = self.gates * hidden_size
        shapes = {"weight_ih": (rows, input_size), "weight_hh": (rows, hidden_size)}
        if bias:
            shapes.update(bias_ih=(rows,), bias_hh=(rows,))
        for name, shape in shapes.items():
            tensor = zeros(*shape, dtype=as_dtype(dtype), requires_grad=True)
            setattr(self, name, init.uniform_(tensor, -bound, bound, generator=rng))
        if not bias:
            self.bias_ih = self.bias_hh = None

    _recurrent = _Recurrent._recurrent

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002 - torch's name
        name = type(self).__name__
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input must be (batch, {self.input_size}) or unbatched "
                f"({self.input_size},), got shape {tuple(input.shape)}"
            )
        unbatched = input.ndim == 1
        x = input.reshape((1, input.shape[0])) if unbatched else input
        states = hx if isinstance(hx, tuple) else (hx,)
        if hx is None:
            states = (zeros_like(x[:, :1]) + np.zeros(self.hidden_size, x.dtype),) * (
                2 if self.gates == 4 else 1
            )
        elif unbatched:
            states = tuple(h.reshape((1, h.shape[0])) for h in states)
        for h in states:
            if tuple(h.shape) != (x.shape[0], self.hidden_size):
                raise ShapeError(
                    f"{name}: hx must have shape ({x.shape[0]}, {self.hidden_size}) for an "
                    f"input of shape {tuple(input.shape)}, got {tuple(h.shape)}"
                )
        projected = x @ self.weight_ih.T
        if self.bias_ih is not None:
            projected = projected + self.bias_ih
        new = self.step(states if self.gates == 4 else states[0], projected, self.weight_hh,
                        self.bias_hh)  # fmt: skip
        if not unbatched:
            return new
        if isinstance(new, tuple):
            return tuple(h.reshape((self.hidden_size,)) for h in new)
        return new.reshape((self.hidden_size,))

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if self.nonlinearity != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(_Cell):
    """One step of nn.RNN: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.RNNCell(3, 4, generator=0)(ge.ones(2, 3)).shape
    (2, 4)
    """

    def __init__(self, *args: Any, nonlinearity: str = "tanh", **kwargs: Any) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise GraphcError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        super().__init__(*args, **kwargs)
        self.nonlinearity = nonlinearity

    step = RNN.step


class GRUCell(_Cell):
    """One step of nn.GRU (gates r, z, n)."""

    gates = 3
    step = GRU.step


class LSTMCell(_Cell):
    """One step of nn.LSTM: (h, c) in and out (gates i, f, g, o)."""

    gates = 4
    step = LSTM.step
