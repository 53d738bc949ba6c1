"""Builders shared by the workloads: graphc's static modes, jax's jit, mode tables.

A static mode compiles outside timing (compile time is its own workload) and keeps
its plan's arena between calls, so the arena counts as the mode's resident memory.
graphc's levels are exact by default; the fast_math modes compile with
`fast_math=True` and are reported only where that changes the generated plan (otherwise
they would time the same code twice and call the noise a difference).

Each static mode names its backend (`gc.compile(backend=...)`; core.MODES). A native
mode checks that the backend can run here first (`UnavailableError` with its reason
otherwise: gc.compile would quietly run numpy instead), then that the plan it built
really runs on it (a plan whose native build failed falls back to numpy: an error), and
notes how many of the plan's steps the backend runs. The default mode (`backend="auto"`)
runs wherever graphc does: its note says which backend its plan ended on.

Every static mode is timed on its final tier: with issue 30's runtime a plan may start on
numpy while its native kernels build in the background, so a builder waits for the
build (`core.finish_build`) after planning, and the runner again after the first call.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

import graphc as gc
from graphc.bench import first_result, peers
from graphc.bench.core import (
    BASELINE,
    BUILD_TIMEOUT,
    COPYTO,
    DEFAULT,
    FAST_MATH,
    FAST_MATH_NATIVE,
    NATIVE,
    O0,
    NotApplicableError,
    Prepared,
    StartBuilder,
    UnavailableError,
    as_arrays,
    finish_build,
)
from graphc.ir.errors import GraphcError
from graphc.runtime.backend import available_backends, get_backend

Builder = Callable[[dict[str, Any], dict[str, Any]], Prepared]
# the exact O2 mode of each backend (what its fast_math mode is compared with)
EXACT_O2 = {"numpy": BASELINE, "native": NATIVE}
AUTO = "auto"  # the backend a user gets without naming one


def require_backend(backend: str) -> None:
    """`UnavailableError`, with the backend's own reason, when `backend` cannot run here.

    Asked for a backend that cannot run, `gc.compile` falls back to numpy with a warning;
    a bench mode must not time numpy under another backend's name, so it checks first.
    The default ("auto") runs everywhere: it is whatever graphc picks here."""
    if backend == AUTO or backend in available_backends():
        return
    try:
        why = get_backend(backend).unavailable() or "not available"
    except GraphcError as exc:  # not registered at all
        why = str(exc)
    raise UnavailableError(f"graphc's {backend} backend cannot run here: {why}")


class BackendMismatchError(RuntimeError):
    """A plan was generated on another backend than the mode asked for (a fallback)."""


_STEP_TAG = re.compile(r"  \[(\w+)\]$")  # explain's step lines end with their backend
_BODY = re.compile(r"\s+\w+: plan for graph ")  # a body's plan, inside a step


def _backend_of(explained: list[str]) -> str | None:
    """The backend named by `explain`'s "backend: " line."""
    return next((x.split(": ", 1)[1] for x in explained if x.startswith("backend: ")), None)


def backend_note(exe: gc.Executable, args: tuple[Any, ...], backend: str, caught: str = "") -> str:
    """Check that `exe`'s plan for `args` runs on `backend` (read from `exe.explain`) and
    say how much of it does: "" for numpy, e.g. "native 15/40 steps, 8 C kernels".

    A plan that fell back to numpy raises `BackendMismatchError` (`caught`: the fallback
    warning, when one was seen). A scalar plan (every value one element, run on numpy
    scalars) is the backend's own choice for such graphs, and is said so, as is a plan
    its backend runs as one C call (an entry in C: backends/native/entry.py)."""
    lines = exe.explain(*args).splitlines()
    in_c = "; run as one C call" if any(x.startswith("entry: one C call") for x in lines) else ""
    if any(line.startswith("scalar plan") for line in lines):
        return "run as one C call" if in_c else "scalar plan (numpy scalars)"
    ran = _backend_of(lines)
    if ran != backend:
        why = f": {caught}" if caught else ""
        raise BackendMismatchError(f"asked for the {backend} backend, the plan ran on {ran}{why}")
    if backend == "numpy":
        return ""
    tags = [m.group(1) for m in map(_STEP_TAG.search, lines) if m]
    kernels = next((line for line in lines if line.startswith(f"{backend}: ")), "")
    count = re.match(rf"{backend}: (\d+) ", kernels)
    built = f", {count.group(1)} C kernels" if count else ""
    # a loop's or branch's body is planned (and lowered) on its own; explain shows its
    # steps without their backends, so the count is of the top-level steps only
    steps = "top-level steps" if any(_BODY.match(line) for line in lines) else "steps"
    return f"{backend} {tags.count(backend)}/{len(tags)} {steps}{built}{in_c}"


def settle(built: Any) -> None:
    """Wait until `built` (an Executable or TrainStep) runs on its final tier, so that a
    steady-state mode is timed on the code it ends with, not on numpy while it builds."""
    if finish_build(built) is False:
        raise TimeoutError(f"the background build did not finish in {BUILD_TIMEOUT:.0f} s")


def mode_note(exe: gc.Executable, args: tuple[Any, ...], backend: str, caught: str = "") -> str:
    """`backend_note`; for the default backend, of the backend its plan ended on ("on
    numpy" where that is numpy: "auto" rightly ends there without a compiler, or after a
    failed build)."""
    if backend != AUTO:
        return backend_note(exe, args, backend, caught)
    ran = _backend_of(exe.explain(*args).splitlines()) or "numpy"
    return backend_note(exe, args, ran, caught) or f"on {ran}"


@contextlib.contextmanager
def fallback_warnings() -> Iterator[list[str]]:
    """Collect the runtime's RuntimeWarnings (a backend falling back says why in one)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", RuntimeWarning)
        messages: list[str] = []
        yield messages
    messages += [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]


def compile_static(
    graph: gc.Graph,
    opt_level: int,
    args: tuple[np.ndarray, ...],
    updates: Mapping[str, str] | None = None,
    state: Mapping[str, np.ndarray] | None = None,
    fast_math: bool = False,
    backend: str = "numpy",
) -> tuple[gc.Executable, Prepared]:
    """Compile `graph` at `opt_level` on `backend`, plan it for `args`, and wrap one
    call on them (the note says what the backend runs)."""
    require_backend(backend)
    with fallback_warnings() as caught:
        exe = gc.compile(
            graph, opt_level=opt_level, updates=updates, fast_math=fast_math, backend=backend
        )
        if state:
            exe.set_state(**{n: np.array(v, copy=True) for n, v in state.items()})
        plan = exe.plan(*args)
        settle(exe)
    ran = mode_note(exe, args, backend, "; ".join(caught))
    arena = plan.arena_bytes
    note = f"arena {arena} B" + (
        f", recycled outputs {plan.recycled_bytes} B" if plan.recycled_bytes else ""
    )
    if ran:
        note = f"{ran}; {note}"

    def call() -> Any:
        return exe(*args)

    # large outputs the caller drops stay with the executable for reuse: count them as kept
    kept = arena + plan.recycled_bytes
    return exe, Prepared(call, resident_bytes=kept, note=note, built=exe)


def fast_math_same(backend: str = "numpy") -> str:
    """The reason a fast_math mode is n/a: its plan is the exact O2 plan's."""
    return f"fast_math changes nothing here (same plan as {EXACT_O2[backend]})"


def same_plan(exact: gc.Executable, fast: gc.Executable, *args: Any) -> bool:
    """Whether two executables generate the same source for `args` (fast_math was moot)."""
    return exact.source(*args) == fast.source(*args)


StaticFactory = Callable[[int, bool, str], Builder]  # (opt_level, fast_math, backend)


def static_modes(make: StaticFactory) -> dict[str, Builder]:
    """graphc's static modes of a workload from one factory: O0, O2 and O2 fast_math on
    the numpy backend, O2 and O2 fast_math on the native backend, and O2 on the default
    one."""
    return {
        O0: make(0, False, "numpy"),
        BASELINE: make(2, False, "numpy"),
        FAST_MATH: make(2, True, "numpy"),
        NATIVE: make(2, False, "native"),
        FAST_MATH_NATIVE: make(2, True, "native"),
        DEFAULT: make(2, False, AUTO),
    }


def static_mode(
    graph_of: Callable[[dict[str, Any]], gc.Graph],
    opt_level: int,
    fast_math: bool = False,
    backend: str = "numpy",
) -> Builder:
    """A builder compiling the case's graph at `opt_level` on `backend`, fed
    `inputs["args"]`.

    The graph is made once per case and kept in `inputs`, so every static mode compiles
    the same one. With `fast_math`, a plan identical to the exact one is
    `NotApplicableError`.
    """

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        require_backend(backend)
        if "graph" not in inputs:
            inputs["graph"] = graph_of(inputs)
        graph, args = inputs["graph"], inputs["args"]
        exe, prepared = compile_static(graph, opt_level, args, fast_math=fast_math, backend=backend)
        if fast_math:
            exact = gc.compile(graph, opt_level=opt_level, backend=backend)
            if same_plan(exact, exe, *args):
                raise NotApplicableError(fast_math_same(backend))
        return prepared

    return build


def compile_train_step(
    model: Any,
    loss_fn: Any,
    optimizer: Any,
    batch: tuple[np.ndarray, ...],
    opt_level: int,
    fast_math: bool,
    backend: str,
) -> Any:
    """`gc.compile_train_step` on `backend` (`UnavailableError` where it cannot run)."""
    require_backend(backend)
    return gc.compile_train_step(
        model, loss_fn, optimizer, batch, opt_level, fast_math, backend=backend
    )


def train_step_note(train: Any, args: tuple[np.ndarray, ...], backend: str) -> tuple[Any, str]:
    """The step's plan for `args` (built here, outside timing, and its background build
    waited for), checked to run on `backend`; and the note saying what the backend runs
    ("" on numpy)."""
    with fallback_warnings() as caught:
        plan = train.executable.plan(*args)
        settle(train)
    return plan, mode_note(train.executable, args, backend, "; ".join(caught))


class Classifier:
    """graphc's modes of one SGD step of a classifier (softmax cross-entropy), fed
    `inputs["args"] = (x, y)`: the compiled step (`static`, parameters as executable
    state) and the eager one (`eager`, backward() and step()). Each mode returns the loss
    and the parameters `names` after the step, from a fresh `make_model()`."""

    def __init__(self, make_model: Callable[[], Any], lr: float, names: tuple[str, ...]):
        self.make_model, self.lr, self.names = make_model, lr, names

    def train_step(
        self,
        x: np.ndarray,
        y: np.ndarray,
        opt_level: int,
        fast_math: bool = False,
        backend: str = "numpy",
    ) -> Any:
        """The compiled SGD step of a fresh model for batches shaped like (x, y)."""
        from graphc import nn, optim

        model = self.make_model()
        optimizer = optim.SGD(model.parameters(), lr=self.lr)
        return compile_train_step(
            model, nn.CrossEntropyLoss(), optimizer, (x, y), opt_level, fast_math, backend
        )

    def static(self, opt_level: int, fast_math: bool = False, backend: str = "numpy") -> Builder:
        def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
            x, y = inputs["args"]
            train = self.train_step(x, y, opt_level, fast_math, backend)
            if fast_math:
                exact = self.train_step(x, y, opt_level, False, backend)
                if same_plan(exact.executable, train.executable, x, y):
                    raise NotApplicableError(fast_math_same(backend))
            plan, ran = train_step_note(train, (x, y), backend)
            arena = plan.arena_bytes
            note = f"{ran}; arena {arena} B" if ran else f"arena {arena} B"

            def arrays(loss: Any) -> list[np.ndarray]:
                values = train.parameters()  # by the model's (dotted) names
                return [loss, *(values[n] for n in self.names)]

            return Prepared(lambda: train.step(x, y), arrays, arena, note=note, built=train)

        return build

    def static_modes(self) -> dict[str, Builder]:
        """The compiled step's modes (`static_modes`)."""
        return static_modes(self.static)

    def model_and_optimizer(self, params: dict[str, Any]) -> tuple[Any, Any]:
        """A fresh model and its SGD optimizer."""
        from graphc import optim

        model = self.make_model()
        return model, optim.SGD(model.parameters(), lr=self.lr)

    def first_results(self, jax: StartBuilder) -> dict[str, StartBuilder]:
        """The cold starts of the compiled step on the numpy and default backends
        (`first_result.train_step`), and `jax`'s."""
        from graphc import nn

        def start(backend: str) -> StartBuilder:
            return first_result.train_step(self.model_and_optimizer, nn.CrossEntropyLoss, backend)

        return {BASELINE: start("numpy"), DEFAULT: start(AUTO), "jax": jax}

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


def onnxruntime_of(
    graph_of: Callable[[dict[str, Any]], gc.Graph], threads: int | None = None
) -> Builder:
    """onnxruntime running the case's graph (`graph_of`), exported to ONNX by graphc: a
    gradient is then ordinary ONNX operators, as onnxruntime has no autodiff of its own
    for inference; every graph optimization, `threads` threads or its default ones."""

    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        peers.onnxruntime_module()
        peers.onnx_module()
        graph = graph_of(inputs)
        model = gc.onnx.export_model(graph).SerializeToString()
        make, note = peers.onnxruntime_session(model, threads)
        session = make()
        feeds = {p.name: a for p, a in zip(graph.inputs, inputs["args"])}
        note = f"graphc's graph as ONNX; {note}"
        return Prepared(lambda: session.run(None, feeds), as_arrays, None, note=note)

    return build


def graph_modes(
    graph_of: Callable[[dict[str, Any]], gc.Graph],
    *,
    eager: Builder,
    numpy: Builder,
    torch: Builder,
    jax: Builder,
    numpy_chunked: Builder | None = None,
    numpy_copyto: Builder | None = None,
) -> dict[str, Builder]:
    """The mode table of a workload whose static modes compile one graph per case."""
    return {
        "graphc-eager": eager,
        **static_modes(
            lambda level, fast_math, backend: static_mode(graph_of, level, fast_math, backend)
        ),
        "numpy": numpy,
        "numpy-chunked": numpy_chunked or not_applicable("only for the GELU chain"),
        COPYTO: numpy_copyto or not_applicable("only for the GELU chain"),
        "torch": torch,
        "jax": jax,
    }


def plain(call: Callable[[], Any], resident_bytes: int | None = 0) -> Prepared:
    """A prepared call whose results are its return value."""
    return Prepared(call, as_arrays, resident_bytes)
