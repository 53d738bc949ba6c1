"""nn.Module's and the containers' API beside torch.nn 2.13's, found missing or different
by a hunt: names with prefixes and duplicates, apply, requires_grad_, to(dtype),
get_submodule, add_module, container mutation, ModuleDict, Identity. Every expected
value is read from torch's twin."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch


def build(lib):
    """The same tree in graphc and torch: a shared layer, a batch norm, nested blocks."""
    shared = lib.Linear(3, 3)
    return lib.Sequential(
        shared,
        lib.BatchNorm1d(3),
        lib.Sequential(lib.Linear(3, 3), lib.Tanh(), shared),
    )


def names(pairs) -> list[str]:
    return [name for name, _ in pairs]


@needs_torch
def test_tree_walks_and_lookups_match_torch() -> None:
    ours, theirs = build(nn), build(torch.nn)
    for call in (
        lambda m: m.named_parameters(prefix="net"),
        lambda m: m.named_parameters(remove_duplicate=False),
        lambda m: m.named_parameters(recurse=False),
        lambda m: m.named_buffers(prefix="net"),
        lambda m: m.named_modules(prefix="net"),
        lambda m: m.named_modules(remove_duplicate=False),
    ):
        assert names(call(ours)) == names(call(theirs))
    assert list(ours.state_dict(prefix="net.")) == list(theirs.state_dict(prefix="net."))
    assert len(list(ours.buffers())) == len(list(theirs.buffers()))
    assert type(ours.get_submodule("2.2")).__name__ == type(theirs.get_submodule("2.2")).__name__
    for getter, target in (("get_parameter", "2.0.weight"), ("get_buffer", "1.running_var")):
        assert getattr(ours, getter)(target).shape == tuple(getattr(theirs, getter)(target).shape)
    with pytest.raises(GraphcError, match="'9'"):
        ours.get_submodule("2.9")

    visited: dict[str, list[str]] = {"ours": [], "theirs": []}
    ours.apply(lambda m: visited["ours"].append(type(m).__name__))
    theirs.apply(lambda m: visited["theirs"].append(type(m).__name__))
    assert visited["ours"] == visited["theirs"]

    for model in (ours, theirs):
        model.requires_grad_(False)
    assert names(ours.named_parameters()) == names(theirs.named_parameters())
    assert not any(p.requires_grad for p in ours.parameters())
    ours[2][0].requires_grad_()
    assert [p.requires_grad for p in ours.parameters()] == [False, False, False, False, True, True]


@needs_torch
def test_to_a_dtype_casts_float_state_as_torch_and_computes_in_it() -> None:
    ours, theirs = build(nn), build(torch.nn)
    x = np.random.default_rng(0).standard_normal((4, 3))
    ours(ge.tensor(x, dtype="float32")).sum().backward()  # a gradient is cast too
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    assert ours.to(ge.zeros(1, dtype="float64")) is ours
    theirs.to(torch.float64)
    for (key, value), (_, their_value) in zip(
        ours.state_dict().items(), theirs.state_dict().items()
    ):
        assert value.dtype == their_value.numpy().dtype, key
    assert ours[0].weight.grad.dtype == np.float64
    np.testing.assert_allclose(
        ours(ge.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12
    )
    assert ours.cpu() is ours and theirs.cpu() is theirs
    with pytest.raises(GraphcError, match="graphc computes on the CPU"):
        ours.cuda()
    with pytest.raises(GraphcError, match="no device 'cuda'"):  # was silently the CPU
        ours.to(device="cuda")
    assert ours.to(device="cpu") is ours
    assert ours.float()[0].weight.dtype == np.float32
    assert ours.double()[0].weight.dtype == np.float64
    with pytest.raises(GraphcError, match="floating point"):
        ours.to("int64")


@needs_torch
@pytest.mark.parametrize("kind", ["Sequential", "ModuleList"])
def test_container_mutations_match_torch(kind: str) -> None:
    def run(lib):
        first = [lib.ReLU(), lib.Tanh(), lib.Sigmoid()]
        box = lib.Sequential(*first) if kind == "Sequential" else lib.ModuleList(first)
        box.append(lib.Identity())
        box.insert(1, lib.Linear(2, 2))
        box.extend([lib.ReLU6(), lib.ELU()])
        del box[0]
        del box[-2]
        box[1] = lib.Softsign()
        box.pop(0)
        return [(name, type(m).__name__) for name, m in box.named_children()], type(box[-1])

    ours, theirs = run(nn), run(torch.nn)
    assert ours[0] == theirs[0]
    assert ours[1].__name__ == theirs[1].__name__
    with pytest.raises(IndexError, match=f"{kind}: index 5"):
        nn.Sequential(nn.ReLU())[5] if kind == "Sequential" else nn.ModuleList([nn.ReLU()])[5]


@needs_torch
def test_module_dict_matches_torch() -> None:
    def run(lib):
        heads = lib.ModuleDict({"b": lib.Linear(2, 1), "a": lib.Linear(2, 3)})
        heads["c"] = lib.Tanh()
        heads.update([("a", lib.Linear(2, 4)), ("d", lib.ReLU())])
        heads.pop("b")
        return list(heads), names(heads.named_parameters()), heads["a"].weight.shape, "c" in heads

    ours, theirs = run(nn), run(torch.nn)
    assert ours[:2] == theirs[:2] and ours[3] == theirs[3]
    assert ours[2] == tuple(theirs[2])
    with pytest.raises(GraphcError, match="not an nn.Module"):
        nn.ModuleDict({"x": 3})


@needs_torch
def test_a_frozen_tensor_assigned_to_a_parameter_keeps_its_slot() -> None:
    """graphc dropped the name from state_dict (a tensor not requiring grad was a plain
    attribute); torch keeps a frozen Parameter in its place."""
    ours, theirs = nn.Linear(2, 3), torch.nn.Linear(2, 3)
    ours.weight = ours.weight.detach()
    theirs.weight = torch.nn.Parameter(theirs.weight.detach(), requires_grad=False)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert names(ours.named_parameters()) == names(theirs.named_parameters())


def compare(ours, theirs, x: np.ndarray, **options) -> None:
    """theirs with ours's weights: outputs, and the gradients of the input and every
    parameter of a random weighting of the outputs, eagerly, as torch's (float64)."""
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    mine, their_x = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, their_out = ours(mine, **options), theirs(their_x, **options)
    out = out[0] if isinstance(out, tuple) else out
    their_out = their_out[0] if isinstance(their_out, tuple) else their_out
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    weights = np.random.default_rng(1).standard_normal(tuple(their_out.shape))
    (out * ge.tensor(weights)).sum().backward()
    (their_out * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(mine.grad.numpy(), their_x.grad.numpy(), atol=1e-10)
    their_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), their_params[name].grad.numpy(), atol=1e-10)


CONVOLUTIONS = [  # (class name, options, input shape): padding modes other than zeros
    ("Conv2d", {"padding": 1, "padding_mode": "reflect", "stride": 2}, (2, 4, 7, 8)),
    ("Conv2d", {"padding": (2, 1), "padding_mode": "circular", "groups": 2}, (2, 4, 7, 8)),
    ("Conv2d", {"padding": "same", "padding_mode": "replicate", "dilation": 2}, (4, 7, 8)),
    ("Conv2d", {"kernel_size": (2, 4), "padding": "same", "padding_mode": "reflect"}, (1, 4, 5, 6)),
    ("Conv1d", {"padding": 2, "padding_mode": "circular", "bias": False}, (2, 4, 9)),
    ("Conv1d", {"padding": "same", "padding_mode": "reflect", "kernel_size": 4}, (4, 9)),
]


@needs_torch
@pytest.mark.parametrize(("kind", "options", "shape"), CONVOLUTIONS, ids=str)
def test_convolution_padding_modes_match_torch(kind: str, options: dict, shape: tuple) -> None:
    options = {"kernel_size": 3, **options}
    ours = getattr(nn, kind)(4, 6, dtype="float64", **options)
    theirs = getattr(torch.nn, kind)(4, 6, dtype=torch.float64, **options)
    assert repr(ours) == repr(theirs)
    x = np.random.default_rng(0).standard_normal(shape)
    compare(ours, theirs, x)
    traced = gc.jit(lambda v: ours(v))(x)  # the padding traces into the graph too
    np.testing.assert_allclose(traced, theirs(torch.tensor(x)).detach().numpy(), atol=1e-12)


RECURRENT = [  # (class name, options, input shape, initial state shapes)
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True}, (5, 3, 3), [(4, 3, 2), (4, 3, 4)]),
    ("LSTM", {"proj_size": 3, "batch_first": True}, (2, 5, 3), []),
    ("LSTM", {"proj_size": 1, "num_layers": 2}, (5, 3), [(2, 1), (2, 4)]),
    ("GRU", {"num_layers": 3, "dropout": 0.5}, (5, 2, 3), [(3, 2, 4)]),
    ("RNN", {"num_layers": 2, "dropout": 1.0, "train": True}, (5, 2, 3), []),
    ("LSTM", {"num_layers": 2, "dropout": 1.0, "train": True, "proj_size": 2}, (5, 2, 3), []),
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize(("kind", "options", "shape", "states"), RECURRENT, ids=str)
def test_recurrent_projection_and_dropout_match_torch(kind, options, shape, states) -> None:
    """proj_size and dropout were refused; dropout=0.5 is compared in eval mode, and
    dropout=1.0 (every value of the lower layers dropped) in training mode."""
    options = dict(options)
    train = options.pop("train", False)
    ours = getattr(nn, kind)(3, 4, dtype="float64", **options).train(train)
    theirs = getattr(torch.nn, kind)(3, 4, dtype=torch.float64, **options).train(train)
    assert repr(ours) == repr(theirs)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in theirs.named_parameters()
    ]
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    hx = [rng.standard_normal(s) for s in states]
    hx_ours = None if not hx else tuple(map(ge.tensor, hx)) if len(hx) == 2 else ge.tensor(hx[0])
    hx_theirs = (
        None if not hx else tuple(map(torch.tensor, hx)) if len(hx) == 2 else torch.tensor(hx[0])
    )
    out, state = ours(ge.tensor(x), hx_ours)
    their_out, their_state = theirs(torch.tensor(x), hx_theirs)
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    for s, t in zip(*(v if isinstance(v, tuple) else (v,) for v in (state, their_state))):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), atol=1e-12)
    if not train:  # (gc.jit of a training dropout does not feed its rng_key yet)
        traced = gc.jit(lambda v: ours(v)[0])(x)
        want = theirs(torch.tensor(x))[0].detach().numpy()
        np.testing.assert_allclose(traced, want, atol=1e-12)


def test_recurrent_settings_torch_refuses_are_named_errors() -> None:
    with pytest.raises(GraphcError, match="GRU: proj_size"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(GraphcError, match="LSTM: proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(GraphcError, match="RNN: dropout"):
        nn.RNN(3, 4, dropout=1.5)
    with pytest.raises(
        ShapeError, match=r"RNN: hx must have shape \(1, batch, 4\) for an input of batch 2"
    ):
        nn.RNN(3, 4)(ge.ones(5, 2, 3), ge.ones(1, 3, 4))


@needs_torch
@pytest.mark.parametrize(
    "options", [{"kdim": 4, "vdim": 3}, {"kdim": 5, "batch_first": True, "bias": False}], ids=str
)
def test_attention_with_other_key_and_value_sizes_matches_torch(options: dict) -> None:
    """kdim/vdim were refused; torch's separate q/k/v projection weights now load."""
    ours = nn.MultiheadAttention(8, 2, dtype="float64", **options)
    theirs = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64, **options)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in theirs.named_parameters()
    ]
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    first = options.get("batch_first", False)

    def shape(length: int, size: int) -> tuple[int, int, int]:
        return (3, length, size) if first else (length, 3, size)

    arrays = [rng.standard_normal(shape(5, 8)), rng.standard_normal(shape(6, ours.kdim))]
    arrays.append(rng.standard_normal(shape(6, ours.vdim)))
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, weights = ours(*mine)
    their_out, their_weights = theirs(*their)
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(weights.detach().numpy(), their_weights.detach().numpy(), atol=1e-12)
    out.sum().backward()
    their_out.sum().backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-10)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            ours.get_parameter(name).grad.numpy(), p.grad.numpy(), atol=1e-10, err_msg=name
        )
    traced = gc.jit(lambda q, k, v: ours(q, k, v)[0])(*arrays)
    np.testing.assert_allclose(traced, their_out.detach().numpy(), atol=1e-12)


@needs_torch
def test_empty_layers_initialize_as_torch() -> None:
    """A layer with no inputs (Linear(0, n), a kernel of size 0) divided by a fan of 0."""
    ours, theirs = nn.Linear(0, 3, dtype="float64"), torch.nn.Linear(0, 3, dtype=torch.float64)
    np.testing.assert_array_equal(ours.bias.detach().numpy(), theirs.bias.detach().numpy())
    np.testing.assert_array_equal(
        ours(ge.ones(2, 0, dtype="float64")).detach().numpy(),
        theirs(torch.ones(2, 0, dtype=torch.float64)).detach().numpy(),
    )
    assert nn.Conv2d(3, 4, 0).weight.shape == tuple(torch.nn.Conv2d(3, 4, 0).weight.shape)


MISTAKES = [  # (what to run, the error and what its message names)
    (lambda: nn.Conv2d(3, 4, (3, 3, 3)), GraphcError, "Conv2d: kernel_size must be one int or 2"),
    (lambda: nn.Hardtanh(1.0, -1.0), GraphcError, r"Hardtanh: max_val \(-1.0\) must be greater"),
    (lambda: nn.Conv1d(3, 4, 3, stride=(1, 2)), GraphcError, "Conv1d: stride must be one int"),
    (lambda: nn.Linear(2, 3)(ge.tensor(1.0)), ShapeError, "Linear.2, 3.: input must have"),
    (lambda: nn.Linear(-1, 3), GraphcError, "Linear: in_features"),
    (lambda: nn.RNN(3, 4)(ge.zeros(0, 2, 3)), ShapeError, "RNN: the input has no time steps"),
    (lambda: nn.LSTM(3, 4, batch_first=True)(ge.zeros(2, 0, 3)), ShapeError, "LSTM: the input"),
    (
        lambda: nn.MultiheadAttention(8, 2)(ge.ones(5, 2, 8), ge.ones(4, 2, 8), ge.ones(3, 2, 8)),
        ShapeError,
        "MultiheadAttention: key of shape",
    ),
    (
        lambda: nn.MultiheadAttention(8, 2)(
            ge.ones(5, 2, 8), ge.ones(5, 2, 8), ge.ones(5, 2, 8), attn_mask=np.zeros((4, 5), bool)
        ),
        ShapeError,
        "MultiheadAttention: attn_mask must have shape",
    ),
    (
        lambda: nn.MultiheadAttention(8, 2)(
            ge.ones(5, 2, 8), ge.ones(5, 2, 8), ge.ones(5, 2, 8), key_padding_mask=np.zeros((5, 2))
        ),
        ShapeError,
        "MultiheadAttention: key_padding_mask",
    ),
    (lambda: nn.MultiheadAttention(8, 2, kdim=3)(*[ge.ones(5, 2, 8)] * 3), ShapeError, "key must"),
]


@needs_torch
@pytest.mark.parametrize(("run", "error", "message"), MISTAKES)
def test_mistakes_torch_refuses_are_named_errors(run, error, message) -> None:
    with pytest.raises(error, match=message):
        run()


@needs_torch
def test_reprs_match_torch() -> None:
    """Dropout left out inplace=False; a module with an extra_repr and children left
    out its extra_repr (torch prints its lines before the children)."""

    def block(lib):
        class Block(lib.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = 2.0
                self.inner = lib.Sequential(lib.Linear(2, 3), lib.Dropout(0.25))

            def extra_repr(self) -> str:
                return f"scale={self.scale},\nlayers=1"

        return Block()

    for make in (block, lambda lib: lib.Dropout(), lambda lib: lib.Sequential()):
        assert repr(make(nn)) == repr(make(torch.nn))


DECODERS = [  # (what to build, options, masks): torch's decoder side, missing before
    ("TransformerDecoderLayer", {}, ()),
    ("Transformer", {"batch_first": True}, ("tgt_mask", "tgt_key_padding_mask", "memory_key_padding_mask")),
    ("TransformerDecoderLayer", {"norm_first": True, "activation": "gelu", "bias": False}, ("tgt_mask",)),
    ("TransformerDecoder", {"batch_first": True}, ("memory_mask", "tgt_key_padding_mask")),
    ("Transformer", {"norm_first": True}, ("src_mask", "src_key_padding_mask")),
]  # fmt: skip


def decoder_twins(kind: str, options: dict):
    def make(lib, **extra):
        if kind == "Transformer":
            return lib.Transformer(8, 2, 2, 2, 16, dropout=0.0, **options, **extra)
        layer = lib.TransformerDecoderLayer(8, 2, 16, dropout=0.0, **options, **extra)
        return layer if kind == "TransformerDecoderLayer" else lib.TransformerDecoder(layer, 2)

    return make(nn, dtype="float64"), make(torch.nn, dtype=torch.float64)


@needs_torch
@pytest.mark.parametrize(("kind", "options", "masks"), DECODERS, ids=str)
def test_decoders_match_torch(kind: str, options: dict, masks: tuple) -> None:
    ours, theirs = decoder_twins(kind, options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    first = options.get("batch_first", False)
    src = rng.standard_normal((3, 6, 8) if first else (6, 3, 8))
    tgt = rng.standard_normal((3, 4, 8) if first else (4, 3, 8))
    padding = np.zeros((3, 6), bool)
    padding[1, 4:] = True
    given = {
        "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4, "float64").numpy(),
        "src_mask": rng.random((6, 6)) < 0.2,
        "memory_mask": rng.random((4, 6)) < 0.2,
        "src_key_padding_mask": padding,
        "memory_key_padding_mask": padding,
        "tgt_key_padding_mask": padding[:, :4],
    }
    kwargs = {name: given[name] for name in masks}
    mine = [ge.tensor(a, requires_grad=True) for a in (src, tgt)]
    their = [torch.tensor(a, requires_grad=True) for a in (src, tgt)]
    if kind != "Transformer":  # (tgt, memory)
        mine, their = mine[::-1], their[::-1]
    out = ours(*mine, **kwargs)
    their_out = theirs(*their, **{k: torch.tensor(v) for k, v in kwargs.items()})
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    out.sum().backward()
    their_out.sum().backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-10)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            ours.get_parameter(name).grad.numpy(), p.grad.numpy(), atol=1e-10, err_msg=name
        )
    arrays = [m.detach().numpy() for m in mine]
    traced = gc.jit(lambda a, b: ours(a, b, **kwargs))(*arrays)
    np.testing.assert_allclose(traced, their_out.detach().numpy(), atol=1e-12)


@needs_torch
def test_transformer_initializes_and_masks_as_torch() -> None:
    ours, theirs = nn.Transformer(16, 2, 1, 1, 32), torch.nn.Transformer(16, 2, 1, 1, 32)
    for (name, p), (_, t) in zip(ours.named_parameters(), theirs.named_parameters()):
        if t.dim() > 1:  # every matrix xavier-uniform: the bound, and most of its width used
            bound = np.sqrt(6 / sum(t.shape[:2]))
            assert 0.9 * bound < np.abs(p.detach().numpy()).max() <= bound, name
    np.testing.assert_array_equal(
        nn.Transformer.generate_square_subsequent_mask(3).numpy(),
        torch.nn.Transformer.generate_square_subsequent_mask(3).numpy(),
    )
    with pytest.raises(ShapeError, match="Transformer: src of shape"):
        ours(ge.ones(5, 2, 16), ge.ones(4, 3, 16))


NEW_LAYERS = [  # (class name, options, input shapes): layers torch has that were missing
    ("PReLU", {"num_parameters": 3, "init": 0.1}, [(2, 3, 4)]),
    ("MaxPool1d", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, [(2, 3, 9)]),
    ("MaxPool1d", {"kernel_size": 2, "dilation": 2, "return_indices": True}, [(3, 9)]),
    ("AvgPool1d", {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, [(2, 3, 9)]),
    ("AvgPool1d", {"kernel_size": 2, "ceil_mode": True}, [(3, 9)]),
    ("AdaptiveAvgPool1d", {"output_size": 4}, [(2, 3, 9)]),
    ("Bilinear", {"in1_features": 3, "in2_features": 5, "out_features": 4}, [(2, 6, 3), (2, 6, 5)]),
    ("Bilinear", {"in1_features": 3, "in2_features": 5, "out_features": 2, "bias": False}, [(3,), (5,)]),
    ("GLU", {"dim": 1}, [(2, 4, 3)]),
    ("Softmin", {"dim": -1}, [(2, 4, 3)]),
    ("PReLU", {}, [(5,)]),
    ("Threshold", {"threshold": 0.5, "value": -2.0}, [(2, 4)]),
    ("Tanhshrink", {}, [(2, 4)]),
    ("Unflatten", {"dim": -1, "unflattened_size": (2, -1)}, [(3, 4)]),
    ("RMSNorm", {"normalized_shape": (3, 4)}, [(2, 3, 4)]),
    ("RMSNorm", {"normalized_shape": 4, "eps": 1e-3, "elementwise_affine": False}, [(2, 4)]),
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize(("kind", "options", "shapes"), NEW_LAYERS, ids=str)
def test_new_layers_match_torch(kind: str, options: dict, shapes: list) -> None:
    typed = {"dtype": "float64"} if kind in ("PReLU", "Bilinear", "RMSNorm") else {}
    ours, theirs = getattr(nn, kind)(**options, **typed), getattr(torch.nn, kind)(**options)
    theirs = theirs.double()
    assert repr(ours) == repr(theirs)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    arrays[0].flat[:2] = (0.0, 0.5)  # a kink of PReLU at 0 and Threshold's edge
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, their_out = ours(*mine), theirs(*their)
    if isinstance(out, tuple):  # return_indices
        np.testing.assert_array_equal(out[1].numpy(), their_out[1].numpy())
        out, their_out = out[0], their_out[0]
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    weights = rng.standard_normal(tuple(their_out.shape))
    (out * ge.tensor(weights)).sum().backward()
    (their_out * torch.tensor(weights)).sum().backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-12)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            ours.get_parameter(name).grad.numpy(), p.grad.numpy(), atol=1e-12
        )
    traced = gc.jit(lambda *a: ours(*a))(*arrays)
    traced = traced[0] if isinstance(traced, tuple) else traced
    np.testing.assert_allclose(traced, their_out.detach().numpy(), atol=1e-12)


@needs_torch
def test_functional_linear_and_bilinear_match_torch() -> None:
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    for args in ((x, w, b), (x, w), (x, w[0])):
        np.testing.assert_allclose(
            F.linear(*map(ge.tensor, args)).numpy(),
            torch.nn.functional.linear(*map(torch.tensor, args)).numpy(),
            atol=1e-12,
        )
    x2, w3 = rng.standard_normal((2, 3, 6)), rng.standard_normal((4, 5, 6))
    np.testing.assert_allclose(
        F.bilinear(*map(ge.tensor, (x, x2, w3, b))).numpy(),
        torch.nn.functional.bilinear(*map(torch.tensor, (x, x2, w3, b))).numpy(),
        atol=1e-12,
    )
    with pytest.raises(ShapeError, match=r"linear: the input's last dim \(5\)"):
        F.linear(ge.tensor(x), ge.tensor(w.T))
    with pytest.raises(GraphcError, match="glu: dim -1 must have an even size"):
        F.glu(ge.ones(2, 3))


@needs_torch
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_matches_torch(causal: bool) -> None:
    """F.scaled_dot_product_attention(enable_gqa=True) was a TypeError."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((2, 6, 5, 4), (2, 2, 7, 4), (2, 2, 7, 3))]
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*mine, is_causal=causal, enable_gqa=True)
    want = torch.nn.functional.scaled_dot_product_attention(
        *their, is_causal=causal, enable_gqa=True
    )
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)
    out.sum().backward()
    want.sum().backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-12)
    traced = gc.jit(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    )(*arrays)
    np.testing.assert_allclose(traced, want.detach().numpy(), atol=1e-12)
    with pytest.raises(ShapeError, match="enable_gqa"):
        F.scaled_dot_product_attention(
            ge.ones(1, 6, 2, 4), ge.ones(1, 4, 2, 4), ge.ones(1, 4, 2, 4), enable_gqa=True
        )


CELLS = [  # (class name, options, input shape, state shapes)
    ("LSTMCell", {}, (3, 5), [(3, 4), (3, 4)]),
    ("RNNCell", {"nonlinearity": "relu", "bias": False}, (3, 5), [(3, 4)]),
    ("GRUCell", {}, (5,), [(4,)]),
    ("LSTMCell", {"bias": False}, (5,), []),
    ("GRUCell", {"bias": False}, (2, 5), []),
]


@needs_torch
@pytest.mark.parametrize(("kind", "options", "shape", "states"), CELLS, ids=str)
def test_recurrent_cells_match_torch(kind: str, options: dict, shape: tuple, states: list) -> None:
    """RNNCell, GRUCell and LSTMCell were missing."""
    ours = getattr(nn, kind)(5, 4, dtype="float64", **options)
    theirs = getattr(torch.nn, kind)(5, 4, dtype=torch.float64, **options)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape)] + [rng.standard_normal(s) for s in states]
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    hx = None if not states else tuple(mine[1:]) if len(states) == 2 else mine[1]
    their_hx = None if not states else tuple(their[1:]) if len(states) == 2 else their[1]
    out, their_out = ours(mine[0], hx), theirs(their[0], their_hx)
    out = out if isinstance(out, tuple) else (out,)
    their_out = their_out if isinstance(their_out, tuple) else (their_out,)
    for o, t in zip(out, their_out):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), atol=1e-12)
    sum(((k + 1) * o).sum() for k, o in enumerate(out)).backward()
    sum(((k + 1) * t).sum() for k, t in enumerate(their_out)).backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-12)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            ours.get_parameter(name).grad.numpy(), p.grad.numpy(), atol=1e-12
        )
    traced = gc.jit(lambda x: ours(x))(arrays[0])
    want = theirs(torch.tensor(arrays[0]))
    want = want[0] if isinstance(want, tuple) else want
    np.testing.assert_allclose(
        traced[0] if isinstance(traced, tuple) else traced, want.detach().numpy(), atol=1e-12
    )
    with pytest.raises(ShapeError, match=f"{kind}: hx must have shape"):
        ours(ge.ones(2, 5, dtype="float64"), ge.ones(3, 4, dtype="float64"))


@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_as_torch(norm_type: float) -> None:
    """max_norm was refused; torch scales the rows looked up in place, each step."""
    ours = nn.Embedding(6, 3, max_norm=1.2, norm_type=norm_type, dtype="float64")
    theirs = torch.nn.Embedding(6, 3, max_norm=1.2, norm_type=norm_type).double()
    assert repr(ours) == repr(theirs)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    for _ in range(2):  # the second lookup sees the first's renormalized rows
        ids = rng.integers(0, 6, (2, 4))
        out, their_out = ours(ge.tensor(ids)), theirs(torch.tensor(ids))
        weights = rng.standard_normal(tuple(their_out.shape))
        (out * ge.tensor(weights)).sum().backward()
        (their_out * torch.tensor(weights)).sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(
        ours.weight.detach().numpy(), theirs.weight.detach().numpy(), atol=1e-12
    )
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), atol=1e-12)
    with pytest.raises(GraphcError, match="embedding: max_norm rewrites the weight in place"):
        gc.trace(ours, gc.TensorSpec((2,), "int64"))


@needs_torch
def test_parameters_and_buffers_register_as_torch() -> None:
    """nn.Parameter was missing (a frozen one was no parameter), register_buffer took no
    persistent flag and register_parameter no None."""

    def build(lib, tensor):
        class Custom(lib.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = lib.Parameter(tensor(np.ones(3, np.float32)))
                self.frozen = lib.Parameter(tensor(np.zeros(2, np.float32)), requires_grad=False)
                self.register_buffer("kept", tensor(np.arange(3, dtype=np.float32)))
                self.register_buffer("scratch", tensor(np.ones(4, np.float32)), persistent=False)
                self.register_parameter("empty", None)
                self.inner = lib.Linear(3, 3)

            def forward(self, x):
                return self.inner(x * self.scale) + self.scratch[:3].sum()

        return Custom()

    ours, theirs = build(nn, ge.tensor), build(torch.nn, torch.tensor)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert names(ours.named_parameters()) == names(theirs.named_parameters())
    assert names(ours.named_buffers()) == names(theirs.named_buffers())
    assert [p.requires_grad for p in ours.parameters()] == [
        p.requires_grad for p in theirs.parameters()
    ]
    assert isinstance(ours.scale, nn.Parameter) and repr(ours.frozen) == (
        "Parameter containing:\ntensor([0., 0.])"
    )
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    out = ours(ge.tensor(x))
    np.testing.assert_allclose(
        out.detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-6
    )
    traced = gc.jit(lambda v: ours(v))(x)  # the non-persistent buffer is read when traced too
    np.testing.assert_allclose(traced, out.detach().numpy(), atol=1e-12)
    assert ours.double().scratch.dtype == np.float64  # to() casts non-persistent buffers too


@needs_torch
def test_forward_hooks_run_as_torch() -> None:
    """register_forward_hook and register_forward_pre_hook were missing."""

    def hooked(model) -> tuple[list, list]:
        seen: list = []
        handles = [
            model[0].register_forward_hook(lambda m, args, out: seen.append(out.detach())),
            model[1].register_forward_pre_hook(lambda m, args: (args[0] * 2.0,)),
            model[2].register_forward_hook(lambda m, args, out: out + 1.0),
        ]
        return seen, handles

    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    (seen, handles), (their_seen, their_handles) = hooked(ours), hooked(theirs)
    want = theirs(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(ours(ge.tensor(x)).detach().numpy(), want, atol=1e-6)
    np.testing.assert_allclose(seen[0].numpy(), their_seen[0].numpy(), atol=1e-6)
    traced = gc.jit(lambda v: ours(v))(x)  # the hooks run while tracing too
    np.testing.assert_allclose(traced, want, atol=1e-6)
    for handle in handles[1:] + their_handles[1:]:
        handle.remove()
    np.testing.assert_allclose(
        ours(ge.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-6
    )
    assert len(seen) == len(their_seen) + 1  # the trace ran the first hook once more


@needs_torch
@pytest.mark.parametrize(
    ("norm_type", "max_norm", "dtype"),
    [
        (2.0, 1.0, "float32"),
        (1.0, 0.5, "float64"),
        (float("inf"), 0.3, "float64"),
        (2.0, 1e3, "float64"),
    ],
)
def test_gradient_clipping_and_vectors_match_torch(norm_type, max_norm, dtype) -> None:
    """nn.utils (clip_grad_norm_, clip_grad_value_, parameters_to_vector and
    vector_to_parameters) was missing."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((3, 2), (4,), (2, 2))]
    grads = [rng.standard_normal(a.shape).astype(dtype) for a in arrays]
    ours = [ge.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = ge.tensor(g), torch.tensor(g)
    ours[2].grad = None  # a parameter without a gradient is left out, as torch's
    theirs[2].grad = None
    rtol = 1e-6 if dtype == "float32" else 1e-12
    total = nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    their_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    np.testing.assert_allclose(total.item(), their_total.item(), rtol=rtol)
    assert total.dtype == their_total.numpy().dtype
    for p, t in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=rtol)
    nn.utils.clip_grad_value_(ours, 0.1)
    torch.nn.utils.clip_grad_value_(theirs, 0.1)
    for p, t in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=rtol)
    vector = nn.utils.parameters_to_vector(ours)
    np.testing.assert_array_equal(
        vector.detach().numpy(), torch.nn.utils.parameters_to_vector(theirs).detach().numpy()
    )
    nn.utils.vector_to_parameters(vector * 2.0, ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(vector.detach().numpy()) * 2.0, theirs)
    for p, t in zip(ours, theirs):
        np.testing.assert_array_equal(p.detach().numpy(), t.detach().numpy())
    with pytest.raises(GraphcError, match="clip_grad_norm_: the total norm"):
        ours[0].grad = ge.tensor(np.full((3, 2), np.nan, dtype))
        nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)


@needs_torch
@pytest.mark.parametrize(
    "options",
    [
        {"add_bias_kv": True, "add_zero_attn": True},
        {"add_bias_kv": True, "batch_first": True, "bias": False},
        {"add_zero_attn": True, "need_weights": False},
    ],
    ids=str,
)
def test_attention_bias_kv_and_zero_attn_match_torch(options: dict) -> None:
    """add_bias_kv and add_zero_attn were refused; torch appends a learned (or zero)
    key and value to every sequence, and a column to the masks."""
    options = dict(options)
    need_weights = options.pop("need_weights", True)
    ours = nn.MultiheadAttention(8, 2, dtype="float64", **options)
    theirs = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64, **options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    first = options.get("batch_first", False)
    arrays = [rng.standard_normal((3, n, 8) if first else (n, 3, 8)) for n in (5, 6, 6)]
    masks = {"attn_mask": rng.random((5, 6)) < 0.3, "key_padding_mask": np.zeros((3, 6), bool)}
    masks["key_padding_mask"][0, 3:] = True
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, weights = ours(*mine, need_weights=need_weights, **masks)
    their_out, their_weights = theirs(
        *their, need_weights=need_weights, **{k: torch.tensor(v) for k, v in masks.items()}
    )
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    if need_weights:
        np.testing.assert_allclose(
            weights.detach().numpy(), their_weights.detach().numpy(), atol=1e-12
        )
    out.sum().backward()
    their_out.sum().backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-10)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            ours.get_parameter(name).grad.numpy(), p.grad.numpy(), atol=1e-10
        )
    traced = gc.jit(lambda q, k, v: ours(q, k, v, need_weights=need_weights, **masks)[0])(*arrays)
    np.testing.assert_allclose(traced, their_out.detach().numpy(), atol=1e-12)


DISTANCES = [  # (graphc's and torch's function of the arrays, how many arrays)
    (lambda lib, a: lib.normalize(a, 2.0, 1), 1),
    (lambda lib, a: lib.normalize(a, 3.0, 0), 1),
    (lambda lib, a: lib.normalize(a, float("inf"), 1), 1),
    (lambda lib, a, b: lib.cosine_similarity(a, b), 2),
    (lambda lib, a, b: lib.cosine_similarity(a * 1e-10, b[:1], dim=-1), 2),
    (lambda lib, a, b: lib.pairwise_distance(a, b, 1.0, keepdim=True), 2),
    (lambda lib, a, b: lib.pairwise_distance(a, a + 0 * b, eps=0.0), 2),
]


@needs_torch
@pytest.mark.parametrize(("fn", "count"), DISTANCES)
def test_distances_match_torch_at_zero_vectors_too(fn, count: int) -> None:
    """F.normalize, F.cosine_similarity, F.pairwise_distance were missing; a zero vector
    gets torch's gradient (0 through the norm), not nan."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 4)) for _ in range(count)]
    arrays[0][1] = 0.0
    mine = [ge.tensor(a, requires_grad=True) for a in arrays]
    their = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = fn(F, *mine), fn(torch.nn.functional, *their)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)
    weights = rng.standard_normal(tuple(want.shape))
    (out * ge.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    for m, t in zip(mine, their):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9)
    traced = gc.jit(lambda *a: fn(F, *a))(*arrays)
    np.testing.assert_allclose(traced, want.detach().numpy(), atol=1e-12)
    assert repr(nn.CosineSimilarity()) == repr(torch.nn.CosineSimilarity())
    np.testing.assert_allclose(
        nn.PairwiseDistance(p=1.0)(*mine[:1] * 2).detach().numpy(),
        torch.nn.PairwiseDistance(p=1.0)(*their[:1] * 2).detach().numpy(),
    )


RESIZES = [  # (input shape, F.interpolate's options): nearest modes, as torch's kernels pick
    ((2, 3, 5, 4), {"scale_factor": 2.1}),
    ((1, 2, 7), {"size": 4}),
    ((1, 2, 5), {"scale_factor": 1.7, "mode": "nearest-exact"}),
    ((1, 2, 3, 6), {"size": (7, 4), "mode": "nearest-exact"}),
    ((2, 1, 6, 3), {"scale_factor": (0.6, 2.22), "recompute_scale_factor": True}),
    ((1, 2, 5), {"scale_factor": 2.01}),  # 1-D, the size doubles: torch's gradient differs
]


@needs_torch
@pytest.mark.parametrize(("shape", "options"), RESIZES, ids=str)
def test_interpolate_nearest_matches_torch(shape: tuple, options: dict) -> None:
    """F.interpolate and nn.Upsample were missing."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    mine, their = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = F.interpolate(mine, **options)
    want = torch.nn.functional.interpolate(their, **options)
    np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
    weights = rng.standard_normal(tuple(want.shape))
    (out * ge.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    # the gradient is the forward's adjoint: each weight added where its output read from
    # (read off the forward of the positions 0, 1, ...); torch's 1-D backward agrees but
    # where a size stays or doubles under a scale_factor
    positions = np.arange(x.size, dtype=np.float64).reshape(shape)
    read = F.interpolate(ge.tensor(positions), **options).numpy().astype(np.int64)
    adjoint = np.bincount(read.ravel(), weights.ravel(), minlength=x.size).reshape(shape)
    np.testing.assert_allclose(mine.grad.numpy(), adjoint, atol=1e-12)
    if options != RESIZES[-1][1]:
        np.testing.assert_allclose(mine.grad.numpy(), their.grad.numpy(), atol=1e-12)
    layer = nn.Upsample(**{k: v for k, v in options.items() if k != "recompute_scale_factor"})
    traced = gc.jit(lambda v: F.interpolate(v, **options))(x)
    np.testing.assert_array_equal(traced, want.detach().numpy())
    assert repr(layer) == repr(
        torch.nn.Upsample(**{k: v for k, v in options.items() if k != "recompute_scale_factor"})
    )
    with pytest.raises(GraphcError, match="interpolate: mode 'trilinear' is not supported"):
        F.interpolate(mine, scale_factor=2, mode="trilinear")


@needs_torch
def test_parameter_containers_match_torch() -> None:
    """ParameterList and ParameterDict were missing."""

    def build(lib, tensor):
        class Mixture(lib.Module):
            def __init__(self) -> None:
                super().__init__()
                ones = np.ones(3, np.float32)
                self.scales = lib.ParameterList([tensor(ones), lib.Parameter(tensor(2 * ones))])
                self.scales.append(tensor(3 * ones))
                self.shifts = lib.ParameterDict({"b": tensor(ones), "a": tensor(-ones)})
                self.shifts["c"] = lib.Parameter(tensor(ones), requires_grad=False)
                del self.shifts["b"]

            def forward(self, x):
                for scale in self.scales:
                    x = x * scale
                return x + self.shifts["a"] + self.shifts["c"]

        return Mixture()

    ours, theirs = build(nn, ge.tensor), build(torch.nn, torch.tensor)
    assert [(n, p.shape, p.requires_grad) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape), p.requires_grad) for n, p in theirs.named_parameters()
    ]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out, want = ours(ge.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy())
    out.sum().backward()
    want.sum().backward()
    for (name, p), t in zip(ours.named_parameters(), theirs.parameters()):
        if t.grad is not None:
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), err_msg=name)
    assert len(ours.scales) == 3 and "a" in ours.shifts and isinstance(ours.scales[0], nn.Parameter)


@needs_torch
def test_more_initializers_match_torchs_distributions() -> None:
    """kaiming_normal_, trunc_normal_, eye_, orthogonal_ and the conv and selu gains were
    missing: statistics and structure against torch's, not bits."""
    from graphc.nn import init

    for name in ("conv1d", "conv_transpose3d", "selu", "tanh"):
        assert init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    ours = init.kaiming_normal_(ge.zeros(400, 300, dtype="float64"), mode="fan_out", generator=0)
    theirs = torch.nn.init.kaiming_normal_(torch.zeros(400, 300), mode="fan_out")
    assert abs(ours.numpy().std() / theirs.std().item() - 1) < 0.02
    ours = init.trunc_normal_(ge.zeros(50000, dtype="float64"), 0.5, 2.0, -1.0, 1.5, generator=0)
    theirs = torch.nn.init.trunc_normal_(
        torch.zeros(50000, dtype=torch.float64), 0.5, 2.0, -1.0, 1.5
    )
    values = ours.numpy()
    assert values.min() >= -1.0 and values.max() <= 1.5
    assert abs(values.mean() - theirs.mean().item()) < 0.02
    assert abs(values.std() - theirs.std().item()) < 0.02
    np.testing.assert_array_equal(
        init.eye_(ge.zeros(3, 5)).numpy(), torch.nn.init.eye_(torch.zeros(3, 5)).numpy()
    )
    for shape in ((4, 6), (6, 4), (3, 2, 2)):
        q = init.orthogonal_(ge.zeros(*shape, dtype="float64"), gain=2.0, generator=1).numpy()
        flat = q.reshape(shape[0], -1)
        small = min(flat.shape)
        gram = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
        np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-12)
