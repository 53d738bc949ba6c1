"""`defop`: register an op and return its public function, in one block per op.

Also the pieces most op blocks share: type rules and kernels for numpy ufuncs,
and the gradient helpers that undo broadcasting.

16-bit floats (float16, ml_dtypes' bfloat16) are computed here, once for every op: a
kernel that is a numpy ufunc runs numpy's float16 loop or ml_dtypes' bfloat16 loop (each
element computed in float32, rounded); every other kernel given a 16-bit operand
computes on float32 copies and rounds each 16-bit result of its type rule once
(`in_float32`), as PyTorch's and onnxruntime's CPU kernels do: numpy's matmul on
bfloat16 gives float32, its float16 cumsum rounds at every term (thousands of steps
off at 4096 terms), a softmax or a norm of several float16 steps rounds at each (7 and
600 steps off), some functions have no bfloat16 loop. Ops holding bodies and a
backend's fused nodes are left alone: the ops they are made of round as they would
unfused (a convolution's own kernel rounds before its epilogue).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError
from graphc.ir.registry import REQUIRED, OpDef, register
from graphc.ir.types import (
    TensorType,
    TupleType,
    as_dtype,
    broadcast_shapes,
    is_bfloat16,
    is_half,
)
from graphc.ops.dispatch import bind
from graphc.ops.spelling import TORCH_KEYWORDS, numpy_keywords, with_torch_parameters

VARIADIC = "*"


def defop(
    name: str,
    *,
    inputs: Sequence[str] | str = ("x",),
    infer: Callable[..., TensorType],
    kernel: Callable[..., Any],
    attrs: dict[str, Any] | None = None,
    vjp: Callable[..., tuple] | None = None,
    canonicalize: Callable[..., dict] | None = None,
    elementwise: bool = False,
    pure: bool = True,
    inplace: bool = False,
    inplace_inputs: tuple[int, ...] = (),
    shape_attrs: tuple[str, ...] = (),
    bodies: tuple[str, ...] = (),
    permutes: bool = False,
    cost: Callable[..., int] | None = None,
    scratch: Callable[..., int] | None = None,
    doc: str = "",
    props: Sequence[str] = (),
) -> Callable[..., Any]:
    """Register op `name` and return the function users call (`gc.<name>`).

    `inputs` names the tensor inputs, or is "*" for an op taking a sequence. `scratch`,
    like `cost`, takes the output and input types and the attrs; it gives the bytes the
    kernel allocates for itself besides its result (see `OpDef`). `bodies` names the
    attrs that hold body Graphs.
    """
    attrs = dict(attrs or {})
    variadic = inputs == VARIADIC
    arity = None if variadic else len(inputs)
    # 16-bit floats' rounding: a ufunc has numpy's or ml_dtypes' loop; the ops of bodies
    # and of a backend's fused nodes round by their own kernels (a convolution's before
    # its epilogue)
    rounds_itself = bool(bodies) or "fusion" in props or hasattr(kernel, "ufunc")
    rounds_itself = rounds_itself or getattr(kernel, "rounds_half", False)
    register(
        OpDef(
            name=name,
            arity=arity,
            infer=infer,
            kernel=kernel if rounds_itself else in_float32(kernel, infer, arity, attrs),
            attrs=attrs,
            vjp=vjp,
            canonicalize=canonicalize,
            elementwise=elementwise,
            pure=pure,
            inplace=inplace,
            inplace_inputs=inplace_inputs,
            shape_attrs=shape_attrs,
            bodies=bodies,
            permutes=permutes,
            cost=cost,
            scratch=scratch,
            doc=doc,
            props=frozenset(props),
        )
    )

    # PyTorch's dim=/keepdim= name numpy's axis/keepdims attrs (ops/spelling.py)
    aliases = [t for t, n in TORCH_KEYWORDS.items() if n in attrs and t not in attrs]

    if variadic:

        def op(values: Sequence[Any], *more: Any, **kwargs: Any) -> Any:
            if more:  # attrs positionally, numpy style (concat(xs, 1)), or arrays unlisted
                if len(more) > len(attrs) or any(hasattr(m, "shape") for m in more):
                    raise GraphcError(
                        f"{name}: takes one sequence of arrays, then its attrs "
                        f"({', '.join(attrs)}): gc.{name}([a, b, ...]), not gc.{name}(a, b)"
                    )
                kwargs.update(zip(list(attrs)[: len(more)], more))
            if aliases:
                kwargs = numpy_keywords(name, attrs, kwargs)
            return bind(name, *values, **kwargs)

        params = [inspect.Parameter("values", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    else:

        def op(*args: Any, **kwargs: Any) -> Any:
            if len(args) > len(inputs):  # attrs may be given positionally, numpy style
                extra = args[len(inputs) :]
                given = list(attrs)[: len(extra)]
                if aliases and any(t in kwargs for t in aliases):
                    kwargs = numpy_keywords(name, attrs, kwargs, given)
                kwargs.update(zip(given, extra))
                args = args[: len(inputs)]
            elif aliases and any(t in kwargs for t in aliases):
                kwargs = numpy_keywords(name, attrs, kwargs)
            return bind(name, *args, **kwargs)

        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in inputs]
    params += [
        inspect.Parameter(
            key,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if default is REQUIRED else default,
        )
        for key, default in attrs.items()
    ]
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return with_torch_parameters(op, inspect.Signature(params), aliases)


# -- 16-bit floats ------------------------------------------------------------


def rounds_half(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a kernel that computes 16-bit floats by itself as its op means it (pow's
    x*x*x, each product rounded in the result dtype): `defop` leaves it out of
    `in_float32`."""
    kernel.rounds_half = True  # type: ignore[attr-defined]
    return kernel


def in_float32(
    kernel: Callable[..., Any],
    infer: Callable[..., Any],
    arity: int | None,
    defaults: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """`kernel`, which on 16-bit float operands computes on float32 copies of them and
    rounds each result its type rule (`infer`, given the op's attr `defaults` where a
    caller leaves them out) gives as a 16-bit float once, into `out` when given (by
    keyword, or after the `arity` operands). Other dtypes call `kernel` itself (a look
    at each operand's itemsize more)."""
    given = {k: v for k, v in (defaults or {}).items() if v is not REQUIRED}

    @functools.wraps(kernel)
    def run(*arrays: Any, out: Any = None, **attrs: Any) -> Any:
        if not _holds_half(arrays):
            return (
                kernel(*arrays, out=out, **attrs) if out is not None else kernel(*arrays, **attrs)
            )
        if arity is not None and len(arrays) > arity:  # out given positionally
            arrays, out = arrays[:arity], arrays[arity]
        wide = [a.astype(np.float32) if is_half(getattr(a, "dtype", None)) else a for a in arrays]
        result = kernel(*wide, **attrs)
        if out is None:
            # a Python number is weak: it takes the 16-bit dtype it meets (NEP 50)
            half = next(a.dtype for a in arrays if is_half(getattr(a, "dtype", None)))
            typed = [np.asarray(a, half if type(a) in (bool, int, float) else None) for a in arrays]
            out_type = infer(*(TensorType.of(a) for a in typed), **{**given, **attrs})
            dtypes = out_type.items if isinstance(out_type, TupleType) else (out_type,)
            if isinstance(result, tuple):
                return tuple(_rounded(r, t.dtype) for r, t in zip(result, dtypes))
            return _rounded(result, dtypes[0].dtype)
        if isinstance(result, tuple):
            for o, r in zip(out, result):
                np.copyto(o, r, casting="unsafe")
            return out
        np.copyto(out, result, casting="unsafe")
        return out

    run.widens_half = True  # type: ignore[attr-defined]
    run.unwidened = kernel  # type: ignore[attr-defined] # what a plan without 16-bit floats calls
    return run


def _holds_half(arrays: tuple) -> bool:
    """Whether any of `arrays` is a 16-bit float (a loop: the kernels' hot path, so the
    itemsize is looked at first)."""
    for a in arrays:
        dt = getattr(a, "dtype", None)
        if dt is not None and dt.itemsize == 2 and is_half(dt):
            return True
    return False


def float32_copy_bytes(kernel: Callable[..., Any], out: Any, inputs: Sequence[Any]) -> int:
    """The bytes `in_float32` allocates for a step of these (concrete) types: float32
    copies of its 16-bit float operands and its float32 result (0 for other kernels)."""
    if not getattr(kernel, "widens_half", False):
        return 0
    narrow = [t for t in inputs if isinstance(t, TensorType) and is_half(t.dtype)]
    if not narrow:
        return 0
    results = out.items if isinstance(out, TupleType) else (out,)
    return 4 * sum(t.size or 0 for t in (*narrow, *results))


def _rounded(result: Any, dtype: np.dtype) -> Any:
    result = np.asarray(result)
    return result.astype(dtype) if result.dtype != dtype else result


# -- ufuncs -------------------------------------------------------------------


def ufunc_dtype(ufunc: np.ufunc, op: str, *dtypes: np.dtype) -> np.dtype:
    """The dtype numpy's own type resolution gives `ufunc` on these dtypes."""
    try:
        resolved = ufunc.resolve_dtypes((*dtypes, None))
    except TypeError as exc:  # numpy's 'no loop' error is a TypeError
        shown = ", ".join(str(d) for d in dtypes)
        raise DTypeError(f"{op}: numpy has no '{ufunc.__name__}' for dtypes ({shown})") from exc
    result = resolved[-1]
    if result == np.float32 and any(map(is_bfloat16, dtypes)):
        # ml_dtypes has no bfloat16 loop (matmul): the kernel rounds to bfloat16 where
        # the operands promote to it (`in_float32`)
        result = np.result_type(*dtypes)
    shown = ", ".join(str(d) for d in dtypes)
    if result == np.float16 and np.bool_ in dtypes and np.float16 not in dtypes:
        # numpy computes log(bool) in float16, torch in float32: a float function of
        # bools has no answer both agree on, so the user chooses the float dtype
        raise DTypeError(
            f"{op}: on dtypes ({shown}) numpy gives float16 (torch float32): cast the "
            "bools to a float dtype first"
        )
    try:
        return as_dtype(result)
    except DTypeError as exc:
        raise DTypeError(f"{op}: on dtypes ({shown}) numpy gives {result}: {exc}") from None


def ufunc_infer(ufunc: np.ufunc, op: str) -> Callable[..., TensorType]:
    def infer(*types: TensorType) -> TensorType:
        shape = broadcast_shapes(*(t.shape for t in types), op=op)
        return TensorType(shape, ufunc_dtype(ufunc, op, *(t.dtype for t in types)))

    return infer


def ufunc_kernel(ufunc: np.ufunc) -> Callable[..., np.ndarray]:
    def kernel(*arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return ufunc(*arrays, out=out)

    kernel.__name__ = ufunc.__name__
    kernel.ufunc = ufunc  # type: ignore[attr-defined] - the runtime calls the ufunc directly
    return kernel


def elementwise_cost(out: TensorType, *inputs: TensorType, **attrs: Any) -> int:
    return out.size or 0


def into(out: np.ndarray | None, result: Any) -> np.ndarray:
    """`result` copied into `out`, or into a fresh array: kernels never return views."""
    if out is None:
        return np.array(result)
    np.copyto(out, result, casting="unsafe")
    return out
