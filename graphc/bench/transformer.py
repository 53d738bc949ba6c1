"""One SGD training step of a transformer encoder layer (issue 15), float32.

`nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, dropout=0.0,
batch_first=True)` (post-norm, ReLU: torch's defaults) on a batch of 16 sequences of 64
tokens; loss = mean(output ** 2); the gradients of all twelve parameters feed an SGD
update (lr 0.01). The step is built as the `mlp` and `cnn` steps are: graphc eager runs
`backward()` and `SGD.step()`; graphc's O0 / O2 modes compile forward, backward and
update with `gc.compile_train_step` on the numpy backend, and O2 on the native one (the
loss ignores its target, a dummy (B,) array the step's signature wants); PyTorch eager runs `torch.nn.TransformerEncoderLayer` loaded with the
same weights and a foreach SGD; torch-compile compiles the layer and loss; `jax.jit`
compiles a hand-written layer (the same arithmetic as torch's: one in-projection for
q, k and v, scaled dot-product attention per head, LayerNorm with eps 1e-5) with its
parameters donated. Every mode returns the loss and updates its parameters in place;
the check compares the loss and the parameters after one step.

Memory (the issue's goal: the compiled step's peak <= 0.7x eager's) is the bench's
usual "peak mem": tracemalloc's peak over one step plus what the mode keeps between
steps (the compiled plan's arena; the parameters, held by every mode, are not counted).
The compiled modes' notes add the planner's own figure, the most bytes live at any one
step (`graphc.runtime.explain.peak_bytes`: intermediates and the kernels' declared
scratch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.bench import first_result, peers, torch_compile
from graphc.bench.core import (
    BASELINE,
    DEFAULT,
    QUICK_SKIP_DEFAULT_COLD,
    QUICK_SKIP_JAX,
    TORCH_COMPILE,
    Case,
    NotApplicableError,
    Prepared,
    Workload,
    as_arrays,
)
from graphc.bench.modes import (
    AUTO,
    compile_train_step,
    fast_math_same,
    not_applicable,
    same_plan,
    static_modes,
    train_step_note,
)
from graphc.bench.report import size
from graphc.runtime.explain import peak_bytes as planned_peak_bytes

LR = 0.01
EPS = 1e-5
FULL = {"batch": 16, "seq": 64, "d_model": 128, "nhead": 4, "ff": 512}
QUICK = {"batch": 2, "seq": 16, "d_model": 32, "nhead": 4, "ff": 64}
FULL_CASE, QUICK_CASE = "B=16 T=64 d=128 h=4 ff=512", "B=2 T=16 d=32 h=4 ff=64"


def layer(params: dict[str, Any]) -> nn.TransformerEncoderLayer:
    """The graphc layer of the case, holding `initial_parameters(params)`."""
    module = nn.TransformerEncoderLayer(
        params["d_model"], params["nhead"], params["ff"], dropout=0.0, batch_first=True
    )
    module.load_state_dict(initial_parameters(params))
    return module


def initial_parameters(params: dict[str, Any]) -> dict[str, np.ndarray]:
    """torch's initialization, drawn by graphc's layer from seed 0, with the LayerNorms'
    scales and shifts moved off (1, 0); fresh arrays on every call."""
    module = nn.TransformerEncoderLayer(
        params["d_model"], params["nhead"], params["ff"], dropout=0.0, batch_first=True,
        generator=0,
    )  # fmt: skip
    state = {k: np.array(v, np.float32) for k, v in module.state_dict().items()}
    rng = np.random.default_rng(1)
    for k in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
        state[k] += (0.1 * rng.standard_normal(params["d_model"])).astype(np.float32)
    return state


def names(params: dict[str, Any]) -> list[str]:
    """The parameters' names, in state_dict order (torch's)."""
    return list(initial_parameters(params))


def make_inputs(params: dict[str, Any]) -> dict[str, Any]:
    """x (B, T, d_model) float32 and the dummy target (B,) the train step's signature takes."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((params["batch"], params["seq"], params["d_model"]))
    return {"args": (x.astype(np.float32), np.zeros(params["batch"], np.float32))}


def mean_square(output: Any, target: Any) -> Any:
    """The loss: mean(output ** 2); `target` is not read."""
    return gc.mean(output * output)


# -- graphc ---------------------------------------------------------------------------


def train_step(
    params: dict[str, Any],
    x: np.ndarray,
    y: np.ndarray,
    opt_level: int,
    fast_math: bool = False,
    backend: str = "numpy",
) -> Any:
    """graphc's compiled SGD step of a fresh `layer(params)` for batches shaped like x."""
    module = layer(params)
    optimizer = optim.SGD(module.parameters(), lr=LR)
    return compile_train_step(module, mean_square, optimizer, (x, y), opt_level, fast_math, backend)


def _static(opt_level: int, fast_math: bool = False, backend: str = "numpy") -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        x, y = inputs["args"]
        train = train_step(params, x, y, opt_level, fast_math, backend)
        if fast_math:
            exact = train_step(params, x, y, opt_level, False, backend)
            if same_plan(exact.executable, train.executable, x, y):
                raise NotApplicableError(fast_math_same(backend))
        plan, ran = train_step_note(train, (x, y), backend)
        order = names(params)

        def arrays(loss: Any) -> list[np.ndarray]:
            values = train.parameters()
            return [loss, *(values[n] for n in order)]

        note = f"arena {plan.arena_bytes} B, planner peak {size(planned_peak_bytes(plan))}"
        note = f"{ran}; {note}" if ran else note
        return Prepared(lambda: train.step(x, y), arrays, plan.arena_bytes, note=note)

    return build


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    x = ge.from_numpy(inputs["args"][0])
    module = layer(params)
    optimizer = optim.SGD(module.parameters(), lr=LR)

    def call() -> Any:
        optimizer.zero_grad()
        loss = mean_square(module(x), None)
        loss.backward()
        optimizer.step()
        return loss

    named = dict(module.named_parameters())
    order = names(params)
    return Prepared(call, lambda loss: as_arrays([loss, *(named[n] for n in order)]))


# -- peers ----------------------------------------------------------------------------


def torch_layer(torch: Any, params: dict[str, Any]) -> Any:
    """torch.nn.TransformerEncoderLayer holding `initial_parameters(params)`."""
    module = torch.nn.TransformerEncoderLayer(
        params["d_model"], params["nhead"], params["ff"], dropout=0.0, batch_first=True
    )
    state = {k: torch.from_numpy(v) for k, v in initial_parameters(params).items()}
    module.load_state_dict(state)
    return module


def _torch_step(compiled: bool) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        torch = peers.torch()
        x = torch.from_numpy(inputs["args"][0])
        module = torch_layer(torch, params)
        optimizer = torch.optim.SGD(module.parameters(), lr=LR, foreach=True)

        def loss_of(x: Any) -> Any:
            out = module(x)
            return (out * out).mean()

        forward = torch_compile.compiled(torch, loss_of) if compiled else loss_of

        def call() -> Any:
            optimizer.zero_grad(set_to_none=True)
            loss = forward(x)
            loss.backward()
            optimizer.step()
            return loss

        named = dict(module.named_parameters())
        order = names(params)

        def arrays(loss: Any) -> list[np.ndarray]:
            return as_arrays([loss, *(named[n] for n in order)])

        if not compiled:
            return Prepared(call, arrays, None)
        initial = {k: torch.from_numpy(v) for k, v in initial_parameters(params).items()}
        reset = lambda: module.load_state_dict(initial)  # noqa: E731 - in place: step one again
        return torch_compile.prepared(call, arrays, torch_compile.TRAIN_NOTE, reset)

    return build


def jax_train_step(jax: Any, nhead: int) -> Any:
    """The jitted step (weights, x) -> (loss, new weights), weights (a dict) donated."""
    import jax.numpy as jnp

    def layer_norm(x: Any, weight: Any, bias: Any) -> Any:
        mean = x.mean(axis=-1, keepdims=True)
        var = jnp.square(x - mean).mean(axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + EPS) * weight + bias

    def attention(w: dict[str, Any], x: Any) -> Any:
        batch, seq, d_model = x.shape
        head = d_model // nhead
        qkv = x @ w["self_attn.in_proj_weight"].T + w["self_attn.in_proj_bias"]
        qkv = qkv.reshape(batch, seq, 3, nhead, head).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, T, head)
        scores = (q / np.sqrt(head).astype(np.float32)) @ k.transpose(0, 1, 3, 2)
        out = jax.nn.softmax(scores, axis=-1) @ v
        out = out.transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
        return out @ w["self_attn.out_proj.weight"].T + w["self_attn.out_proj.bias"]

    def forward(w: dict[str, Any], x: Any) -> Any:
        x = layer_norm(x + attention(w, x), w["norm1.weight"], w["norm1.bias"])
        hidden = jax.nn.relu(x @ w["linear1.weight"].T + w["linear1.bias"])
        ff = hidden @ w["linear2.weight"].T + w["linear2.bias"]
        return layer_norm(x + ff, w["norm2.weight"], w["norm2.bias"])

    def loss(w: dict[str, Any], x: Any) -> Any:
        out = forward(w, x)
        return jnp.mean(out * out)

    def step(w: dict[str, Any], x: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(w, x)
        return value, {k: w[k] - LR * grads[k] for k in w}

    return jax.jit(step, donate_argnums=0)


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    x = jnp.asarray(inputs["args"][0])
    state = [{k: jnp.asarray(v) for k, v in initial_parameters(params).items()}]
    step = jax_train_step(jax, params["nhead"]).lower(state[0], x).compile()  # not timed
    order = names(params)

    def call() -> Any:
        value, state[0] = jax.block_until_ready(step(state[0], x))
        return value

    def arrays(value: Any) -> list[np.ndarray]:
        return [np.asarray(value), *(np.asarray(state[0][n]) for n in order)]

    return Prepared(call, arrays, None, note="hand-written layer, parameters donated")


def _jax_step_args(jax: Any, params: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, ...]:
    """(weights, x) for the jitted step's first call: the weights as jax arrays (a jax
    user's parameters; donated), x as a numpy array."""
    import jax.numpy as jnp

    return {k: jnp.asarray(v) for k, v in initial_parameters(params).items()}, inputs["args"][0]


def _model_and_optimizer(params: dict[str, Any]) -> tuple[Any, Any]:
    module = layer(params)
    return module, optim.SGD(module.parameters(), lr=LR)


def _first_results() -> dict[str, Any]:
    def start(backend: str) -> Any:
        return first_result.train_step(_model_and_optimizer, lambda: mean_square, backend)

    jax = first_result.jax_first_call(
        lambda jax, params: jax_train_step(jax, params["nhead"]), _jax_step_args
    )
    return {BASELINE: start("numpy"), DEFAULT: start(AUTO), "jax": jax}


WORKLOAD = Workload(
    name="transformer",
    description=(
        "TransformerEncoderLayer training step (post-norm, ReLU, dropout 0, batch_first; "
        "loss mean(out^2), SGD lr 0.01), float32"
    ),
    unit="step",
    cases=[
        Case(
            QUICK_CASE,
            QUICK,
            full=False,
            quick_skip_modes={**torch_compile.QUICK_SKIP, **QUICK_SKIP_JAX},
            quick_skip_cold=QUICK_SKIP_DEFAULT_COLD,
        ),
        Case(FULL_CASE, FULL, quick=False),
    ],
    make_inputs=make_inputs,
    builders={
        "graphc-eager": _eager,
        **static_modes(_static),
        "numpy": not_applicable("not written (attention and LayerNorm backward by hand)"),
        "torch": _torch_step(compiled=False),
        TORCH_COMPILE: _torch_step(compiled=True),
        "jax": _jax,
    },
    reference="torch",
    first_result=_first_results(),
)
