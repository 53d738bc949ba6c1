"""Time to first result: from nothing to the first returned result, on a cold cache.

What a new user waits for before seeing a number (issue 30): tracing (where the mode
traces), compiling, and the first call, with no compiled kernel on disk or in the
process. Measured per case for graphc O2 on the numpy backend (`core.BASELINE`), on the
default backend (`core.DEFAULT`, `backend="auto"`: with issue 30's runtime the first call
runs a numpy plan while the native kernels build in the background) and for `jax.jit`'s
first call of a freshly defined function (`jax.clear_caches()` first, so no cache of an
earlier measurement is hit), wherever the workload declares them (`Workload.first_result`).

One measurement, exactly:

1. untimed: the mode prepares what a user already has before writing the first line of
   their program (a fresh model and optimizer, the input arrays in the library's form,
   the library imported: `import graphc` and `import jax` are not counted), and the
   garbage collector runs;
2. untimed: `GRAPHC_CACHE_DIR` is pointed at a new empty temporary directory and the
   runtime forgets the native libraries this process loaded
   (`toolchain.reset(loaded=True)`), so nothing built before is found;
3. timed, "first result": the cold start (trace + compile + first call; the first call
   blocks until its result is ready);
4. timed, "background build": from the first result until the object it made says its
   plans run on their final tier (`exe.wait()` or `train.wait()` returned: native kernels
   swapped in, or numpy after a failed build). Nothing else runs meanwhile, so one
   measurement's build never loads the next. A runtime without `wait()` builds before
   the first result: no figure;
5. the temporary directory is removed and `GRAPHC_CACHE_DIR` restored.

Each measurement is single-shot, so a case takes several rounds, each round one
measurement per mode, the modes' order rotated from round to round; figures are the
medians over the rounds. graphc's first results are checked against the numpy
backend's of the same round (the same computation, so they must agree). This runs after
the case's steady-state timing, in the same process: Python modules are imported and
the compiler found, as in a user's process after its first import.
"""

from __future__ import annotations

import contextlib
import gc as garbage
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import graphc as gc
from graphc.backends.native import toolchain
from graphc.bench import peers
from graphc.bench.core import (
    BASELINE,
    BUILD_TIMEOUT,
    DEFAULT,
    FIRST_RESULT_MODES,
    QUICK_SKIP_COLD,
    Case,
    FirstCall,
    NotApplicableError,
    StartBuilder,
    UnavailableError,
    Workload,
    as_arrays,
    finish_build,
    relative_error,
)

CACHE_VARIABLE = "GRAPHC_CACHE_DIR"


@dataclass
class Rounds:
    """How many cold measurements per mode: at least `least`, at most `most`, and no new
    round once `budget` seconds have gone on the case's measurements."""

    least: int
    most: int
    budget: float

    def another(self, done: int, spent: float) -> bool:
        """Whether to take another round after `done` rounds that took `spent` seconds."""
        return done < self.most and (done < self.least or spent < self.budget)


@dataclass
class FirstResult:
    """One mode's time to first result in one case (seconds; medians over the rounds)."""

    status: str  # ok | error | unavailable | n/a | skipped
    reason: str = ""
    median: float | None = None  # nothing -> first result
    min: float | None = None
    max: float | None = None
    repeats: int = 0
    build: float | None = None  # first result -> wait() returned; None: nothing to wait for
    build_max: float | None = None
    rel_error: float | None = None  # against the numpy backend's first result (graphc)
    agrees: bool | None = None
    note: str = ""


@contextlib.contextmanager
def cold_cache() -> Iterator[None]:
    """A new empty `GRAPHC_CACHE_DIR`, and no native library remembered by the runtime
    (`toolchain.reset(loaded=True)`, as in a fresh process), for the duration of the
    block. The directory goes afterwards (leave the block only when no build writes into
    it)."""
    toolchain.reset(loaded=True)
    saved = os.environ.get(CACHE_VARIABLE)
    with tempfile.TemporaryDirectory(prefix="graphc-cold-", ignore_cleanup_errors=True) as root:
        os.environ[CACHE_VARIABLE] = root
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(CACHE_VARIABLE, None)
            else:
                os.environ[CACHE_VARIABLE] = saved
            # libraries of the deleted directory stay mapped; later plans look in the
            # user's cache again
            toolchain.reset(loaded=True)


@dataclass
class Cold:
    """One cold measurement."""

    first: float  # seconds to the first result
    build: float | None  # seconds from it until wait() returned (None: no wait())
    arrays: list[np.ndarray]  # the first result, copied
    tiers: str  # graphc: the tier of the first result and the final one, else ""


def _tier(built: Any) -> str | None:
    """Which code `built` (an Executable, or a TrainStep's) runs now, where it says."""
    return getattr(getattr(built, "executable", built), "tier", None)


def cold_start(prepare: StartBuilder, params: dict[str, Any], inputs: dict[str, Any]) -> Cold:
    """Prepare one cold start (untimed), run it on a cold cache, wait for its build."""
    start = prepare(params, inputs)
    garbage.collect()
    with cold_cache():
        began = time.perf_counter()
        made = start()
        first = time.perf_counter() - began
        tier = _tier(made.built)  # read after the clock: the code that answered
        arrays = [np.array(a, copy=True) for a in as_arrays(made.value)]
        waited = time.perf_counter()
        done = finish_build(made.built)
        build = time.perf_counter() - waited
        if done is False:
            raise TimeoutError(f"the background build did not finish in {BUILD_TIMEOUT:.0f} s")
    final = _tier(made.built)
    tiers = f"{tier} -> {final}" if tier is not None and final != tier else str(tier or "")
    return Cold(first, None if done is None else build, arrays, tiers)


def _skipped(case: Case, mode: str, quick: bool) -> str:
    """Why `mode`'s cold start is not measured in `case` ("" when it is)."""
    if not quick:
        return case.skip_modes.get(mode, "")
    cold = {**QUICK_SKIP_COLD, **case.quick_skip_cold}  # --quick's, then the case's own
    return case.skip_modes.get(mode) or case.quick_skip_modes.get(mode) or cold.get(mode, "")


def measure(
    workload: Workload,
    case: Case,
    inputs: dict[str, Any],
    rounds: Rounds,
    quick: bool = False,
    tick: Callable[[str], None] | None = None,
) -> dict[str, FirstResult]:
    """Time to first result of every mode `workload` declares one for, in `case`."""
    modes = [m for m in FIRST_RESULT_MODES if m in workload.first_result]
    results = {m: FirstResult("ok") for m in modes}
    for mode in modes:
        skip = _skipped(case, mode, quick)
        if skip:
            results[mode] = FirstResult("skipped", skip)
    runs: dict[str, list[Cold]] = {m: [] for m in modes}
    errors: dict[str, float | None] = {m: None for m in modes}  # None: never compared
    began = time.perf_counter()
    done = 0
    while rounds.another(done, time.perf_counter() - began):
        live = [m for m in modes if results[m].status == "ok"]
        if not live:
            break
        reference: list[np.ndarray] | None = None
        for mode in live[done % len(live) :] + live[: done % len(live)]:
            if tick is not None:
                tick(f"first result {mode}")
            try:
                cold = cold_start(workload.first_result[mode], case.params, inputs)
            except UnavailableError as exc:
                results[mode] = FirstResult("unavailable", str(exc))
                continue
            except NotApplicableError as exc:
                results[mode] = FirstResult("n/a", str(exc))
                continue
            except Exception as exc:  # a broken mode is reported, the others go on
                results[mode] = FirstResult("error", f"{type(exc).__name__}: {exc}")
                continue
            runs[mode].append(cold)
            if mode == BASELINE:
                reference = cold.arrays
        # graphc's modes against the numpy backend's result of this round
        for mode in live:
            if mode.startswith("graphc") and reference is not None and runs[mode]:
                error = relative_error(runs[mode][-1].arrays, reference)
                errors[mode] = max(errors[mode] or 0.0, error)
        done += 1
    for mode in modes:
        if results[mode].status == "ok":
            results[mode] = _summary(runs[mode], errors[mode], workload.tolerance, mode)
    return results


def _summary(runs: Sequence[Cold], error: float | None, tolerance: float, mode: str) -> FirstResult:
    if not runs:
        return FirstResult("error", "no measurement")
    firsts = [r.first for r in runs]
    builds = [r.build for r in runs if r.build is not None]
    result = FirstResult(
        "ok",
        median=statistics.median(firsts),
        min=min(firsts),
        max=max(firsts),
        repeats=len(runs),
        build=statistics.median(builds) if builds else None,
        build_max=max(builds) if builds else None,
    )
    if error is not None:
        result.rel_error, result.agrees = error, error <= tolerance
    notes = [runs[-1].tiers] if runs[-1].tiers else []
    if mode == DEFAULT and not builds:
        notes.append("no background build: the plans were final at the first result")
    result.note = "; ".join(notes)
    return result


# -- cold starts -----------------------------------------------------------------------


def compiled(graph_of: Callable[[dict[str, Any]], gc.Graph], backend: str) -> StartBuilder:
    """graphc's cold start of a workload whose static modes compile one graph: trace
    (`graph_of`, which may also differentiate), `gc.compile` at O2 on `backend`, call on
    `inputs["args"]` (read after `graph_of`, which may set them)."""

    def prepare(params: dict[str, Any], inputs: dict[str, Any]) -> Callable[[], FirstCall]:
        def start() -> FirstCall:
            graph = graph_of(inputs)
            exe = gc.compile(graph, opt_level=2, backend=backend)
            return FirstCall(exe(*inputs["args"]), exe)

        return start

    return prepare


def train_step(
    make: Callable[[dict[str, Any]], tuple[Any, Any]], loss_fn: Callable[[], Any], backend: str
) -> StartBuilder:
    """graphc's cold start of a training step: `gc.compile_train_step` (trace of the model
    and loss, gradients, compile at O2 on `backend`) and its first step on
    `inputs["args"]`; `make(params)` gives the fresh model and optimizer (untimed)."""

    def prepare(params: dict[str, Any], inputs: dict[str, Any]) -> Callable[[], FirstCall]:
        model, optimizer = make(params)
        x, y = inputs["args"]

        def start() -> FirstCall:
            train = gc.compile_train_step(model, loss_fn(), optimizer, (x, y), backend=backend)
            return FirstCall(train.step(x, y), train)

        return start

    return prepare


# (jax, case params, case inputs) -> the args of a jitted function's first call
ArgsMaker = Callable[[Any, dict[str, Any], dict[str, Any]], tuple[Any, ...]]


def jax_first_call(
    make_fn: Callable[[Any, dict[str, Any]], Callable[..., Any]], make_args: ArgsMaker
) -> StartBuilder:
    """jax's cold start: `jax.jit` of a freshly defined function (`make_fn(jax, params)`,
    caches cleared first) and its first call on `make_args(jax, params, inputs)`, to the
    result's readiness."""

    def prepare(params: dict[str, Any], inputs: dict[str, Any]) -> Callable[[], FirstCall]:
        jax = peers.jax()
        args = make_args(jax, params, inputs)
        jax.clear_caches()

        def start() -> FirstCall:
            return FirstCall(jax.block_until_ready(make_fn(jax, params)(*args)))

        return start

    return prepare


def jax_args(jax: Any, params: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, ...]:
    """The case's args as a user hands them to a jitted function: numpy arrays, int64
    labels as int32 (jax's default integers)."""
    return tuple(a.astype(np.int32) if a.dtype == np.int64 else a for a in inputs["args"])


def classifier_args(
    initial: Callable[[], dict[str, np.ndarray]], names: Sequence[str]
) -> ArgsMaker:
    """(weights, x, y) for a jitted classifier step's first call: the weights `initial()`
    in `names`' order as jax arrays (a jax user's parameters; the step donates them), the
    batch as numpy arrays, labels as int32."""

    def make_args(jax: Any, params: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, ...]:
        import jax.numpy as jnp

        weights = initial()
        x, y = inputs["args"]
        return tuple(jnp.asarray(weights[n]) for n in names), x, y.astype(np.int32)

    return make_args


def jax_jitted(fn_of: Callable[[Any], Callable[..., Any]]) -> StartBuilder:
    """jax's cold start of `jax.jit(fn_of(jnp))` (a new function on each call of
    `fn_of`) on the case's args."""

    def make_fn(jax: Any, params: dict[str, Any]) -> Callable[..., Any]:
        import jax.numpy as jnp

        return jax.jit(fn_of(jnp))

    return jax_first_call(make_fn, jax_args)


def graph_starts(
    graph_of: Callable[[dict[str, Any]], gc.Graph], jax: StartBuilder | None = None
) -> dict[str, StartBuilder]:
    """The cold starts of a workload compiling one graph per case: graphc O2 on the numpy
    and default backends, and jax's when given."""
    starts = {BASELINE: compiled(graph_of, "numpy"), DEFAULT: compiled(graph_of, "auto")}
    return {**starts, "jax": jax} if jax is not None else starts
