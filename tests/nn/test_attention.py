"""Scaled dot-product attention and nn.MultiheadAttention against PyTorch, both modes."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(0)


def as_ge(value: object) -> object:
    return ge.tensor(value) if isinstance(value, np.ndarray) else value


def as_torch(value: object) -> object:
    return torch.tensor(value) if isinstance(value, np.ndarray) else value


SDPA_OPTIONS = [
    {},
    {"is_causal": True},
    {"attn_mask": RNG.random((5, 6)) > 0.3},
    {"attn_mask": RNG.standard_normal((5, 6))},
    {"scale": 0.7},
]


@needs_torch
@pytest.mark.parametrize("options", SDPA_OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_sdpa_values_and_gradients_match_torch(options: dict) -> None:
    q = RNG.standard_normal((2, 3, 5, 4))
    k, v = RNG.standard_normal((2, 3, 6, 4)), RNG.standard_normal((2, 3, 6, 4))
    if options.get("is_causal"):
        k, v = k[:, :, :5], v[:, :, :5]
    ours = [ge.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ours, **{n: as_ge(o) for n, o in options.items()})
    want = torch.nn.functional.scaled_dot_product_attention(
        *theirs, **{n: as_torch(o) for n, o in options.items()}
    )
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)
    (out * out).sum().backward()
    (want * want).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)


def _rows_masked_out(kind: str) -> np.ndarray:
    """A (2, 1, 5, 6) mask for sdpa leaving query 1 of batch 0 and query 3 of both batches
    no key: all False (boolean) or all -inf (float, with finite values elsewhere)."""
    keep = RNG.random((2, 1, 5, 6)) > 0.3
    keep[:, :, :, 0] = True
    keep[0, :, 1] = False
    keep[:, :, 3] = False
    if kind == "bool":
        return keep
    return np.where(keep, RNG.standard_normal(keep.shape), -np.inf)


@needs_torch
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_fully_masked_query_rows_give_zero_as_torch(kind: str) -> None:
    mask = _rows_masked_out(kind)
    q, k, v = (RNG.standard_normal((2, 3, n, 4)) for n in (5, 6, 6))
    ours = [ge.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ours, attn_mask=ge.tensor(mask))
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=torch.tensor(mask))
    assert (want.detach().numpy()[:, :, 3] == 0).all()  # torch 2.13's safe softmax
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)
    (out * out).sum().backward()
    (want * want).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
    # traced: the mask as a constant (known when tracing) and as an input
    want_array = want.detach().numpy()
    graphs = {
        "constant": gc.trace(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask), q, k, v
        ),
        "input": gc.trace(F.scaled_dot_product_attention, q, k, v, mask),
    }
    for how, graph in graphs.items():
        feeds = dict(zip([p.name for p in graph.inputs], (q, k, v, mask)))
        for level in (0, 2):
            got = gc.compile(graph, opt_level=level)(**feeds)
            np.testing.assert_allclose(got, want_array, atol=1e-12, err_msg=f"{how}, O{level}")


MHA_OPTIONS = [
    {},
    {"attn_mask": RNG.random((5, 5)) > 0.7},
    {"attn_mask": RNG.standard_normal((5, 5))},
    {"key_padding_mask": np.array([[False] * 4 + [True]] * 3)},
    {"average_attn_weights": False},
    {"is_causal": True, "attn_mask": ~np.tril(np.ones((5, 5), np.bool_))},
]


@needs_torch
@pytest.mark.parametrize("options", MHA_OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_multihead_attention_matches_torch(options: dict) -> None:
    ours = nn.MultiheadAttention(8, 2, generator=0, dtype="float64")
    theirs = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    q, k, v = (RNG.standard_normal((5, 3, 8)) for _ in range(3))
    out, w = ours(*(ge.tensor(a) for a in (q, k, v)), **{n: as_ge(o) for n, o in options.items()})
    t_out, t_w = theirs(
        *(torch.tensor(a) for a in (q, k, v)), **{n: as_torch(o) for n, o in options.items()}
    )
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), t_w.detach().numpy(), atol=1e-12)
    (out * out).sum().backward()
    (t_out * t_out).sum().backward()
    for name, p in ours.named_parameters():
        want = dict(theirs.named_parameters())[name].grad.numpy()
        np.testing.assert_allclose(p.grad.numpy(), want, atol=1e-10)


@needs_torch
def test_batch_first_and_unbatched_inputs_match_torch() -> None:
    ours = nn.MultiheadAttention(6, 3, batch_first=True, generator=1, dtype="float64")
    theirs = torch.nn.MultiheadAttention(6, 3, batch_first=True, dtype=torch.float64)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    for shape in ((2, 4, 6), (4, 6)):
        x = RNG.standard_normal(shape)
        out, w = ours(ge.tensor(x), ge.tensor(x), ge.tensor(x))
        t_out, t_w = theirs(torch.tensor(x), torch.tensor(x), torch.tensor(x))
        np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(w.detach().numpy(), t_w.detach().numpy(), atol=1e-12)


def test_a_traced_attention_runs_any_sequence_length_and_batch_as_eager() -> None:
    attn = nn.MultiheadAttention(8, 2, generator=0)
    g = gc.trace(lambda x: attn(x, x, x, need_weights=False)[0], gc.TensorSpec((None, None, 8)))
    for level in (0, 2):
        exe = gc.compile(g, opt_level=level)
        for length, batch in ((5, 3), (2, 1)):
            x = RNG.standard_normal((length, batch, 8)).astype(np.float32)
            want = attn(ge.tensor(x), ge.tensor(x), ge.tensor(x))[0].detach().numpy()
            np.testing.assert_allclose(exe(x, **gc.lifted_feeds(g)), want, rtol=1e-6, atol=1e-6)


def test_errors_name_what_was_expected() -> None:
    with pytest.raises(gc.GraphcError, match="not divisible by num_heads"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(gc.ShapeError, match=r"query must be \(L, N, 8\)"):
        nn.MultiheadAttention(8, 2)(ge.ones(2, 3, 4), ge.ones(2, 3, 4), ge.ones(2, 3, 4))
    with pytest.raises(gc.ShapeError, match="do not fit"):
        F.scaled_dot_product_attention(ge.ones(2, 3), ge.ones(2, 4), ge.ones(2, 3))


# key 0 of batch entry 0 is padding and query 0 sees only key 0 (causal): row 0 of
# entry 0 has no key left; every other row has one
FULLY_MASKED = {
    "key_padding_mask": np.array([[True, False, False], [False, False, False]]),
    "attn_mask": np.triu(np.ones((3, 3), np.bool_), 1),
}
FULLY_MASKED_FLOAT = {
    "key_padding_mask": np.where(FULLY_MASKED["key_padding_mask"], -np.inf, 0.0),
    "attn_mask": np.where(FULLY_MASKED["attn_mask"], -np.inf, 0.0),
}


def _attention_with_a_fully_masked_row(masks: dict, lib) -> tuple:
    """MHA (need_weights=False) on masks leaving query 0 of entry 0 no key: the
    output, and the gradients of the parameters and of x."""
    ours = nn.MultiheadAttention(4, 2, generator=0, dtype="float64")
    ours.out_proj.bias = ge.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
    x = np.random.default_rng(1).standard_normal((3, 2, 4))  # (L, N, E)
    if lib is ge:
        module, xt = ours, ge.tensor(x, requires_grad=True)
    else:
        module = torch.nn.MultiheadAttention(4, 2, dtype=torch.float64)
        module.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
        xt = torch.tensor(x, requires_grad=True)
    given = {n: lib.tensor(m) for n, m in masks.items()}
    out, weights = module(xt, xt, xt, need_weights=False, **given)
    assert weights is None
    (out * out).sum().backward()
    grads = {n: p.grad.numpy() for n, p in module.named_parameters()}
    return out.detach().numpy(), grads, xt.grad.numpy()


@pytest.mark.parametrize("masks", [FULLY_MASKED, FULLY_MASKED_FLOAT], ids=["bool", "float"])
def test_a_fully_masked_row_attends_to_nothing_without_weights(masks: dict) -> None:
    out, grads, x_grad = _attention_with_a_fully_masked_row(masks, ge)
    np.testing.assert_array_equal(out[0, 0], [0.5, -1.0, 2.0, 0.25])  # out_proj's bias alone
    assert np.isfinite(out).all()
    assert all(np.isfinite(g).all() for g in grads.values()) and np.isfinite(x_grad).all()
    # with the weights asked for, the row is nan (as torch's)
    attn = nn.MultiheadAttention(4, 2, generator=0, dtype="float64")
    x = ge.tensor(np.ones((3, 2, 4)))
    with np.errstate(invalid="ignore"):
        full, weights = attn(x, x, x, **{n: ge.tensor(m) for n, m in masks.items()})
    assert np.isnan(full.detach().numpy()[0, 0]).all()
    assert np.isfinite(full.detach().numpy()[1:]).all()


@needs_torch
@pytest.mark.parametrize("masks", [FULLY_MASKED, FULLY_MASKED_FLOAT], ids=["bool", "float"])
def test_a_fully_masked_row_matches_torch_with_its_gradients(masks: dict) -> None:
    out, grads, x_grad = _attention_with_a_fully_masked_row(masks, ge)
    t_out, t_grads, t_x_grad = _attention_with_a_fully_masked_row(masks, torch)
    np.testing.assert_allclose(out, t_out, atol=1e-12)
    for name, want in t_grads.items():
        np.testing.assert_allclose(grads[name], want, atol=1e-10)
    np.testing.assert_allclose(x_grad, t_x_grad, atol=1e-10)


@needs_torch
def test_a_transformer_layer_over_padding_under_a_causal_mask_matches_torch() -> None:
    ours = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, dtype="float64").eval()
    theirs = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, dtype=torch.float64).eval()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((3, 2, 4))
    masks = {
        "src_mask": FULLY_MASKED["attn_mask"],
        "src_key_padding_mask": FULLY_MASKED["key_padding_mask"],
    }
    got = ours(ge.tensor(x), **{n: ge.tensor(m) for n, m in masks.items()}).detach().numpy()
    want = theirs(torch.tensor(x), **{n: torch.tensor(m) for n, m in masks.items()})
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want.detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("masks_as", ["constants", "inputs"])
def test_a_fully_masked_row_is_zero_in_a_traced_graph_too(masks_as: str) -> None:
    attn = nn.MultiheadAttention(4, 2, generator=0, dtype="float64").eval()
    attn.out_proj.bias = ge.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
    x = np.random.default_rng(1).standard_normal((3, 2, 4))
    padding, causal = FULLY_MASKED["key_padding_mask"], FULLY_MASKED["attn_mask"]

    def forward(x, padding=padding, causal=causal):
        return attn(x, x, x, key_padding_mask=padding, attn_mask=causal, need_weights=False)[0]

    if masks_as == "constants":
        graph = gc.trace(forward, x)
        feeds = {"x": x}
    else:
        graph = gc.trace(forward, x, padding, causal)
        feeds = dict(zip([p.name for p in graph.inputs], (x, padding, causal)))
    feeds.update(gc.lifted_feeds(graph))
    want = forward(ge.tensor(x)).detach().numpy()
    np.testing.assert_array_equal(want[0, 0], [0.5, -1.0, 2.0, 0.25])
    for level in (0, 2):
        got = gc.compile(graph, opt_level=level)(**feeds)
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_masks_that_leave_every_row_a_key_record_no_extra_step() -> None:
    attn = nn.MultiheadAttention(4, 2, generator=0, dtype="float64")
    causal = np.triu(np.ones((3, 3), np.bool_), 1)

    def count_wheres(padding: np.ndarray) -> int:
        graph = gc.trace(
            lambda x: attn(x, x, x, key_padding_mask=padding, attn_mask=causal,
                           need_weights=False)[0],
            np.ones((3, 2, 4)),
        )  # fmt: skip
        return sum(n.op == "where" for n in graph.op_nodes)

    # the padding under the causal mask leaves row 0 of entry 0 no key: two more wheres
    assert (
        count_wheres(FULLY_MASKED["key_padding_mask"])
        == count_wheres(np.zeros((2, 3), np.bool_)) + 2
    )
