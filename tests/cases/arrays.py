"""Op cases: arrays (added to the table of tests/op_cases.py).

Registry ops: flip, tril, triu, pad, unpad, cumsum, arange, take_along_axis,
scatter_add_along_axis, embedding, argsort. Builders (BUILDER_CASES): flatten, split,
chunk, tile, sort, topk, einsum and torch's F.pad. Cases at ties or kinks (sort of equal
values) take no gradient: finite differences there average two one-sided slopes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
from graphc.nn import functional as nnf
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, B, F, I, _case

_builder = {"table": BUILDER_CASES}


def _fixed(value: Any, dtype: str = "int64") -> Arg:
    array = np.asarray(value)
    return Arg(array.shape, dtype, "fixed", value=value)


# -- flip, tril, triu ----------------------------------------------------------------------------

for _label, _axis in [("all", None), ("axes", (0, -1)), ("one", -2)]:
    _case("flip", _label, lambda x, a=_axis: gc.flip(x, a), [F(2, 3, 4)],
          lambda x, a=_axis: np.flip(x, a).copy())  # fmt: skip
_case("flip", "dims", lambda x: gc.flip(x, dims=[1]), [F(2, 3)], lambda x: x[:, ::-1].copy())
_case("flip", "0d", lambda x: gc.flip(x, 0), [F()], lambda x: x.copy())
_case("flip", "int", lambda x: gc.flip(x, 1), [I(3, 4)], lambda x: np.flip(x, 1).copy())
_case("flip", "bool", gc.flip, [B(2, 3)], lambda x: np.flip(x).copy())
_case("flip", "empty", lambda x: gc.flip(x, 0), [F(0, 3)], lambda x: np.flip(x, 0).copy())

for _name, _fn, _ref in [("tril", gc.tril, np.tril), ("triu", gc.triu, np.triu)]:
    for _label, _shape, _k in [
        ("square", (4, 4), 0),
        ("wide_k1", (3, 5), 1),
        ("tall_kneg", (5, 3), -2),
        ("batch", (2, 3, 4), 0),
        ("k_past_end", (3, 4), 10),
        ("k_before_start", (3, 4), -10),
        ("empty", (0, 3), 0),
    ]:
        _case(_name, _label, lambda x, f=_fn, k=_k: f(x, k), [F(*_shape)],
              lambda x, r=_ref, k=_k: r(x, k))  # fmt: skip
    _case(_name, "diagonal", lambda x, f=_fn: f(x, diagonal=-1), [F(3, 3)],
          lambda x, r=_ref: r(x, -1))  # fmt: skip
    _case(_name, "int", _fn, [I(3, 3)], _ref)
    _case(_name, "bool", _fn, [B(3, 4)], _ref)

# -- pad and unpad ---------------------------------------------------------------------------------

_PADS = [
    ("constant", (3, 4), ((1, 2), (0, 3)), "constant"),
    ("reflect", (4, 5), ((2, 3), (1, 1)), "reflect"),
    ("edge", (3, 4), ((2, 3), (0, 5)), "edge"),
    ("wrap", (3, 4), ((1, 3), (2, 0)), "wrap"),
    ("reflect_3d", (2, 3, 4), ((0, 0), (1, 2), (3, 1)), "reflect"),
    ("edge_one", (1, 3), ((2, 1), (1, 1)), "edge"),
]
for _label, _shape, _width, _mode in _PADS:
    _case("pad", _label, lambda x, w=_width, m=_mode: gc.pad(x, w, mode=m), [F(*_shape)],
          lambda x, w=_width, m=_mode: np.pad(x, w, mode=m))  # fmt: skip
_case("pad", "value", lambda x: gc.pad(x, (2, 1), constant_values=-1.5), [F(3)],
      lambda x: np.pad(x, (2, 1), constant_values=-1.5))  # fmt: skip
_case("pad", "value_f32", lambda x: gc.pad(x, 1, constant_values=0.1), [F(2, 2)],
      lambda x: np.pad(x, 1, constant_values=0.1))  # fmt: skip
_case("pad", "int", lambda x: gc.pad(x, ((0, 1), (2, 0)), constant_values=7), [I(2, 3)],
      lambda x: np.pad(x, ((0, 1), (2, 0)), constant_values=7))  # fmt: skip
_case("pad", "int_reflect", lambda x: gc.pad(x, (1, 1), mode="reflect"), [I(2, 3)],
      lambda x: np.pad(x, (1, 1), mode="reflect"))  # fmt: skip
_case("pad", "bool", lambda x: gc.pad(x, 1, constant_values=True), [B(2, 2)],
      lambda x: np.pad(x, 1, constant_values=True))  # fmt: skip
_case("pad", "0d", lambda x: gc.pad(x, 0), [F()], lambda x: x.copy())
_case("pad", "nothing", lambda x: gc.pad(x, 0, mode="reflect"), [F(2, 3)], lambda x: x.copy())
_case("pad", "empty_dim", lambda x: gc.pad(x, ((1, 1), (0, 0)), constant_values=2.0),
      [F(0, 3)], lambda x: np.pad(x, ((1, 1), (0, 0)), constant_values=2.0))  # fmt: skip


def unpad_reference(ct: np.ndarray, width: tuple, mode: str) -> np.ndarray:
    """The transpose of pad's matrix, by brute force: <pad(e_i), ct> for every unit e_i."""
    shape = tuple(m - b - a for m, (b, a) in zip(ct.shape, width))
    grads = []
    for i in range(int(np.prod(shape))):
        unit = np.zeros(int(np.prod(shape)))
        unit[i] = 1.0
        grads.append(np.sum(np.pad(unit.reshape(shape), width, mode=mode) * ct))
    return np.asarray(grads, ct.dtype).reshape(shape)


for _label, _shape, _width, _mode in _PADS:
    _padded = tuple(n + b + a for n, (b, a) in zip(_shape, _width))
    _case("unpad", _label, lambda c, w=_width, m=_mode: gc.unpad(c, w, mode=m), [F(*_padded)],
          lambda c, w=_width, m=_mode: unpad_reference(c, w, m))  # fmt: skip
_case("unpad", "int", lambda c: gc.unpad(c, (1, 1), mode="edge"), [I(3, 5)],
      lambda c: unpad_reference(c, ((1, 1), (1, 1)), "edge").astype(np.int64))  # fmt: skip

# -- cumsum and arange ---------------------------------------------------------------------------

_case("cumsum", "axis0", lambda x: gc.cumsum(x, 0), [F(3, 4)], lambda x: np.cumsum(x, 0))
_case("cumsum", "dim_neg", lambda x: gc.cumsum(x, dim=-1), [F(2, 3, 4)],
      lambda x: np.cumsum(x, -1))  # fmt: skip
_case("cumsum", "flat", gc.cumsum, [F(2, 3)], np.cumsum)
_case("cumsum", "0d", lambda x: gc.cumsum(x, -1), [F()], lambda x: x.copy())
_case("cumsum", "int32", lambda x: gc.cumsum(x, 1), [I(3, 4, dtype="int32")],
      lambda x: np.cumsum(x, 1))  # fmt: skip
_case("cumsum", "bool", lambda x: gc.cumsum(x, 0), [B(6)], lambda x: np.cumsum(x, 0))
_case("cumsum", "empty", lambda x: gc.cumsum(x, 0), [F(0, 3)], lambda x: np.cumsum(x, 0))

for _label, _args, _kwargs, _want in [
    ("stop", (5,), {}, np.arange(5)),
    ("negstep", (5, -3, -2), {}, np.arange(5, -3, -2)),
    ("empty", (3, 1), {}, np.arange(3, 1)),
    ("float", (0.5, 2.0, 0.25), {}, (np.arange(6.0) * 0.25 + 0.5).astype(np.float32)),
    ("float_stop", (0, 2.5), {}, np.arange(3, dtype=np.float32)),
    ("dtype", (1, 4), {"dtype": "float64"}, np.arange(1.0, 4.0)),
    ("int32", (2, 9, 3), {"dtype": "int32"}, np.arange(2, 9, 3, dtype=np.int32)),
    ("tenth", (0, 1, 0.1), {}, (np.arange(10.0) * 0.1).astype(np.float32)),
]:
    _case("arange", _label, lambda a=_args, k=_kwargs: gc.arange(*a, **k), [],
          lambda w=_want: w)  # fmt: skip

# -- take_along_axis, scatter_add_along_axis, embedding -------------------------------------------

_ROWS = _fixed([[0, 3], [1, 1], [2, 0]])
_case("take_along_axis", "axis1", lambda x, i: gc.take_along_axis(x, i, 1), [F(3, 4), _ROWS],
      lambda x, i: np.take_along_axis(x, i, 1))  # fmt: skip
_case("take_along_axis", "axis0_repeats", lambda x, i: gc.take_along_axis(x, i, dim=0),
      [F(4, 2), _fixed([[3, 0], [3, 3], [1, 0]])],
      lambda x, i: np.take_along_axis(x, i, 0))  # fmt: skip
# torch.gather's window: the indices' other dims may be smaller than x's
_case("take_along_axis", "window", lambda x, i: gc.take_along_axis(x, i, -1), [F(4, 5), _ROWS],
      lambda x, i: np.take_along_axis(x[:3], i, -1))  # fmt: skip
_case("take_along_axis", "negative", lambda x, i: gc.take_along_axis(x, i, 1),
      [F(2, 3), _fixed([[-1, -3], [0, -2]])], lambda x, i: np.take_along_axis(x, i, 1))  # fmt: skip
_case("take_along_axis", "flat", lambda x, i: gc.take_along_axis(x, i), [F(2, 3), _fixed([5, 0, 5, 2])],
      lambda x, i: np.take_along_axis(x.ravel(), i, 0))  # fmt: skip
_case("take_along_axis", "0d", lambda x, i: gc.take_along_axis(x, i, 0), [F(), _fixed(0)],
      lambda x, i: x.copy())  # fmt: skip
_case("take_along_axis", "empty", lambda x, i: gc.take_along_axis(x, i, 1),
      [F(2, 3), Arg((2, 0), "int64", "fixed", value=np.zeros((2, 0)))],
      lambda x, i: np.take_along_axis(x, i, 1))  # fmt: skip
_case("take_along_axis", "int", lambda x, i: gc.take_along_axis(x, i, 1),
      [I(3, 4), I(3, 6, low=0, high=4, dtype="int32")], lambda x, i: np.take_along_axis(x, i, 1))  # fmt: skip


def scatter_reference(ct: np.ndarray, i: np.ndarray, shape: tuple, axis: int) -> np.ndarray:
    out = np.zeros(shape, ct.dtype)
    for position in np.ndindex(*i.shape):
        target = list(position)
        target[axis] = i[position]
        out[tuple(target)] += ct[position]
    return out


_case("scatter_add_along_axis", "axis1",
      lambda c, i: gc.scatter_add_along_axis(c, i, (3, 4), 1), [F(3, 2), _ROWS],
      lambda c, i: scatter_reference(c, i, (3, 4), 1))  # fmt: skip
_case("scatter_add_along_axis", "window_repeats",
      lambda c, i: gc.scatter_add_along_axis(c, i, (5, 2), dim=0),
      [F(3, 2), _fixed([[4, 0], [4, 4], [-1, 0]])],
      lambda c, i: scatter_reference(c, i, (5, 2), 0))  # fmt: skip
_case("scatter_add_along_axis", "0d", lambda c, i: gc.scatter_add_along_axis(c, i, (), 0),
      [F(), _fixed(0)], lambda c, i: c.copy())  # fmt: skip
_case("scatter_add_along_axis", "int",
      lambda c, i: gc.scatter_add_along_axis(c, i, (3, 5), 1), [I(3, 2), _ROWS],
      lambda c, i: scatter_reference(c, i, (3, 5), 1))  # fmt: skip

_IDS = _fixed([[1, 0, 4], [1, 1, 2]])
_case("embedding", "basic", gc.embedding, [_IDS, F(5, 3)], lambda i, w: w[i])
# the padding row is read but never learns: its zero gradient is no derivative, so these
# cases check values only (tests/ops/test_arrays.py checks the gradient against torch)
_case("embedding", "padding", lambda i, w: gc.embedding(i, w, padding_idx=1), [_IDS, F(5, 3)],
      lambda i, w: w[i], grad=(False, False))  # fmt: skip
_case("embedding", "padding_neg", lambda i, w: gc.embedding(i, w, padding_idx=-1),
      [_IDS, F(5, 3)], lambda i, w: w[i], grad=(False, False))  # fmt: skip
_case("embedding", "0d", gc.embedding, [_fixed(2), F(4, 2)], lambda i, w: w[i].copy())
_case("embedding", "no_ids", gc.embedding, [Arg((0,), "int64", "fixed", value=[]), F(4, 2)],
      lambda i, w: w[i])  # fmt: skip
_case("embedding", "int32_ids", gc.embedding, [I(2, 2, low=0, high=3, dtype="int32"), F(3, 4)],
      lambda i, w: w[i])  # fmt: skip
_case("embedding", "int_weight", gc.embedding, [I(4, low=0, high=3), I(3, 2)], lambda i, w: w[i])

# -- argsort ---------------------------------------------------------------------------------------


def stable_order(x: np.ndarray, axis: int = -1, descending: bool = False) -> np.ndarray:
    """torch.sort(stable=True)'s indices by Python's sorted: NaN largest, ties in order."""
    moved = np.moveaxis(np.asarray(x), axis, -1)
    out = np.zeros(moved.shape, np.int64)
    for position in np.ndindex(*moved.shape[:-1]):
        row = moved[position]

        def key(i: int, row: np.ndarray = row) -> tuple:
            value = row[i].item()  # a Python number: negating it cannot wrap
            nan = bool(value != value)
            return (not nan, -value) if descending else (nan, value)

        out[position] = sorted(range(len(row)), key=key)
    return np.moveaxis(out, -1, axis)


_TIES = Arg((2, 5), FLOAT, "fixed", value=[[1.0, 3.0, 3.0, 1.0, 2.0], [0.0, -0.0, 0.0, 5.0, 0.0]])
_NANS = Arg((6,), FLOAT, "fixed", value=[1.0, np.nan, -np.inf, np.nan, np.inf, 1.0])
for _descending in (False, True):
    _d = {"descending": _descending}
    _tag = "desc" if _descending else "asc"
    _case("argsort", f"last_{_tag}", lambda x, d=_d: gc.argsort(x, **d), [F(3, 5)],
          lambda x, d=_d: stable_order(x, **d), grad=(False,))  # fmt: skip
    _case("argsort", f"axis0_{_tag}", lambda x, d=_d: gc.argsort(x, 0, **d), [F(4, 3)],
          lambda x, d=_d: stable_order(x, 0, **d), grad=(False,))  # fmt: skip
    _case("argsort", f"ties_{_tag}", lambda x, d=_d: gc.argsort(x, dim=1, **d), [_TIES],
          lambda x, d=_d: stable_order(x, 1, **d))  # fmt: skip
    _case("argsort", f"nan_{_tag}", lambda x, d=_d: gc.argsort(x, **d), [_NANS],
          lambda x, d=_d: stable_order(x, **d))  # fmt: skip
    _case("argsort", f"int_{_tag}", lambda x, d=_d: gc.argsort(x, **d),
          [I(3, 6, low=0, high=3)], lambda x, d=_d: stable_order(x, **d))  # fmt: skip
    _case("argsort", f"bool_{_tag}", lambda x, d=_d: gc.argsort(x, **d), [B(8)],
          lambda x, d=_d: stable_order(x, **d))  # fmt: skip
    _case("argsort", f"int_limits_{_tag}", lambda x, d=_d: gc.argsort(x, **d),
          [_fixed([-(2**63), 5, 2**63 - 1, -(2**63)])], lambda x, d=_d: stable_order(x, **d))  # fmt: skip
_case("argsort", "0d", lambda x: gc.argsort(x, 0), [F()], lambda x: np.zeros((), np.int64),
      grad=(False,))  # fmt: skip
_case("argsort", "empty_axis", lambda x: gc.argsort(x, 1), [F(3, 0)],
      lambda x: np.zeros((3, 0), np.int64), grad=(False,))  # fmt: skip
_case("argsort", "empty_rows", lambda x: gc.argsort(x, 1, descending=True), [F(0, 4)],
      lambda x: np.zeros((0, 4), np.int64), grad=(False,))  # fmt: skip

# -- builders ---------------------------------------------------------------------------------------

for _label, _shape, _start, _end in [
    ("all", (2, 3, 4), 0, -1),
    ("inner", (2, 3, 4, 5), 1, 2),
    ("neg", (2, 3, 4), -2, -1),
    ("one_dim", (2, 3), 1, 1),
]:
    _case("flatten", _label, lambda x, s=_start, e=_end: gc.flatten(x, s, e), [F(*_shape)],
          lambda x, s=_start, e=_end: x.reshape(x.shape[:s] + (-1,) + x.shape[e % x.ndim + 1 :]),
          **_builder)  # fmt: skip
_case("flatten", "0d", gc.flatten, [F()], lambda x: x.reshape(1), **_builder)


def _weighted(pieces: Any, axis: int) -> Any:
    """The pieces joined again, piece k scaled by k + 1 (so gradients show each route)."""
    return gc.concat([p * (k + 1) for k, p in enumerate(pieces)], axis=axis)


def _weighted_ref(pieces: Any, axis: int) -> np.ndarray:
    return np.concatenate([p * (k + 1) for k, p in enumerate(pieces)], axis=axis)


for _label, _shape, _sections, _axis, _bounds in [
    ("size", (5, 2), 2, 0, [2, 4]),
    ("exact", (2, 6), 3, 1, [3]),
    ("sizes", (2, 5), [1, 0, 4], -1, [1, 1]),
    ("bigger", (3, 2), 5, 0, []),
]:
    _case("split", _label, lambda x, s=_sections, a=_axis: _weighted(gc.split(x, s, a), a),
          [F(*_shape)], lambda x, b=_bounds, a=_axis: _weighted_ref(np.split(x, b, a), a),
          **_builder)  # fmt: skip
for _label, _shape, _chunks, _bounds in [("even", (6, 2), 3, [2, 4]), ("short", (6,), 4, [2, 4])]:
    _case("chunk", _label, lambda x, c=_chunks: _weighted(gc.chunk(x, c), 0), [F(*_shape)],
          lambda x, b=_bounds: _weighted_ref(np.split(x, b), 0), **_builder)  # fmt: skip

for _label, _shape, _reps in [
    ("2d", (2, 3), (2, 1)),
    ("longer_reps", (3,), (2, 1, 2)),
    ("shorter_reps", (2, 1, 3), (4,)),
    ("int", (2, 2), 3),
    ("zero", (2, 3), (0, 2)),
]:
    _case("tile", _label, lambda x, r=_reps: gc.tile(x, r), [F(*_shape)],
          lambda x, r=_reps: np.tile(x, r), **_builder)  # fmt: skip


def _sort_values(x: np.ndarray, axis: int = -1, descending: bool = False) -> np.ndarray:
    return np.take_along_axis(x, stable_order(x, axis, descending), axis)


def _sorted_both(result: Any) -> Any:
    """sort's values, plus its indices (cast) times zero: one output that needs both."""
    values, indices = result
    return values + gc.cast(indices, values.dtype) * 0.0


_case("sort", "values", lambda x: gc.sort(x).values, [F(3, 5)], _sort_values, **_builder)
_case("sort", "desc_axis0", lambda x: gc.sort(x, 0, descending=True)[0], [F(4, 3)],
      lambda x: _sort_values(x, 0, True), **_builder)  # fmt: skip
_case("sort", "ties", lambda x: _sorted_both(gc.sort(x, dim=1, stable=True)), [_TIES],
      lambda x: _sort_values(x, 1), grad=(False,), **_builder)  # fmt: skip
for _label, _k, _axis, _largest in [
    ("largest", 2, -1, True),
    ("smallest", 3, -1, False),
    ("axis0", 1, 0, True),
    ("all", 5, -1, True),
    ("none", 0, -1, True),
]:
    _case("topk", _label, lambda x, k=_k, a=_axis, big=_largest: gc.topk(x, k, a, big).values,
          [F(4, 5)],
          lambda x, k=_k, a=_axis, big=_largest: np.take(_sort_values(x, a, big), range(k), a),
          **_builder)  # fmt: skip
_case("topk", "ties", lambda x: _sorted_both(gc.topk(x, 3)), [_TIES],
      lambda x: _sort_values(x, -1, True)[:, :3], grad=(False,), **_builder)  # fmt: skip

for _label, _equation, _shapes in [
    ("attention_scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("attention_values", "bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("matmul", "ij,jk->ik", [(3, 4), (4, 2)]),
    ("implicit", "ij,jk", [(3, 4), (4, 2)]),
    ("batched", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bilinear", "bi,oij,bj->bo", [(4, 3), (2, 3, 5), (4, 5)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("dot", "i,i->", [(5,)] * 2),
    ("hadamard", "ij,ij->ij", [(2, 3)] * 2),
    ("transpose", "ijk->kij", [(2, 3, 4)]),
    ("sum_axis", "ij->j", [(3, 4)]),
    ("sum_first", "ij,jk->k", [(3, 4), (4, 2)]),
    ("merged_groups", "abc,cbd->ad", [(2, 3, 4), (4, 3, 5)]),
    ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("broadcast_one", "bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),
    ("permuted_out", "bhqd,bhkd->bkhq", [(2, 3, 4, 5), (2, 3, 6, 5)]),
]:
    _case("einsum", _label, lambda *xs, e=_equation: gc.einsum(e, *xs), [F(*s) for s in _shapes],
          lambda *xs, e=_equation: np.einsum(e, *xs), rtol=1e-5, atol=1e-5, **_builder)  # fmt: skip

for _label, _pads, _mode in [
    ("last", (1, 2), "constant"),
    ("last_two_reflect", (1, 1, 2, 0), "reflect"),
    ("replicate", (0, 3, 1, 1), "replicate"),
    ("circular", (2, 1), "circular"),
    ("crop", (-1, 2, 1, -1), "constant"),
]:
    _case("F.pad", _label, lambda x, p=_pads, m=_mode: nnf.pad(x, p, mode=m), [F(2, 3, 4)],
          lambda x, p=_pads, m=_mode: _torch_pad(x, p, m), **_builder)  # fmt: skip


def _torch_pad(x: np.ndarray, pads: tuple, mode: str) -> np.ndarray:
    """F.pad's meaning in numpy: pairs from the last dim backwards; negatives crop."""
    width = [(0, 0)] * x.ndim
    for i in range(len(pads) // 2):
        width[x.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    grown = [(max(b, 0), max(a, 0)) for b, a in width]
    modes = {"replicate": "edge", "circular": "wrap"}
    padded = np.pad(x, grown, mode=modes.get(mode, mode))
    window = tuple(slice(max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(padded.shape, width))
    return padded[window].copy()
