"""Fit the float32 tanh of the native backend (graphc/backends/native/cexpr.py: TANH_P, TANH_Q)
and measure its error against the correctly rounded tanh and against numpy's.

tanh(x) ~ x P(x^2) / Q(x^2), P of degree 4 and Q of degree 4 in x^2, Q(0) = 1, on x in
[1e-4, 9]: the linearized problem x P - tanh(x) Q = 0 divided by tanh(x) (relative
error), solved by least squares, reweighted by the last denominator (Loeb) and by the
last error (Lawson) towards a minimax fit. The coefficients are rounded to float32 and
the fit is evaluated as the kernel evaluates it: float32 Horner with fused multiply-adds
(emulated here in float64, whose product of two float32 numbers is exact; the double
rounding may differ from a true fma in rare last-bit cases, which the kernel's own test,
tests/backends/test_native_ulp.py, covers), x clamped to [-9, 9], x itself below 1e-4,
+-1 from 8.7 on.

    python tools/fit_tanh.py      # prints the coefficients (hex) and the measured errors
"""

from __future__ import annotations

import numpy as np

CLAMP = 9.0


def fit(p_terms: int = 5, q_terms: int = 4, iterations: int = 60) -> tuple[np.ndarray, np.ndarray]:
    xs = np.concatenate([np.linspace(1e-4, 1, 6000), np.linspace(1, CLAMP, 12000)])
    t, u = np.tanh(xs), xs * xs
    a0 = (
        np.concatenate(
            [
                xs[:, None] * u[:, None] ** np.arange(p_terms)[None, :],
                -(t[:, None] * u[:, None] ** np.arange(1, q_terms + 1)[None, :]),
            ],
            1,
        )
        / t[:, None]
    )
    weights, denominator = np.ones_like(xs), np.ones_like(xs)
    for _ in range(iterations):
        root = np.sqrt(weights)
        solution, *_ = np.linalg.lstsq(
            a0 / denominator[:, None] * root[:, None], root / denominator, rcond=None
        )
        p, q = solution[:p_terms], np.concatenate([[1.0], solution[p_terms:]])
        denominator = np.polyval(q[::-1], u)
        error = np.abs(xs * np.polyval(p[::-1], u) / denominator / t - 1)
        weights = weights * (error + 1e-30)
        weights /= weights.sum()
    return p.astype(np.float32), q.astype(np.float32)


def evaluate(x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    xc = np.clip(x, np.float32(-CLAMP), np.float32(CLAMP))
    u = xc * xc
    num, den = p[-1], q[-1]
    for c in p[-2::-1]:  # fma: one rounding of num * u + c
        num = (num.astype(np.float64) * u + c).astype(np.float32)
    for c in q[-2::-1]:
        den = (den.astype(np.float64) * u + c).astype(np.float32)
    r = (xc * num) / den
    r = np.where(np.abs(x) < np.float32(1e-4), x, r)
    return np.where(np.abs(x) >= np.float32(8.7), np.copysign(np.float32(1), x), r)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ia, ib = (v.view(np.int32).astype(np.int64) for v in (a, b))
    ia, ib = (np.where(i < 0, -(2**31) - i, i) for i in (ia, ib))
    return np.abs(ia - ib)


def main() -> None:
    p, q = fit()
    print("TANH_P", [float(c).hex() for c in p])
    print("TANH_Q", [float(c).hex() for c in q])
    dense = np.arange(0x38D1B717, 0x41200000, 3, dtype=np.uint32).view(np.float32)
    bits = np.random.default_rng(1).integers(0, 2**32, 2**24, dtype=np.uint64).astype(np.uint32)
    random = bits.view(np.float32)
    for name, x in (
        ("every 3rd float32 in [1e-4, 10]", dense),
        ("2**24 random bit patterns", random),
    ):
        x = x[np.isfinite(x)]
        with np.errstate(all="ignore"):
            got = evaluate(x, p, q)
            exact = np.tanh(x.astype(np.float64)).astype(np.float32)
            print(
                f"{name}: max {ulps(got, exact).max()} ulp from the correctly rounded tanh, "
                f"{ulps(got, np.tanh(x)).max()} from numpy's"
            )


if __name__ == "__main__":
    main()
