"""The tutorials' RNN: loss on the last state and its gradients (BPTT), float32.

h_t = tanh(x_t @ W_ih + h_{t-1} @ W_hh + b) over T steps from h_0 = 0, loss =
mean(h_T ** 2); every mode returns (loss, d loss / d W_ih, d W_hh, d b). graphc's
static modes compile two graphs of one program (`rnn_loop`, `rnn_scan`):

- graphc-O0, graphc-O2 (and fast_math), on the numpy backend, and graphc-O2 (and
  fast_math) on the native one: `gc.trace` of the Python `for` loop, unrolled into one
  copy of the step per time step, differentiated by `gc.gradients`;
- graphc-O2-scan, on the numpy and the default backend: the same step as the body of one
  `gc.scan` node; its gradient is a forward scan that saves per-step residuals and a
  reverse scan over them. On native each scan is one C call (backends/native/loops.py).

graphc eager runs the `for` loop on eager tensors (a tape of T steps, then
`autograd.grad`). The peers run the same computation their idiomatic way: PyTorch
eager a Python loop with `torch.autograd.grad` (the tutorials' picture; not
`nn.RNN`, whose whole loop is one C++ op), `jax.jit` of `value_and_grad` of a
`lax.scan` (nothing is donated: every input lives on to the next call); onnxruntime
the scan graph as graphc exports it to ONNX (its two scans as ONNX Scan nodes: onnxruntime
has no autodiff for inference), on one thread and on its default threads.
The hand-written numpy is what an expert writes: the input projections of all steps
as one matrix product before the loop, the weight gradients as two products over all
steps after the reverse loop (the loop keeps only the recurrent products), buffers
for the states and the per-step gradients allocated once per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc.bench import peers
from graphc.bench.core import (
    QUICK_SKIP_DEFAULT_COLD,
    QUICK_SKIP_JAX,
    SCAN,
    SCAN_DEFAULT,
    Case,
    NotApplicableError,
    Prepared,
    Workload,
)
from graphc.bench.first_result import graph_starts, jax_first_call
from graphc.bench.modes import (
    AUTO,
    compile_static,
    fast_math_same,
    onnxruntime_of,
    plain,
    require_backend,
    same_plan,
    static_modes,
)

WEIGHTS = ("w_ih", "w_hh", "b")
FULL = {"steps": 50, "batch": 32, "inputs": 64, "hidden": 128}
ONE = {**FULL, "batch": 1}  # a recurrence at batch 1: per-step overhead, not arithmetic
QUICK = {"steps": 10, "batch": 8, "inputs": 16, "hidden": 32}
# goals name FULL_CASE and ONE_CASE
FULL_CASE, ONE_CASE, QUICK_CASE = (
    "T=50 B=32 I=64 H=128",
    "T=50 B=1 I=64 H=128",
    "T=10 B=8 I=16 H=32",
)


def cell(w_ih: Any, w_hh: Any, b: Any) -> Callable[[Any, Any], Any]:
    """One step over these weights, in graphc ops (graph values or eager tensors)."""

    def step(h: Any, x: Any) -> Any:
        return gc.tanh(x @ w_ih + h @ w_hh + b)

    return step


def rnn_loop(xs: Any, h0: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    """The loss by a Python `for` over the steps (eager: runs it; tracing: unrolls it)."""
    step = cell(w_ih, w_hh, b)
    h = h0
    for t in range(xs.shape[0]):
        h = step(h, xs[t])
    return gc.mean(h * h)


def rnn_scan(xs: Any, h0: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    """The loss by one `gc.scan` whose body is the same step."""
    step = cell(w_ih, w_hh, b)
    h, _ = gc.scan(lambda h, x: (step(h, x), None), h0, xs)
    return gc.mean(h * h)


def make_inputs(params: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """(xs, h0, w_ih, w_hh, b), float32; weights scaled so that tanh does not saturate."""
    rng = np.random.default_rng(seed)
    steps, batch, inputs, hidden = (params[k] for k in ("steps", "batch", "inputs", "hidden"))
    values = (
        rng.standard_normal((steps, batch, inputs)),
        np.zeros((batch, hidden)),
        rng.standard_normal((inputs, hidden)) / np.sqrt(inputs),
        rng.standard_normal((hidden, hidden)) / np.sqrt(hidden),
        0.1 * rng.standard_normal(hidden),
    )
    return {"args": tuple(v.astype(np.float32) for v in values)}


def joint_graph(fn: Callable[..., Any], args: tuple[np.ndarray, ...]) -> gc.Graph:
    """`fn` traced for `args`' shapes, with the gradients of the weights as outputs."""
    forward = gc.trace(fn, *(gc.TensorSpec(a.shape, a.dtype) for a in args))
    return gc.gradients(forward, wrt=list(WEIGHTS))


def count_nodes(graph: gc.Graph) -> int:
    """Nodes, those in the bodies of scan (and fused) nodes included."""
    inner = sum(
        count_nodes(v) for n in graph.nodes for v in n.attrs.values() if isinstance(v, gc.Graph)
    )
    return len(graph.nodes) + inner


# -- graphc ---------------------------------------------------------------------------

GRAPHS = {"unrolled": rnn_loop, "scan": rnn_scan}


def graph_of(kind: str, inputs: dict[str, Any]) -> gc.Graph:
    """The case's joint graph of `kind`, built once and shared by the modes using it."""
    key = f"{kind} graph"
    if key not in inputs:
        inputs[key] = joint_graph(GRAPHS[kind], inputs["args"])
    return inputs[key]


def static(kind: str, opt_level: int, fast_math: bool = False, backend: str = "numpy") -> Any:
    """A builder compiling the `kind` joint graph ("unrolled" or "scan") on `backend`."""

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        require_backend(backend)
        graph, args = graph_of(kind, inputs), inputs["args"]
        exe, prepared = compile_static(graph, opt_level, args, fast_math=fast_math, backend=backend)
        exact = gc.compile(graph, opt_level=opt_level, backend=backend) if fast_math else None
        if exact is not None and same_plan(exact, exe, *args):
            raise NotApplicableError(fast_math_same(backend))
        prepared.note = f"{kind}: {count_nodes(graph)} nodes; {prepared.note}"
        return prepared

    return build


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    xs, h0, *weights = inputs["args"]
    xs, h0 = ge.from_numpy(xs), ge.from_numpy(h0)
    leaves = [ge.tensor(w, requires_grad=True) for w in weights]

    def call() -> Any:
        loss = rnn_loop(xs, h0, *leaves)
        return (loss, *ge.autograd.grad(loss, leaves))

    prepared = plain(call)
    prepared.note = "Python loop on eager tensors, autograd.grad"
    return prepared


# -- hand-written numpy ---------------------------------------------------------------


def numpy_rnn(
    xs: np.ndarray, h0: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, b: np.ndarray
) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """Forward and BPTT by hand: (loss, d W_ih, d W_hh, d b)."""
    steps, batch, inputs = xs.shape
    hidden = h0.shape[1]
    flat_xs = xs.reshape(steps * batch, inputs)
    # states[t + 1] = h_t; the input projections of every step come from one product
    states = np.empty((steps + 1, batch, hidden), np.float32)
    states[0] = h0
    np.matmul(flat_xs, w_ih, out=states[1:].reshape(steps * batch, hidden))
    states[1:] += b
    for t in range(steps):
        z = states[t + 1]
        z += states[t] @ w_hh
        np.tanh(z, out=z)
    h = states[-1]
    loss = np.mean(h * h)
    ct = h * np.float32(2.0 / h.size)  # d loss / d h_T
    dz = np.empty((steps, batch, hidden), np.float32)  # d loss / d pre-activation, per step
    w_hh_t = w_hh.T
    for t in range(steps - 1, -1, -1):
        d = dz[t]
        np.multiply(states[t + 1], states[t + 1], out=d)
        np.subtract(np.float32(1.0), d, out=d)  # tanh' = 1 - h^2
        d *= ct
        ct = d @ w_hh_t
    flat_dz = dz.reshape(steps * batch, hidden)
    grad_ih = flat_xs.T @ flat_dz
    grad_hh = states[:-1].reshape(steps * batch, hidden).T @ flat_dz
    return loss, grad_ih, grad_hh, flat_dz.sum(axis=0)


def _numpy(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    args = inputs["args"]
    prepared = plain(lambda: numpy_rnn(*args))
    prepared.note = "input and weight products over all steps at once"
    return prepared


# -- peers ----------------------------------------------------------------------------


def _torch(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    torch = peers.torch()
    xs, h0, *weights = (torch.from_numpy(a) for a in inputs["args"])
    for w in weights:
        w.requires_grad_(True)
    w_ih, w_hh, b = weights

    def call() -> Any:
        h = h0
        for t in range(xs.shape[0]):
            h = torch.tanh(xs[t] @ w_ih + h @ w_hh + b)
        loss = (h * h).mean()
        return (loss, *torch.autograd.grad(loss, weights))

    return Prepared(call, resident_bytes=None, note="Python loop, autograd.grad")


def jax_loss(jax: Any) -> Callable[..., Any]:
    """loss(weights, xs, h0) with `lax.scan`, as a new function on each call."""
    import jax.numpy as jnp

    def loss(weights: tuple, xs: Any, h0: Any) -> Any:
        w_ih, w_hh, b = weights

        def step(h: Any, x: Any) -> tuple[Any, None]:
            return jnp.tanh(x @ w_ih + h @ w_hh + b), None

        h, _ = jax.lax.scan(step, h0, xs)
        return jnp.mean(h * h)

    return loss


def jax_value_and_grad(jax: Any) -> Any:
    """The jitted (weights, xs, h0) -> (loss, (d W_ih, d W_hh, d b))."""
    return jax.jit(jax.value_and_grad(jax_loss(jax)))


def jax_args(inputs: dict[str, Any]) -> tuple[Any, ...]:
    import jax.numpy as jnp

    xs, h0, *weights = (jnp.asarray(a) for a in inputs["args"])
    return tuple(weights), xs, h0


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    fn = jax_value_and_grad(jax)
    args = jax_args(inputs)

    def call() -> Any:
        return jax.block_until_ready(fn(*args))

    return Prepared(call, resident_bytes=None, note="jit(value_and_grad) of lax.scan")


def _jax_numpy_args(jax: Any, params: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, ...]:
    """(weights, xs, h0) for the jitted loss's first call, as numpy arrays."""
    xs, h0, *weights = inputs["args"]
    return tuple(weights), xs, h0


WORKLOAD = Workload(
    name="rnn",
    description=(
        "RNN h=tanh(x W_ih + h W_hh + b), loss mean(h_T^2) + gradients of W_ih, W_hh, b "
        "(BPTT), float32; graphc-O2 = unrolled loop, graphc-O2-scan = gc.scan"
    ),
    unit="call",
    cases=[
        Case(
            QUICK_CASE,
            QUICK,
            full=False,
            quick_skip_modes=QUICK_SKIP_JAX,
            quick_skip_cold=QUICK_SKIP_DEFAULT_COLD,
        ),
        Case(ONE_CASE, ONE, quick=False),
        Case(FULL_CASE, FULL, quick=False),
    ],
    make_inputs=make_inputs,
    builders={
        "graphc-eager": _eager,
        **static_modes(
            lambda level, fast_math, backend: static("unrolled", level, fast_math, backend)
        ),
        SCAN: static("scan", 2),
        SCAN_DEFAULT: static("scan", 2, backend=AUTO),
        "numpy": _numpy,
        "torch": _torch,
        "jax": _jax,
        # the scan graph (forward and backward scans as ONNX Scan): as exported by graphc
        "onnxruntime-1thread": onnxruntime_of(lambda inputs: graph_of("scan", inputs), 1),
        "onnxruntime": onnxruntime_of(lambda inputs: graph_of("scan", inputs)),
    },
    # the unrolled loop, as graphc-O2: traced and differentiated in the cold start
    first_result=graph_starts(
        lambda inputs: joint_graph(rnn_loop, inputs["args"]),
        jax=jax_first_call(lambda jax, params: jax_value_and_grad(jax), _jax_numpy_args),
    ),
)
