"""unslice on the native backend (graphc/backends/native/unslice.py): one C call making
zeros with the cotangent put in its window, numpy's bits byte for byte (+0.0 zeros, nan
payloads kept) for every dtype and every form of basic index (ints, negative and
stepped slices, None, an ellipsis, empty windows, 0-d), from a caller's array in any
layout, an arena buffer or a transposed view, on one thread or the pool; a slice's
gradient and the transformer training step (the q, k and v gradients put back into the
in-projection) run as one C call; a new batch size builds no C.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.backends.native import copies, toolchain
from graphc.ops.indexing import format_index, parse_index
from tests.backends.test_native_batch_sizes import RTOL
from tests.budget import draws
from tests.edge_values import edge_array
from tests.native_checks import check_native, needs_native, normwise

pytestmark = needs_native

DTYPES = [
    np.float32, np.float64, np.float16, np.bool_,
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
]  # fmt: skip


def same_bytes(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why `got` is not `want` byte for byte (a nan's payload and sign count), or None."""
    if not isinstance(got, np.ndarray):
        return f"got a {type(got).__name__}"
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    item = got.dtype.itemsize
    a = np.ascontiguousarray(got).reshape(-1).view(np.uint8).reshape(got.size, item)
    b = np.ascontiguousarray(want).reshape(-1).view(np.uint8).reshape(want.size, item)
    bad = np.flatnonzero((a != b).any(axis=1))
    if bad.size == 0:
        return None
    at = np.unravel_index(bad[0], got.shape)
    return f"{bad.size} of {got.size} elements differ, first at {at}: {got[at]!r} vs {want[at]!r}"


def tags(exe: gc.Executable, *args: np.ndarray) -> list[str]:
    """The backend tag of each unslice step of `exe`'s plan for `args` (explain's lines)."""
    return re.findall(r"= unslice\(.*\[(native|numpy)\]", exe.explain(*args))


def window_items(index: str) -> tuple:
    """The parsed index, with an ellipsis where it has none (so that numpy gives a view,
    not a scalar, where it picks one element)."""
    return parse_index(index if "..." in index else f"{index},...")


def put(ct: np.ndarray, shape: tuple, index: str) -> np.ndarray:
    """What unslice means, in numpy: zeros of `shape` with `ct` at [index]."""
    out = np.zeros(shape, ct.dtype)
    out[window_items(index)] = ct
    return out


# -- random windows -----------------------------------------------------------------


@st.composite
def indices(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple:
    """A basic index of an array of `shape`: per dim an int (negative ones too), a slice
    with negative or stepped bounds (empty ones too) or the whole dim; some Nones; a run
    of whole dims (maybe none) given as an ellipsis, or trailing ones left out."""
    items: list = []
    for d in shape:
        kinds = ["int", "slice", "all"] if d else ["slice", "all"]
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            items.append(draw(st.integers(-d, d - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-d - 2, d + 2))
            stop = draw(st.none() | st.integers(-d - 2, d + 2))
            items.append(slice(start, stop, draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
        else:
            items.append(slice(None))
    form = draw(st.sampled_from(["plain", "ellipsis", "short"]))
    if form == "ellipsis":
        at = draw(st.integers(0, len(items)))
        end = at
        while end < len(items) and items[end] == slice(None):
            end += 1
        items[at:end] = [Ellipsis]
    elif form == "short":
        while items and items[-1] == slice(None):
            items.pop()
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    return tuple(items)


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    """(shape, index, dtype, how the cotangent comes: a caller's array, a strided one,
    a transposed view, or an arena buffer, and a permutation for the view)."""
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    index = draw(indices(shape))
    dtype = draw(st.sampled_from(DTYPES))
    source = draw(st.sampled_from(["input", "strided", "transposed", "arena"]))
    window_rank = np.zeros(shape)[(*index, Ellipsis) if Ellipsis not in index else index].ndim
    perm = tuple(draw(st.permutations(range(window_rank))))
    return shape, index, dtype, source, perm


def unslice_graph(
    shape: tuple, index: str, window: tuple, dtype: np.dtype, source: str, perm: tuple
) -> gc.Graph:
    """unslice of a cotangent that is a placeholder (`input`, `strided`), a transposed
    view of one (`transposed`: fed with its dims in `perm`'s order) or a copy of one
    reversed (`arena`: a slice's C copy into an arena buffer)."""
    g = gc.Graph("unslice_case")
    with g:
        if source == "transposed":
            fed = tuple(window[p] for p in perm)
            x = gc.placeholder("ct", shape=fed, dtype=dtype.name)
            ct = gc.transpose(x, tuple(int(k) for k in np.argsort(perm)))
        else:
            ct = x = gc.placeholder("ct", shape=window, dtype=dtype.name)
            if source == "arena" and len(window) > 0:
                ct = x[::-1]
        gc.output(gc.unslice(ct, shape=shape, index=index), name="y")
    return g


def feed_for(source: str, ct: np.ndarray, perm: tuple) -> np.ndarray:
    """The array fed for cotangent `ct`: itself, a strided copy of it, its transpose in
    `perm`'s order, or it reversed along its first dim (the graph reverses it back)."""
    if source == "transposed":
        return ct.transpose(perm).copy(order="C")
    if source == "strided":
        wide = np.zeros((*ct.shape[:-1], 2 * ct.shape[-1]) if ct.ndim else (2,), ct.dtype)
        view = wide[..., ::2] if ct.ndim else wide[:1].reshape(())
        view[...] = ct
        return view
    if source == "arena" and ct.ndim:
        return ct[::-1].copy(order="C")
    return ct


@settings(max_examples=draws(400), deadline=None)
@given(cases(), st.integers(0, 2**16))
def test_random_windows_have_numpys_bytes(case: tuple, seed: int) -> None:
    shape, items, dtype, source, perm = case
    dtype = np.dtype(dtype)
    index = format_index(items)
    window = np.zeros(shape)[window_items(index)].shape
    ct = edge_array(np.random.default_rng(seed), window, dtype)
    g = unslice_graph(shape, index, window, dtype, source, perm)
    fed = feed_for(source, ct, perm)
    before = fed.copy()
    want = put(ct, shape, index)
    where = f"unslice to {shape} at [{index}], {dtype}, {source}\n{g}"
    for level in (0, 2):
        exe = gc.compile(g, backend="native", opt_level=level)
        assert tags(exe, fed) == ["native"], f"{where}\n{exe.explain(fed)}"
        assert same_bytes(exe(fed), want) is None, (
            f"O{level}: {same_bytes(exe(fed), want)}\n{where}"
        )
        assert same_bytes(fed, before) is None, "the feed was written"
    numpy_result = gc.compile(g, backend="numpy")(fed)
    assert same_bytes(numpy_result, want) is None, f"numpy backend: {where}"


def test_nan_payloads_and_signed_zeros_are_kept_and_zeros_are_positive() -> None:
    """Signalling and quiet nans with payloads of both signs, -0.0, infinities and
    subnormals land as they are; every element outside the window is +0.0 (bits 0)."""
    for dtype, bits in (
        (np.float32, [0x7F800001, 0xFFC12345, 0x80000000, 0x7FBFFFFF, 0xFF800000, 0x1]),
        (
            np.float64,
            [
                0x7FF0000000000001,
                0xFFF8DEADBEEF0001,
                0x8000000000000000,
                0x7FF7FFFFFFFFFFFF,
                0xFFF0000000000000,
                0x1,
            ],
        ),
    ):
        uint = np.uint32 if dtype == np.float32 else np.uint64
        ct = np.array(bits * 4, uint)[: 4 * len(bits)].view(dtype).reshape(4, len(bits))
        shape = (9, 3 * len(bits))
        for index in ("1:9:2, ::3", "-1:-9:-2, 2::3", "1:5, 3:9"):
            want = put(ct, shape, index)
            g = gc.Graph("payloads")
            with g:
                x = gc.placeholder("ct", shape=ct.shape, dtype=np.dtype(dtype).name)
                gc.output(gc.unslice(x, shape=shape, index=index), name="y")
            exe = gc.compile(g, backend="native")
            assert tags(exe, ct) == ["native"]
            got = exe(ct)
            assert same_bytes(got, want) is None, (dtype, index, same_bytes(got, want))
            outside = np.ones(shape, bool)
            outside[window_items(index)] = False
            assert not got[outside].view(uint).any(), "a zero that is not +0.0"


@pytest.mark.parametrize(
    ("shape", "index", "window"),
    [
        ((), "", ()),  # 0-d into 0-d
        ((), "...", ()),
        ((3, 4), "1,-1", ()),  # one element, by ints
        ((3, 4), "-1", (4,)),
        ((3, 0, 4), ":, :, 1", (3, 0)),  # an empty output
        ((5, 4), "4:1", (0, 4)),  # an empty window of a non-empty output
        ((5, 4), "::-1, None, 1:4:2", (5, 1, 2)),
        ((2, 3, 4), "..., None, ::-3", (2, 3, 1, 2)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_edge_shapes(shape: tuple, index: str, window: tuple, dtype: type) -> None:
    ct = edge_array(np.random.default_rng(1), window, np.dtype(dtype))
    g = gc.Graph("edge")
    with g:
        x = gc.placeholder("ct", shape=window, dtype=np.dtype(dtype).name)
        gc.output(gc.unslice(x, shape=shape, index=index), name="y")
    exe = gc.compile(g, backend="native")
    assert tags(exe, ct) == ["native"], exe.explain(ct)
    got = exe(ct)
    assert same_bytes(got, put(ct, shape, index)) is None
    check_native(g, [{"ct": ct}])


@pytest.mark.parametrize("index", ["100:300", "::-1, 3:200:2", "7, None, :", "1::3, -5"])
def test_a_large_unslice_runs_on_the_pool_with_the_same_bytes(index: str) -> None:
    """From copies.PARALLEL_BYTES of output the threads share the zeroing and the
    elements (a window of one run, a stepped one, one of a single row, a column)."""
    shape = (512, 2048)  # 4 MiB of float32
    assert np.prod(shape) * 4 >= copies.PARALLEL_BYTES
    window = np.zeros(shape, np.uint8)[window_items(index)].shape
    ct = edge_array(np.random.default_rng(4), window, np.dtype(np.float32))
    g = gc.Graph("large")
    with g:
        x = gc.placeholder("ct", shape=window, dtype="float32")
        gc.output(gc.unslice(x, shape=shape, index=index), name="y")
    exe = gc.compile(g, backend="native")
    assert re.search(r"gc_unslice\(.*, 1\)", exe.source(ct)), exe.source(ct)
    assert same_bytes(exe(ct), put(ct, shape, index)) is None


def test_a_window_that_does_not_fit_the_fed_size_is_the_same_error() -> None:
    """unslice's window 0:5 of a symbolic dim fed 3: the ShapeError numpy gives, naming
    the op, never a C call writing past the output."""
    g = gc.Graph("unslice_short")
    with g:
        ct = gc.placeholder("ct", shape=(5,), dtype="float64")
        b = gc.placeholder("b", shape=("B",), dtype="float64")
        gc.output(gc.unslice(ct, shape=("B",), index="0:5") + b, name="y")
    exe = gc.compile(g, backend="native")
    with pytest.raises(gc.ShapeError, match="'unslice'.*B=3"):
        exe(ct=np.ones(5), b=np.zeros(3))
    assert same_bytes(exe(ct=np.ones(5), b=np.zeros(6)), np.array([1.0] * 5 + [0.0])) is None
    assert tags(exe, np.ones(5), np.zeros(6)) == ["native"]
    check_native(g, [{"ct": np.ones(5), "b": np.zeros(3)}, {"ct": np.ones(5), "b": np.zeros(7)}])


# -- whole plans as one C call -------------------------------------------------------


def test_a_slices_gradient_runs_as_one_c_call_with_numpys_bits() -> None:
    """Exact ops only around the unslices (two windows' gradients, seeded): the plan's
    entry is one C call and its results are the numpy backend's bit for bit."""

    def windows(x: Any, w: Any) -> Any:
        return x[:, 1:6:2, ::-1] * w + x[:, -1:-4:-1, 0:5] * 3.0

    graph = gc.trace(windows, gc.TensorSpec(("B", 7, 5)), gc.TensorSpec((3, 5)))
    grads = gc.gradients(graph, wrt=[graph.inputs[0].name], seeds=True)
    rng = np.random.default_rng(2)
    args = [edge_array(rng, shape, np.dtype(np.float32)) for shape in ((4, 7, 5), (3, 5))]
    args.append(edge_array(rng, (4, 3, 5), np.dtype(np.float32)))  # the seed
    exe = gc.compile(grads, backend="native", wait=True)
    numpy = gc.compile(grads, backend="numpy")
    with np.errstate(all="ignore"):
        for _ in range(3):
            exe(*args)
        exe.wait()
        text = exe.explain(*args)
        assert tags(exe, *args) == ["native", "native"], text
        assert "entry: one C call" in text, text
        for got, want in zip(exe(*args), numpy(*args), strict=True):
            assert same_bytes(got, want) is None


def test_the_transformer_training_step_runs_as_one_c_call() -> None:
    """The bench's transformer step (its quick case): six unslices put the q, k and v
    gradients back into the in-projection's weight and bias; with them in C the step is
    one C call, and its loss and parameters after each step are the numpy backend's
    within the bound the training steps' products are held to."""
    from graphc.bench import transformer

    params = dict(transformer.QUICK)
    x, y = transformer.make_inputs(params)["args"]
    native = transformer.train_step(params, x, y, 2, False, "native")
    numpy = transformer.train_step(params, x, y, 2, False, "numpy")
    close = normwise(RTOL)
    for k in range(3):
        losses = [native.step(x, y), numpy.step(x, y)]
        if k == 0:
            assert native.executable.wait()
            text = native.explain(x, y)
            assert "entry: one C call" in text, text
            assert re.findall(r"= unslice\(.*\[(\w+)\]", text) == ["native"] * 6, text
        why = close(np.atleast_1d(losses[0]), np.atleast_1d(losses[1]))
        assert why is None, f"step {k}, loss: {why}"
        got, want = native.parameters(), numpy.parameters()
        for name in want:
            assert close(got[name], want[name]) is None, f"step {k}, {name}"


def test_a_layer_norm_of_fed_weights_runs_as_one_c_call() -> None:
    """A weight and bias of one value per element (a training step's state, fed here)
    take the kernel's row mode without a look at their values per call (norm.py), so
    the plan records into an entry in C, with the bits of its calls from Python."""
    g = gc.Graph("ln_fed")
    with g:
        x = gc.placeholder("x", shape=("B", 48), dtype="float32")
        w = gc.placeholder("w", shape=(48,), dtype="float32")
        b = gc.placeholder("b", shape=(48,), dtype="float32")
        gc.output(gc.layer_norm(x, w, b, axis=1), name="y")
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((6, 48), (48,), (48,))]
    args[1][:4] = 1.0  # values the one-element rule would skip, here one among many
    args[2][:4] = 0.0
    exe = gc.compile(g, backend="native", wait=True)
    from_python = exe(*args)
    for _ in range(3):
        exe(*args)
    exe.wait()
    assert "entry: one C call" in exe.explain(*args), exe.explain(*args)
    assert same_bytes(exe(*args), from_python) is None


# -- sizes are arguments -----------------------------------------------------------


def test_a_symbolic_batch_builds_c_once(empty_cache: None) -> None:
    g = gc.Graph("batch")
    with g:
        x = gc.placeholder("x", shape=("B", 6), dtype="float32")
        gc.output(gc.unslice(x, shape=(3, "B", 10), index="1, :, 2:8"), name="rows")
        gc.output(gc.unslice(x, shape=("B", 6, 2), index=":, ::-1, -1"), name="reversed")
    exe = gc.compile(g, backend="native", wait=True)
    runs = toolchain.compiler_runs()
    rng = np.random.default_rng(3)
    for batch in (2, 3, 5, 17, 64):
        xv = edge_array(rng, (batch, 6), np.dtype(np.float32))
        rows, backwards = exe(xv)
        exe.wait()
        assert tags(exe, xv) == ["native", "native"]
        assert same_bytes(rows, put(xv, (3, batch, 10), "1, :, 2:8")) is None
        assert same_bytes(backwards, put(xv, (batch, 6, 2), ":, ::-1, -1")) is None
        if batch == 2:
            assert toolchain.compiler_runs() > runs, "the first size built nothing"
            runs = toolchain.compiler_runs()
    assert toolchain.compiler_runs() == runs, "a new batch size ran the compiler"
