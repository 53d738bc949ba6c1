"""gemm on the native backend: one cblas_sgemm / cblas_dgemm call on numpy's own OpenBLAS.

numpy's wheels bundle OpenBLAS (`numpy.libs/libscipy_openblas64_*.so`, symbols with a
`scipy_` prefix and a `64_` suffix: 64-bit integers); numpy's `matmul` calls the same
library, so a gemm here runs on the one BLAS thread pool numpy already has (a second
pool beside it, scipy's own OpenBLAS say, costs 50x when the two alternate:
docs/backends.md, "Choosing the GEMM"). `library()` finds it: the shared libraries
beside numpy's package first, then any OpenBLAS the process has loaded (a numpy built
against the system's), trying the symbol spellings in turn, and checks the binding on a
small product before trusting it. Not found, or a self-check failing: the lowering
declines and numpy's gemm kernel runs (the numpy backend never needs this file).

One call computes `out := alpha op(a) op(b) + beta out` after copying c into out (none
when the planner gave the gemm c's own buffer, as for a weight updated in place), so
the SGD update folded by fast_math (`w - lr * g.T @ x`) reads and writes w once, with
no gradient buffer. BLAS scales and accumulates in its own order (OpenBLAS adds
alpha * (one block of K) into c, block after block), so its bits are not numpy's
kernel's (matmul, scale, add): gemm is declared inexact on native, and the tests hold
it within a tolerance of numpy's. With alpha = 1 and no c it is the very call numpy's
matmul makes, bit for bit.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphc.ir.registry import get_op
from graphc.runtime.backend import Backend, get_backend, register_lowering

try:
    import cffi
except ImportError:  # pragma: no cover - exercised where cffi is missing
    cffi = None

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
# (sgemm, dgemm, integer bits): OpenBLAS's spellings, numpy 2's wheels first
SPELLINGS = (
    ("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", 64),
    ("cblas_sgemm64_", "cblas_dgemm64_", 64),
    ("scipy_cblas_sgemm", "scipy_cblas_dgemm", 32),
    ("cblas_sgemm", "cblas_dgemm", 32),
)
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class Blas:
    """A bound cblas: the two gemm functions by dtype, their integer width, where from."""

    path: Path
    symbols: tuple[str, str]
    bits: int
    functions: dict[np.dtype, Any]
    via: str


def candidates() -> list[Path]:
    """Shared libraries that may be numpy's BLAS, most likely first."""
    package = Path(np.__file__).resolve().parent
    found: list[Path] = []
    for folder in (package.parent / "numpy.libs", package / ".libs", package / ".dylibs"):
        if folder.is_dir():
            found += sorted(p for p in folder.iterdir() if "blas" in p.name.lower())
    try:  # a numpy built against the system's OpenBLAS: the one this process loaded
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = Path(line.split()[-1]) if "/" in line else None
                if (
                    path is not None
                    and "openblas" in path.name.lower()
                    and "scipy.libs" not in str(path)  # scipy's own: a second pool
                    and path not in found
                ):
                    found.append(path)
    except OSError:
        pass
    return found


def locate() -> tuple[Path, tuple[str, str, int]] | None:
    """The first candidate library holding a cblas gemm spelling, and that spelling."""
    for path in candidates():
        try:
            handle = ctypes.CDLL(str(path))
        except OSError:
            continue
        for single, double, bits in SPELLINGS:
            if hasattr(handle, single) and hasattr(handle, double):
                return path, (single, double, bits)
    return None


def _bind(path: Path, spelling: tuple[str, str, int]) -> Blas:
    single, double, bits = spelling
    if cffi is not None:
        ffi = cffi.FFI()
        integer = "int64_t" if bits == 64 else "int"
        for name, real in ((single, "float"), (double, "double")):
            # addresses passed as integers: the same registers and stack slots as pointers
            ffi.cdef(
                f"void {name}(int, int, int, {integer}, {integer}, {integer}, {real}, intptr_t, "
                f"{integer}, intptr_t, {integer}, {real}, intptr_t, {integer});"
            )
        lib = ffi.dlopen(str(path))
        functions = {np.dtype(np.float32): getattr(lib, single)}
        functions[np.dtype(np.float64)] = getattr(lib, double)
        return Blas(path, (single, double), bits, functions, "cffi")
    handle = ctypes.CDLL(str(path))
    integer = ctypes.c_int64 if bits == 64 else ctypes.c_int
    functions = {}
    for name, real, dtype in ((single, ctypes.c_float, np.float32), (double, ctypes.c_double, np.float64)):  # fmt: skip
        fn = getattr(handle, name)
        address = ctypes.c_void_p
        fn.argtypes = [ctypes.c_int] * 3 + [integer] * 3 + [real, address, integer, address]
        fn.argtypes += [integer, real, address, integer]
        fn.restype = None
        functions[np.dtype(dtype)] = fn
    return Blas(path, (single, double), bits, functions, "ctypes")


_cache: dict[str, Blas | str] = {}


def library() -> Blas | str:
    """numpy's cblas, bound and checked; or why there is none (cached per process)."""
    if "found" not in _cache:
        _cache["found"] = _load()
    return _cache["found"]


def _load() -> Blas | str:
    if os.environ.get("GRAPHC_NATIVE_BLAS", "1") == "0":
        return "GRAPHC_NATIVE_BLAS=0"
    found = locate()
    if found is None:
        return "no cblas gemm found in numpy's OpenBLAS"
    try:
        blas = _bind(*found)
    except Exception as exc:  # noqa: BLE001 - cffi's and ctypes' errors alike: decline
        return f"binding {found[0].name} failed: {exc}"
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        a, b = rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal((5, 4)).astype(dtype)
        c = rng.standard_normal((3, 5)).astype(dtype)
        want = -0.5 * a @ b.T + 2.0 * c
        GemmCall(blas, np.dtype(dtype), 3, 5, 4, -0.5, 2.0, False, True, True)(a, b, c, c)
        if not np.allclose(c, want, rtol=1e-5, atol=1e-5):
            return f"{found[0].name}'s {found[1][0]} failed its check"
    return blas


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _rows(array: np.ndarray, trans: bool) -> tuple[np.ndarray, int, int]:
    """`array` as BLAS reads it: C-contiguous rows, its transpose flag, its leading dim.
    A Fortran-ordered array (a transposed view) is its transpose's rows, flag flipped;
    any other layout is copied (a caller's array is never written)."""
    if not array.flags.c_contiguous:
        if array.T.flags.c_contiguous:
            array, trans = array.T, not trans
        else:
            array = np.ascontiguousarray(array)
    return array, TRANS if trans else NO_TRANS, max(1, array.shape[1])


class GemmCall:
    """One planned gemm: `call(a, b, c, out)` with the sizes and flags fixed at planning."""

    def __init__(
        self, blas: Blas, dtype: np.dtype, m: int, n: int, k: int, alpha: float,
        beta: float, trans_a: bool, trans_b: bool, has_c: bool,
    ) -> None:  # fmt: skip
        self.fn = blas.functions[dtype]
        self.sizes = (m, n, k)
        self.alpha = alpha
        self.given_beta = beta
        self.beta = beta if has_c else 0.0  # beta = 0: BLAS does not read out
        self.flags = (trans_a, trans_b)

    def __call__(self, a: np.ndarray, b: np.ndarray, c: Any, out: np.ndarray) -> np.ndarray:
        if not out.flags.c_contiguous:  # planned buffers are; anything else: numpy's kernel
            args = (a, b) if c is None else (a, b, c)
            return get_op("gemm").kernel(*args, out=out, alpha=self.alpha, beta=self.given_beta,
                                         trans_a=self.flags[0], trans_b=self.flags[1])  # fmt: skip
        a, ta, lda = _rows(a, self.flags[0])
        b, tb, ldb = _rows(b, self.flags[1])
        if self.beta != 0.0 and not (_address(c) == _address(out) and c.shape == out.shape):
            np.copyto(out, c)  # broadcast; BLAS then scales it by beta and accumulates
        m, n, k = self.sizes
        self.fn(ROW_MAJOR, ta, tb, m, n, k, self.alpha, _address(a), lda, _address(b), ldb,
                self.beta, _address(out), n)  # fmt: skip
        return out


def lower_gemm(gen: Any, step: Any, out: str) -> list[str] | None:
    """One BLAS call for a gemm step, or None (numpy's kernel runs it): no BLAS found,
    alpha = 0 (BLAS would skip the product, and with it a nan or inf of a or b), an
    empty dim, or sizes beyond the library's integers."""
    blas = library()
    if isinstance(blas, str):
        return None
    attrs = step.attrs
    out_t = gen.plan.values[step.output].type
    a_t = gen.plan.values[step.inputs[0]].type
    m, n = out_t.shape
    k = a_t.shape[0] if attrs["trans_a"] else a_t.shape[1]
    limit = 2**31 - 1 if blas.bits == 32 else 2**63 - 1
    sizes = (m, n, k, *a_t.shape, *gen.plan.values[step.inputs[1]].type.shape)
    if attrs["alpha"] == 0.0 or min(m, n, k) == 0 or max(sizes) > limit:
        return None
    has_c = len(step.inputs) == 3
    call = GemmCall(
        blas, out_t.dtype, m, n, k, attrs["alpha"], attrs["beta"], attrs["trans_a"],
        attrs["trans_b"], has_c,
    )  # fmt: skip
    symbol = blas.symbols[out_t.dtype == np.float64]
    if not gen.state.setdefault("blas", set()):
        gen.notes.append(f"native: gemm through {blas.path.name} (numpy's OpenBLAS, {blas.via})")
    gen.state["blas"].add(symbol)
    fn = gen.const(call, f"gemm_{symbol}")
    a, b = gen.array(step.inputs[0]), gen.array(step.inputs[1])
    c = gen.array(step.inputs[2]) if has_c else "None"
    return [f"{fn}({a}, {b}, {c}, {out})"]


def register(backend: str = "native") -> None:
    """Lower gemm on `backend` with this BLAS, and declare it inexact there (see above)."""
    target: Backend = get_backend(backend)
    target.inexact = target.inexact | {"gemm"}
    register_lowering("gemm", lower_gemm, backend=backend)


register()
