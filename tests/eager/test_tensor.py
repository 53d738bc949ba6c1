"""Tensors: creation and dtypes, memory sharing, printing, and PyTorch's method spellings."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.errors import AutodiffError, DTypeError, GraphcError


def test_default_dtypes_follow_pytorch() -> None:
    assert ge.tensor([1.0, 2.0]).dtype == ge.float32
    assert ge.tensor([1, 2]).dtype == ge.int64
    assert ge.tensor([True]).dtype == ge.bool
    assert ge.tensor(np.zeros(2)).dtype == ge.float64  # an array keeps its dtype
    assert ge.tensor([1, 2], dtype=ge.double).dtype == np.float64
    assert ge.Tensor([1, 2]).dtype == ge.float32  # torch.Tensor(...) is float
    assert ge.zeros(2, 3).shape == (2, 3) and ge.ones((2, 3)).dtype == ge.float32
    assert ge.full((2,), 7).dtype == ge.int64 and ge.full((2,), 0.5).dtype == ge.float32
    assert ge.arange(3).dtype == ge.int64 and ge.arange(0.0, 1.0, 0.5).dtype == ge.float32
    np.testing.assert_array_equal(ge.linspace(0, 1, 3).numpy(), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(ge.eye(2).numpy(), np.eye(2))
    assert ge.zeros_like(ge.ones(2, dtype=ge.int64)).dtype == ge.int64
    with pytest.raises(DTypeError):
        ge.tensor(np.zeros(2, np.complex64))


def test_from_numpy_shares_memory_and_tensor_copies() -> None:
    a = np.zeros(3, np.float32)
    shared, copied = ge.from_numpy(a), ge.tensor(a)
    a[0] = 5
    assert shared[0].item() == 5 and copied[0].item() == 0
    shared.add_(1)
    assert a[1] == 1
    assert np.asarray(shared) is a


def test_tensor_copies_into_c_order_so_eager_sums_as_compiled_plans_do() -> None:
    """ge.tensor of a Fortran-ordered array kept its order, as torch.tensor does not (it
    copies into contiguous memory); numpy then summed it in another order than a
    compiled plan, which copies feeds into C order: 23 of 30 sums differed."""
    x = np.asfortranarray(np.random.default_rng(0).standard_normal((40, 30)).astype(np.float32))
    t = ge.tensor(x)
    assert t.numpy().flags["C_CONTIGUOUS"] and t.stride() == (30, 1)
    eager = gc.sum(t * 1, axis=0).numpy()
    np.testing.assert_array_equal(eager, gc.jit(lambda v: gc.sum(v * 1, axis=0))(x))


def test_manual_seed_makes_rand_and_randn_reproducible() -> None:
    ge.manual_seed(42)
    first = (ge.rand(3).numpy().copy(), ge.randn(2, 2).numpy().copy(), ge.randint(0, 9, (4,)))
    ge.manual_seed(42)
    again = (ge.rand(3).numpy(), ge.randn(2, 2).numpy(), ge.randint(0, 9, (4,)))
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    np.testing.assert_array_equal(first[2].numpy(), again[2].numpy())
    assert first[0].dtype == np.float32 and np.all((first[0] >= 0) & (first[0] < 1))
    assert sorted(ge.randperm(5).tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ([1.0, 2.0], "tensor([1., 2.])"),
        ([6.0, 11.0], "tensor([ 6., 11.])"),
        ([-0.4], "tensor([-0.4000])"),
        ([5.7183, 10.3891], "tensor([ 5.7183, 10.3891])"),
        ([1e-5, 1.0], "tensor([1.0000e-05, 1.0000e+00])"),
        ([0.0, 0.0], "tensor([0., 0.])"),
        ([1.5, float("nan")], "tensor([1.5000,    nan])"),
        ([[1, 2], [30, 4]], "tensor([[ 1,  2],\n        [30,  4]])"),
        ([True, False], "tensor([ True, False])"),
        (2.5, "tensor(2.5000)"),
        ([], "tensor([])"),
    ],
)
def test_printing_matches_pytorch(values: object, text: str) -> None:
    assert repr(ge.tensor(values)) == text


def test_printing_suffixes_wrapping_and_summaries() -> None:
    assert repr(ge.tensor([1.0], dtype=ge.float64)) == "tensor([1.], dtype=float64)"
    assert repr(ge.zeros(0, 3)) == "tensor([], size=(0, 3))"
    long = repr(ge.arange(30).float())
    assert long.splitlines()[1] == "        " + ", ".join(f"{i}." for i in range(14, 28)) + ","
    big = repr(ge.arange(2000))
    assert "..." in big and big.startswith("tensor([   0,    1,    2,  ..., 1997, 1998, 1999])")
    assert f"{ge.tensor(2.0):.2f}" == "2.00"


def test_pytorch_reduction_spellings() -> None:
    x = ge.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    np.testing.assert_array_equal(x.sum(dim=1, keepdim=True).numpy(), [[9.0], [12.0]])
    np.testing.assert_array_equal(ge.sum(x, 0).numpy(), [5.0, 7.0, 9.0])
    np.testing.assert_array_equal(x.mean(axis=0).numpy(), [2.5, 3.5, 4.5])
    values, indices = x.max(dim=1)
    assert values.tolist() == [5.0, 6.0] and indices.tolist() == [1, 2]
    assert ge.min(x, 0).indices.tolist() == [0, 1, 0] and x.max().item() == 6.0
    assert x.max(axis=1).tolist() == [5.0, 6.0]  # numpy style: values only
    assert x.argmin(1).tolist() == [0, 1]
    np.testing.assert_allclose(x.var().item(), np.var(x.numpy(), ddof=1), rtol=1e-6)
    np.testing.assert_allclose(x.var(unbiased=False).item(), np.var(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(ge.std(x, 1).numpy(), np.std(x.numpy(), 1, ddof=1), rtol=1e-6)


def test_pytorch_shape_spellings() -> None:
    x = ge.arange(6).view(2, 3)
    assert x.size() == (2, 3) and x.size(1) == 3 and x.dim() == 2 and x.numel() == 6
    assert x.transpose(0, 1).shape == (3, 2) and x.t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert ge.transpose(x, 0, 1).tolist() == x.T.tolist()
    assert x.permute(1, 0).shape == (3, 2) and x.view(-1, 1).shape == (6, 1)
    assert x.unsqueeze(0).shape == (1, 2, 3) and x.unsqueeze(0).squeeze(0).shape == (2, 3)
    assert x.flatten().shape == (6,) and x.reshape(3, 2).shape == (3, 2)
    assert ge.ones(1, 1).expand_as(x).shape == (2, 3) and ge.ones(3).expand(2, -1).shape == (2, 3)
    assert x.repeat(2, 1).tolist() == [[0, 1, 2], [3, 4, 5], [0, 1, 2], [3, 4, 5]]
    assert ge.cat([x, x], dim=1).shape == (2, 6) and ge.stack([x, x], dim=0).shape == (2, 2, 3)
    assert x.index_select(1, ge.tensor([2, 0])).tolist() == [[2, 0], [5, 3]]
    assert ge.index_select(x, 0, ge.tensor([1])).tolist() == [[3, 4, 5]]


def test_pytorch_math_spellings_are_on_the_tape() -> None:
    x = ge.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    y = (
        x.clamp(min=-1, max=2).sum()
        + x.pow(2).mean()
        + x.mm(x).sum()
        + ge.clamp(x, max=0.0).abs().sum()
        + x.add(x, alpha=2).sum()
        + x.softmax(dim=1)[:, 0].sum()
    )
    assert y.grad_fn.name() == "AddBackward0"
    y.backward()
    assert x.grad.shape == (2, 2)
    assert x.double().dtype == ge.float64 and x.long().dtype == ge.int64
    assert x.to(ge.float32) is x and x.clone().grad_fn.name() == "CloneBackward0"
    assert x.detach().masked_fill(x.detach() < 0, 0.0).tolist() == [[1.0, 0.0], [3.0, 0.5]]


def test_every_registry_op_is_a_tensor_method_and_an_eager_function() -> None:
    from graphc.ir.registry import all_ops, ops_with

    # made by passes (constant, count, and a backend's fused nodes: fused, the epilogues,
    # attention, ...), by tracing a custom gradient (custom_vjp: autograd.Function.apply
    # and gc.custom_vjp) or by the control flow functions (result reads a scan's or cond's
    # results), not called by users
    internal = {"constant", "count", "custom_vjp", "result"} | set(ops_with("fusion"))
    internal.add("contract_rows")  # made by matmul's gradient rule
    control = {"cond", "scan", "while_loop"}  # functions of functions, not Tensor methods
    public = set(all_ops()) - internal
    # ops that are torch.nn.functional functions (conv2d, layer_norm, ...) need no method
    functional = set(gc.nn.functional.__all__)
    functional |= {"random_uniform", "random_normal", "fold_in"}  # of a key, as jax.random
    functional |= {"arange"}  # made from sizes alone: a function, as torch.arange
    # pooling's gradient ops, made by VJP rules (as PyTorch's aten *_backward ops)
    functional |= {"max_pool2d_backward", "max_pool2d_select", "avg_pool2d_backward"}
    functional |= {"layer_norm_grad"}  # layer_norm's, made by its VJP rule
    functional |= {"gemm"}  # ONNX's Gemm, a function of three matrices (torch's: addmm)
    assert [n for n in sorted(public - control - functional) if not hasattr(ge.Tensor, n)] == []
    assert [n for n in sorted(public - {"slice"}) if not callable(getattr(ge, n, None))] == []
    assert callable(ge.fori_loop)
    assert callable(ge.slice_)


def test_every_graphc_op_is_a_function_on_tensors() -> None:
    x = ge.tensor([0.5, 1.5])
    for name in ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "sin", "cos", "neg"):
        result = getattr(ge, name)(x)
        assert isinstance(result, ge.Tensor), name
    assert isinstance(ge.matmul(x, x), ge.Tensor) and isinstance(ge.where(x > 1, x, 0.0), ge.Tensor)
    assert isinstance(x + np.ones(2), ge.Tensor) and isinstance(np.ones(2) * x, ge.Tensor)
    assert ge.is_tensor(x) and not ge.is_tensor(x.numpy())


def test_boolean_masks_select_eagerly_and_differentiably() -> None:
    x = ge.tensor([[1.0, -2.0], [3.0, -4.0]], requires_grad=True)
    picked = x[x > 0]
    assert picked.tolist() == [1.0, 3.0]
    picked.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 0.0], [1.0, 0.0]])
    assert x[ge.tensor([False, True])].tolist() == [[3.0, -4.0]]
    with pytest.raises(GraphcError, match="boolean mask"):
        x[ge.tensor([True, False, True])]


def test_grad_fn_names_follow_pytorch() -> None:
    x = ge.ones(2, 2, requires_grad=True)
    names = [
        t.grad_fn.name()
        for t in (x + 1, x - 1, x * 2, x / 2, x**2, -x, x.sum(), x.sum(1), x.mean(), x.mean(0))
    ]
    assert names == [
        "AddBackward0",
        "SubBackward0",
        "MulBackward0",
        "DivBackward0",
        "PowBackward0",
        "NegBackward0",
        "SumBackward0",
        "SumBackward1",
        "MeanBackward0",
        "MeanBackward1",
    ]
    more = (x.exp(), x.t(), x.view(4), ge.cat([x, x]), x.double(), x.clamp(0, 1), x @ x)
    assert [t.grad_fn.name() for t in more] == [
        "ExpBackward0",
        "TBackward0",  # torch's name for t(), a transpose op here
        "ViewBackward0",
        "CatBackward0",
        "ToCopyBackward0",
        "ClampBackward1",
        "MmBackward0",
    ]


def test_all_any_equal() -> None:
    x = ge.tensor([[1.0, 0.0], [2.0, 3.0]])
    assert x.all().item() is False and x.any().item() is True
    assert x.all(dim=1).tolist() == [False, True] and x.any(1, keepdim=True).shape == (2, 1)
    assert x.equal(x.clone()) and not x.equal(x[0])


def test_conversions() -> None:
    x = ge.tensor([[1.0, 2.0]])
    assert x.tolist() == [[1.0, 2.0]] and float(x[0, 1]) == 2.0 and len(x) == 1
    assert [row.tolist() for row in x] == [[1.0, 2.0]]
    with pytest.raises(GraphcError, match="2 elements"):
        x.item()
    with pytest.raises(AutodiffError, match="detach"):
        ge.ones(1, requires_grad=True).numpy()
    assert int(ge.tensor(3)) == 3 and [10, 20, 30][ge.tensor(1)] == 20
    assert x.data.requires_grad is False and np.shares_memory(x.data.numpy(), x.numpy())


def test_argmin_and_min_indices_of_bool_and_int_min() -> None:
    # argmin is its own op: argmax of the negation wraps INT_MIN and fails on bools
    for values in (
        np.array([True, False, True]),
        np.array([5, np.iinfo(np.int32).min, 0], np.int32),
        np.array([[2.0, -1.0], [0.5, 4.0]]),
    ):
        t = ge.tensor(values)
        assert int(t.argmin().numpy()) == int(np.argmin(values))
        if values.ndim == 2:
            np.testing.assert_array_equal(t.min(dim=1).indices.numpy(), values.argmin(axis=1))
            np.testing.assert_array_equal(t.argmin(dim=0).numpy(), values.argmin(axis=0))


def test_a_shape_error_is_not_shown_during_handling_of_the_caches_key_error() -> None:
    """An op's first call with new shapes misses the canonical-attrs cache; the user's
    ShapeError raised from inside that miss's except showed 'KeyError ... During
    handling of the above exception, another exception occurred' above it."""
    import graphc as gc

    with pytest.raises(gc.ShapeError) as caught:
        ge.tensor([1.0, 2.0]) + ge.tensor([1.0, 2.0, 3.0])
    assert caught.value.__context__ is None and caught.value.__cause__ is None
