"""tools/mlp_roofline.py's plan of the MLP step's eight products: the products the step
makes (shapes, layouts, values), every one a native kernel, and their flops."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.native_checks import needs_native, normwise

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import mlp_roofline  # noqa: E402

pytestmark = needs_native
KS = (784, 256, 256, 10, 256, 24, 24, 24)  # each product's inner dim at batch 24


def test_the_eight_products_are_the_steps_and_run_as_native_kernels() -> None:
    exe, feeds, flops = mlp_roofline.products(24)
    x, h1, h2, dz, d2, d1, w1, w2, w3 = feeds
    want = [x @ w1.T, h1 @ w2.T, h2 @ w3.T, dz @ w3, d2 @ w2, dz.T @ h2, d2.T @ h1, d1.T @ x]
    got = exe(*feeds)
    assert len(got) == len(want) == 8
    close = normwise(1e-5)
    for i, (g, w) in enumerate(zip(got, want)):
        assert close(g, w) is None, (i, close(g, w))
    assert flops == sum(2.0 * w.shape[0] * w.shape[1] * k for w, k in zip(want, KS))
    steps = [line for line in exe.explain(*feeds).splitlines() if "= matmul(" in line]
    assert len(steps) == 8 and all(line.endswith("[native]") for line in steps), steps
