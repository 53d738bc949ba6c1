"""Programs a PyTorch user writes, run on torch 2.13 and on graphc.eager side by side.

Each case is a function of the library (`torch` or `graphc.eager`) returning what it
computed (tensors, numbers, tuples of them); the two must agree in values, shapes and
dtypes. Error cases must raise in both, graphc's error being an instance of the class
torch raises (docs/trust.md, section 5). Every case here was a difference once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc.eager as ge
from graphc.ir.errors import GraphcError

Case = Callable[[Any], Any]


def _torch() -> Any:
    return pytest.importorskip("torch")


def _plain(value: Any) -> Any:
    """Tensors as (shape, dtype name, values); sequences element by element."""
    if hasattr(value, "detach") and hasattr(value, "shape"):
        array = np.asarray(value.detach().numpy())
        return (tuple(value.shape), str(value.dtype).removeprefix("torch."), array)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if type(value).__name__ == "Size":  # torch.Size, a tuple
        return tuple(value)
    return value


def _assert_same(got: Any, want: Any, where: str = "result") -> None:
    if isinstance(want, tuple) and len(want) == 3 and isinstance(want[2], np.ndarray):
        assert got[:2] == want[:2], f"{where}: shape and dtype {got[:2]}, torch {want[:2]}"
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=0, err_msg=where)
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{where}: {got} vs {want}"
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r}, torch {want!r}"


# -- what both compute alike -------------------------------------------------------------------


def _grad_materialized(lib: Any) -> Any:
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    unused = lib.tensor([3.0], requires_grad=True)
    return lib.autograd.grad((x * x).sum(), [x, unused], materialize_grads=True)


def _requires_grad_of_non_leaf(lib: Any) -> Any:
    y = lib.tensor([1.0], requires_grad=True) * 2
    return y.requires_grad_().requires_grad, y.requires_grad_(True).is_leaf


def _reductions_with_dtype(lib: Any) -> Any:
    x = lib.tensor([[1, 2], [3, 4]])
    return (
        x.sum(dtype=lib.float64),
        x.sum(1, dtype=lib.float32),
        x.prod(dtype=lib.float64),
        x.mean(dtype=lib.float32),
        lib.sum(x, 0, dtype=lib.float32),
        lib.mean(x, dtype=lib.float64),
        x.int().sum(dtype=lib.int32),  # the result too is of dtype (numpy's would be int64)
        lib.sum(x.int(), 1, dtype=lib.int32),
        x.prod(0, dtype=lib.int16),
    )


def _norms(lib: Any) -> Any:
    x = lib.tensor([[1.0, -5.0], [3.0, 0.0]], requires_grad=True)
    norms = (
        x.norm(),
        x.norm(p=1),
        x.norm(p=float("inf"), dim=1),
        x.norm(p=-float("inf"), dim=0, keepdim=True),
        x.norm(3),
        x.norm(dim=1),
        x.norm(0).detach(),
        lib.norm(x, p="fro"),
    )
    grads = lib.autograd.grad(sum(n.sum() for n in norms if n.requires_grad), x)
    zero = lib.zeros(3, requires_grad=True)  # the 2-norm's gradient at 0 is 0, not nan
    return norms, grads, lib.autograd.grad(zero.norm(), zero), norms[0].grad_fn.name()


def _rounded_division(lib: Any) -> Any:
    a, b = lib.tensor([7, -7, 6, -6]), lib.tensor([2, 2, -4, 4])
    big = lib.tensor([2**62 + 3])  # exact: no trip through float64
    f = lib.tensor([7.5, -7.5])
    return (
        a.div(b, rounding_mode="trunc"),
        a.div(b, rounding_mode="floor"),
        lib.div(a, 2, rounding_mode="trunc"),
        big.div(2, rounding_mode="trunc"),
        f.div(2, rounding_mode="trunc"),
        f.divide(2, rounding_mode="floor"),
        f.div(2),
    )


def _frac(lib: Any) -> Any:
    x = lib.tensor([1.5, -2.25, 3.0], requires_grad=True)
    y = x.frac()
    return y, lib.autograd.grad(y.sum(), x), lib.frac(x), y.grad_fn.name()


def _invert_and_logic(lib: Any) -> Any:
    m = lib.tensor([True, False, True])
    n = lib.tensor([False, False, True])
    x = lib.tensor([1.0, -2.0, 3.0])
    return (
        ~m,
        m & n,
        m | n,
        m ^ n,
        True & m,
        (x > 0) & (x < 2),
        ~lib.tensor([1, 0, -3]),
        ~lib.tensor([1, 0, 3], dtype=lib.uint8),
        x[~(x > 0)],
    )


def _nonzero(lib: Any) -> Any:
    x = lib.tensor([[1.0, 0.0], [0.0, 2.0]])
    return (
        x.nonzero(),
        lib.nonzero(x),
        x.nonzero(as_tuple=True),
        lib.zeros(0).nonzero(),
        lib.tensor(3.0).nonzero(),
        lib.tensor(3.0).nonzero(as_tuple=True),
        lib.argwhere(x),
        x.count_nonzero(),
        x.count_nonzero(dim=1),
        lib.count_nonzero(x, dim=(0, 1)),
    )


def _layout(lib: Any) -> Any:
    x = lib.arange(24.0).reshape(2, 3, 4)
    return (
        x.stride(),
        x.stride(-1),
        x.transpose(0, 2).stride(),
        x[1, :, 1:].storage_offset(),
        x[1][2].storage_offset(),
        x.storage_offset(),
        x.element_size(),
        lib.tensor([1], dtype=lib.int16).element_size(),
        x.is_floating_point(),
        lib.tensor([1]).is_floating_point(),
    )


def _more_methods(lib: Any) -> Any:
    x = lib.arange(6.0).reshape(2, 3)
    return (
        x.mT,
        lib.ones(4, 2, 3).mT.shape,
        x.type_as(lib.tensor([1])),
        x.new_full((2,), 3),
        x.new_empty((1, 2)).shape,
        x.unflatten(1, (3, 1)).shape,
        x.unflatten(-1, (1, -1)).shape,
        x.flip(dims=(0,)),
        lib.flip(x, (0, 1)),
        x.flip(1),
    )


def _to_copy(lib: Any) -> Any:
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x.to(lib.float32, copy=True)
    with lib.no_grad():
        y.mul_(10)
    return y is x, x, y.grad_fn.name(), x.to(lib.float32) is x


def _creation_sizes(lib: Any) -> Any:
    return (
        lib.zeros(size=(2, 3)),
        lib.ones(size=[2]),
        lib.rand(size=(1, 2)).shape,
        lib.randn(size=(3,)).shape,
        lib.randint(5, (3,)).shape,
        lib.randint(5, size=(2, 2)).shape,
        lib.zeros(0, 2),
    )


def _cat_legacy_empty(lib: Any) -> Any:
    out = lib.zeros(0)
    for i in range(2):  # the old way to accumulate: start from an empty 1-d tensor
        out = lib.cat([out, lib.full((1, 3), float(i))])
    return out, lib.cat([lib.zeros(0), lib.zeros(0)]), lib.cat([lib.ones(2), lib.zeros(0)])


def _inplace_rounding(lib: Any) -> Any:
    x = lib.tensor([1.6, -2.5, 0.5], requires_grad=True)
    outs = [x * 2, x * 3, x * 1, x * 1, x * 1, x * 1, x * 1]
    outs[0].floor_()
    outs[1].round_()
    outs[2].clamp_min_(0.0)
    outs[3].clamp_max_(0.0)
    outs[4].reciprocal_()
    outs[5].ceil_()
    outs[6].trunc_()
    sum(o.sum() for o in outs).backward()  # floor_'s rule reads its input: kept intact
    return outs, x.grad


def _random_fill(lib: Any) -> Any:
    w = lib.ones(200, 3)
    with lib.no_grad():
        w.uniform_(-2.0, -1.0)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.normal_(5.0, 0.1)  # the old values are forgotten: no gradient reaches x
    y.sum().backward()
    in_range = bool(((w >= -2.0) & (w < -1.0)).all())
    return w.shape, w.dtype == lib.float32, in_range, bool((y - 5).abs().max() < 1), x.grad


def _median(lib: Any) -> Any:
    nan = float("nan")
    x = lib.tensor([[3.0, 1.0, 2.0, 4.0], [nan, 1.0, 0.0, 5.0], [2.5, 0.5, 1.5, 9.0]])
    x.requires_grad_()
    along = x.median(1)
    whole = x[0].median()
    grads = lib.autograd.grad(along.values.sum() + whole, x)
    return (
        along.values,
        along.indices,
        whole,
        grads,
        x.median(0, keepdim=True).indices,
        lib.median(x, dim=-1).values,
        lib.tensor([3, 1, 2, 4]).median(),
        lib.tensor([]).median(),
        lib.tensor(5.0).median(-1),
        lib.zeros(0, 3).median(1),
        along.values.grad_fn.name(),
        whole.grad_fn.name(),
    )


def _empty_reprs(lib: Any) -> Any:
    tensors = (
        lib.tensor([], dtype=lib.int64),
        lib.zeros(0, 3, dtype=lib.bool),
        lib.zeros(0, dtype=lib.int32),
        lib.tensor([]),
        lib.tensor([1, 2]),
    )
    return tuple(repr(t).replace("torch.", "") for t in tensors)


def _node_hooks(lib: Any) -> Any:
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    z = y.exp()
    log: list = []

    def plain(grads: Any) -> list:
        return [None if g is None else g.tolist() for g in grads]

    y.register_hook(lambda g: log.append(("tensor", g.tolist())))
    y.grad_fn.register_prehook(lambda go: log.append(("pre", plain(go))))
    y.grad_fn.register_prehook(lambda go: (go[0] * 2,))
    y.grad_fn.register_hook(lambda gi, go: log.append(("post", plain(gi), plain(go))))
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[1] * 0))  # w gets nothing
    removed = y.grad_fn.register_hook(lambda gi, go: (gi[0] * 0, gi[1] * 0))
    removed.remove()
    acc = y.grad_fn.next_functions[0][0]  # x's AccumulateGrad
    acc.register_prehook(lambda go: (go[0] + 1,))
    after: list = []
    x.register_post_accumulate_grad_hook(lambda p: after.append(p.grad.tolist()))
    y.retain_grad()
    z.sum().backward()
    # autograd.grad runs a node's pre-hooks too
    s = (x * 3).sum()
    s.grad_fn.register_prehook(lambda go: (go[0] * 10,))
    return log, after, y.grad, x.grad, w.grad, lib.autograd.grad(s, x)


def _custom_function_hooks(lib: Any) -> Any:
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    counts: list = []
    y.grad_fn.register_hook(lambda gi, go: counts.append((len(gi), len(go))))
    y.grad_fn.register_prehook(lambda go: (go[0] * 3,))
    y.sum().backward()
    return counts, x.grad


def _repeat_copies(lib: Any) -> Any:
    x = lib.arange(6.0).reshape(2, 3)
    parts = [x.repeat(1, 1), x.tile(1, 1), x.tile((1,)), lib.tile(x, (1, 1)), x.repeat(2, 1)]
    for part in parts:
        part.mul_(10)  # new memory: x keeps its values (a view of x refused, or changed x)
    w = lib.ones(2, requires_grad=True)
    return x, parts, w.repeat(1).grad_fn.name(), w.tile(2).grad_fn.name()


def _tensor_split_and_to(lib: Any) -> Any:
    x = lib.arange(7.0, requires_grad=True)
    splits = (
        x.tensor_split(3),
        x.tensor_split([1, 5]),
        lib.tensor_split(x, [2, 9]),
        x.tensor_split(9),
        x.tensor_split([5, 2]),
        lib.ones(2, 5).tensor_split(2, dim=1),
    )
    grads = lib.autograd.grad(sum((p * (i + 1)).sum() for i, p in enumerate(splits[4])), x)
    ones = lib.ones(2)
    return splits, grads, ones.to(lib.tensor([1])), ones.int().to(ones)


def _write_node_names(lib: Any) -> Any:
    x = lib.ones(3, requires_grad=True)
    writes = [
        lambda y: y.fill_(2),
        lambda y: y.fill_(lib.tensor(2.0)),
        lambda y: y.zero_(),
        lambda y: y.copy_(x),
        lambda y: y.__setitem__(0, 5),
        lambda y: y.__setitem__(slice(1, None), x[1:]),
        lambda y: y.__setitem__([0, 1], 5),
        lambda y: y.__setitem__(y > 0, 2),
        lambda y: y.__setitem__(..., 3),
        lambda y: y.__setitem__(slice(None), x),
        lambda y: y.__setitem__(lib.tensor(1), 5),
        lambda y: y.index_put_((lib.tensor([0]),), lib.tensor(1.0)),
        lambda y: y.index_put_((lib.tensor([0]),), lib.tensor(1.0), accumulate=True),
    ]
    names = []
    for write in writes:
        y = x * 1
        write(y)
        names.append(y.grad_fn.name().removeprefix("torch::autograd::"))
    return tuple(names)


def _op_node_names(lib: Any) -> Any:
    x = lib.ones(2, 3, requires_grad=True)
    made = [
        x**x,
        2**x,
        x.pow(x),
        lib.tensor(2.0) ** x,
        x**2,
        1 - x,
        2.5 - x,
        x - 1,
        x.var(0),
        x.std(1, keepdim=True),
        lib.std(x),
        lib.var(x),
        x[[0]],
        x[x > 0],
        x[lib.tensor([0, 1])],
        x[:, [0, 2]],
        x[[0, 1], [1, 2]],
        x[lib.tensor([True, False])],
        x[lib.tensor(1)],
        x[0][[1]],
    ]
    return tuple(y.grad_fn.name() for y in made)


def _index_by_0d_tensor_is_a_view(lib: Any) -> Any:
    x = lib.arange(6.0).reshape(2, 3)
    x[lib.tensor(1), 1:].add_(10)
    x[lib.tensor(0)][lib.tensor(2)] = -1
    x[lib.tensor([0])].add_(100)  # an index tensor of one element copies
    return x


def _composites(lib: Any) -> Any:
    x = lib.arange(6.0).reshape(2, 3).requires_grad_()
    outs = [
        x.roll(1),
        x.roll(1, 1),
        lib.roll(x, (1, -1), (0, 1)),
        x.roll(-4, 1),
        x.roll(3, 1),
        lib.lerp(x, x * 2, 0.3),
        x.lerp(x * x, lib.tensor(0.7)),
        lib.addcmul(x, x, x, value=0.5),
        x.addcdiv(x, x + 1, value=2),
        lib.trace(x),
        x[:, :2].trace(),
        lib.diff(x),
        x.diff(n=2, dim=1, prepend=lib.zeros(2, 1)),
        lib.diff(x, dim=0, append=x),
        lib.masked_select(x, lib.tensor([True, False, True])),
        x.masked_select(x > 2),
        lib.aminmax(x).min,
        x.aminmax(dim=1, keepdim=True).max,
        lib.std_mean(x, 1)[0],
        lib.var_mean(x, dim=0, unbiased=False)[1],
        lib.where(x > 2, x, 0.0),
        lib.gather(x, 1, lib.tensor([[0], [2]])),
        lib.narrow(x, 1, 1, 2),
    ]
    grads = lib.autograd.grad(sum((o * (i + 1)).sum() for i, o in enumerate(outs)), x)
    names = tuple(o.grad_fn.name() for o in outs[:11] + outs[14:20])
    more = (
        lib.meshgrid(lib.arange(2), lib.arange(3), indexing="ij"),
        lib.meshgrid(lib.arange(2), lib.arange(3), indexing="xy"),
        lib.meshgrid([lib.arange(2), lib.arange(3)], indexing="ij"),
        lib.broadcast_tensors(lib.ones(2, 1), lib.zeros(3)),
        lib.where(x > 2),
        lib.diff(lib.tensor([True, False, False])),
        lib.tensor([1, 2, 3]).roll(1),
        lib.trace(lib.arange(6).reshape(2, 3)),
    )
    return outs, grads, names, more


def _keywords(lib: Any) -> Any:
    x = lib.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    return (
        x.transpose(dim0=1, dim1=0),
        x.permute(dims=(1, 0)),
        x.add(1, alpha=2),  # a number times a number: float32 stays float32
        x.sub(1, alpha=0.5),
        lib.add(x, 1, alpha=2),
        lib.sub(x, 2, alpha=3),
        lib.true_divide(x, 2),
    )


def _deepcopy(lib: Any) -> Any:
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    alive = w * 2  # w's graph is alive while it is copied
    (w * 5).sum().backward()
    copied = copy.deepcopy(w)
    (copied * 3).sum().backward()  # goes to the copy's .grad alone
    (alive * 1).sum().backward()
    plain = copy.deepcopy(lib.arange(4.0)[1:3])  # a copy of a view: its own memory
    plain.add_(1)
    return w.grad, copied.grad, copied.requires_grad, copied.is_leaf, plain


def _python_protocols(lib: Any) -> Any:
    x = lib.tensor([[1, 2], [3, 4]])
    loss = lib.tensor(2.7)
    return (
        f"{loss}",
        f"{loss:.2f}",
        x == None,  # noqa: E711 - what a user writes
        x != None,  # noqa: E711
        x.__eq__("a"),
        x.nbytes,
        x.itemsize,
        x.float().nbytes,
    )


def _scaled_function(lib: Any) -> Any:
    class Scaled(lib.autograd.Function):  # torch 2's style: forward without ctx
        @staticmethod
        def forward(x: Any, k: float) -> Any:
            return x**2 * k

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
            x, k = inputs
            ctx.save_for_backward(x)
            ctx.k = k

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 2 * x * ctx.k, None

    return Scaled


def _setup_context_function(lib: Any) -> Any:
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = _scaled_function(lib).apply(x, 3.0)
    y.sum().backward()
    return y, x.grad


def _legacy_constructor(lib: Any) -> Any:
    ints = lib.tensor([1, 2])
    alias = lib.Tensor(ints)  # an alias whatever the dtype
    alias.add_(1)
    return (
        lib.Tensor(3).shape,
        lib.Tensor(2, 3).shape,
        lib.Tensor().shape,
        lib.Tensor([[1, 2]]),
        lib.Tensor(np.array([1, 2])),
        lib.Tensor(np.zeros(2)),
        lib.Tensor((2, 3)),
        ints,
    )


def _quietly(compute: Callable[[], Any]) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return compute()


def _extrema_of_nan(lib: Any) -> Any:
    nan = float("nan")
    x = lib.tensor([[1.0, nan], [nan, 3.0]], requires_grad=True)
    clean = lib.tensor([[1.0, 3.0], [3.0, 2.0]], requires_grad=True)  # ties share the gradient
    return (
        x.max(),
        lib.autograd.grad(x.max(), x),
        lib.autograd.grad(lib.min(x), x),
        _quietly(lambda: lib.autograd.grad(x.amax(), x)),  # nan everywhere: 0 / 0
        lib.autograd.grad(clean.max(), clean),
        x.max().grad_fn.name(),
    )


def _setitem_leading_ones(lib: Any) -> Any:
    w = lib.tensor([5.0], requires_grad=True)
    x = lib.zeros(2, 3)
    x[1, 2] = w  # one element from a 1-element tensor
    x[0] = w.reshape(1, 1, 1)
    y = lib.zeros(2, 3)
    y[lib.tensor([0, 1]), 1] = lib.tensor([[7.0, 8.0]])
    z = lib.zeros(3)
    z[1] = lib.tensor([[5.0]])  # without grad
    (x * lib.arange(6.0).reshape(2, 3)).sum().backward()
    return x, w.grad, y, z


def _autograd_namespace(lib: Any) -> Any:
    t = lib.ones(2)
    v = lib.autograd.Variable(t, requires_grad=True)  # a new leaf over t's memory
    (v * 3).sum().backward()
    with lib.autograd.enable_grad():
        on = lib.is_grad_enabled()
    with lib.autograd.grad_mode.no_grad():
        held = (v * 2).requires_grad
    with lib.autograd.inference_mode():
        inside = lib.is_grad_enabled()
    v.data.add_(1)
    return (
        v is t,
        v.requires_grad,
        t.requires_grad,
        v.is_leaf,
        v.grad,
        t,
        isinstance(t, lib.autograd.Variable),
        on,
        held,
        inside,
    )


def _scatter_family(lib: Any) -> Any:
    x = lib.zeros(3, 4, requires_grad=True)
    src = lib.arange(12.0).reshape(3, 4).requires_grad_()
    y = x * 1
    y.scatter_(1, lib.tensor([[0], [2], [3]]), 5.0)
    outs = [
        y,
        (x * 1).scatter(0, lib.tensor([[2, 1, 0, 0], [0, 0, 1, 2], [1, 2, 2, 1]]), src),
        (x * 1).scatter_add(1, lib.tensor([[0, 0, 1, 1], [3, 3, 3, 3], [0, 1, 2, 3]]), src),
        lib.zeros(3, 4).requires_grad_().index_add(0, lib.tensor([0, 2, 0]), src, alpha=2),
        (x * 1).index_fill(1, lib.tensor([0, 2]), -1.0),
        (x * 1).index_copy(0, lib.tensor([2, 0, 1]), src * 2),
    ]
    weights = lib.arange(12.0).reshape(3, 4)
    grads = lib.autograd.grad(sum((o * weights).sum() for o in outs), [x, src])
    one_hot = lib.zeros(3, 5).scatter_(1, lib.tensor([[1], [4], [0]]), 1.0)
    counts = lib.zeros(4).scatter_add_(0, lib.tensor([0, 1, 0, 3]), lib.ones(4))
    return outs, grads, one_hot, counts, tuple(o.grad_fn.name() for o in outs)


def _more_in_place(lib: Any) -> Any:
    x = lib.tensor([[0.5, 1.5, -2.0], [3.0, -0.25, 2.0]], requires_grad=True)
    g = lib.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    writes = [
        lambda y: y.abs_().rsqrt_(),
        lambda y: y.square_(),
        lambda y: y.sign_(),
        lambda y: y.sin_(),
        lambda y: y.cos_(),
        lambda y: y.abs_().log1p_(),
        lambda y: y.expm1_(),
        lambda y: y.remainder_(0.7),
        lambda y: y.fmod_(0.7),
        lambda y: y.tril_(),
        lambda y: y.triu_(1),
        lambda y: y.lerp_(g, 0.1),
        lambda y: y.addcmul_(g, g, value=0.5),
        lambda y: y.addcdiv_(g, g + 1, value=-0.1),
    ]
    outs = []
    for write in writes:
        y = x * 1
        write(y)
        outs.append(y)
    grads = lib.autograd.grad(sum((o * (i + 1)).sum() for i, o in enumerate(outs)), x)
    p, m, v = lib.tensor([1.0, -2.0]), lib.zeros(2), lib.zeros(2)
    grad = lib.tensor([0.5, -0.1])
    with lib.no_grad():  # one Adam step, as torch.optim.Adam writes it
        m.lerp_(grad, 0.1)
        v.mul_(0.999).addcmul_(grad, grad, value=0.001)
        p.addcdiv_(m, v.sqrt().add_(1e-8), value=-0.01)
    halves = lib.tensor([7.0, -7.0])
    halves.floor_divide_(2)
    return outs, grads, p, halves, tuple(o.grad_fn.name() for o in outs)


def _same_memory_writes(lib: Any) -> Any:
    plain = lib.arange(1.0, 4.0)
    plain.mul_(plain)  # the very same memory is fine
    plain[0:2] = plain[0:2]
    b = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = b * 1
    c += c
    c[1:] = c[1:]
    c.sum().backward()
    return plain, c, b.grad


def _counting(lib: Any) -> Any:
    x = lib.tensor([[3, 1, 3], [2, 1, 3]])
    sequence = lib.tensor([1.0, 2.0, 3.0])
    return (
        lib.unique(x),
        x.unique(return_inverse=True, return_counts=True),
        lib.unique(x, dim=0),
        lib.unique(x, dim=1, return_inverse=True),
        lib.unique(lib.tensor([2.0, 1.0, 2.0]), sorted=False),
        lib.bincount(lib.tensor([0, 2, 2])),
        lib.bincount(lib.tensor([0, 2, 2]), weights=lib.tensor([0.5, 1.0, 1.0])),
        lib.tensor([1]).bincount(minlength=4),
        lib.bincount(lib.tensor([], dtype=lib.int64)),
        lib.searchsorted(sequence, lib.tensor([2.0, 2.5])),
        lib.searchsorted(sequence, lib.tensor([2.0]), right=True),
        lib.searchsorted(lib.tensor([[1.0, 2.0], [0.0, 5.0]]), lib.tensor([[1.5], [6.0]])),
        lib.searchsorted(lib.tensor([1, 2, 3]), lib.tensor([2]), side="right"),
    )


def _more_node_names(lib: Any) -> Any:
    x = lib.ones(2, 3, requires_grad=True)
    made = [
        x.unbind()[0],
        x.split(1)[0],
        x.split([1, 1])[1],
        x.chunk(2)[1],
        x.sort(descending=True)[0],
        x.topk(1)[0],
        x.gather(0, lib.zeros(1, 3, dtype=lib.int64)),
        x.prod(0),
        x.prod(),
        x.nan_to_num(),
        x[0, 0].topk(1)[0],  # of a 0-d tensor: 0-d
        x[0] @ x[1],
        x @ x[0],
        x[0] @ x.t(),
        x @ x.t(),
        x[None] @ x.t()[None],
        lib.bmm(x[None], x.t()[None]),
        lib.mv(x, x[0]),
    ]
    grads = lib.autograd.grad(sum(m.sum() for m in made), x)
    return tuple(m.grad_fn.name() for m in made), grads


CASES: dict[str, Case] = {
    "grad_fn names of unbind, split, sort, topk, gather, prod(dim)": _more_node_names,
    "writes reading the very same memory": _same_memory_writes,
    "unique, bincount, searchsorted": _counting,
    "in-place lerp_, addcmul_, addcdiv_ (an Adam step), sin_, tril_, ...": _more_in_place,
    "scatter_, scatter_add, index_add, index_fill, index_copy": _scatter_family,
    "autograd.Variable, enable_grad, grad_mode, inference_mode": _autograd_namespace,
    "x[i] = a tensor with leading dims of size 1": _setitem_leading_ones,
    "max() and min() of a tensor with nan: the gradient goes to the nan": _extrema_of_nan,
    "Tensor(2, 3) is a shape, Tensor(data) float32": _legacy_constructor,
    "a Function with setup_context": _setup_context_function,
    "deepcopy of a leaf is a new leaf": _deepcopy,
    "f-string of a 0-d tensor, == None, nbytes": _python_protocols,
    "roll, lerp, addcmul, trace, diff, masked_select, meshgrid, torch.where(c)": _composites,
    "transpose dim0=, permute dims=, add alpha= keeps float32": _keywords,
    "grad_fn names of in-place writes": _write_node_names,
    "grad_fn names of pow, rsub, var, std, advanced indexing": _op_node_names,
    "a 0-d integer tensor indexes as an int": _index_by_0d_tensor_is_a_view,
    "repeat and tile copy": _repeat_copies,
    "tensor_split, to(other)": _tensor_split_and_to,
    "grad_fn.register_hook, register_prehook, post-accumulate hooks": _node_hooks,
    "hooks of a custom Function's node": _custom_function_hooks,
    "median": _median,
    "repr of empty int and bool tensors names the dtype": _empty_reprs,
    "in-place floor_, round_, clamp_min_, reciprocal_": _inplace_rounding,
    "uniform_ and normal_": _random_fill,
    "invert and logic of bool tensors": _invert_and_logic,
    "autograd.grad materialize_grads": _grad_materialized,
    "requires_grad_ of a non-leaf": _requires_grad_of_non_leaf,
    "sum, prod, mean dtype=": _reductions_with_dtype,
    "norm p, dim, keepdim": _norms,
    "div rounding_mode": _rounded_division,
    "frac": _frac,
    "nonzero, argwhere, count_nonzero": _nonzero,
    "stride, storage_offset, element_size": _layout,
    "mT, type_as, new_full, unflatten, flip dims=": _more_methods,
    "to copy=True": _to_copy,
    "zeros size=, randint(high, size)": _creation_sizes,
    "cat skips empty 1-d tensors": _cat_legacy_empty,
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_as_torch(name: str) -> None:
    torch = _torch()
    case = CASES[name]
    _assert_same(_plain(case(ge)), _plain(case(torch)))


def test_a_setup_context_function_traces() -> None:
    torch = _torch()
    import graphc as gc

    scaled = _scaled_function(ge)
    g = gc.trace(lambda v: scaled.apply(v, 3.0).sum(), gc.TensorSpec((2,)))
    loss, grad = gc.compile(gc.gradients(g, wrt=[g.inputs[0].name]))(np.array([1.0, 2.0], "f"))
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    want = _scaled_function(torch).apply(x, 3.0).sum()
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-6)
    np.testing.assert_allclose(grad, x.grad.numpy(), rtol=1e-6)


# -- what both refuse ----------------------------------------------------------------------------


def _set_requires_grad_of_non_leaf(lib: Any) -> None:
    y = lib.tensor([1.0], requires_grad=True) * 2
    y.requires_grad = True  # the attribute refuses even True (requires_grad_ takes it)


def _unused_materialized_not_allowed(lib: Any) -> None:
    x = lib.tensor([1.0], requires_grad=True)
    lib.autograd.grad(x.sum(), x, allow_unused=False, materialize_grads=True)


def _hook_returning_a_number(lib: Any) -> None:
    y = lib.ones(2, requires_grad=True) * 3
    y.grad_fn.register_hook(lambda gi, go: 5)
    y.sum().backward()


def _hook_returning_too_few(lib: Any) -> None:
    y = lib.ones(2, requires_grad=True) * 3
    y.grad_fn.register_hook(lambda gi, go: (gi[0],))  # mul has two inputs
    y.sum().backward()


def _overlapping_write(lib: Any) -> None:
    b = lib.arange(4.0)
    b[1:3] = b[0:2]  # the same memory, shifted: torch refuses (clone() the source)


def _overlapping_add(lib: Any) -> None:
    b = lib.tensor([1.0, 2.0, 3.0], requires_grad=True) * 1
    b[1:] += b[:-1]


def _int_data(lib: Any) -> None:
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.data = lib.tensor([5, 6])


ERRORS: dict[str, Case] = {
    "a float tensor as an index": lambda lib: lib.arange(4.0)[lib.tensor([0.0, 1.0])],
    "a boolean mask of the wrong shape": lambda lib: lib.ones(3, 2)[lib.tensor([True, False])],
    "a negative slice step": lambda lib: lib.arange(4.0)[::-1],
    "writing to a negative slice step": lambda lib: lib.zeros(3).__setitem__(
        slice(None, None, -1), 1
    ),
    "writing two values to one slot": lambda lib: lib.zeros(3).__setitem__(1, lib.ones(2)),
    "a zero slice step": lambda lib: lib.arange(4.0)[0:2:0],
    "requires_grad = True on a non-leaf": _set_requires_grad_of_non_leaf,
    "allow_unused=False with materialize_grads": _unused_materialized_not_allowed,
    "clamp without bounds": lambda lib: lib.ones(2).clamp(),
    "div by an unknown rounding_mode": lambda lib: lib.ones(2).div(2, rounding_mode="round"),
    "~ of a float tensor": lambda lib: ~lib.ones(2),
    "norm of an int tensor": lambda lib: lib.tensor([1, 2]).norm(),
    "mT of a vector": lambda lib: lib.ones(3).mT,
    "a negative size": lambda lib: lib.zeros(2, -1),
    "a negative size of full": lambda lib: lib.full((-1,), 2.0),
    "cat of nothing": lambda lib: lib.cat([]),
    "bmm of matrices": lambda lib: lib.bmm(lib.ones(2, 3), lib.ones(3, 2)),
    "eye of a negative size": lambda lib: lib.eye(-1),
    "linspace of negative steps": lambda lib: lib.linspace(0, 1, -1),
    "randint with low >= high": lambda lib: lib.randint(5, 2, (3,)),
    ".data = ints on a tensor requiring grad": _int_data,
    "writing a window over its own shifted copy": _overlapping_write,
    "adding into a window its own shifted copy": _overlapping_add,
    "bincount of a negative": lambda lib: lib.bincount(lib.tensor([-1])),
    "scatter by a float index": lambda lib: lib.zeros(3).scatter_(0, lib.tensor([0.0]), 1.0),
    "Variable of a list": lambda lib: lib.autograd.Variable([1.0, 2.0]),
    "Tensor(a float)": lambda lib: lib.Tensor(2.5),
    "Tensor(a negative size)": lambda lib: lib.Tensor(2, -1),
    "deepcopy of a non-leaf": lambda lib: copy.deepcopy(lib.ones(2, requires_grad=True) * 2),
    "trace of a vector": lambda lib: lib.trace(lib.ones(3)),
    "stack of nothing": lambda lib: lib.stack([]),
    "arange with a step of 0": lambda lib: lib.arange(0, 5, 0),
    "arange stepping away from the end": lambda lib: lib.arange(5, 0),
    "tensor_split into no sections": lambda lib: lib.ones(3).tensor_split(0),
    "a node's hook returning a number": _hook_returning_a_number,
    "a node's hook returning too few": _hook_returning_too_few,
    "a post-accumulate hook on a non-leaf": lambda lib: (
        lib.ones(2, requires_grad=True) * 2
    ).register_post_accumulate_grad_hook(print),
    "grad with no inputs": lambda lib: lib.autograd.grad(lib.ones(1, requires_grad=True).sum(), []),
    "median along an empty dim": lambda lib: lib.zeros(0, 3).median(0),
    "median along a dim out of range": lambda lib: lib.tensor(5.0).median(1),
    "normal_ of a leaf requiring grad": lambda lib: lib.ones(2, requires_grad=True).normal_(),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_raises_as_torch(name: str) -> None:
    torch = _torch()
    case = ERRORS[name]
    with pytest.raises(Exception) as torch_error:
        case(torch)
    with pytest.raises(GraphcError) as graphc_error:
        case(ge)
    assert isinstance(graphc_error.value, torch_error.type), (
        f"torch raises {torch_error.type.__name__}, graphc {type(graphc_error.value).__mro__}"
    )
