"""The native backend's float32 product by a matrix (graphc/backends/native/matmul.py).

Its claim is exact: every output is a chain of fused multiply-adds over k in order from
+0.0, then the bias and the relu. So it is checked bit for bit against that chain
computed with exact rationals and rounded once per step, over shapes that reach every
tile case (12, 8, 4, 2 and 1 rows; partial panels; K of 0), with nan, inf, -0.0,
subnormals and sums that overflow; and against numpy within the componentwise bound of
a sum of K products. The right operand may be a constant (packed once, at setup) or any
matrix (a placeholder, state, an activation: read in place or packed by the call, in
every layout: rows in order, transposed, strided): the same chain either way. The same
bits at every level (a weight that is a constant, its transpose, a product computed
from constants at O0 and folded at O2, an LSTM-like scan body), on one thread or two,
for every batch size; strided left operands read in place; a caller's arrays
untouched. Other dtypes and a vector on the right stay numpy's, the reason in
explain(); stacks on the right are tests/backends/test_native_stacked_matmul.py's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import matmul
from graphc.ir.graph import Graph
from graphc.ops.linalg import contract_rows
from tests.edge_values import bits_differ
from tests.native_checks import (
    assert_numpys_kernel_runs,
    assert_within_sum_bound,
    check_native,
    needs_native,
    normwise,
)

pytestmark = needs_native

F32 = np.float32
MAX = Fraction(float(np.finfo(F32).max))
OVERFLOW = MAX + Fraction(2) ** (127 - 24)  # max + half an ulp: rounds to inf (max is odd)


def _has_fma() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " fma " in f.read()
    except OSError:
        return False


def round_f32(value: Fraction, zero_sign: float) -> F32:
    """`value` rounded once to float32 (nearest, ties to even); an exact zero gets
    `zero_sign`'s sign, a value that rounds to zero keeps its own."""
    if value == 0:
        return F32(zero_sign) * F32(0.0) if zero_sign < 0 else F32(0.0)
    if abs(value) >= OVERFLOW:
        return F32(np.inf) if value > 0 else F32(-np.inf)
    guess = F32(float(value)) if abs(value) <= MAX else F32(np.copysign(float(MAX), value))
    candidates = [np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))]
    candidates = [c for c in candidates if np.isfinite(c)]

    def key(c: F32) -> tuple[Fraction, int]:
        return abs(Fraction(float(c)) - value), int(c.view(np.uint32)) & 1

    best = min(candidates, key=key)
    if best == 0:  # underflow: the sign of the value
        return F32(-0.0) if value < 0 else F32(0.0)
    return best


def fma(a: F32, b: F32, c: F32) -> F32:
    """a * b + c rounded once, as the hardware's fused multiply-add."""
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        with np.errstate(all="ignore"):  # inf and nan need no rounding
            return F32(np.float64(a) * np.float64(b) + np.float64(c))
    product = Fraction(float(a)) * Fraction(float(b))
    # an exact zero sum is -0.0 only when both addends are -0.0
    negative_zero = product == 0 and np.signbit(a) != np.signbit(b) and c == 0 and np.signbit(c)
    return round_f32(product + Fraction(float(c)), -1.0 if negative_zero else 1.0)


def chain(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, relu: bool) -> np.ndarray:
    """What the kernel claims: out[i, j] = fma(a[i, k], b[k, j], .) over k from +0.0,
    then + bias[j], then numpy's maximum(., 0)."""
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n), F32)
    for i in range(m):
        for j in range(n):
            acc = F32(0.0)
            for t in range(k):
                acc = fma(a[i, t], b[t, j], acc)
            out[i, j] = acc
    with np.errstate(all="ignore"):
        if bias is not None:
            out = out + bias
        if relu:
            out = np.maximum(out, F32(0.0))
    return out


def hostile(rng: np.random.Generator, shape: tuple, share: float = 0.08) -> np.ndarray:
    """float32 values from 1e-30 to 1e30 with zeros of both signs, subnormals, values
    near the overflow, inf and nan sprinkled in (`share` of them each kind)."""
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-30, 30, shape)).astype(F32)
    specials = np.array(
        [0.0, -0.0, 1e-45, -3e-42, 1e-39, 3e38, -3e38, np.inf, -np.inf, np.nan], F32
    )
    pick = rng.random(shape) < share * len(specials)
    x[pick] = rng.choice(specials, int(pick.sum()))
    return x


def product_graph(
    w: np.ndarray,
    x_shape: tuple,
    bias: np.ndarray | None = None,
    relu: bool = False,
    transposed: bool = False,
) -> Graph:
    """y = x @ W (+ bias, relu), W a constant (the transpose of one when `transposed`)."""
    g = Graph("product")
    with g:
        x = gc.placeholder("x", x_shape, "float32")
        weight = gc.transpose(gc.constant(w)) if transposed else gc.constant(w)
        y = gc.matmul(x, weight)
        if bias is not None:
            y = y + gc.constant(bias)
        gc.output(gc.relu(y) if relu else y, name="y")
    return g


# rows that reach every tile case (12, 8, 4, 2, 1 rows with 16 lanes; 6, 4, 2, 1 with
# 8), columns that fill panels or leave a part (one vector, two, a partial one), K of 0;
# one row by groups of four whole panels and a rest (mm_row4), K of 1 (mm_outer: rows
# of whole vectors and a tail, one row)
SHAPES = [
    (1, 5, 1),
    (13, 7, 17),
    (30, 3, 33),
    (11, 0, 9),
    (7, 12, 69),
    (25, 1, 32),
    (20, 6, 40),
    (1, 9, 140),
    (9, 1, 37),
    (1, 1, 70),
]


@pytest.mark.skipif(not _has_fma(), reason="the claim is of fused multiply-adds")
@pytest.mark.parametrize("epilogue", ["none", "bias", "bias_relu", "matrix", "matrix_relu"])
@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
def test_every_output_is_the_fma_chain_bit_for_bit(m: int, k: int, n: int, epilogue: str) -> None:
    """The chain, then a bias per column or a matrix of the output's shape (a gradient's
    accumulator: matmul.bias_rows) added on the tiles, then the relu."""
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    x, w = hostile(rng, (m, k)), hostile(rng, (k, n))
    shape = (m, n) if epilogue.startswith("matrix") else (n,)
    bias = hostile(rng, shape) if epilogue != "none" else None
    relu = epilogue.endswith("relu")
    want = chain(x, w, bias, relu)
    for level in (0, 2):
        exe = gc.compile(product_graph(w, (m, k), bias, relu), opt_level=level, backend="native")
        with np.errstate(all="ignore"):
            got = exe(x)
        assert bits_differ(got, want) is None, f"O{level}: {bits_differ(got, want)}"
        assert matmul.PRODUCT.name in exe.source(x)


@pytest.mark.skipif(not _has_fma(), reason="the claim is of fused multiply-adds")
def test_the_chain_holds_on_the_pool_and_through_strided_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tiles on two threads (every product made parallel), a left operand that is a
    transposed view of the caller's array, the weight a transposed constant."""
    monkeypatch.setattr(matmul, "PARALLEL_WORK", 0)
    rng = np.random.default_rng(5)
    x3 = hostile(rng, (6, 5, 9))  # (batch, time, k), read time first
    w = hostile(rng, (40, 9))  # (n, k): y = x @ w.T
    g = Graph("strided")
    with g:
        x = gc.placeholder("x", (6, 5, 9), "float32")
        gc.output(gc.matmul(gc.transpose(x, (1, 0, 2)), gc.transpose(gc.constant(w))), name="y")
    exe = gc.compile(g, backend="native")
    with np.errstate(all="ignore"):
        got = exe(x3)
    rows = np.transpose(x3, (1, 0, 2)).reshape(30, 9)
    want = chain(rows, np.ascontiguousarray(w.T), None, False).reshape(5, 6, 40)
    assert bits_differ(got, want) is None, bits_differ(got, want)
    assert ", 1)" in next(s for s in exe.source(x3).splitlines() if "gc_matmul_f32(" in s)


def _fed_weight(rng: np.random.Generator, k: int, n: int, layout: str) -> np.ndarray:
    """A (k, n) float32 matrix in `layout`: C order, the transpose of a C-ordered (n, k)
    array, or a view two rows and three columns apart."""
    if layout == "rows":
        return hostile(rng, (k, n))
    if layout == "transposed":
        return hostile(rng, (n, k)).T
    return hostile(rng, (2 * k, 3 * n))[::2, ::3]


@pytest.mark.skipif(not _has_fma(), reason="the claim is of fused multiply-adds")
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("layout", ["rows", "transposed", "strided", "graph_transpose"])
@pytest.mark.parametrize(
    ("m", "k", "n"), [(13, 19, 40), (98, 9, 33), (520, 9, 33), (7, 17, 8), (1, 19, 140)]
)
def test_a_fed_weight_gives_the_same_chain_in_every_layout(
    m: int, k: int, n: int, layout: str, parallel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A right operand that is no constant: read in place (whole panels of C-ordered rows,
    up to MM_IN_PLACE rows of output) or packed by the call (more rows, a partial panel,
    a transposed matrix by 8 x 8 blocks and its tail, any strides element by element),
    on one thread or on the pool; every output the chain, and the caller's arrays left
    as they were."""
    if parallel:
        monkeypatch.setattr(matmul, "PARALLEL_WORK", 0)
    rng = np.random.default_rng(m * 100 + k + n)
    x = hostile(rng, (m, k))
    g = Graph("fed")
    with g:
        xp = gc.placeholder("x", (m, k), "float32")
        if layout == "graph_transpose":  # the plan's own transposed view of an input
            w = _fed_weight(rng, n, k, "rows")
            wp = gc.transpose(gc.placeholder("w", (n, k), "float32"))
            dense = np.ascontiguousarray(w.T)
        else:
            w = _fed_weight(rng, k, n, layout)
            wp = gc.placeholder("w", (k, n), "float32")
            dense = np.ascontiguousarray(w)
        gc.output(gc.matmul(xp, wp), name="y")
    kept = [x.copy(), (w.base if w.base is not None else w).copy()]
    want = chain(x, dense, None, False)
    for level in (0, 2):
        exe = gc.compile(g, opt_level=level, backend="native")
        with np.errstate(all="ignore"):
            got = exe(x, w)
        assert bits_differ(got, want) is None, f"O{level}: {bits_differ(got, want)}"
        assert matmul.PRODUCT.name in exe.source(x, w)
    assert bits_differ(x, kept[0]) is None
    assert bits_differ(w.base if w.base is not None else w, kept[1]) is None


@pytest.mark.skipif(not _has_fma(), reason="the claim is of fused multiply-adds")
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("layout", ["transposed", "batch_transposed"])
@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(13, 19, 40), (16, 4, 50), (98, 9, 70), (121, 17, 33), (2, 5, 65), (7, 3, 34), (98, 260, 9)],
)
def test_a_left_operand_read_across_its_rows_is_packed_and_gives_the_chain(
    m: int, k: int, n: int, layout: str, parallel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A left operand that is the plan's transpose moving its last axis (a weight
    gradient's G^T; a batch of matrices seen transposed) is packed by the call, tile by
    tile (mm_pack_rows: whole tiles, the 8, 4, 2 and 1 rows after them; on the pool,
    parts of k by chunks of rows: 260 values of k are three parts); every output is still the chain, and the caller's array is left as it
    was. It is packed from PACK_ROWS_FROM elements (set to 0 here, after a first compile
    that reads it in place at these sizes, as by default)."""
    if parallel:
        monkeypatch.setattr(matmul, "PARALLEL_WORK", 0)
    rng = np.random.default_rng(m * 100 + k + n)
    # along a long k, hostile values would make every output inf or nan: plain ones there
    values = hostile if k < 32 else (lambda rng, shape: rng.standard_normal(shape).astype(F32))
    w = values(rng, (k, n))
    g = Graph("packed_rows")
    with g:
        if layout == "transposed":  # x fed as (k, m), used as its transpose
            given = values(rng, (k, m))
            rows = np.ascontiguousarray(given.T)
            left = gc.transpose(gc.placeholder("x", (k, m), "float32"))
        else:  # x fed as (2, k, m), used as (2, m, k): rows of two matrices
            given = values(rng, (2, k, m))
            rows = np.ascontiguousarray(np.transpose(given, (0, 2, 1))).reshape(2 * m, k)
            left = gc.transpose(gc.placeholder("x", (2, k, m), "float32"), (0, 2, 1))
        gc.output(gc.matmul(left, gc.placeholder("w", (k, n), "float32")), name="y")
    kept = given.copy()
    want = chain(rows, w, None, False).reshape(-1, n)
    for packed in (False, True):
        if packed:
            monkeypatch.setattr(matmul, "PACK_ROWS_FROM", 0)
        exe = gc.compile(g, backend="native")
        with np.errstate(all="ignore"):
            got = exe(given, w)
        assert bits_differ(got.reshape(want.shape), want) is None, bits_differ(got, want)
        call = next(s for s in exe.source(given, w).splitlines() if "gc_matmul_f32(" in s)
        apack = call.split(",")[6].strip()  # null (cffi) or None (ctypes): not packed
        assert (apack not in ("null", "None")) is packed, call
    assert bits_differ(given, kept) is None


def _bound(got: np.ndarray, x: np.ndarray, w: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        want = np.matmul(x, w)
        magnitude = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64))
    assert_within_sum_bound(got, want, np.nan_to_num(magnitude, posinf=0.0), x.shape[-1])


@pytest.mark.parametrize(("m", "k", "n"), [(64, 784, 256), (3, 130, 45), (100, 33, 10)])
def test_within_the_bound_of_numpys_product(m: int, k: int, n: int) -> None:
    """Values of very different sizes (1e-12 .. 1e12): the componentwise bound of a sum
    of K products, 2 (K + 2) eps sum |x| |w|; the same bits at every level and for
    any batch size (a row's bits do not depend on the rows around it)."""
    rng = np.random.default_rng(k)
    scale = lambda s: (rng.standard_normal(s) * 10.0 ** rng.uniform(-12, 12, s)).astype(F32)  # noqa: E731
    x, w = scale((m, k)), scale((k, n))
    results = [
        gc.compile(product_graph(w, (m, k)), opt_level=level, backend="native")(x)
        for level in (0, 1, 2)
    ]
    _bound(results[0], x, w)
    for other in results[1:]:
        assert bits_differ(other, results[0]) is None
    one_row = gc.compile(product_graph(w, (1, k)), backend="native")
    for i in (0, m // 2, m - 1):
        assert bits_differ(one_row(x[i : i + 1]), results[0][i : i + 1]) is None


def _levels_graphs() -> dict[str, tuple[Graph, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((24, 20)).astype(F32)
    x = rng.standard_normal((5, 24)).astype(F32)
    graphs: dict[str, tuple[Graph, dict[str, np.ndarray]]] = {}

    g = Graph("computed_weight")  # w * 2 and its transpose: computed at O0, folded at O2
    with g:
        xp = gc.placeholder("x", (5, 24), "float32")
        doubled = gc.constant(w.T.copy()) * 2.0
        gc.output(gc.relu(gc.matmul(xp, gc.transpose(doubled)) + 0.5), name="y")
    graphs["computed"] = (g, {"x": x})

    g = Graph("vector_times_matrix")  # a 1-D left operand: one row
    with g:
        v = gc.placeholder("v", (24,), "float32")
        gc.output(gc.matmul(v, gc.constant(w)), name="y")
    graphs["vector"] = (g, {"v": x[0]})

    g = Graph("batched_rows")  # (2, 5, 24) @ (24, 20), bias of shape (1, 20)
    with g:
        xb = gc.placeholder("x", (2, 5, 24), "float32")
        b = gc.constant(np.linspace(-1, 1, 20, dtype=F32).reshape(1, 20))
        gc.output(gc.matmul(xb, gc.constant(w)) + b, name="y")
    graphs["batched"] = (g, {"x": np.stack([x, -x])})

    g = Graph("full_bias")  # a bias of the output's shape: added after the product
    with g:
        xp = gc.placeholder("x", (5, 24), "float32")
        c = gc.constant(rng.standard_normal((5, 20)).astype(F32))
        gc.output(gc.relu(gc.matmul(xp, gc.constant(w)) + c), name="y")
    graphs["full_bias"] = (g, {"x": x})

    r = rng.standard_normal((20, 24)).astype(F32) * 0.3  # (4 n, n) as an LSTM's r

    def step(h: gc.Tensor, xt: gc.Tensor) -> tuple:
        h2 = gc.tanh(gc.matmul(h, gc.transpose(gc.constant(r[:, :20]))) + xt)
        return h2, h2

    g = Graph("recurrent")
    with g:
        h0 = gc.placeholder("h", (5, 20), "float32")
        xs = gc.placeholder("xs", (7, 5, 20), "float32")
        gc.output(gc.scan(step, h0, xs)[1], name="y")
    graphs["recurrent"] = (
        g,
        {"h": x[:, :20], "xs": rng.standard_normal((7, 5, 20)).astype(F32)},
    )
    return graphs


LEVEL_GRAPHS = _levels_graphs()


@pytest.mark.parametrize("name", list(LEVEL_GRAPHS))
def test_the_levels_agree_bit_for_bit_and_stay_near_numpy(name: str) -> None:
    graph, feeds = LEVEL_GRAPHS[name]
    check_native(graph, [feeds], close=normwise(1e-5), close_sets=(0,))
    exe = gc.compile(graph, opt_level=2, backend="native")
    text = exe.explain(**feeds)
    assert "matmul in C" not in text, text  # no product declined
    assert matmul.PRODUCT.name in exe.source(**feeds) or "scan" in text


def test_a_scan_body_packs_its_constant_weight_once() -> None:
    """A recurrent weight stays a constant's transpose in the body at O2 (not hoisted
    into a per-step input), so it is packed at setup, not on every step."""
    graph, feeds = LEVEL_GRAPHS["recurrent"]
    exe = gc.compile(graph, opt_level=2, backend="native")
    exe(**feeds)
    compiled = exe._compiled_for((), feeds)  # noqa: SLF001 - the body's generated code
    (body,) = [g for bodies in compiled.generated.bodies.values() for g in bodies.values()]
    run = body.source.split("def run(")[1]
    assert matmul.PRODUCT.name in run and matmul.PACK.name not in run, body.source
    assert matmul.PACK.name in body.source.split("def run(")[0]  # at setup


def test_the_callers_strided_input_is_read_in_place_and_left_alone() -> None:
    rng = np.random.default_rng(9)
    w = rng.standard_normal((16, 40)).astype(F32)
    big = rng.standard_normal((12, 50)).astype(F32)
    x = big[::2, 3:35:2]  # (6, 16), strides of 2 rows and 2 elements
    before = big.copy()
    got = gc.compile(product_graph(w, (6, 16)), backend="native")(x)
    _bound(got, np.ascontiguousarray(x), w)
    assert bits_differ(big, before) is None
    again = gc.compile(product_graph(w, (6, 16)), backend="native")(np.ascontiguousarray(x))
    assert bits_differ(got, again) is None  # the same bits as the contiguous copy


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("float64", "float32 only"),
        ("vector", "a matrix or a stack of matrices on the right only"),
    ],
)
def test_other_products_stay_numpys_with_the_reason(case: str, why: str) -> None:
    rng = np.random.default_rng(1)
    g = Graph(case)
    with g:
        if case == "float64":
            x = gc.placeholder("x", (4, 6), "float64")
            gc.output(gc.matmul(x, gc.constant(rng.standard_normal((6, 3)))), name="y")
            feeds = [rng.standard_normal((4, 6))]
        else:  # a vector on the right: numpy's matrix-vector product
            x = gc.placeholder("x", (2, 4, 6), "float32")
            b = gc.constant(rng.standard_normal(6).astype(F32))
            gc.output(gc.matmul(x, b), name="y")
            feeds = [rng.standard_normal((2, 4, 6)).astype(F32)]
    assert_numpys_kernel_runs(g, why, *feeds)


@pytest.mark.parametrize(("m", "k", "n"), [(0, 5, 7), (3, 5, 0), (0, 0, 0), (4, 0, 33)])
def test_empty_products(m: int, k: int, n: int) -> None:
    """No rows, no columns, or no terms (zeros, +0.0): numpy's shapes and values, for a
    constant weight and a fed one."""
    w = np.arange(k * n, dtype=F32).reshape(k, n)
    x = np.ones((m, k), F32)
    bias = np.linspace(-1, 1, n, dtype=F32)
    exe = gc.compile(product_graph(w, (m, k), bias, relu=True), backend="native")
    got = exe(x)
    want = np.maximum(x @ w + bias, F32(0.0))
    assert bits_differ(got, want) is None, bits_differ(got, want)
    assert matmul.PRODUCT.name in exe.source(x)
    fed = gc.compile(gc.trace(lambda x, w: gc.matmul(x, w), x, w), backend="native")
    for layout in (w, np.asfortranarray(w)):  # a fed weight, in place or packed
        assert bits_differ(fed(x, layout), x @ w) is None
    assert matmul.PRODUCT.name in fed.source(x, w)


@pytest.mark.parametrize(
    ("lead", "k", "n", "packed"),
    [((16, 8), 12, 40, False), ((16, 8), 12, 40, True), ((300,), 5, 3, False), ((3,), 1, 1, False), ((), 7, 5, False), ((0, 4), 3, 2, False)],
)  # fmt: skip
def test_contract_rows_is_the_chain_of_its_matrices(
    lead: tuple, k: int, n: int, packed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """contract_rows(x, y), x^T y over every row (a Linear layer's weight gradient for a
    batch of sequences), is this kernel's product of x seen as (rows, k), transposed,
    by y seen as (rows, n), read in place or packed row by row: each output the chain
    (numpy's kernel ran before: a transformer step's six weight gradients stayed on
    numpy and kept its entry in Python). The callers' arrays are left as they were."""
    if packed:
        monkeypatch.setattr(matmul, "PACK_ROWS_FROM", 0)
    rng = np.random.default_rng(len(lead) * 100 + k * 10 + n)
    x, y = hostile(rng, (*lead, k)), hostile(rng, (*lead, n))
    kept = (x.copy(), y.copy())
    rows = int(np.prod(lead))
    exe = gc.compile(gc.trace(contract_rows, x, y), backend="native")
    with np.errstate(all="ignore"):
        got = exe(x, y)
    want = chain(np.ascontiguousarray(x.reshape(rows, k).T), y.reshape(rows, n), None, False)
    assert bits_differ(got, want) is None, bits_differ(got, want)
    call = next(s for s in exe.source(x, y).splitlines() if f"{matmul.PRODUCT.name}(" in s)
    assert (call.split(",")[6].strip() not in ("null", "None")) is packed, call
    assert bits_differ(x, kept[0]) is None and bits_differ(y, kept[1]) is None
    if rows:  # within the bound of numpy's product
        _bound(got, np.ascontiguousarray(x.reshape(rows, k).T), y.reshape(rows, n))


def test_contract_rows_of_float64_stays_numpys() -> None:
    rng = np.random.default_rng(2)
    g = Graph("contract64")
    with g:
        x = gc.placeholder("x", (4, 3, 6), "float64")
        gc.output(contract_rows(x, gc.placeholder("y", (4, 3, 2), "float64")), name="z")
    assert_numpys_kernel_runs(
        g, "float32 only", rng.standard_normal((4, 3, 6)), rng.standard_normal((4, 3, 2))
    )
