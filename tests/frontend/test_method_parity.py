"""Traced values and eager tensors have one method table (graphc/ops/methods.py).

Every public method of the eager Tensor is either eager-only, for a reason written
below, or has a case here; each case is traced and run eagerly on the same inputs, and
both must apply the same ops, in the same order, and give the same bits. A new eager
method that applies an op fails `test_every_eager_method_is_shared_or_eager_only` until
it has a case, and its case fails until traced values have it too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.eager import value_kind
from graphc.eager.tensor import Tensor
from graphc.ops import methods
from graphc.ops.symbolic import Symbol

# What only an eager tensor can do. In-place methods (a name ending in "_") are
# eager-only too: graph values are immutable, and refuse them with a TracingError.
EAGER_ONLY = {
    "backward": "runs the autograd tape",
    "grad": "the gradient the tape accumulated",
    "grad_fn": "the tape entry that made the tensor",
    "requires_grad": "a flag of the tape",
    "is_leaf": "a question about the tape",
    "retains_grad": "a flag of the tape",
    "retain_grad": "a request to the tape",
    "register_hook": "a hook on the tape",
    "detach": "cuts the tensor from the tape (a graph value's detach records gc.stop_gradient)",
    "data": "the tensor's memory outside the tape",
    "device": "where the memory is",
    "tolist": "reads the values",
    "item": "reads the values (a traced value raises a TracingError saying so)",
    "numpy": "reads the values (a traced value raises a TracingError saying so)",
    "equal": "reads the values: a Python bool",
    "allclose": "reads the values: a Python bool, as torch (a graph value's is a 0-d bool)",
    "is_contiguous": "reads the memory layout",
    # a graph value's new_* record a constant (test_new_values_of_graph_values)
    "new_tensor": "makes a tensor from data, applies no op to self",
    "new_zeros": "makes a tensor from data, applies no op to self",
    "new_ones": "makes a tensor from data, applies no op to self",
    "new_full": "makes a tensor from data, applies no op to self",
    "new_empty": "makes a tensor from data, applies no op to self",
    "register_post_accumulate_grad_hook": "a hook on the tape",
    "nonzero": "reads the values: the result's shape depends on them",
    "argwhere": "reads the values: the result's shape depends on them",
    "masked_select": "reads the mask: the result's shape depends on it",
    "unique": "reads the values: the result's shape depends on them",
    "bincount": "reads the values: the result's shape depends on them",
    "stride": "reads the memory layout",
    "storage_offset": "reads the memory layout",
    "element_size": "the memory's size",
    "itemsize": "the memory's size",
    "nbytes": "the memory's size",
}
# bfloat16() casts to ml_dtypes' bfloat16: a case where ml_dtypes is installed
HAS_BFLOAT16 = importlib.util.find_spec("ml_dtypes") is not None
if not HAS_BFLOAT16:
    EAGER_ONLY["bfloat16"] = "needs ml_dtypes, not installed here (a DTypeError says so)"

# Questions answered without an op (by the shape, or by who made the value): the same
# answers for both kinds.
QUERIES = [
    "dim", "ndimension", "size", "numel", "nelement", "ndim", "shape", "dtype", "made_by",
    "is_floating_point", "is_complex", "is_signed", "is_cuda",
]  # fmt: skip
# refused on both kinds alike: test_a_device_but_the_cpu_is_refused_on_both_kinds
REFUSED = ["cuda"]

_rng = np.random.default_rng(0)
F = (_rng.random((2, 3)) + 0.25).astype(np.float32)  # positive: log, sqrt, pow are defined
G = (_rng.random((2, 3)) + 0.25).astype(np.float32)
SQUARE = _rng.standard_normal((3, 3)).astype(np.float32)
CUBE = _rng.standard_normal((2, 3, 4)).astype(np.float32)
ROW = _rng.standard_normal((1, 3)).astype(np.float32)
VECTOR = _rng.standard_normal(3).astype(np.float32)
MASK = F > 0.75
IDS = np.array([2, 0, 2])  # along a dim of size 3
ROW_IDS = np.array([[2, 0], [1, 1]])
LABELS = np.array([3, 0, 1])

# the methods graphc/ops/methods.py generates from its tables are all taken (an op added
# there is checked here with nothing more to write); the hand-written ones are named
UNARY = [
    *sorted(set(methods.UNARY) - {"exp"}),
    "exp", "log", "sqrt", "square", "abs", "neg", "negative", "sign", "sin", "cos", "tanh",
    "sigmoid", "relu", "gelu", "gelu_exact", "erf", "log1p", "expm1", "reciprocal", "rsqrt",
    "floor", "ceil", "trunc", "fix", "logical_not", "norm", "t", "fliplr", "flipud", "clone",
    "float", "double", "long", "int", "bool", "half", "short", "char", "byte", "cpu",
    "contiguous", "sum", "mean", "prod", *(["bfloat16"] if HAS_BFLOAT16 else []),
    "max", "min", "amax", "amin", "argmax", "argmin", "var", "std", "all", "any",
    "logsumexp", "softmax", "log_softmax", "flatten", "squeeze", "round", "argsort", "sort",
]  # fmt: skip
BINARY = [
    *sorted(set(methods.BINARY) - {"add"}),
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "pow",
    "maximum", "minimum", "remainder", "fmod", "logical_and", "logical_or", "logical_xor",
    "eq", "ne", "lt", "le", "gt", "ge", "view_as", "reshape_as", "expand_as",
]  # fmt: skip

Case = tuple[Callable[..., Any], tuple[np.ndarray, ...]]


def _method(name: str, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    return lambda x: getattr(x, name)(*args, **kwargs)


CASES: dict[str, Case] = {
    **{name: (_method(name), (F,)) for name in UNARY},
    **{name: (lambda x, y, name=name: getattr(x, name)(y), (F, G)) for name in BINARY},
    # products
    "matmul": (lambda x, y: x.matmul(y), (F, G.T.copy())),
    "mm": (lambda x, y: x.mm(y), (F, G.T.copy())),
    "bmm": (lambda x, y: x.bmm(y), (CUBE[:, :, :3].copy(), CUBE[:, :3, :2].copy())),
    "mv": (lambda x, y: x.mv(y), (F, VECTOR)),
    "dot": (lambda x, y: x.dot(y), (VECTOR, VECTOR * 2)),
    # PyTorch's extra arguments
    "sum/dim": (lambda x: x.sum(dim=1, keepdim=True), (F,)),
    "mean/axis": (lambda x: x.mean(axis=0), (F,)),
    "max/dim": (lambda x: x.max(1), (F,)),
    "max/axis": (lambda x: x.max(axis=1), (F,)),
    "min/other": (lambda x, y: x.min(y), (F, G)),
    "var/dim": (lambda x: x.var(1, keepdim=True), (F,)),
    "var/axis": (lambda x: x.var(axis=1), (F,)),
    "std/unbiased": (lambda x: x.std(0, unbiased=False), (F,)),
    "all/dim": (lambda x: x.all(dim=1), (F,)),
    "softmax/dim": (lambda x: x.softmax(0), (F,)),
    "add/alpha": (lambda x, y: x.add(y, alpha=2), (F, G)),
    "round/decimals": (lambda x: x.round(1), (F,)),
    "clamp": (lambda x: x.clamp(0.5, 0.75), (F,)),
    "clamp/tensor": (lambda x, y: x.clamp(y), (F, G)),
    "clip": (lambda x: x.clip(0.5, 0.75), (F,)),
    "clamp_min": (lambda x: x.clamp_min(0.5), (F,)),
    "clamp_max": (lambda x: x.clamp_max(0.5), (F,)),
    "where": (lambda x, c, y: x.where(c, y), (F, MASK, G)),
    "masked_fill": (lambda x, c: x.masked_fill(c, 0.5), (F, MASK)),
    # dtypes
    "to": (lambda x: x.to(np.float64), (F,)),
    "type": (lambda x: x.type("torch.DoubleTensor") + x.type(x.type()), (F,)),
    "astype": (lambda x: x.astype(np.int32), (F,)),
    "cast": (lambda x: x.cast(np.float64), (F,)),
    "full_like": (lambda x: x.full_like(2.0), (F,)),
    # shapes
    "T": (lambda x: x.T, (F,)),
    "reshape": (lambda x: x.reshape(3, 2), (F,)),
    "view": (lambda x: x.view(-1), (F,)),
    "flatten/start": (lambda x: x.flatten(1), (CUBE,)),
    "expand": (lambda x: x.expand(2, 3), (ROW,)),
    "broadcast_to": (lambda x: x.broadcast_to((2, 2, 3)), (F,)),
    "sum_to": (lambda x: x.sum_to((3,)), (F,)),
    "repeat": (lambda x: x.repeat(2, 1), (F,)),
    "tile": (lambda x: x.tile(2), (F,)),
    "squeeze/dim": (lambda x: x.squeeze(1), (CUBE[:, :1].copy(),)),
    "unsqueeze": (lambda x: x.unsqueeze(0), (F,)),
    "permute": (lambda x: x.permute(2, 0, 1), (CUBE,)),
    "transpose": (lambda x: x.transpose(0, 2), (CUBE,)),
    "swapaxes": (lambda x: x.swapaxes(0, 1), (F,)),
    "swapdims": (lambda x: x.swapdims(1, 0), (F,)),
    "concat": (lambda x, y: x.concat([y], axis=1), (F, G)),
    "split": (lambda x: x.split(2, dim=1), (F,)),
    "chunk": (lambda x: x.chunk(2, dim=0), (F,)),
    "flip": (lambda x: x.flip(0, 1), (F,)),
    "tril": (lambda x: x.tril(), (SQUARE,)),
    "triu": (lambda x: x.triu(1), (SQUARE,)),
    "unpad": (lambda x: x.unpad((1, 1), "edge"), (VECTOR,)),
    "cumsum": (lambda x: x.cumsum(1), (F,)),
    "cumprod": (lambda x: x.cumprod(1), (F,)),
    "nansum": (lambda x: x.nansum(dim=1), (F,)),
    "nanmean": (lambda x: x.nanmean(0, keepdim=True), (F,)),
    "diagonal": (lambda x: x.diagonal(1, 2, 0), (CUBE,)),
    "outer": (lambda x, y: x.outer(y), (VECTOR, VECTOR * 2)),
    "ger": (lambda x, y: x.ger(y), (VECTOR, VECTOR * 2)),
    "isclose": (lambda x, y: x.isclose(y, rtol=0.5), (F, G)),
    "ravel": (lambda x: x.ravel(), (CUBE,)),
    "moveaxis": (lambda x: x.moveaxis(0, -1), (CUBE,)),
    "movedim": (lambda x: x.movedim((0, 1), (2, 0)), (CUBE,)),
    "diag": (lambda x: x.diag(-1), (SQUARE,)),
    "diag/vector": (lambda x: x.diag(1), (VECTOR,)),
    "nan_to_num": (lambda x: (x / (x - x)).nan_to_num(posinf=2.0), (F,)),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), (F,)),
    "repeat_interleave/counts": (lambda x: x.repeat_interleave([1, 0, 2]), (VECTOR,)),
    "sort/dim": (lambda x: x.sort(dim=0, descending=True), (F,)),
    "topk": (lambda x: x.topk(2), (F,)),
    # indexing
    "narrow": (lambda x: x.narrow(1, 1, 2), (F,)),
    "select": (lambda x: x.select(1, -1), (F,)),
    "unbind": (lambda x: x.unbind(1), (F,)),
    "slice": (lambda x: x.slice((slice(None), slice(0, 2))), (F,)),
    "unslice": (lambda x: x.unslice((4, 3), (slice(1, 3),)), (F,)),
    "take": (lambda x, i: x.take(i, axis=1), (F, IDS)),
    "index_select": (lambda x, i: x.index_select(1, i), (F, IDS)),
    "scatter_add": (lambda x, i: x.scatter_add(i, (2, 4), axis=1), (F, IDS)),
    "gather": (lambda x, i: x.gather(1, i), (F, ROW_IDS)),
    "take_along_dim": (lambda x, i: x.take_along_dim(i, dim=1), (F, ROW_IDS)),
    "take_along_axis": (lambda x, i: x.take_along_axis(i, axis=1), (F, ROW_IDS)),
    "scatter_add_along_axis": (
        lambda x, i: x.scatter_add_along_axis(i, (2, 4), axis=1),
        (F[:, :2].copy(), ROW_IDS),
    ),
    "one_hot": (lambda x: x.one_hot(4), (LABELS,)),
    # torch's extra arguments, on graph values too
    "norm/p_dim": (lambda x: x.norm(1, dim=1, keepdim=True), (F,)),
    "norm/inf": (lambda x: x.norm(float("inf"), 0), (F,)),
    "norm/dtype": (lambda x: x.norm(dtype=np.float64), (F,)),
    "div/floor": (lambda x, y: x.div(y * 0.3, rounding_mode="floor"), (F, G)),
    "div/trunc": (lambda x: (-x).div(0.3, rounding_mode="trunc"), (F,)),
    "divide/trunc_ints": (lambda x: x.divide(-2, rounding_mode="trunc"), (ROW_IDS * 7 - 5,)),
    "sum/dtype": (lambda x: x.sum(1, dtype=np.float64), (F,)),
    "sum/dtype_ints": (lambda x: x.sum(dtype=np.int32), (ROW_IDS.astype(np.int32),)),
    "prod/dtype": (lambda x: x.prod(0, dtype=np.float64), (F,)),
    "mean/dtype": (lambda x: x.mean(dtype=np.float64), (ROW_IDS,)),
    "nansum/dtype": (lambda x: x.nansum(dtype=np.float64), (F,)),
    "softmax/dtype": (lambda x: x.softmax(-1, dtype=np.float64), (F,)),
    "log_softmax/dtype": (lambda x: x.log_softmax(0, np.float64), (F,)),
    "transpose/named": (lambda x: x.transpose(dim0=2, dim1=0), (CUBE,)),
    "permute/named": (lambda x: x.permute(dims=(1, 2, 0)), (CUBE,)),
    "flip/named": (lambda x: x.flip(dims=(0, -1)), (CUBE,)),
    "masked_fill/ints": (lambda x, c: x.masked_fill(c, 2.5), (ROW_IDS, ROW_IDS > 1)),
    "masked_fill/value": (lambda x, c, v: x.masked_fill(c, v), (F, MASK, np.array(0.5))),
    "topk/0d": (lambda x: x.topk(1), (np.float32(2.0),)),
    # torch's composites (graphc/ops/composites.py, graphc/ops/scatters.py)
    "roll": (lambda x: x.roll(4, 1), (F,)),
    "roll/flat": (lambda x: x.roll(-2), (F,)),
    "roll/dims": (lambda x: x.roll((1, -1), (0, -1)), (F,)),
    "roll/whole_turn": (lambda x: x.roll(3, 1), (F,)),
    "lerp": (lambda x, y: x.lerp(y, 0.25), (F, G)),
    "lerp/tensor": (lambda x, y, w: x.lerp(y, w), (F, G, ROW)),
    "addcmul": (lambda x, y, z: x.addcmul(y, z, value=0.5), (F, G, ROW)),
    "addcdiv": (lambda x, y, z: x.addcdiv(y, z), (F, G, F)),
    "trace": (lambda x: x.trace(), (SQUARE,)),
    "diff": (lambda x: x.diff(2), (CUBE,)),
    "diff/prepend": (lambda x, y: x.diff(1, 0, prepend=y), (F, ROW)),
    "aminmax": (lambda x: x.aminmax(dim=1, keepdim=True), (F,)),
    "frac": (lambda x: (x * 7).frac(), (SQUARE,)),
    "count_nonzero": (lambda x: x.count_nonzero(0), (ROW_IDS - 1,)),
    "unflatten": (lambda x: x.unflatten(-1, (2, -1)), (CUBE,)),
    "mT": (lambda x: x.mT, (CUBE,)),
    "tensor_split": (lambda x: x.tensor_split(2, 1), (F,)),
    "tensor_split/indices": (lambda x: x.tensor_split([1, -1, 0], -1), (F,)),
    "type_as": (lambda x, y: x.type_as(y), (F, LABELS)),
    "scatter": (lambda x, i, y: x.scatter(1, i, y), (F, ROW_IDS, G)),
    "scatter/value": (lambda x, i: x.scatter(1, i, 0.5), (F, ROW_IDS)),
    "scatter_add/dim": (lambda x, i, y: x.scatter_add(1, i, y), (F, ROW_IDS, G)),
    "index_add": (lambda x, i, y: x.index_add(1, i, y, alpha=2), (F, IDS, G)),
    "index_fill": (lambda x, i: x.index_fill(1, i, -1.0), (F, IDS)),
    "index_copy": (lambda x, i, y: x.index_copy(-1, i, y), (F, IDS[:2], G[:, :2].copy())),
    "positive": (lambda x: x.positive() * 2, (F,)),
    "median": (lambda x: x.median(), (F,)),
    "median/dim": (lambda x: x.median(0, keepdim=True), (CUBE,)),
    "nanmedian": (lambda x: (x / (x - F)).nanmedian(0), (np.where(MASK, F, G),)),
    "cummax": (lambda x: x.cummax(1), (F,)),
    "diag_embed": (lambda x: x.diag_embed(1, 0, 2), (F,)),
    "narrow_copy": (lambda x: x.narrow_copy(1, -2, 2), (F,)),
    "diagflat": (lambda x: x.diagflat(-1), (F,)),
    "cummin": (lambda x: x.cummin(0), (ROW_IDS,)),
    "median/nan": (lambda x: (x / (x - F)).median(-1), (np.where(MASK, F, G),)),
    "logit": (lambda x: (x * 0.5).logit(eps=0.3), (F,)),
    "dist": (lambda x, y: x.dist(y, 3), (F, G)),
    "kthvalue": (lambda x: x.kthvalue(2, 0, keepdim=True), (SQUARE,)),
    "msort": (lambda x: x.msort(), (SQUARE,)),
    "logcumsumexp": (lambda x: x.logcumsumexp(-1), (CUBE,)),
    "rot90": (lambda x: x.rot90(3, (2, 0)), (CUBE,)),
    "unfold": (lambda x: x.unfold(2, 2, 1), (CUBE,)),
    "matrix_power": (lambda x: x.matrix_power(5), (SQUARE,)),
    "sum_to_size": (lambda x: x.sum_to_size(2, 1, 4), (CUBE,)),
    "addmm": (lambda b, x, y: b.addmm(x, y, beta=0.5), (VECTOR, F, SQUARE)),
    "addmv": (lambda b, x, y: b.addmv(x, y, alpha=2), (VECTOR[:2].copy(), F, VECTOR)),
    "addr": (lambda b, x, y: b.addr(x, y, beta=0), (F, VECTOR[:2].copy(), VECTOR)),
    "baddbmm": (lambda b, x, y: b.baddbmm(x, y), (CUBE[0, 0], CUBE[:, :, :3].copy(), CUBE)),
    "addbmm": (lambda b, x, y: b.addbmm(x, y, alpha=-1), (CUBE[0], CUBE[:, :, :3].copy(), CUBE)),
    "at": (lambda x, y: x.at[0, 1:].add(y[1, 1:]).at[1].set(y[0]), (F, G)),
}


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def _in_place(name: str) -> bool:
    return name.endswith("_")


def test_every_eager_method_is_shared_or_eager_only() -> None:
    covered = {case.split("/")[0] for case in CASES} | set(QUERIES) | set(EAGER_ONLY) | set(REFUSED)
    missing = {n for n in _public(Tensor) - covered if not _in_place(n)}
    assert not missing, f"eager methods without a parity case or an eager-only reason: {missing}"
    stale = set(EAGER_ONLY) - _public(Tensor)
    assert not stale, f"EAGER_ONLY names no eager method: {stale}"


def test_traced_values_have_every_shared_method() -> None:
    shared = {case.split("/")[0] for case in CASES} | set(QUERIES) | set(REFUSED)
    assert not shared - _public(Symbol), shared - _public(Symbol)


@pytest.mark.parametrize("kind", ["eager", "traced"])
def test_a_device_but_the_cpu_is_refused_on_both_kinds(kind: str) -> None:
    """graphc computes on the CPU: "cpu" passes everywhere a device is taken; "cuda" (or
    "mps", a torch.device of either) is an ArgumentError naming it, not a CPU tensor the
    program then takes for a GPU one (x.to("cuda") was a DTypeError 'not a dtype',
    x.to(device="cuda") and ge.ones(2, device="cuda") silently the CPU's)."""
    import graphc as gc
    import graphc.eager as ge

    assert not ge.cuda.is_available() and ge.cuda.device_count() == 0
    calls = [
        lambda x: x.to("cuda"),
        lambda x: x.to("cuda:1", np.float64),
        lambda x: x.to(device="mps"),
        lambda x: x.cuda(),
    ]
    for call in calls:
        with pytest.raises(gc.ArgumentError, match="no device '(cuda|cuda:1|mps|cuda)'"):
            if kind == "eager":
                call(ge.ones(2))
            else:
                gc.trace(call, gc.TensorSpec((2,)))

    def kept(x: Any) -> Any:
        return x.to("cpu").to(device="cpu:0").to("cpu", np.float64) * 2

    value = kept(ge.ones(2)).numpy() if kind == "eager" else gc.jit(kept)(np.ones(2, np.float32))
    np.testing.assert_array_equal(value, [2.0, 2.0])
    assert value.dtype == np.float64


@pytest.mark.parametrize(
    "make", ["tensor", "zeros", "ones", "arange", "rand", "randint", "randperm"]
)
def test_creation_takes_the_cpu_and_refuses_other_devices(make: str) -> None:
    import graphc as gc
    import graphc.eager as ge

    args = {"tensor": ([1.0],), "arange": (3,), "randint": (0, 3, (2,)), "randperm": (3,)}
    made = getattr(ge, make)(*args.get(make, (2,)), device="cpu")
    assert made.device == "cpu"
    with pytest.raises(gc.ArgumentError, match=f"{make}: .*no device 'cuda'"):
        getattr(ge, make)(*args.get(make, (2,)), device="cuda")


def _outputs(value: Any) -> list[np.ndarray]:
    values = value if isinstance(value, tuple) else (value,)
    return [v.detach().numpy() for v in values]


def _eager_run(fn: Callable[..., Any], inputs: tuple, monkeypatch: Any) -> tuple[list, list]:
    """fn on eager tensors: its results and the ops it applied, in order."""
    applied: list[str] = []
    apply = value_kind.EAGER.apply

    def recording(opdef: Any, *args: Any) -> Any:
        applied.append(opdef.name)
        return apply(opdef, *args)

    monkeypatch.setattr(value_kind.EAGER, "apply", recording)
    results = fn(*[ge.tensor(a) for a in inputs])
    monkeypatch.undo()
    return _outputs(results), applied


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_traced_method_applies_the_eager_ops_and_gives_the_eager_bits(
    case: str, monkeypatch: Any
) -> None:
    fn, inputs = CASES[case]
    g = gc.trace(fn, *inputs)
    recorded = [n.op for n in g.nodes if n.kind == "op" and n.op != "constant"]
    expected, applied = _eager_run(fn, inputs, monkeypatch)
    assert recorded == applied
    got = gc.run(g, {p.name: a for p, a in zip(g.inputs, inputs)})
    assert len(got) == len(expected)
    for traced, eager in zip(got, expected):
        assert traced.dtype == eager.dtype and traced.shape == eager.shape
        np.testing.assert_array_equal(traced, eager, strict=True)


def test_erf_traces() -> None:
    g = gc.trace(lambda x: x.erf(), gc.TensorSpec((None, 3)))
    assert [n.op for n in g.nodes if n.kind == "op"] == ["erf"]


@pytest.mark.parametrize("name", QUERIES)
def test_shape_questions_have_the_same_answers(name: str) -> None:
    def ask(x: Any) -> Any:
        answer = getattr(x, name)
        return tuple(answer) if name == "shape" else answer() if callable(answer) else answer

    traced = []
    gc.trace(lambda x: traced.append(ask(x)) or x, CUBE)
    assert traced == [ask(ge.tensor(CUBE))]


def test_in_place_methods_are_refused_on_traced_values() -> None:
    names = sorted(n for n in _public(Tensor) if _in_place(n))
    assert "add_" in names

    def touch(x: Any) -> Any:
        for name in names:
            with pytest.raises(gc.TracingError, match="immutable"):
                getattr(x, name)
        return x

    gc.trace(touch, gc.TensorSpec((3,)))


def test_max_along_a_dim_sends_the_gradient_to_the_index_returned() -> None:
    """x.max(dim) / x.min(dim) on graph values, as on eager tensors and in torch: the
    values are the entries at the returned indices, one winner per tie (the max op,
    max() and amax share a tie's gradient, as JAX)."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    want = {"max": [[0, 1, 0], [1, 0, 0]], "min": [[1, 0, 0], [0, 0, 1]]}
    for which, expected in want.items():
        for keepdim in (False, True):

            def loss(v, which=which, keepdim=keepdim):
                values, indices = getattr(v, which)(1, keepdim)
                return gc.sum(values)

            np.testing.assert_array_equal(gc.grad(loss)(x), expected)
            t = ge.tensor(x, requires_grad=True)
            getattr(t, which)(1, keepdim)[0].sum().backward()
            np.testing.assert_array_equal(t.grad.numpy(), expected)
    np.testing.assert_array_equal(
        gc.grad(lambda v: gc.max(v, axis=1).sum())(x), [[0, 0.5, 0.5], [0.5, 0.5, 0]]
    )


def test_all_and_any_of_no_elements_on_graph_values_and_tensors() -> None:
    """True and False over nothing, as torch and numpy (a min or max of no bools raised)."""
    x = np.zeros((2, 0))
    got = gc.jit(lambda v: (v.all(), v.any(), v.all(1), v.any(0)))(x)
    want = (x.all(), x.any(), x.all(1), x.any(0))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.shape == w.shape and g.dtype == np.bool_
    t = ge.tensor(x)
    assert bool(t.all()) and not bool(t.any())
    y = np.array([[1.0, 0.0, -2.0], [3.0, 4.0, np.nan]])
    got = gc.jit(lambda v: (v.all(1), v.any(0), v.all(keepdim=True, dim=0)))(y)
    for g, w in zip(got, (y.all(1), y.any(0), y.all(0, keepdims=True))):
        np.testing.assert_array_equal(g, w)


def test_new_values_of_graph_values() -> None:
    """x.new_zeros(...) and the other new_* record constants of x's dtype on a graph value
    (a symbolic dim among the sizes too), with the eager tensor's values."""

    def make(x: Any) -> tuple:
        return (
            x.new_zeros(2, 3),
            x.new_ones((3,)),
            x.new_full((2, 1), 7),
            x.new_empty(0),
            x.new_tensor([[1, 2]]),
        )

    eager = [t.numpy() for t in make(ge.tensor(F))]
    for got, want in zip(gc.jit(make)(F), eager):
        assert got.dtype == want.dtype == F.dtype and got.shape == want.shape
        if want.size:
            np.testing.assert_array_equal(got, want)
    g = gc.trace(lambda x: x.new_zeros(x.shape[0], 2) + x.sum(), gc.TensorSpec((None, 3)))
    np.testing.assert_array_equal(
        gc.run(g, {g.inputs[0].name: np.ones((4, 3), np.float32)})[0], np.full((4, 2), 12.0)
    )
