"""ONNX handlers: RNN, GRU and LSTM, each direction one graphc `scan`.

The input projection of every step is one matmul before the loop (x W^T + Wb for all
T steps at once); the loop carries h (and c) and adds h R^T + Rb per step, as
graphc.nn's recurrent layers do. Gate orders are ONNX's: LSTM i, o, f, c; GRU z, r, h.
LSTM's peepholes (P) are read: the i and f gates see c_{t-1}, the o gate the new c_t.
sequence_lens shorter than the sequence (of known length and batch) mask the steps
past each example's length: its state is kept and its outputs are zeros. Refused by
name: clip, input_forget, activations other than the defaults (LSTM/GRU: Sigmoid,
Tanh, Tanh; RNN: Tanh or Relu).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.types import is_symbol
from graphc.onnx.importer import Context, Value, handler, known, needs_known
from graphc.ops import elementwise as E
from graphc.ops.flow import scan
from graphc.ops.indexing import getitem
from graphc.ops.linalg import matmul
from graphc.ops.selection import where
from graphc.ops.shape import broadcast_to, concat, reshape, transpose

_DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def _gates(v: Value, k: int, hidden: int) -> Value:
    """Gate k of a (..., G*H) value."""
    return getitem(v, (Ellipsis, slice(k * hidden, (k + 1) * hidden)))


def _steps_taken(ctx: Context, op: str, inputs: list[Value], x: Value) -> Any:
    """None when every sequence runs all T steps, else a (T, B, 1) bool table of the
    steps each sequence takes (t < its length), from sequence_lens known at import."""
    lens = inputs[4] if len(inputs) > 4 else None
    if lens is None:
        return None
    if not known(lens):
        raise needs_known(ctx, lens, f"{op}'s sequence_lens")
    lens = np.asarray(lens).reshape(-1)
    steps, batch = x.shape[0], x.shape[1]
    if not is_symbol(steps) and np.all(lens == steps):
        return None
    if is_symbol(steps) or is_symbol(batch) or lens.size != batch or np.any(lens < 0):
        raise ctx.error(
            f"{op}'s sequence_lens {lens.tolist()} shorter than the sequence need the "
            f"sequence's length and batch known (got {steps}, {batch}) and one length "
            "per example"
        )
    ctx.check_size(steps * batch, f"{op}'s table of steps")
    return (np.arange(steps)[:, None] < np.minimum(lens, steps)[None, :])[..., None]


def _check(ctx: Context, op: str, inputs: list[Value], attrs: dict, x: Value) -> None:
    for key in ("clip",) + (("input_forget",) if op == "LSTM" else ()):
        if attrs.get(key):
            raise ctx.error(f"{op} with {key} is not supported")
    acts = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
    if op == "RNN":
        if any(a not in ("Tanh", "Relu") for a in acts) or len(set(acts)) > 1:
            raise ctx.error(f"RNN activations {acts} are not supported (Tanh or Relu)")
    elif acts and acts != _DEFAULTS[op] * (len(acts) // len(_DEFAULTS[op])):
        raise ctx.error(f"{op} activations {acts} are not supported (the defaults)")


def _cell(op: str, attrs: dict, hidden: int, peep: Value = None) -> Any:
    """step(carry, xw_t, R^T, Rb) -> new carry (a tuple), for one direction; `peep` is
    an LSTM's peephole weights (3H: i, o, f) for that direction, or None."""
    acts = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
    squash = E.relu if op == "RNN" and acts and acts[0] == "Relu" else E.tanh

    def rnn(carry: tuple, xw: Value, r: Value, rb: Value) -> tuple:
        return (squash(E.add(E.add(xw, matmul(carry[0], r)), rb)),)

    def lstm(carry: tuple, xw: Value, r: Value, rb: Value) -> tuple:
        h, c = carry
        g = E.add(E.add(xw, matmul(h, r)), rb)
        pre_i, pre_o, pre_f = (_gates(g, k, hidden) for k in range(3))
        if peep is not None:  # i and f see the previous cell, o the new one
            pre_i = E.add(pre_i, E.mul(_gates(peep, 0, hidden), c))
            pre_f = E.add(pre_f, E.mul(_gates(peep, 2, hidden), c))
        i, f = E.sigmoid(pre_i), E.sigmoid(pre_f)
        c_new = E.add(E.mul(f, c), E.mul(i, E.tanh(_gates(g, 3, hidden))))
        if peep is not None:
            pre_o = E.add(pre_o, E.mul(_gates(peep, 1, hidden), c_new))
        return (E.mul(E.sigmoid(pre_o), E.tanh(c_new)), c_new)

    def gru(carry: tuple, xw: Value, r: Value, rb: Value) -> tuple:
        (h,) = carry
        if attrs.get("linear_before_reset", 0):
            rec = E.add(matmul(h, r), rb)
            z = E.sigmoid(E.add(_gates(xw, 0, hidden), _gates(rec, 0, hidden)))
            reset = E.sigmoid(E.add(_gates(xw, 1, hidden), _gates(rec, 1, hidden)))
            n = E.tanh(E.add(_gates(xw, 2, hidden), E.mul(reset, _gates(rec, 2, hidden))))
        else:
            zr = E.add(matmul(h, _gates(r, 0, 2 * hidden)), _gates(rb, 0, 2 * hidden))
            z = E.sigmoid(E.add(_gates(xw, 0, hidden), _gates(zr, 0, hidden)))
            reset = E.sigmoid(E.add(_gates(xw, 1, hidden), _gates(zr, 1, hidden)))
            rh = E.add(matmul(E.mul(reset, h), _gates(r, 2, hidden)), _gates(rb, 2, hidden))
            n = E.tanh(E.add(_gates(xw, 2, hidden), rh))
        return (E.add(E.mul(E.sub(np.ones((), np.dtype(n.dtype)), z), n), E.mul(z, h)),)

    return {"RNN": rnn, "LSTM": lstm, "GRU": gru}[op]


def _recurrent(op: str, states: int) -> Any:
    def run(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, w, r, b = inputs[:4]
        if attrs.get("layout", 0):  # (batch, seq, ...) in and out
            x = transpose(x, (1, 0, 2))
        _check(ctx, op, inputs, attrs, x)
        taken = _steps_taken(ctx, op, inputs, x)
        hidden = int(attrs.get("hidden_size", r.shape[-1]))
        gates = w.shape[1] // hidden
        direction = attrs.get("direction", "forward")
        directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        dtype = np.dtype(x.dtype)
        batch = x.shape[1]
        ys, finals = [], []
        for d, way in enumerate(directions):
            w_d, r_d = getitem(w, d), getitem(r, d)
            if b is None:
                ctx.check_size(gates * hidden, f"{op}'s zero bias")
                wb = rb = np.zeros((gates * hidden,), dtype)
            else:
                wb = _gates(getitem(b, d), 0, gates * hidden)
                rb = _gates(getitem(b, d), 1, gates * hidden)
            carry = []
            for init in inputs[5 : 5 + states]:
                if init is None:  # zeros (B, H), B perhaps symbolic: a node then
                    with ctx.recording():
                        init = broadcast_to(np.zeros((), dtype), (batch, hidden))
                else:
                    init = getitem(init, d)
                carry.append(init)
            xw = E.add(matmul(x, transpose(w_d, (1, 0))), wb)  # every step's projection
            peep = getitem(inputs[7], d) if op == "LSTM" and inputs[7] is not None else None
            cell = _cell(op, attrs, hidden, peep)
            r_t = transpose(r_d, (1, 0))

            def step(c: tuple, xs: tuple, cell: Any = cell, r_t: Any = r_t, rb: Any = rb) -> tuple:
                xw_t, *taken_t = xs
                new = cell(c, xw_t, r_t, rb)
                if not taken_t:
                    return new, new[0]
                # past its length a sequence keeps its state and outputs zeros (and a
                # reversed one starts at its last step)
                kept = tuple(where(taken_t[0], n, o) for n, o in zip(new, c))
                return kept, where(taken_t[0], new[0], np.zeros((), dtype))

            xs = (xw,) if taken is None else (xw, taken)
            final, y = scan(step, tuple(carry), xs, reverse=way == "reverse")
            if taken is not None and not taken.any(axis=0).all():
                # a sequence of no steps ends in zeros (onnxruntime's), not its initial state
                some = taken.any(axis=0)  # (B, 1)
                final = tuple(where(some, v, np.zeros((), dtype)) for v in final)
            ys.append(reshape(y, (y.shape[0], 1, batch, hidden)))
            finals.append([reshape(v, (1, batch, hidden)) for v in final])
        y = ys[0] if len(ys) == 1 else concat(ys, axis=1)  # (T, dirs, B, H)
        outs = [concat([f[k] for f in finals], axis=0) if len(finals) > 1 else finals[0][k]
                for k in range(states)]  # fmt: skip
        if attrs.get("layout", 0):
            y = transpose(y, (2, 0, 1, 3))  # (B, T, dirs, H)
            outs = [transpose(o, (1, 0, 2)) for o in outs]
        return [y, *outs]

    return run


handler("RNN", since=7)(_recurrent("RNN", 1))
handler("GRU", since=7)(_recurrent("GRU", 1))
handler("LSTM", since=7)(_recurrent("LSTM", 2))

__all__: list[str] = []
