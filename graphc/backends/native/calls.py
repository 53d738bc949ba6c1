"""How generated code calls native kernels: through cffi when it is installed, else ctypes.

A call passes the element count, buffer addresses and sizes. Addresses of arrays that
exist before the call (arena buffers, constants, state) are taken once per thread;
those of a call's inputs and outputs on every call, which is most of a small call's
cost: `ffi.from_buffer(a)` takes 0.2 us, `a.ctypes.data` 0.8 us (cffi's call itself is
also a little cheaper, 0.23 us against 0.30). cffi is an optional extra
(`pip install "graphc[native]"`); ctypes is always there.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from graphc.backends.numpy.chunked import transposed_view
from graphc.runtime import forks

try:
    import cffi

    FFI: Any = cffi.FFI()
except ImportError:  # pragma: no cover - exercised where cffi is missing
    FFI = None

_lock = forks.lock()
_declared: set[str] = set()
_libraries: dict[str, Any] = {}

# the pool's clock (gc_pool_clock in csrc/prelude.h), shared by every kernel library of
# the process: when a parallel region last ended, and for how long idle workers spin
# after one (threads.openmp_environment sets it), both in ns
POOL_CLOCK = np.zeros(2, np.int64)


def via() -> str:
    return "cffi" if FFI is not None else "ctypes"


def contiguous(array: np.ndarray) -> np.ndarray:
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def in_order(gen: Any, value: str) -> bool:
    """Whether plan value `value`'s array exists before a call and is C-ordered, so that
    its address can be taken once per thread: a static value but a transposed view
    (every other static array is C-contiguous: docs/trust.md)."""
    return value in gen.static and not transposed_view(gen, value)


def value_address(gen: Any, value: str, lines: list[str], expr: str | None = None) -> str:
    """Source for the address of plan value `value`'s array (`expr` when given) that a
    kernel reads or writes: once per thread when it is `in_order`, else per call."""
    return operand(gen, gen.array(value) if expr is None else expr, in_order(gen, value), lines)


def operand(gen: Any, expr: str, static: bool, lines: list[str]) -> str:
    """Source for the address of an operand array `expr` read by a kernel: taken once per
    thread when it is static; else on every call, after a copy to C order when the
    array is not (a caller's input may be strided)."""
    if static:
        return address(gen, expr, True, lines)
    array = gen.fresh(f"{expr}_c")
    lines.append(f"{array} = {gen.const(contiguous, 'contiguous')}({expr})")
    return per_call(array, gen.const)


def per_call(expr: str, const: Callable[[Any, str], str]) -> str:
    """Source for the address of array `expr`, evaluated on every call."""
    if FFI is not None:
        return f"{const(FFI.from_buffer, 'from_buffer')}({expr})"
    return f"{expr}.ctypes.data"


# a null pointer argument, as the call takes it
NULL: Any = FFI.NULL if FFI is not None else None


def address_now(array: np.ndarray) -> Any:
    """The address of a C-contiguous array as the call takes it, for a call made now."""
    return FFI.from_buffer(array) if FFI is not None else array.ctypes.data


def address_int(array: np.ndarray) -> int:
    """The address of an array's first element, as an int (0.7 us with cffi, 1.4 with
    ctypes; numpy's __array_interface__ builds a dict: 1.6)."""
    if FFI is not None and array.flags.c_contiguous:
        return int(FFI.cast("intptr_t", FFI.from_buffer(array)))
    return array.ctypes.data


def static_address(array: np.ndarray) -> Any:
    """The address of an array that outlives the plan's calls, as the call takes it."""
    if FFI is not None:
        return FFI.cast("void *", array.ctypes.data)
    return array.ctypes.data


def array_at(address: int, shape: tuple, dtype: Any) -> np.ndarray:
    """The array of `shape` and `dtype` whose memory starts at `address` (a tape's word:
    a failing call's argument, read back by its kernel's `failure`)."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address) if count else b""
    return np.frombuffer(raw, dtype, count).reshape(shape)


def pointer(address: int) -> Any:
    """An address as an int (a tape's word) as the bound kernels take a pointer."""
    if FFI is not None:
        return FFI.cast("void *", address)
    return address


def function_address(fn: Any) -> int:
    """The address of a bound kernel (a function `bind` returned), as an int."""
    if FFI is not None:
        return int(FFI.cast("intptr_t", fn))
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def word(pointer: Any) -> int:
    """An address argument as the generated code passes it (cffi's pointer or buffer,
    ctypes' int, None or cffi's NULL for none), as an int."""
    if pointer is None:
        return 0
    if FFI is not None and isinstance(pointer, FFI.CData):
        return int(FFI.cast("intptr_t", pointer))
    return int(pointer)


def plan_state(gen: Any) -> dict[str, Any]:
    """What the native backend records about the plan being generated: its kernels by
    name, how many steps call them, why the others stay on numpy, and the kernels of
    steps numpy runs because they are small here ("spares", built for larger sizes)."""
    return gen.state.setdefault("native", {"kernels": {}, "calls": 0, "declined": {}, "spares": {}})


def recorded(generated: Any, key: str) -> dict[str, Any]:
    """What `plan_state` recorded under `key` for a plan whose code is `generated` (empty
    when the native backend recorded nothing: a plan generated on numpy)."""
    return generated.state.get("native", {}).get(key, {})


def loop_constants(gen: Any) -> frozenset[int] | None:
    """When `gen` plans a loop's body that is to run in C (loops.py): the positions of its
    inputs that are the same at every step (the loop's constants); none for a whole plan
    run as one C call (entry.py); else None."""
    if gen.parent is None:  # a whole plan run as a tape (entry.py) has no constants
        return frozenset() if plan_state(gen).get("whole") else None
    bodies = plan_state(gen.parent).get("taping")
    return bodies[-1] if bodies else None


def alias_safe(gen: Any, step: Any, inputs: set[int]) -> None:
    """Note that `step`'s kernel may write its output over the inputs at positions
    `inputs`: it reads each of their elements only for the output element in the same
    place, before writing it (loops.py runs a loop's carries in place on this)."""
    if inputs:
        plan_state(gen).setdefault("alias_safe", {})[step.index] = frozenset(inputs)


def record(gen: Any, kernel: Any) -> None:
    """Note that a step calls `kernel` (compiled and bound by the backend's finish)."""
    state = plan_state(gen)
    state["kernels"].setdefault(kernel.name, kernel)
    state["calls"] += 1
    gen.namespace.setdefault(kernel.name, None)


def address(gen: Any, expr: str, static: bool, lines: list[str]) -> str:
    """Source for the address of array `expr`: taken once per thread when the array is
    static (exists before the call), else on every call."""
    if not static:
        return per_call(expr, gen.const)
    name = gen.fresh("ptr")
    gen.setup_lines.append(f"{name} = {gen.const(static_address, 'address')}({expr})")
    return name


def bind(
    path: Path,
    library: ctypes.CDLL,
    signatures: dict[str, str],
    statuses: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The kernels of a loaded library, callable with the arguments the generated code
    passes; `signatures` maps each kernel to its parameters after the count: 'p' an
    address, 'i' an int64. The kernels in `statuses` return an int64 (Kernel.status),
    the others nothing."""
    if FFI is None:
        functions = {}
        library.gc_bind_pool_clock(ctypes.c_void_p(POOL_CLOCK.ctypes.data))
        for name, kinds in signatures.items():
            fn = getattr(library, name)
            fn.argtypes = [ctypes.c_int64] + [
                ctypes.c_void_p if k == "p" else ctypes.c_int64 for k in kinds
            ]
            fn.restype = ctypes.c_int64 if name in statuses else None
            functions[name] = fn
        return functions
    with _lock:
        new = [name for name in signatures if name not in _declared]
        if new:
            FFI.cdef(
                "\n".join(
                    f"{'int64_t' if name in statuses else 'void'} {name}(int64_t"
                    f"{''.join(', void *' if k == 'p' else ', int64_t' for k in signatures[name])});"
                    for name in new
                )
            )
            _declared.update(new)
        if "gc_bind_pool_clock" not in _declared:
            FFI.cdef("void gc_bind_pool_clock(int64_t *);")
            _declared.add("gc_bind_pool_clock")
        key = str(path)
        if key not in _libraries:
            _libraries[key] = FFI.dlopen(key)
            _libraries[key].gc_bind_pool_clock(FFI.cast("int64_t *", POOL_CLOCK.ctypes.data))
        lib = _libraries[key]
    return {name: getattr(lib, name) for name in signatures}


def scratch_failed(op: str) -> None:
    """Raise for a kernel of `op` that could not allocate its scratch memory (a nonzero
    status: Kernel.status); its output is incomplete."""
    raise MemoryError(f"graphc native kernel for {op}: could not allocate its scratch memory")


def checked(gen: Any, call: str, op: str) -> list[str]:
    """Source lines that make the call `call` of a status kernel and raise MemoryError,
    naming `op`, when it reports a failed allocation."""
    return [f"if {call}:", f"    {gen.const(scratch_failed, 'scratch_failed')}({op!r})"]
