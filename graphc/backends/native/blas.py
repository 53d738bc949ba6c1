"""gemm on the native backend, where matmul.py's product does not compute it (float64,
operands transposed by flags, a beta other than 0 and 1: `lower_gemm` in native's
__init__.py decides): one cblas_sgemm / cblas_dgemm call on numpy's own OpenBLAS.

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


def symbol(blas: Blas, name: str) -> Any | None:
    """A ctypes function of the bound library by name, or None where it has none: for
    what the generated code does not call through `Blas.functions` (the threads
    callback's setter, threads.py; gemm's address for a C kernel, attention.py)."""
    return getattr(ctypes.CDLL(str(blas.path)), name, None)


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
        GemmCall(blas, np.dtype(dtype), (a.shape, b.shape), 3, 5, 4, -0.5, 2.0, False, True)(
            a, b, c
        )
        if not np.allclose(c, want, rtol=1e-5, atol=1e-5):
            return f"{found[0].name}'s {found[1][0]} failed its check"
    return blas


def address(array: np.ndarray) -> int:
    """An array's data address (taken once per thread for the plan's own buffers)."""
    return array.__array_interface__["data"][0]


def _rows(array: np.ndarray, trans: bool) -> tuple[int, int, int]:
    """A caller's `array` as BLAS reads it: the address of C-contiguous rows, its
    transpose flag, its leading dim. A Fortran-ordered array (a transposed view) is its
    transpose's rows, flag flipped; any other layout is copied (never written)."""
    if not array.flags.c_contiguous:
        if array.T.flags.c_contiguous:
            array, trans = array.T, not trans
        else:
            array = np.ascontiguousarray(array)
    return address(array), TRANS if trans else NO_TRANS, max(1, array.shape[1])


class GemmCall:
    """One planned gemm, `call(a, b, out)`: out := alpha op(a) op(b) + beta out, with the
    sizes and flags fixed at planning. Each argument is an address (the plan's own
    C-contiguous buffers, taken at setup) or an array (a caller's, of any layout)."""

    def __init__(
        self, blas: Blas, dtype: np.dtype, shapes: tuple[tuple[int, int], ...], m: int,
        n: int, k: int, alpha: float, beta: float, trans_a: bool, trans_b: bool,
    ) -> None:  # fmt: skip
        self.fn = blas.functions[dtype]
        self.sizes = (m, n, k)
        self.alpha, self.beta = alpha, beta
        self.trans = (trans_a, trans_b)
        self.codes = tuple(TRANS if t else NO_TRANS for t in self.trans)
        self.leading = tuple(max(1, shape[1]) for shape in shapes)

    def __call__(self, a: Any, b: Any, out: Any) -> None:
        (ta, tb), (lda, ldb) = self.codes, self.leading
        if type(a) is not int:
            a, ta, lda = _rows(a, self.trans[0])
        if type(b) is not int:
            b, tb, ldb = _rows(b, self.trans[1])
        m, n, k = self.sizes
        if type(out) is int:
            self.fn(ROW_MAJOR, ta, tb, m, n, k, self.alpha, a, lda, b, ldb, self.beta, out, n)
        elif out.flags.c_contiguous:  # a fresh output buffer
            self.fn(ROW_MAJOR, ta, tb, m, n, k, self.alpha, a, lda, b, ldb, self.beta, address(out), n)  # fmt: skip
        else:  # a buffer given by a loop, say: through contiguous rows and back
            rows = np.ascontiguousarray(out)
            self.fn(ROW_MAJOR, ta, tb, m, n, k, self.alpha, a, lda, b, ldb, self.beta, address(rows), n)  # fmt: skip
            np.copyto(out, rows)


def _argument(gen: Any, name: str, expr: str) -> str:
    """An address taken at setup for the plan's own buffers (C-contiguous by the
    planner's layout rule), else the array, examined per call."""
    if name not in gen.static or gen.plan.values[name].kind not in OWN_KINDS:
        return expr
    pointer = gen.fresh("ptr")
    gen.setup_lines.append(f"{pointer} = {gen.const(address, 'address')}({expr})")
    return pointer


OWN_KINDS = ("allocated", "reused", "inplace", "state")


def lower_gemm(gen: Any, step: Any, out: str) -> list[str] | None:
    """One BLAS call for a gemm step, or None (numpy's kernel runs it): no BLAS found,
    alpha = 0 (BLAS would skip the product, and with it a nan or inf of a or b), an
    empty dim, or sizes beyond the library's integers. c is copied into the output
    first (broadcast), unless the planner gave the gemm c's own buffer."""
    blas = library()
    if isinstance(blas, str):
        return None
    attrs = step.attrs
    values = gen.plan.values
    out_value = values[step.output]
    shapes = tuple(tuple(values[x].type.shape) for x in step.inputs[:2])
    m, n = out_value.type.shape
    k = shapes[0][0] if attrs["trans_a"] else shapes[0][1]
    limit = 2**31 - 1 if blas.bits == 32 else 2**63 - 1
    if attrs["alpha"] == 0.0 or min(m, n, k) == 0 or max(m, n, k, *shapes[0], *shapes[1]) > limit:
        return None
    reads_c = len(step.inputs) == 3 and attrs["beta"] != 0.0
    in_place = reads_c and out_value.base == step.inputs[2]
    call = GemmCall(
        blas, out_value.type.dtype, shapes, m, n, k, attrs["alpha"],
        attrs["beta"] if reads_c else 0.0, attrs["trans_a"], attrs["trans_b"],
    )  # fmt: skip
    symbol = blas.symbols[out_value.type.dtype == np.float64]
    if not gen.state.setdefault("blas", set()):
        gen.notes.append(f"blas: gemm through {blas.path.name} (numpy's OpenBLAS, {blas.via})")
    gen.state["blas"].add(symbol)
    lines = []
    if reads_c and not in_place:  # BLAS accumulates into out: c goes there first
        c = gen.array(step.inputs[2])
        lines.append(f"{gen.const(np.copyto, 'copyto')}({out}, {c})")
    a, b = (_argument(gen, x, gen.array(x)) for x in step.inputs[:2])
    target = _argument(gen, step.output, out)
    return [*lines, f"{gen.const(call, f'gemm_{symbol}')}({a}, {b}, {target})"]
