"""The array ops of issue 15 (flatten, split, chunk, tile, pad, flip, tril/triu, cumsum,
arange, take_along_axis, embedding, einsum, sort, topk, argsort) against PyTorch, in
every mode (arrays, eager, the reference interpreter, compiled O0 and O2), with
gradients; on symbolic dims; bit for bit across levels; and their errors.

The per-op registry tests (kernels, type rules, VJPs, round trips, differential) run
from the cases in tests/cases/arrays.py.
"""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.nn import functional as nnf
from tests.conftest import needs_torch, torch
from tests.differential import check_levels
from tests.ops.test_op_edges import assert_modes_agree, every_mode

MODULES = [
    "graphc.ops.arrays",
    "graphc.ops.along_axis",
    "graphc.ops.sorting",
    "graphc.ops.sequences",
    "graphc.ops.padding",
    "graphc.ops.einsum",
    "graphc.ops.methods",
    "graphc.nn.functional.arrays",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _weighted(pieces: Any, cat: Callable, axis: int) -> Any:
    return (
        cat([p * (k + 1) for k, p in enumerate(pieces)], axis=axis)
        if cat is gc.concat
        else cat([p * (k + 1) for k, p in enumerate(pieces)], axis)
    )


IDX = np.array([[0, 3, 3], [2, 1, 0]])
IDS = np.array([[1, 2, 0], [2, 2, 4]])

# name: (graphc build, torch build, inputs, indices of the inputs to differentiate)
TORCH_CASES: dict[str, tuple[Callable, Callable, list[np.ndarray], list[int]]] = {
    "flatten": (lambda x: gc.flatten(x, 1, 2), lambda t: torch.flatten(t, 1, 2),
                [_rand(2, 3, 4, 2)], [0]),
    "split": (lambda x: _weighted(gc.split(x, [1, 3, 1], 1), gc.concat, 1),
              lambda t: _weighted(torch.split(t, [1, 3, 1], 1), torch.cat, 1), [_rand(2, 5)], [0]),
    "split_size": (lambda x: _weighted(gc.split(x, 2), gc.concat, 0),
                   lambda t: _weighted(torch.split(t, 2), torch.cat, 0), [_rand(5, 2)], [0]),
    "chunk": (lambda x: _weighted(gc.chunk(x, 4, dim=1), gc.concat, 1),
              lambda t: _weighted(torch.chunk(t, 4, 1), torch.cat, 1), [_rand(2, 6)], [0]),
    "tile": (lambda x: gc.tile(x, (2, 1, 3)), lambda t: torch.tile(t, (2, 1, 3)), [_rand(3, 2)], [0]),
    "flip": (lambda x: gc.flip(x, dims=(0, 2)), lambda t: torch.flip(t, (0, 2)), [_rand(2, 3, 4)], [0]),
    "tril": (lambda x: gc.tril(x, diagonal=1), lambda t: torch.tril(t, 1), [_rand(2, 3, 5)], [0]),
    "triu": (lambda x: gc.triu(x, diagonal=-1), lambda t: torch.triu(t, -1), [_rand(4, 3)], [0]),
    "cumsum": (lambda x: gc.cumsum(x, dim=1), lambda t: torch.cumsum(t, 1), [_rand(3, 4)], [0]),
    "gather": (lambda x, i: gc.take_along_axis(x, i, 1), lambda t, i: torch.gather(t, 1, i),
               [_rand(2, 4), IDX], [0]),
    "gather_window": (lambda x, i: gc.take_along_axis(x, i, dim=1),
                      lambda t, i: torch.gather(t, 1, i), [_rand(3, 5), IDX], [0]),
    "gather_dim0": (lambda x, i: gc.take_along_axis(x, i, 0), lambda t, i: torch.gather(t, 0, i),
                    [_rand(4, 3), IDX], [0]),
    "take_along_dim": (lambda x, i: gc.take_along_dim(x, i), lambda t, i: torch.take_along_dim(t, i),
                       [_rand(2, 3), IDX], [0]),
    "embedding": (lambda i, w: nnf.embedding(i, w), lambda i, w: torch.nn.functional.embedding(i, w),
                  [IDS, _rand(5, 3)], [1]),
    "embedding_padding": (lambda i, w: nnf.embedding(i, w, padding_idx=2),
                          lambda i, w: torch.nn.functional.embedding(i, w, padding_idx=2),
                          [IDS, _rand(5, 3)], [1]),
    "sort": (lambda x: gc.sort(x, dim=0, stable=True).values,
             lambda t: torch.sort(t, dim=0, stable=True).values, [_rand(4, 3)], [0]),
    "sort_desc": (lambda x: gc.sort(x, descending=True)[0],
                  lambda t: torch.sort(t, descending=True, stable=True)[0], [_rand(3, 5)], [0]),
    "topk": (lambda x: gc.topk(x, 2).values, lambda t: torch.topk(t, 2).values, [_rand(3, 5)], [0]),
    "topk_smallest": (lambda x: gc.topk(x, 3, 0, largest=False).values,
                      lambda t: torch.topk(t, 3, 0, largest=False).values, [_rand(4, 2)], [0]),
    "argsort": (lambda x: gc.argsort(x, dim=0, descending=True),
                lambda t: torch.argsort(t, dim=0, descending=True, stable=True), [_rand(4, 3)], []),
}  # fmt: skip

for _mode, _pads in [("reflect", (1, 2, 2, 1)), ("replicate", (2, 0, 1, 3)),
                     ("circular", (1, 2, 2, 0)), ("constant", (1, 1, 0, 2))]:  # fmt: skip
    TORCH_CASES[f"pad_{_mode}"] = (
        lambda x, p=_pads, m=_mode: nnf.pad(x, p, mode=m),
        lambda t, p=_pads, m=_mode: torch.nn.functional.pad(t, p, mode=m),
        [_rand(2, 3, 4, 5)],
        [0],
    )
TORCH_CASES["pad_value_crop"] = (
    lambda x: nnf.pad(x, (-1, 2, 1, -2), value=1.5),
    lambda t: torch.nn.functional.pad(t, (-1, 2, 1, -2), value=1.5),
    [_rand(3, 4)],
    [0],
)
for _label, _equation, _shapes in [
    ("scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("values", "bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("matmul", "ij,jk->ik", [(3, 4), (4, 2)]),
    ("batched", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bilinear", "bn,anm,bm->ba", [(4, 3), (2, 3, 5), (4, 5)]),
    ("ellipsis", "...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("outer_sum", "i,j->", [(3,), (4,)]),
]:
    TORCH_CASES[f"einsum_{_label}"] = (
        lambda *xs, e=_equation: gc.einsum(e, *xs),
        lambda *ts, e=_equation: torch.einsum(e, *ts),
        [_rand(*s, seed=k) for k, s in enumerate(_shapes)],
        list(range(len(_shapes))),
    )


@needs_torch
@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_values_and_gradients_agree_with_torch_in_every_mode(name: str) -> None:
    build, torch_build, xs, wrt = TORCH_CASES[name]
    ts = [torch.tensor(x, requires_grad=i in wrt) for i, x in enumerate(xs)]
    y = torch_build(*ts)
    if wrt:
        y.sum().backward()
    want = [y.detach().numpy()] + [ts[i].grad.numpy() for i in wrt]
    assert_modes_agree(every_mode(build, xs, wrt), want, rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_topk_of_ties_nan_and_signed_zeros_are_torchs_stable_order(
    descending: bool,
) -> None:
    x = np.array([[2.0, np.nan, -0.0, 1.0, 0.0, 2.0, np.nan, -np.inf, 1.0, 0.0]] * 2)
    x[1] = x[1][::-1]
    values, indices = torch.sort(torch.tensor(x), dim=1, descending=descending, stable=True)
    for mode in ("arrays", "eager"):
        arg = ge.tensor(x) if mode == "eager" else x
        got = gc.sort(arg, 1, descending=descending)
        np.testing.assert_array_equal(np.asarray(got.values), values.numpy())
        np.testing.assert_array_equal(np.asarray(got.indices), indices.numpy())
        top = gc.topk(arg, 6, largest=descending)
        np.testing.assert_array_equal(np.asarray(top.indices), indices.numpy()[:, :6])
    assert gc.argsort(x, 1, descending).dtype == np.int64


@needs_torch
def test_tensor_methods_spell_torch() -> None:
    x = _rand(3, 4)
    g, t = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    i = np.array([[0, 1], [3, 3], [2, 0]])
    pairs = [
        (g.gather(1, ge.tensor(i)), t.gather(1, torch.tensor(i))),
        (g.take_along_dim(ge.tensor(i), 1), t.take_along_dim(torch.tensor(i), 1)),
        (g.flip(0, 1), t.flip(0, 1)),
        (g.flip([1]), t.flip([1])),
        (g.tril(-1), t.tril(-1)),
        (g.triu(diagonal=1), t.triu(diagonal=1)),
        (g.cumsum(0), t.cumsum(0)),
        (g.tile(2, 1), t.tile(2, 1)),
        (g.repeat(1, 2, 1), t.repeat(1, 2, 1)),
        (g.flatten(), t.flatten()),
        (g.sort(1)[0], t.sort(1)[0]),
        (g.topk(2, dim=0, largest=False).values, t.topk(2, dim=0, largest=False).values),
        (g.split(3, 1)[1], t.split(3, 1)[1]),
        (g.chunk(2)[0], t.chunk(2)[0]),
    ]
    for k, (a, b) in enumerate(pairs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), err_msg=str(k))
        (a * (k + 1)).sum().backward()
        (b * (k + 1)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy())
    assert g.argsort(1, descending=True).tolist() == t.argsort(1, descending=True).tolist()
    assert g.cumsum(1, dtype=ge.float64).dtype == ge.float64
    assert ge.tensor([True, True]).cumsum(0).dtype == ge.int64
    labels = ge.tensor([[0, 3], [1, 1]])
    torch_hot = torch.nn.functional.one_hot(torch.tensor([[0, 3], [1, 1]]))
    assert nnf.one_hot(labels).tolist() == torch_hot.tolist()
    assert nnf.one_hot(labels).dtype == ge.int64


@needs_torch
@pytest.mark.parametrize(
    "args, kwargs",
    [((5,), {}), ((2, 9, 3), {}), ((5, -3, -2), {}), ((0.5, 2.0, 0.25), {}), ((0, 1, 0.1), {}),
     ((-1.0, 1.0, 0.3), {}), ((1, 4), {"dtype": "float64"}), ((0, 2.5), {}),
     ((0, 7, 2), {"dtype": "int32"})],
)  # fmt: skip
def test_arange_agrees_with_torch_bit_for_bit_as_an_op_and_compiled(
    args: tuple, kwargs: dict
) -> None:
    dtypes = {"float64": torch.float64, "int32": torch.int32}
    torch_kwargs = {"dtype": dtypes[kwargs["dtype"]]} if kwargs else {}
    want = torch.arange(*args, **torch_kwargs).numpy()
    got = gc.arange(*args, **kwargs)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    g = gc.Graph("arange")
    with g:
        gc.output(gc.arange(*args, **kwargs), name="out")
    assert "arange(" in str(g)
    for level in (0, 2):
        assert gc.compile(g, opt_level=level)().tobytes() == want.tobytes()


# -- symbolic dims, compiled at every level ------------------------------------------------


def _graph(build: Callable, specs: list[tuple[tuple, str]]) -> gc.Graph:
    g = gc.Graph("symbolic")
    with g:
        xs = [gc.placeholder(f"x{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
        gc.output(build(*xs), name="y")
    return g


SYMBOLIC: dict[str, tuple[Callable, list[tuple[tuple, str]], Callable]] = {
    "flip": (lambda x: gc.flip(x, (0, 1)), [(("B", 3), "float64")], lambda x: np.flip(x, (0, 1))),
    "tril": (lambda x: gc.tril(x, 1), [(("B", "T", "T"), "float64")], lambda x: np.tril(x, 1)),
    "cumsum": (lambda x: gc.cumsum(x, 0), [(("T", 2), "float64")], lambda x: np.cumsum(x, 0)),
    "flatten": (lambda x: gc.flatten(x, 1), [(("B", 3, 2), "float64")],
                lambda x: x.reshape(len(x), -1)),
    "tile": (lambda x: gc.tile(x, (1, 2)), [(("B", 3), "float64")], lambda x: np.tile(x, (1, 2))),
    "pad": (lambda x: gc.pad(x, ((0, 0), (1, 2)), mode="reflect"), [(("B", 4), "float64")],
            lambda x: np.pad(x, ((0, 0), (1, 2)), mode="reflect")),
    "argsort": (lambda x: gc.argsort(x, descending=True), [((2, "T"), "float64")],
                lambda x: np.argsort(-x, axis=-1, kind="stable")),
    "sort": (lambda x: gc.sort(x, 0).values, [(("T", 3), "float64")], lambda x: np.sort(x, 0)),
    "topk": (lambda x: gc.topk(x, 2).values, [(("B", "T"), "float64")],
             lambda x: -np.sort(-x, -1)[:, :2]),
    "take_along_axis": (lambda x, i: gc.take_along_axis(x, i, 1),
                        [(("B", 5), "float64"), (("B", 2), "int64")],
                        lambda x, i: np.take_along_axis(x, i, 1)),
    "embedding": (lambda i, w: gc.embedding(i, w, padding_idx=0),
                  [(("B", "T"), "int64"), ((5, 3), "float64")], lambda i, w: w[i]),
    "einsum": (lambda q, k: gc.einsum("bhqd,bhkd->bhqk", q, k),
               [(("B", 2, "T", 4), "float64"), (("B", 2, "T", 4), "float64")],
               lambda q, k: np.einsum("bhqd,bhkd->bhqk", q, k)),
    "einsum_fallback": (lambda x, y: gc.einsum("bij,bjk->bik", x, y),
                        [(("B", 2, 3), "float64"), (("B", 3, 4), "float64")],
                        lambda x, y: np.einsum("bij,bjk->bik", x, y)),
    "positions": (lambda x: x + gc.cast(gc.arange(x.shape[1]), x.dtype),
                  [((2, "T"), "float64")], lambda x: x + np.arange(x.shape[1])),
}  # fmt: skip


def _feeds(g: gc.Graph, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in g.inputs:
        shape = tuple(sizes.get(d, d) for d in p.type.shape)
        if p.type.dtype == np.int64:
            feeds[p.name] = rng.integers(0, 2, shape)  # valid ids and indices everywhere here
        else:
            feeds[p.name] = rng.standard_normal(shape)
    return feeds


@pytest.mark.parametrize("name", list(SYMBOLIC))
def test_symbolic_dims_compile_and_agree_bit_for_bit_at_every_level(name: str) -> None:
    build, specs, reference = SYMBOLIC[name]
    g = _graph(build, specs)
    assert any(isinstance(d, str) for d in g.outputs[0].type.shape) or name == "einsum"
    feed_sets = [_feeds(g, {"B": b, "T": t}, seed) for seed, (b, t) in enumerate([(3, 4), (1, 6)])]
    check_levels(g, feed_sets)
    exe = gc.compile(g, opt_level=2)
    for feeds in feed_sets:
        np.testing.assert_allclose(exe(**feeds), reference(*feeds.values()), rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in SYMBOLIC if n not in ("argsort", "positions")])
def test_symbolic_gradients_agree_with_eager(name: str) -> None:
    build, specs, _ = SYMBOLIC[name]
    g = _graph(lambda *xs: gc.sum(build(*xs) * 1.5), specs)
    floats = [p.name for p in g.inputs if p.type.dtype == np.float64]
    gg = gc.gradients(g, wrt=floats)
    feeds = _feeds(g, {"B": 2, "T": 3}, seed=5)
    results = gc.compile(gg, opt_level=2)(**feeds)
    tensors = {k: ge.tensor(v, requires_grad=k in floats) for k, v in feeds.items()}
    (build(*tensors.values()) * 1.5).sum().backward()
    for name_, grad in zip(floats, results[1:]):
        np.testing.assert_allclose(grad, tensors[name_].grad.numpy(), rtol=1e-12)


def test_arange_of_a_symbolic_dim_round_trips_and_binds_per_call() -> None:
    g = _graph(lambda x: gc.arange(x.shape[0]) * 2, [(("T",), "int64")])
    text = str(g)
    assert 'arange(start=0, step=1, length="T", dtype=i64)' in text
    assert str(gc.parse(text)) == text
    exe = gc.compile(g, opt_level=2)
    assert exe(x0=np.zeros(3, np.int64)).tolist() == [0, 2, 4]
    assert exe(x0=np.zeros(1, np.int64)).tolist() == [0]


# -- errors name the op, and say why --------------------------------------------------------

ERRORS: list[tuple[Callable, type, str]] = [
    (lambda: gc.split(np.zeros((5, 2)), [2, 2]), gc.ShapeError, "split: section sizes"),
    (lambda: gc.split(np.zeros(4), 0), gc.ShapeError, "split: split_size 0"),
    (lambda: gc.chunk(np.zeros(4), 0), gc.ShapeError, "chunk: chunks must be at least 1"),
    (lambda: gc.flatten(np.zeros((2, 3)), 1, 0), gc.ShapeError, "flatten: start_dim"),
    (lambda: gc.tile(np.zeros(2), (-1,)), gc.ShapeError, "tile: a repeat count"),
    (lambda: gc.tril(np.zeros(3)), gc.ShapeError, "tril: needs at least 2 dims"),
    (lambda: gc.flip(np.zeros((2, 2)), 2), IndexError, "flip: axis 2 is out of range"),
    (lambda: gc.pad(np.zeros(3), 3, mode="reflect"), gc.ShapeError, "reflect padding"),
    (lambda: gc.pad(np.zeros(3), 4, mode="wrap"), gc.ShapeError, "wrap padding"),
    (lambda: gc.pad(np.zeros(0), 1, mode="edge"), gc.ShapeError, "edge padding"),
    (lambda: gc.pad(np.zeros(3), 1, mode="symmetric"), gc.GraphcError, "pad: mode must be"),
    (lambda: gc.pad(np.zeros(3), -1), gc.ShapeError, "pad: a pad must be at least 0"),
    (lambda: gc.pad(np.zeros(3, np.int64), 1, constant_values=0.5), gc.DTypeError, "whole"),
    (lambda: nnf.pad(np.zeros(3), (1, 1), mode="reflect", value=1.0), gc.GraphcError, "value"),
    (lambda: nnf.pad(np.zeros(3), (1, 1, 1, 1)), gc.GraphcError, "at most the 1 dims"),
    (lambda: gc.topk(np.zeros((2, 3)), 4), IndexError, "topk: k=4 is out of range"),
    (lambda: gc.topk(np.zeros(()), 0), IndexError, "topk: k=0 is out of range"),
    (lambda: gc.take_along_axis(np.zeros((2, 3)), np.array([[3]]), 1), IndexError, "index 3"),
    (lambda: gc.take_along_axis(np.zeros((2, 3)), np.array([0]), 1), gc.ShapeError, "rank"),
    (lambda: gc.take_along_axis(np.zeros((2, 3)), np.zeros((3, 1), np.int64), 1),
     gc.ShapeError, "do not fit"),
    (lambda: gc.take_along_axis(np.zeros((2, 3)), np.zeros((2, 1)), 1), gc.DTypeError, "integers"),
    (lambda: gc.embedding(np.array([5]), np.zeros((5, 2))), IndexError, "index 5 is out of range"),
    (lambda: gc.embedding(np.array([-1]), np.zeros((5, 2))), IndexError, "index -1"),
    (lambda: gc.embedding(np.array([0]), np.zeros(5)), gc.ShapeError, "embedding: the weight"),
    (lambda: gc.embedding(np.array([0]), np.zeros((5, 2)), padding_idx=5), IndexError, "padding"),
    (lambda: gc.einsum("ii->i", np.zeros((2, 2))), gc.GraphcError, "diagonals"),
    (lambda: gc.einsum("ij,jk->ik", np.zeros((2, 3)), np.zeros((4, 2))), gc.ShapeError, "sizes"),
    (lambda: gc.einsum("ij->k", np.zeros((2, 3))), gc.GraphcError, "output"),
    (lambda: gc.einsum("ij", np.zeros(2)), gc.ShapeError, "rank 1"),
    (lambda: gc.arange(0, 5, 0), gc.GraphcError, "step must not be zero"),
    (lambda: gc.arange(0.5, 3, dtype="int64"), gc.DTypeError, "whole"),
    (lambda: gc.cumsum(np.zeros((2, 3)), 2), IndexError, "cumsum: axis 2"),
    (lambda: gc.argsort(np.zeros(()), 1), IndexError, "argsort: axis 1"),
]  # fmt: skip


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_mistakes_raise_graphc_errors_that_say_what_is_wrong(k: int) -> None:
    fn, kind, message = ERRORS[k]
    with pytest.raises(kind, match=message) as info:
        fn()
    assert isinstance(info.value, gc.GraphcError)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda x: gc.split(x, 2), "split: cannot split the symbolic dim 'B'"),
        (lambda x: gc.tile(x, (2, 1)), "tile: cannot repeat the symbolic dim 'B' 2 times"),
        (lambda x: gc.pad(x, 1), "pad: cannot pad the symbolic dim 'B'"),
        (lambda x: gc.flatten(x), "flatten: cannot merge dims"),
        (lambda x: gc.arange(1, x.shape[0]), "arange: a symbolic stop 'B' needs start 0"),
    ],
)
def test_what_a_symbolic_dim_cannot_do_is_refused_when_the_graph_is_built(
    build: Callable, message: str
) -> None:
    with pytest.raises(gc.ShapeError, match=message):
        _graph(build, [(("B", 3), "float32")])


def test_topk_past_a_symbolic_size_fails_when_the_graph_runs() -> None:
    g = _graph(lambda x: gc.topk(x, 3).values, [(("T",), "float64")])
    assert gc.compile(g)(x0=np.arange(4.0)).tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(gc.ShapeError):
        gc.compile(g)(x0=np.arange(2.0))
