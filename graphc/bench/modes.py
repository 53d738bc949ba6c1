"""Builders shared by the workloads: graphc's static modes, jax's jit, mode tables.

A static mode compiles outside timing (compile time is its own workload) and keeps
its plan's arena between calls, so the arena counts as the mode's resident memory.
graphc's levels are exact by default; the fast_math mode compiles with
`fast_math=True` and is reported only where that changes the generated plan (otherwise
it would time the same code twice and call the noise a difference).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import peers
from graphc.bench.core import FAST_MATH, NotApplicableError, Prepared, as_arrays

Builder = Callable[[dict[str, Any], dict[str, Any]], Prepared]


def compile_static(
    graph: gc.Graph,
    opt_level: int,
    args: tuple[np.ndarray, ...],
    updates: Mapping[str, str] | None = None,
    state: Mapping[str, np.ndarray] | None = None,
    fast_math: bool = False,
) -> tuple[gc.Executable, Prepared]:
    """Compile `graph` at `opt_level`, plan it for `args`, and wrap one call on them."""
    exe = gc.compile(graph, opt_level=opt_level, updates=updates, fast_math=fast_math)
    if state:
        exe.set_state(**{name: np.array(value, copy=True) for name, value in state.items()})
    plan = exe.plan(*args)
    arena = plan.arena_bytes
    note = f"arena {arena} B" + (
        f", recycled outputs {plan.recycled_bytes} B" if plan.recycled_bytes else ""
    )

    def call() -> Any:
        return exe(*args)

    # large outputs the caller drops stay with the executable for reuse: count them as kept
    return exe, Prepared(call, resident_bytes=arena + plan.recycled_bytes, note=note)


FAST_MATH_SAME = "fast_math changes nothing here (same plan as graphc-O2)"


def same_plan(exact: gc.Executable, fast: gc.Executable, *args: Any) -> bool:
    """Whether two executables generate the same source for `args` (fast_math was moot)."""
    return exact.source(*args) == fast.source(*args)


def static_mode(
    graph_of: Callable[[dict[str, Any]], gc.Graph], opt_level: int, fast_math: bool = False
) -> Builder:
    """A builder compiling the case's graph at `opt_level`, fed `inputs["args"]`.

    The graph is made once per case and kept in `inputs`, so O0 and O2 compile the same
    one. With `fast_math`, a plan identical to the exact one is `NotApplicableError`.
    """

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        if "graph" not in inputs:
            inputs["graph"] = graph_of(inputs)
        graph, args = inputs["graph"], inputs["args"]
        exe, prepared = compile_static(graph, opt_level, args, fast_math=fast_math)
        if fast_math and same_plan(gc.compile(graph, opt_level=opt_level), exe, *args):
            raise NotApplicableError(FAST_MATH_SAME)
        return prepared

    return build


class Classifier:
    """graphc's modes of one SGD step of a classifier (softmax cross-entropy), fed
    `inputs["args"] = (x, y)`: the compiled step (`static`, parameters as executable
    state) and the eager one (`eager`, backward() and step()). Each mode returns the loss
    and the parameters `names` after the step, from a fresh `make_model()`."""

    def __init__(self, make_model: Callable[[], Any], lr: float, names: tuple[str, ...]):
        self.make_model, self.lr, self.names = make_model, lr, names

    def train_step(
        self, x: np.ndarray, y: np.ndarray, opt_level: int, fast_math: bool = False
    ) -> Any:
        """The compiled SGD step of a fresh model for batches shaped like (x, y)."""
        from graphc import nn, optim

        model = self.make_model()
        optimizer = optim.SGD(model.parameters(), lr=self.lr)
        return gc.compile_train_step(
            model, nn.CrossEntropyLoss(), optimizer, (x, y), opt_level, fast_math
        )

    def static(self, opt_level: int, fast_math: bool = False) -> Builder:
        def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
            x, y = inputs["args"]
            train = self.train_step(x, y, opt_level, fast_math)
            if fast_math:
                exact = self.train_step(x, y, opt_level, False)
                if same_plan(exact.executable, train.executable, x, y):
                    raise NotApplicableError(FAST_MATH_SAME)
            arena = train.executable.plan(x, y).arena_bytes

            def arrays(loss: Any) -> list[np.ndarray]:
                values = train.parameters()  # by the model's (dotted) names
                return [loss, *(values[n] for n in self.names)]

            return Prepared(lambda: train.step(x, y), arrays, arena, note=f"arena {arena} B")

        return build

    def eager(self, params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        import graphc.eager as ge
        from graphc import nn, optim

        x, y = (ge.from_numpy(a) for a in inputs["args"])
        model = self.make_model()
        optimizer = optim.SGD(model.parameters(), lr=self.lr)
        loss_fn = nn.CrossEntropyLoss()

        def call() -> Any:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        named = dict(model.named_parameters())
        return Prepared(call, lambda loss: as_arrays([loss, *(named[n] for n in self.names)]))


def jax_jit(fn_of: Callable[[Any], Callable[..., Any]]) -> Builder:
    """A builder jitting `fn_of(jnp)` and calling it on the case's args as jax arrays."""

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        jax = peers.jax()
        import jax.numpy as jnp

        fn = jax.jit(fn_of(jnp))
        # jax runs with 32-bit integers unless x64 is enabled; say so instead of warning
        args = [
            jnp.asarray(a.astype(np.int32) if a.dtype == np.int64 else a) for a in inputs["args"]
        ]

        def call() -> Any:
            return jax.block_until_ready(fn(*args))

        return Prepared(call, resident_bytes=None)

    return build


def not_applicable(reason: str) -> Builder:
    """A builder for a mode that has no meaning in this workload."""

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        raise NotApplicableError(reason)

    return build


def graph_modes(
    graph_of: Callable[[dict[str, Any]], gc.Graph],
    *,
    eager: Builder,
    numpy: Builder,
    torch: Builder,
    jax: Builder,
    numpy_chunked: Builder | None = None,
) -> dict[str, Builder]:
    """The mode table of a workload whose static modes compile one graph per case."""
    return {
        "graphc-eager": eager,
        "graphc-O0": static_mode(graph_of, 0),
        "graphc-O2": static_mode(graph_of, 2),
        FAST_MATH: static_mode(graph_of, 2, fast_math=True),
        "numpy": numpy,
        "numpy-chunked": numpy_chunked or not_applicable("only for the GELU chain"),
        "torch": torch,
        "jax": jax,
    }


def plain(call: Callable[[], Any], resident_bytes: int | None = 0) -> Prepared:
    """A prepared call whose results are its return value."""
    return Prepared(call, as_arrays, resident_bytes)
