"""The native backend's row kernels (graphc/backends/native/rows.py): sum, mean and sum_to
give numpy's bits on every length and layout numpy sums in one of its two orders;
softmax and log_softmax stay as close to numpy's as their native lowerings declare
(`native_bound`); everything else stays on numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import rows
from graphc.backends.native.rows import PAIRWISE_MAX, WHOLE_ROWS, runs, two_runs
from graphc.runtime.backend import get_backend
from tests.edge_values import bits_differ
from tests.native_checks import needs_native, random_bits, runs_native, ulp_distance

pytestmark = needs_native

DTYPES = ("float32", "float64")


def _both(g: gc.Graph, *feeds: np.ndarray) -> tuple[list, list, gc.Executable]:
    """Outputs on numpy and on native (as lists), and the native executable."""
    want = gc.compile(g, backend="numpy")(*feeds)
    exe = gc.compile(g, backend="native")
    got = exe(*feeds)
    as_list = lambda r: list(r) if isinstance(r, tuple) else [r]  # noqa: E731
    return as_list(want), as_list(got), exe


def _values(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Magnitudes over 12 decades with both signs, and some -0.0, subnormals and specials."""
    n = int(np.prod(shape))
    x = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)
    x = x.astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    picks = rng.integers(0, max(n, 1), size=min(n, 6))
    x[picks[:2]] = -0.0
    x[picks[2:4]] = tiny * 3
    return x.reshape(shape)


def _reductions(shape: tuple, dtype: str, specs: list[tuple[str, dict]]) -> gc.Graph:
    g = gc.Graph("rows")
    with g:
        x = gc.placeholder("x", shape=shape, dtype=dtype)
        for k, (op, attrs) in enumerate(specs):
            gc.output(getattr(gc, op)(x, **attrs), name=f"r{k}")
    return g


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_sums_give_numpy_bits_on_every_length(dtype: str) -> None:
    """Pairwise summation: every branch (under 8, up to 128 with the rest, the recursive
    halves) at each length to 600 and at a few long ones, as sum and mean over the last
    axis and over all axes."""
    rng = np.random.default_rng(0)
    lengths = [*range(1, 600), 1023, 1024, 1025, 4099, 10_000]
    for n in lengths:
        g = _reductions(
            (3, n),
            dtype,
            [("sum", {"axis": 1}), ("mean", {"axis": -1}), ("sum", {}), ("mean", {})],
        )
        x = _values((3, n), dtype, rng)
        want, got, _ = _both(g, x)
        for k, (a, b) in enumerate(zip(want, got)):
            assert not bits_differ(a, b), f"n={n}, output r{k}: {a!r} vs {b!r}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "axis"),
    [
        ((300, 257), 0),  # leading axis: row after row
        ((7, 40, 33), 1),  # a middle axis
        ((7, 40, 33), (0, 1)),  # a leading run of two axes
        ((5, 1, 9, 17), (0, 2)),  # a run once the axis of length 1 is set aside
        ((2, 3, 4, 5), (1, 2, 3)),  # a trailing run: pairwise over 60
        ((33, 1), 0),  # a trailing 1: numpy sums pairwise, not row by row
        ((1, 1, 70), (0, 1)),  # only axes of length 1: no run to sum over
        ((6, 1, 5), (0, 2)),  # one run once the axis of length 1 is set aside
        ((4, 5, 6), (0, 2)),  # two runs around a kept axis (numpy 2.3 on: native)
        ((8, 16, 10, 10), (0, 2, 3)),  # a conv's bias gradient
        ((3, 4, 5, 6), (1, 3)),  # a kept axis first: numpy's
    ],
)
def test_sums_over_axes_give_numpy_bits(dtype: str, shape: tuple, axis: object) -> None:
    rng = np.random.default_rng(1)
    specs = [
        ("sum", {"axis": axis}),
        ("mean", {"axis": axis}),
        ("sum", {"axis": axis, "keepdims": True}),
    ]
    g = _reductions(shape, dtype, specs)
    for _ in range(3):
        x = _values(shape, dtype, rng)
        want, got, exe = _both(g, x)
        for k, (a, b) in enumerate(zip(want, got)):
            assert not bits_differ(a, b), f"{shape} axis={axis} r{k}"
    axes = (axis,) if isinstance(axis, int) else axis
    around = two_runs(shape, axes) is not None and WHOLE_ROWS
    expected_native = 3 if runs(shape, axes) is not None or around else 0
    assert runs_native(exe, x) == expected_native


@pytest.mark.parametrize("dtype", DTYPES)
def test_sums_keep_nan_inf_and_negative_zero(dtype: str) -> None:
    """Specials where they change a sum: nan anywhere, inf of both signs (nan), -0.0
    rows (+0.0, as numpy's identity gives), overflow to inf."""
    big = np.finfo(dtype).max
    rows = [
        [1.0, np.nan, 2.0],
        [np.inf, 1.0, 1.0],
        [np.inf, -np.inf, 0.0],
        [-0.0, -0.0, -0.0],
        [big, big, -big],
        [-big, -big, 1.0],
    ]
    x = np.array(rows, dtype=dtype)
    g = _reductions(x.shape, dtype, [("sum", {"axis": 1}), ("sum", {"axis": 0}), ("mean", {})])
    with np.errstate(all="ignore"):
        want, got, _ = _both(g, x)
    for a, b in zip(want, got):
        assert not bits_differ(a, b), (a, b)
    assert np.signbit(got[0][3]) == np.signbit(want[0][3]) == False  # noqa: E712


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_to_and_the_bias_gradient_give_numpy_bits(dtype: str) -> None:
    """sum_to, as the gradient of a broadcast bias writes it (leading axes, kept 1s)."""
    rng = np.random.default_rng(2)
    g = gc.Graph("sum_to")
    with g:
        x = gc.placeholder("x", shape=("B", 6, 40), dtype=dtype)
        gc.output(gc.sum_to(x, shape=(40,)), name="bias")
        gc.output(gc.sum_to(x, shape=(6, 1)), name="channel")
        gc.output(gc.sum_to(x, shape=(1, 40)), name="kept")
    for batch in (1, 3, 64):
        want, got, exe = _both(g, _values((batch, 6, 40), dtype, rng))
        for a, b in zip(want, got):
            assert not bits_differ(a, b)
    # (6, 1) sums axes 0 and 2, two runs around the kept one: native from numpy 2.3
    assert runs_native(exe, _values((64, 6, 40), dtype, rng)) == 2 + WHOLE_ROWS


@pytest.mark.skipif(not WHOLE_ROWS, reason="numpy before 2.3 sums these itself")
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_runs_around_kept_axes_give_numpy_bits(dtype: str) -> None:
    """A leading and a trailing run reduced around kept axes (an (a, k, b) view): the
    row kernel's sums of the a k rows, then the run kernel's over them, numpy's bits on
    random shapes (rows up to 3000, runs of one to three axes) with -0.0, subnormals,
    nan and inf; sum, mean and keepdims; a batch of one (a single run) alike."""
    rng = np.random.default_rng(4)
    for trial in range(40):
        rank = int(rng.integers(3, 6))
        shape = tuple(int(d) for d in rng.integers(2, 7, rank))
        if trial % 4 == 0:
            shape = (*shape[:-1], int(rng.integers(100, 3000)))
        first = int(rng.integers(1, rank - 1))
        last = int(rng.integers(first + 1, rank))
        axes = (*range(first), *range(last, rank))
        assert two_runs(shape, axes) is not None
        specs = [
            ("sum", {"axis": axes}),
            ("mean", {"axis": axes}),
            ("sum", {"axis": axes, "keepdims": True}),
        ]
        g = _reductions(shape, dtype, specs)
        x = _values(shape, dtype, rng)
        if trial % 5 == 1:
            x.reshape(-1)[::7] = -0.0
        if trial % 5 == 2:
            x.reshape(-1)[3] = np.inf
            x.reshape(-1)[-2] = np.nan
        with np.errstate(all="ignore"):
            want, got, exe = _both(g, x)
            for k, (a, b) in enumerate(zip(want, got)):
                assert not bits_differ(a, b), f"{shape} axes={axes} r{k}"
            assert runs_native(exe, x) == 3, exe.explain(x)
            one = (1, *shape[1:])  # a batch of one: one run, or two
            want, got, _ = _both(_reductions(one, dtype, specs), _values(one, dtype, rng))
            for k, (a, b) in enumerate(zip(want, got)):
                assert not bits_differ(a, b), f"batch of one, {shape} axes={axes} r{k}"


def test_two_runs_before_numpy_2_3_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's pieces run across the rows there: the reduction stays numpy's."""
    monkeypatch.setattr(rows, "WHOLE_ROWS", False)
    g = _reductions((4, 3, 5), "float32", [("sum", {"axis": (0, 2)})])
    x = _values((4, 3, 5), "float32", np.random.default_rng(5))
    want, got, exe = _both(g, x)
    assert not bits_differ(want[0], got[0])
    assert runs_native(exe, x) == 0


def test_integer_sums_and_transposed_inputs_stay_on_numpy() -> None:
    g = gc.Graph("declined")
    with g:
        i = gc.placeholder("i", shape=(4, 5), dtype="int32")
        x = gc.placeholder("x", shape=(4, 5), dtype="float32")
        gc.output(gc.sum(i, axis=1), name="ints")
        gc.output(gc.sum(gc.transpose(x * 2.0), axis=1), name="transposed")
    ints = np.arange(20, dtype=np.int32).reshape(4, 5)
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    want, got, exe = _both(g, ints, x)
    for a, b in zip(want, got):
        assert not bits_differ(a, b)
    assert runs_native(exe, ints, x) == 0


@pytest.mark.parametrize("op", ["sum", "softmax"])
def test_a_callers_strided_array_goes_to_numpy(op: str) -> None:
    """numpy sums a caller's Fortran-ordered array in its memory order: the kernel, which
    reads rows, must not run on it (the generated code checks the layout per call), so
    even softmax gives numpy's bits here."""
    g = gc.Graph("strided")
    with g:
        x = gc.placeholder("x", shape=(64, 300), dtype="float32")
        gc.output(getattr(gc, op)(x, axis=1), name="y")
    x = np.asfortranarray(_values((64, 300), "float32", np.random.default_rng(4)))
    exe = gc.compile(g, backend="native")
    got = exe(x)
    want = gc.compile(g, backend="numpy")(x)
    assert not bits_differ(want, got)
    assert runs_native(exe, x) == 1  # lowered, with numpy's kernel for this layout


def _softmax_graph(shape: tuple, dtype: str) -> gc.Graph:
    g = gc.Graph("softmax")
    with g:
        x = gc.placeholder("x", shape=shape, dtype=dtype)
        gc.output(gc.softmax(x, axis=-1), name="probabilities")
        gc.output(gc.log_softmax(x, axis=-1), name="log_probabilities")
    return g


def native_bound(op: str) -> int:
    """The bound `op`'s native lowering declares (softmax in ulp of the result,
    log_softmax in eps (1 + |result|): native/__init__.py)."""
    bound = get_backend("native").inexact_lowerings[op].bound
    assert bound is not None, f"{op}'s native lowering states no bound"
    return bound


def _check_bounds(x: np.ndarray, want: list, got: list) -> None:
    dtype = x.dtype
    eps = float(np.finfo(dtype).eps)
    for op, a, b in zip(("softmax", "log_softmax"), want, got):
        assert np.array_equal(np.isnan(a), np.isnan(b)), op
        finite = np.isfinite(a)
        assert np.array_equal(a[~finite & ~np.isnan(a)], b[~finite & ~np.isnan(a)]), op
        if op == "softmax":
            far = ulp_distance(a[finite], b[finite]) > native_bound(op)
        else:
            with np.errstate(all="ignore"):
                diff = np.abs(a[finite].astype(np.float64) - b[finite])
            far = diff > native_bound(op) * eps * (1 + np.abs(a[finite].astype(np.float64)))
        assert not far.any(), (
            f"{op} {dtype}: {int(far.sum())} elements beyond the bound, e.g. "
            f"{a[finite][far][:4]!r} vs {b[finite][far][:4]!r}"
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 10), (16, 129), (5, 3000), (300, 600)])
def test_softmax_and_log_softmax_within_their_bounds(dtype: str, shape: tuple) -> None:
    """Logits over many scales (the sum then mixes magnitudes), one large row in the
    parallel case (300 x 600 is above its threshold)."""
    rng = np.random.default_rng(5)
    g = _softmax_graph(shape, dtype)
    for scale in (1e-3, 1.0, 30.0, 1e4):
        x = (rng.standard_normal(shape) * scale).astype(dtype)
        want, got, exe = _both(g, x)
        _check_bounds(x, want, got)
    assert runs_native(exe, x) == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_rows_with_specials_match_numpy(dtype: str) -> None:
    """nan and +inf poison their row, -inf gives 0 (and -inf for log_softmax), a row of
    -inf is nan, equal maxima of both zero signs, random bit patterns."""
    rows = [
        [1.0, np.nan, 2.0, 0.0],
        [np.inf, 1.0, 2.0, 0.0],
        [-np.inf, 1.0, 2.0, 0.0],
        [-np.inf, -np.inf, -np.inf, -np.inf],
        [-0.0, 0.0, -0.0, -1.0],
        [0.0, -0.0, -5.0, -1e30],
    ]
    x = np.array(rows, dtype=dtype)
    rng = np.random.default_rng(6)
    noise = random_bits(dtype, 4 * 50, rng).reshape(50, 4)
    for feed in (x, noise):
        with np.errstate(all="ignore"):
            want, got, _ = _both(_softmax_graph(feed.shape, dtype), feed)
        _check_bounds(feed, want, got)


def test_softmax_not_over_the_last_axis_stays_on_numpy() -> None:
    g = gc.Graph("axis0")
    with g:
        x = gc.placeholder("x", shape=(6, 5), dtype="float32")
        gc.output(gc.softmax(x, axis=0), name="y")
    x = np.random.default_rng(7).standard_normal((6, 5)).astype(np.float32)
    want, got, exe = _both(g, x)
    assert not bits_differ(want[0], got[0])
    assert runs_native(exe, x) == 0


def test_the_cross_entropy_head_runs_native_and_trains_alike() -> None:
    """The MLP's loss head (log_softmax, the one-hot product's sum, the bias sums of the
    backward pass) lowered to row kernels: gradients within tolerance of numpy's."""
    rng = np.random.default_rng(8)
    g = gc.Graph("head")
    with g:
        z = gc.placeholder("z", shape=("B", 10), dtype="float32")
        y = gc.placeholder("y", shape=("B",), dtype="int64")
        b = gc.placeholder("b", shape=(10,), dtype="float32")
        gc.output(gc.cross_entropy(z + b, y), name="loss")
    g = gc.gradients(g, ["b"])
    feeds = (
        rng.standard_normal((512, 10)).astype(np.float32),
        rng.integers(0, 10, 512),
        rng.standard_normal(10).astype(np.float32),
    )
    want, got, exe = _both(g, *feeds)
    for a, c in zip(want, got):
        np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-7)
    assert runs_native(exe, *feeds) >= 3


def test_rows_longer_than_numpys_buffer_sum_as_the_numpy_at_hand() -> None:
    """Guards the piece argument: numpy before 2.3 sums a row longer than its buffer
    (8192) in pieces, added in turn (the oldest numpy in CI's matrix caught a
    12,297-element sum 2 ulp off a whole pairwise sum), so the kernel sums any length as
    the numpy at hand does; a softmax's row stays on numpy past PAIRWISE_MAX."""
    cases = ((PAIRWISE_MAX, 2), (PAIRWISE_MAX + 1, 1), (3 * PAIRWISE_MAX + 5, 1), (100_003, 1))
    for n, native_steps in cases:
        g = _reductions((n,), "float32", [("sum", {}), ("softmax", {"axis": -1})])
        x = _values((n,), "float32", np.random.default_rng(9))
        want, got, exe = _both(g, x)
        assert not bits_differ(want[0], got[0])
        assert runs_native(exe, x) == native_steps, exe.explain(x)
