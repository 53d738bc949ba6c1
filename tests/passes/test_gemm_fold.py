"""The SGD fold (graphc/passes/gemm_rules.py): w - s * op(a) @ op(b) -> one gemm into w.

Text in, text out (a pass of the native backend's fusion step: with fast_math, and in
its exact form at every level, and of nothing else); where it must not fire; the
train step of the benchmark's MLP with fast_math against the exact one over several
steps; and the planner letting the gemm write into its c's buffer (state updated in
place, an arena value dying there) but never into an operand it also reads as a or b.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.bench import mlp
from graphc.passes.gemm_rules import fold_sgd_updates
from graphc.passes.pipeline import with_options
from graphc.passes.simplify import simplify_fast_math
from tests.differential import check_levels
from tests.native_checks import needs_native
from tests.passes.passcheck import check_pass


def graph(params: str, *body: str) -> str:
    return f"graph g({params}) {{\n" + "\n".join(body) + "\n}"


SGD = graph(
    "%w: f32[4,5], %g: f32[3,4], %x: f32[3,5]",
    "%c: f32[] = constant(value=0.01)",
    "%s: f32[3,4] = mul(%g, %c)",
    "%t: f32[4,3] = transpose(%s, axes=(1, 0))",
    "%m: f32[4,5] = matmul(%t, %x)",
    "%u: f32[4,5] = sub(%w, %m)",
    "output %y = %u",
)


def test_the_update_becomes_one_gemm_with_fast_math_only() -> None:
    folded = graph(
        "%w: f32[4,5], %g: f32[3,4], %x: f32[3,5]",
        "%gemm: f32[4,5] = gemm(%g, %x, %w, alpha=-0.009999999776482582, beta=1.0, "
        "trans_a=True, trans_b=False)",
        "output %y = %gemm",
    )
    check_pass(fold_sgd_updates, SGD, folded)
    check_pass(gc.passes.simplify, SGD, SGD)
    check_pass(simplify_fast_math, SGD, SGD)  # backend-free: never folds
    assert "gemm" not in str(gc.optimize(gc.parse(SGD), level=2, fast_math=True))


def test_the_exact_fold_peels_nothing_and_asks_the_backend() -> None:
    """`computes` given: only w - (a @ b) * s and w - a @ b, a and b as they are (the
    transpose and the scale on g stay), s the alpha; a gemm the backend would not
    compute as it computes the matmul stays the update it was."""
    exact = graph(
        "%w: f32[4,5], %g: f32[3,4], %x: f32[3,5]",
        "%c: f32[] = constant(value=0.01)",
        "%s: f32[3,4] = mul(%g, %c)",
        "%t: f32[4,3] = transpose(%s, axes=(1, 0))",
        "%gemm: f32[4,5] = gemm(%t, %x, %w, alpha=-1.0, beta=1.0, trans_a=False, trans_b=False)",
        "output %y = %gemm",
    )
    check_pass(with_options(fold_sgd_updates, computes=lambda node: True), SGD, exact)
    check_pass(with_options(fold_sgd_updates, computes=lambda node: False), SGD, SGD)
    scaled = graph(
        "%w: f32[4,5], %a: f32[4,3], %b: f32[3,5]",
        "%c: f32[] = constant(value=0.5)",
        "%m: f32[4,5] = matmul(%a, %b)",
        "%s: f32[4,5] = mul(%c, %m)",
        "%u: f32[4,5] = sub(%w, %s)",
        "output %y = %u",
    )
    folded = graph(
        "%w: f32[4,5], %a: f32[4,3], %b: f32[3,5]",
        "%gemm: f32[4,5] = gemm(%a, %b, %w, alpha=-0.5, beta=1.0, trans_a=False, trans_b=False)",
        "output %y = %gemm",
    )
    check_pass(with_options(fold_sgd_updates, computes=lambda node: True), scaled, folded)


def test_scale_before_the_transpose_and_on_the_other_operand() -> None:
    before = graph(
        "%w: f64[4,5], %g: f64[4,3], %x: f64[5,3]",
        "%c: f64[] = constant(value=0.5)",
        "%t: f64[3,5] = transpose(%x, axes=(1, 0))",
        "%s: f64[3,5] = mul(%t, %c)",
        "%m: f64[4,5] = matmul(%g, %s)",
        "%u: f64[4,5] = sub(%w, %m)",
        "output %y = %u",
    )
    after = graph(
        "%w: f64[4,5], %g: f64[4,3], %x: f64[5,3]",
        "%gemm: f64[4,5] = gemm(%g, %x, %w, alpha=-0.5, beta=1.0, trans_a=False, trans_b=True)",
        "output %y = %gemm",
    )
    check_pass(fold_sgd_updates, before, after)


@pytest.mark.parametrize(
    "why,text",
    [
        ("the product has another user", graph(
            "%w: f64[4,5], %a: f64[4,3], %b: f64[3,5]", "%m: f64[4,5] = matmul(%a, %b)",
            "%u: f64[4,5] = sub(%w, %m)", "output %y = %u", "output %z = %m")),
        ("batched operands", graph(
            "%w: f64[2,4,5], %a: f64[2,4,3], %b: f64[3,5]", "%m: f64[2,4,5] = matmul(%a, %b)",
            "%u: f64[2,4,5] = sub(%w, %m)", "output %y = %u")),
        ("w wider than the product", graph(
            "%w: f64[2,4,5], %a: f64[4,3], %b: f64[3,5]", "%m: f64[4,5] = matmul(%a, %b)",
            "%u: f64[2,4,5] = sub(%w, %m)", "output %y = %u")),
        ("integers", graph(
            "%w: i64[4,5], %a: i64[4,3], %b: i64[3,5]", "%m: i64[4,5] = matmul(%a, %b)",
            "%u: i64[4,5] = sub(%w, %m)", "output %y = %u")),
        ("mixed dtypes", graph(
            "%w: f64[4,5], %a: f32[4,3], %b: f32[3,5]", "%m: f32[4,5] = matmul(%a, %b)",
            "%u: f64[4,5] = sub(%w, %m)", "output %y = %u")),
        ("a product minus w", graph(
            "%w: f64[4,5], %a: f64[4,3], %b: f64[3,5]", "%m: f64[4,5] = matmul(%a, %b)",
            "%u: f64[4,5] = sub(%m, %w)", "output %y = %u")),
    ],
)  # fmt: skip
def test_where_it_does_not_fire(why: str, text: str) -> None:
    check_pass(fold_sgd_updates, text, text)


def test_a_transpose_used_elsewhere_stays_and_is_read_through() -> None:
    text = graph(
        "%w: f64[4,5], %g: f64[3,4], %x: f64[3,5]",
        "%t: f64[4,3] = transpose(%g, axes=(1, 0))",
        "%m: f64[4,5] = matmul(%t, %x)",
        "%u: f64[4,5] = sub(%w, %m)",
        "output %y = %u",
        "output %z = %t",
    )
    out = fold_sgd_updates(gc.parse(text))
    assert "gemm(%t, %x, %w, alpha=-1.0, beta=1.0, trans_a=False" in str(out)


def _steps(fast_math: bool, backend: str = "native") -> tuple[gc.TrainStep, np.ndarray, np.ndarray]:
    model = mlp.model()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 784)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    opt = optim.SGD(model.parameters(), lr=mlp.LR)
    step = gc.compile_train_step(
        model, nn.CrossEntropyLoss(), opt, (x, y), fast_math=fast_math, backend=backend
    )
    return step, x, y


@needs_native
def test_train_step_with_the_fold_stays_close_to_the_exact_one() -> None:
    fast, x, y = _steps(True)
    exact, _, _ = _steps(False)
    assert sum("gemm" in n.op for n in fast.executable.optimized.op_nodes) == 3
    for _ in range(8):
        np.testing.assert_allclose(fast(x, y), exact(x, y), rtol=1e-5)
    got, want = fast.parameters(), exact.parameters()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-6, err_msg=name)


@needs_native
def test_the_weight_is_updated_in_its_own_buffer() -> None:
    fast, x, y = _steps(True)
    lines = [line for line in fast.explain(x, y).splitlines() if "= gemm(" in line]
    assert len(lines) == 3 and all("written into state" in line for line in lines), lines


def test_only_the_native_backend_folds() -> None:
    """numpy's gemm is a matmul, a scale and a sum, so the fold would only move the scale
    from the small operand onto the product (one pass more): numpy's fusion step keeps
    the unfolded update; native's folds (with fast_math, and at the exact levels, where
    its product computes the gemm: the updates of this float32 MLP)."""
    fast, x, y = _steps(True, backend="numpy")
    assert not any(n.op == "gemm" for n in fast.executable.optimized.op_nodes)
    assert "matmul" in {n.op for n in fast.executable.optimized.op_nodes}
    optimized = gc.optimize(fast.graph, level=2, fast_math=True)
    assert not any(n.op == "gemm" for n in optimized.op_nodes)  # type: ignore[union-attr]
    numpy_fused = gc.fuse(optimized, backend="numpy", fast_math=True)
    assert not any(n.op == "gemm" for n in numpy_fused.op_nodes)  # type: ignore[union-attr]
    if gc.backends.native.BACKEND.quick_unavailable() is None:
        for fast_math, folds in ((True, 3), (False, 3)):
            fused = gc.fuse(optimized, backend="native", fast_math=fast_math)
            assert sum(n.op == "gemm" for n in fused.op_nodes) == folds  # type: ignore[union-attr]


def _planned(text: str) -> str:
    g = gc.parse(text)
    feeds = {p.name: np.ones(p.type.shape, p.type.dtype) for p in g.inputs}
    return gc.compile(g, opt_level=0).explain(**feeds)


def test_gemm_writes_in_place_of_a_dying_c_but_never_of_an_operand() -> None:
    dying_c = graph(
        "%a: f32[4,3], %b: f32[3,4], %v: f32[4,4]",
        "%c: f32[4,4] = exp(%v)",
        "%g: f32[4,4] = gemm(%a, %b, %c, alpha=-1.0, beta=1.0, trans_a=False, trans_b=False)",
        "output %y = %g",
    )
    assert "gemm(a, b, c)" in _planned(dying_c)
    # the result is returned: an output buffer; computed into an arena value instead:
    kept = dying_c.replace("output %y = %g", "%h: f32[4,4] = neg(%g)\n  output %y = %h")
    plan = _planned(kept)
    assert next(line for line in plan.splitlines() if "= gemm(" in line).count("in place of c")
    twice = graph(
        "%b: f32[4,4], %v: f32[4,4]",
        "%c: f32[4,4] = exp(%v)",
        "%g: f32[4,4] = gemm(%c, %b, %c, alpha=-1.0, beta=1.0, trans_a=False, trans_b=False)",
        "%h: f32[4,4] = neg(%g)",
        "output %y = %h",
    )
    line = next(line for line in _planned(twice).splitlines() if "= gemm(" in line)
    assert "in place" not in line
    rng = np.random.default_rng(1)
    feeds = {"b": rng.standard_normal((4, 4)).astype(np.float32)}
    feeds["v"] = rng.standard_normal((4, 4)).astype(np.float32)
    # the product of c and b (bit for bit on numpy; on native within gemm's and exp's
    # declared bounds, all else bit for bit): a write into c while gemm reads it shows
    check_levels(gc.parse(twice), [feeds], levels=(0,))
    c = np.exp(feeds["v"])
    np.testing.assert_allclose(
        gc.compile(gc.parse(twice), opt_level=0, backend="numpy")(**feeds),
        -(c - c @ feeds["b"]),
        rtol=1e-6,
    )
