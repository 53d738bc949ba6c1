"""`compile(graph) -> Executable`: optimize once, then plan and generate code per signature.

A graph with symbolic dims is optimized again for each signature once its dims are
bound (`Executable._graph_for`), so size-dependent rewrites and counts fold.

Calling an Executable goes through a small generated entry function that looks the
input signature (shapes and dtypes of the data inputs) up in this thread's table of
ready `run` functions; only a miss takes the slow path, which checks the feeds
(errors name the placeholder), binds symbolic dims, builds and caches the plan
(shared by all threads), and instantiates it on a fresh arena for this thread.

Backends (runtime/backend.py): the plan is backend-neutral; `backend` picks who lowers
its steps to code ("numpy", "native", or "auto": the preferred one available here).
A backend that compiles code never keeps a call waiting unless asked to (`wait`): a
plan whose kernels are not built yet runs on numpy while they build in the background,
and is swapped to them when they are ready (runtime/tiers.py).

Plans are kept per signature in a bounded LRU cache (`plan_cache_size`, as jax.jit's
cache of traced shapes), and each thread keeps at most as many instantiated plans.

Threads: every thread gets its own arena (`threading.local`), so calls on one
Executable from several threads run concurrently and never share scratch buffers.
An Executable with `updates` holds its state in one set of buffers that every
call writes, so its calls are serialized by a lock.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import linecache
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from graphc.ir.errors import FeedError, GraphcError
from graphc.ir.graph import Graph, expect_graph
from graphc.ir.verify import verify
from graphc.passes.pipeline import optimize_verified, run_fusion
from graphc.passes.report import OptimizationReport
from graphc.runtime import forks, tiers
from graphc.runtime.backend import (
    Backend,
    BackendUnavailableError,
    KernelsNotBuiltError,
    chain,
    get_backend,
    line_aligned_copy,
    resolve,
    warn_once,
)
from graphc.runtime.codegen import Generated, Generator, generate
from graphc.runtime.feeds import as_feed_array, bind_dims, name_error
from graphc.runtime.plan import Plan, build_plan
from graphc.runtime.specialize import bound_graph, specialize


def optimize(
    graph: Graph,
    opt_level: int,
    fast_math: bool = False,
    fired: set[str] | None = None,
    backend: Backend | None = None,
) -> Graph:
    """The graph a plan is made of: the pass pipeline at `opt_level`, then at O2 the
    `backend`'s fusion step; O0 compiles the graph as declared. The value-changing
    rules that fired (fast_math only) are added to `fired`."""
    if opt_level <= 0:
        return graph
    # (compile verified the graph; a per-signature one is made from it)
    result, report = optimize_verified(graph, opt_level, fast_math=fast_math)
    if opt_level >= 2 and backend is not None:
        result, report = run_fusion(result, backend.fusion(fast_math), report)
    if fired is not None:
        fired.update(report.value_changing)
    return result


def fuse(
    graph: Graph, backend: str = "auto", fast_math: bool = False, explain: bool = False
) -> Graph | tuple[Graph, OptimizationReport]:
    """`graph` (normally `gc.optimize`'s result) after `backend`'s fusion step: what
    `gc.compile(..., opt_level=2, backend=backend)` plans. Its fused nodes (`fused`
    groups, matmul and conv2d epilogues, `conv2d_fused`, attention) are the backend's:
    its plans run them, and nothing else takes them (differentiate, export or split the
    graph before fusing it). With fast_math the native step also folds SGD updates into
    gemm. `explain=True` returns `(graph, report)`.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[3]) {
    ...   %a: f32[3] = exp(%x)
    ...   %b: f32[3] = mul(%a, %a)
    ...   output %y = %b
    ... }''')
    >>> [n.op for n in gc.fuse(gc.optimize(g), backend="numpy").op_nodes]
    ['fused']
    """
    expect_graph(graph, "fuse")
    chosen = resolve(backend)
    verify(graph)  # a graph broken through the low-level API: a named error, not a crash
    title = f"the {chosen.name} backend's fusion step"
    report = OptimizationReport(level=2, fast_math=bool(fast_math), title=title)
    result, report = run_fusion(graph, chosen.fusion(fast_math), report)
    return (result, report) if explain else result


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic GC: planning a long graph makes many objects, and the
    collector's passes over them took more than a third of the time of a 50,000-op plan."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# calls of one signature (in one thread) after which its entry in C is built: a plan
# called a few times, as most in a test suite are, gets none (nor its build's work)
WARM_CALLS = 16


def _warming(run: Any, runs: dict, key: tuple, job: tiers.Job) -> Any:
    """`run` counting its calls: at the WARM_CALLS-th it starts `job` (the signature's
    entry in C) and puts `run` itself back in the thread's table."""
    left = WARM_CALLS - 1  # (the thread's first call ran `run` from _slow)

    def warming(*arrays: Any) -> Any:
        nonlocal left
        left -= 1
        if left <= 0:
            runs[key] = run
            job.start()
        return run(*arrays)

    return warming


def _empty_result(entry: Any) -> Any:
    """`entry` returning (), as calling the graph does, where the plan returns no output
    (a graph without outputs, or whose every output is an update): the plans' code returns
    None then, and a caller unpacking the results of any graph should get a sequence."""

    def returns_nothing(*arrays: Any) -> tuple:
        entry(*arrays)
        return ()

    return returns_nothing


class Compiled:
    """One signature's plan and generated code, shared by the threads that run it; `job`
    builds its fast tier in the background (None: `generated` is final). Once the final
    tier is in, `entry_job` may build the backend's entry for it (Backend.entries:
    the plan as one call), `entry` once built; `entry_note` says why there is none."""

    def __init__(self, plan: Plan, generated: Generated, job: tiers.Job | None = None) -> None:
        self.plan = plan
        self.generated = generated
        self.job = job
        self.constants = [np.asarray(plan.nodes[name].value, order="C") for name in plan.constants]
        self.spec: Any = None  # the specialized graph's types (the entry plans with them)
        self.entry_job: tiers.Job | None = None
        self.entry: Any = None
        self.entry_note: str | None = None

    def instantiate(self, states: list[np.ndarray]) -> Any:
        return self.generated.instantiate(self.plan.arena_bytes, self.constants, states)


class Executable:
    """A compiled graph: call it with arrays, get arrays back.

    >>> import numpy as np, graphc as gc
    >>> g = gc.Graph("affine")
    >>> with g:
    ...     x = gc.placeholder("x", shape=("B", 3))
    ...     _ = gc.output(gc.relu(x * 2.0 - 1.0), name="y")
    >>> exe = gc.compile(g)
    >>> exe(np.ones((2, 3), np.float32))
    array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)

    One output gives an array, several a tuple, none an empty tuple (as calling the graph
    does); returned arrays are fresh per call (a large one dropped by the caller may be
    recycled: runtime/recycle.py).
    With ``updates={"w": "w_new"}`` the placeholder ``w`` becomes state held by the
    executable: it is fed by keyword (the first call, or whenever it should be reset)
    or with `set_state`, each call writes output ``w_new`` back into it (that output
    is not returned), and `state` reads it back. Data placeholders are positional in
    declaration order, or by name.
    """

    def __init__(
        self,
        graph: Graph,
        optimized: Graph,
        updates: Mapping[str, str] | None = None,
        check_numerics: bool = False,
        opt_level: int = 0,
        fast_math: bool = False,
        value_changing: set[str] | None = None,
        backend: Backend | None = None,
        plan_cache_size: int = 32,
        wait: bool = True,
    ) -> None:
        self.graph = graph
        self.backend = backend if backend is not None else resolve("numpy")
        # may a call wait for the backend's build (else it runs numpy's tier meanwhile)?
        self.waits_for_build = wait
        if not isinstance(plan_cache_size, int) or plan_cache_size < 1:
            raise GraphcError(
                f"compile: plan_cache_size must be an int >= 1, got {plan_cache_size!r}"
            )
        self.plan_cache_size = plan_cache_size
        self.optimized = optimized
        self.opt_level = opt_level
        self.fast_math = fast_math
        # the value-changing rules that fired, at compile and per signature (explain)
        self.value_changing: set[str] = set(value_changing or ())
        self.check_numerics = check_numerics
        self.updates = dict(updates or {})
        self._check_updates()
        placeholders = optimized.inputs
        self._data = [p for p in placeholders if p.name not in self.updates]
        self._state_nodes = [p for p in placeholders if p.name in self.updates]
        self._state: dict[str, np.ndarray | None] = {p.name: None for p in self._state_nodes}
        self._compiled: OrderedDict[tuple, Compiled] = OrderedDict()  # LRU, newest last
        self._lock = forks.lock()
        self._call_lock = forks.lock() if self.updates else None
        self._local = threading.local()
        self.plans_built = 0
        self._last: Compiled | None = None
        self._in_c: Any = None  # the backend's entry of the signature built last (Compiled.entry)
        written = set(self.updates.values())
        self._returns_nothing = all(o.name in written for o in optimized.outputs)
        self._entry = self._make_entry()
        if all(p.type.is_concrete for p in placeholders):
            self._compile_signature(signature([(p.type.shape, p.type.dtype) for p in self._data]))

    # -- calling ------------------------------------------------------------------

    def __call__(self, /, *args: Any, **feeds: Any) -> Any:
        if feeds or len(args) != len(self._data):
            args = self._order(args, feeds)
        return self._entry(*args)

    def _order(
        self, args: tuple, feeds: dict[str, Any], examples: dict[str, np.ndarray] | None = None
    ) -> tuple:
        """Positional data feeds from args and keywords. Keyword state feeds set the state,
        or, when `examples` is given (inspection), are only checked and collected there."""
        names = [p.name for p in self._data]
        if len(args) > len(names):
            # the words of calling the graph (feeds.py), but for the state fed by name
            state = f"; state {', '.join(self._state)} by name" if self._state else ""
            data = "data input(s)" if self._state else "input(s)"
            raise FeedError(
                f"graph '{self.graph.name}' takes {len(names)} {data} ({', '.join(names)}"
                f"{state}), got {len(args)} positional"
            )
        given = dict(zip(names, args))
        unknown = []
        for name, value in feeds.items():
            if name in self._state and examples is not None:
                p = next(p for p in self._state_nodes if p.name == name)
                examples[name] = as_feed_array(p, value, layout=False)
                bind_dims(name, p.type, examples[name].shape, {})
            elif name in self._state:
                self.set_state(**{name: value})
            elif name in given:
                raise FeedError(f"placeholder '{name}' was fed twice (by position and by name)")
            elif name not in names:
                unknown.append(name)
            else:
                given[name] = value
        # every call passes here: the message is built only when a name is wrong
        if unknown or len(given) < len(names):
            error = name_error(self.graph, self._data, [*given, *unknown])
            if error is not None:  # the interpreter's error, word for word (runtime/feeds.py)
                raise error
        return tuple(given[n] for n in names)

    def _make_entry(self) -> Any:
        """The callable every call goes through: the Python entry below, behind the
        backend's entry for one signature where one is built (it hands every other call
        to the Python one)."""
        python = entry = self._python_entry()
        if self._in_c is not None:
            try:
                entry = self._in_c.bind(python, self._call_lock)
            except Exception as exc:  # noqa: BLE001 - the Python entry runs everything
                warn_once(f"graphc: an entry in C could not be made ({exc}); calls run in Python")
                self._in_c = None
        if self._returns_nothing:
            return _empty_result(entry)
        return entry

    def _python_entry(self) -> Any:
        params = [f"a{k}" for k in range(len(self._data))]
        # only an exact, C-contiguous ndarray is trusted: any other object with `shape` and
        # `dtype` attributes (an eager tensor, a subclass, a duck) or another layout takes
        # the checked slow path (which copies it to C order: feeds.py's layout rule)
        key = ", ".join(
            f"({a}.shape if type({a}) is ndarray and {a}.flags.c_contiguous else None), {a}.dtype"
            for a in params
        )
        call = f"run({', '.join(params)})"
        if self._call_lock is not None:
            call_lines = ["    with lock:", f"        return {call}"]
        else:
            call_lines = [f"    return {call}"]
        source = "\n".join(
            [
                f"def entry({', '.join(params)}):",
                "    try:",
                f"        run = local.runs[({key}{',' if params else ''})]",
                "    except (AttributeError, KeyError, TypeError):",
                "        run = None",
                # outside the except: a feed's error (a FeedError on the slow path) is not
                # shown as raised during the handling of the cache's KeyError
                "    if run is None:",
                f"        return slow({', '.join(params)})",
                *call_lines,
            ]
        )
        namespace = {
            "local": self._local,
            "slow": self._slow,
            "lock": self._call_lock,
            "ndarray": np.ndarray,
        }
        filename = f"<graphc entry {self.graph.name}>"
        # a traceback (a notebook's too) shows the entry's lines, as it shows a file's
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(builtins.compile(source, filename, "exec"), namespace)
        return namespace["entry"]

    def _feeds(self, args: tuple, layout: bool = True) -> tuple[list[np.ndarray], tuple]:
        """The data feeds as checked arrays, and their signature (`layout` False: example
        feeds, whose shapes and dtypes alone are read, kept in their own layout)."""
        arrays = [as_feed_array(p, a, layout=layout) for p, a in zip(self._data, args)]
        return arrays, signature([(a.shape, a.dtype) for a in arrays])

    def _slow(self, *args: Any) -> Any:
        arrays, key = self._feeds(args)
        states = self._states()
        try:
            runs = self._local.runs
        except AttributeError:
            runs = self._local.runs = {}
        run = runs.get(key)
        job = None
        if run is None:
            compiled = self._compile_signature(key)
            if len(runs) >= self.plan_cache_size:  # bounded too: drop this thread's oldest
                del runs[next(iter(runs))]
            run = runs[key] = compiled.instantiate(states)
            job = compiled.job
            if compiled.entry_job is not None and not compiled.entry_job.queued:
                runs[key] = _warming(run, runs, key, compiled.entry_job)
        try:
            if self._call_lock is not None:
                with self._call_lock:
                    return run(*arrays)
            return run(*arrays)
        finally:
            if job is not None:  # the fast tier builds once this first call is over
                job.start()

    # -- specialization -----------------------------------------------------------

    def _state_shapes(self) -> dict[str, tuple]:
        return {name: v.shape for name, v in self._state.items() if v is not None}

    def _bindings(self, key: tuple, state_shapes: dict[str, tuple]) -> dict[str, int]:
        bindings: dict[str, int] = {}
        for p, shape in zip(self._data, key[0::2]):
            bind_dims(p.name, p.type, shape, bindings)
        for p in self._state_nodes:
            if p.name in state_shapes:
                bind_dims(p.name, p.type, state_shapes[p.name], bindings)
        return bindings

    def _compile_signature(
        self, key: tuple, state_shapes: dict[str, tuple] | None = None
    ) -> Compiled:
        """The plan for data signature `key` (built and cached on a miss). `state_shapes`
        (inspection with example state) that differ from the state held give a plan that
        is returned but not cached: calls run on the state they hold."""
        current = self._state_shapes()
        example = {**current, **(state_shapes or {})}
        cache = example == current
        with self._lock, collector_paused():
            if cache and key in self._compiled:
                self._compiled.move_to_end(key)
                return self._compiled[key]
            graph, spec = self._specialized(key, example)
            scalars = self.backend.scalar_plans
            scalar = not self.updates and scalars is not None and scalars.supports(graph, spec)
            plan = build_plan(graph, spec, key, self.updates, scalar)
            if scalar:
                compiled = Compiled(plan, scalars.generate(plan, self.check_numerics))  # type: ignore[union-attr]
            else:
                compiled = self._generate(plan)
            compiled.spec = spec
            if cache and compiled.job is None:
                self._plan_entry(compiled)
            if cache:
                self._compiled[key] = compiled
                if len(self._compiled) > self.plan_cache_size:
                    self._compiled.popitem(last=False)  # the least recently used signature
                self._last = compiled
                self.plans_built += 1
            return compiled

    def _specialized(self, key: tuple, state_shapes: dict[str, tuple]) -> tuple[Graph, Any]:
        """The graph of data signature `key` (and the state's shapes) and its bound types."""
        bindings = self._bindings(key, state_shapes)
        graph = self._graph_for(bindings)
        return graph, specialize(graph, bindings)

    def _generate(self, plan: Plan) -> Compiled:
        """The plan's code on this executable's backend; or, where that needs a build and
        this executable does not wait for one, on numpy, with a job building the rest."""
        if self.waits_for_build or self.backend.finish is None:
            return Compiled(plan, generate(plan, self.check_numerics, self.backend))
        numpy_tier = chain(self.backend)[-1]
        if self.backend.ready():  # probed: maybe every kernel is built already
            if self.backend.unavailable() is not None:  # the probe failed: numpy for good
                return Compiled(plan, generate(plan, self.check_numerics, numpy_tier))
            try:
                generated = generate(plan, self.check_numerics, self.backend, compile_kernels=False)
                return Compiled(plan, generated)
            except KernelsNotBuiltError:
                pass
        compiled = Compiled(plan, generate(plan, self.check_numerics, numpy_tier))
        compiled.job = tiers.Job(lambda: self._fast_tier(plan), lambda job: self._swap(compiled))
        return compiled

    def _fast_tier(self, plan: Plan) -> Generated:
        """The plan on this executable's backend, kernels built (on the builder thread)."""
        why = self.backend.unavailable()  # probes the compiler, the first time
        if why is not None:
            raise tiers.UnavailableError(why)
        with collector_paused():
            return Generator(plan, self.check_numerics, self.backend).generate()

    def _swap(self, compiled: Compiled) -> None:
        """Put a finished job's code in (on the builder thread): every thread's next call
        instantiates it, on the same state buffers; a call under way finishes on the
        code it started with. A failed build keeps the numpy tier, with one warning."""
        job = compiled.job
        assert job is not None
        if job.result is None:
            if not job.silent:
                warn_once(
                    f"graphc: backend '{self.backend.name}' could not build its kernels "
                    f"({job.error}); plans keep running on numpy"
                )
            return
        with self._lock:
            compiled.generated = job.result
            self._local = threading.local()
            self._entry = self._make_entry()
            self._plan_entry(compiled)

    def _plan_entry(self, compiled: Compiled) -> None:
        """Give `compiled` (on its final tier) a job building the backend's entry, where
        the backend has entries and this plan may get one; else say why not."""
        entries = self.backend.entries
        if entries is None:
            return
        plan = compiled.plan
        if self.check_numerics:
            why = "check_numerics runs the generated Python"
        elif not plan.scalar and compiled.generated.backend != self.backend.name:
            why = f"the plan runs on {compiled.generated.backend}"
        elif any(v is None for v in self._state.values()):  # (set_state plans again)
            why = "its state has no value yet"
        else:
            why = entries.refuses(self.backend, plan, compiled.generated)
        if why is not None:
            compiled.entry_note = f"entry: Python ({why})"
            return
        backend = self.backend
        updates, states = self.updates, self._states()

        def build() -> Any:
            try:
                return entries.build(backend, plan, compiled.spec, updates, states)
            except BackendUnavailableError as exc:
                raise tiers.UnavailableError(str(exc)) from None

        # (started by _warming after WARM_CALLS calls, or by wait())
        compiled.entry_job = tiers.Job(build, lambda job: self._install_entry(compiled, job))

    def _install_entry(self, compiled: Compiled, job: tiers.Job) -> None:
        """A finished entry job (on the builder thread): the entry takes this signature's
        calls from now on (the one built last has it; the others run in Python)."""
        if job.result is None:
            compiled.entry_note = f"entry: Python (no entry in C: {job.error})"
            return
        with self._lock:
            held = job.result.states
            if len(held) != len(self._state) or any(
                a is not b for a, b in zip(held, self._state.values())
            ):  # set_state gave a state new buffers meanwhile: the entry points at the old
                compiled.entry_note = "entry: Python (its state's buffers were replaced)"
                return
            compiled.entry = self._in_c = job.result
            self._entry = self._make_entry()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every plan built so far runs on its final tier: the backend's
        compiled kernels, or numpy where they could not be built. True when all are
        there, False when `timeout` (seconds) ran out first.

        >>> import numpy as np, graphc as gc
        >>> g = gc.Graph("half")
        >>> with g:
        ...     x = gc.placeholder("x", shape=(4,))
        ...     _ = gc.output(gc.tanh(x) * 0.5, name="y")
        >>> exe = gc.compile(g)
        >>> exe.wait()
        True
        """
        deadline = None if timeout is None else time.perf_counter() + timeout
        for attribute in ("job", "entry_job"):  # an entry job is made once its tier is in
            with self._lock:
                jobs = [getattr(c, attribute) for c in self._compiled.values()]
            for job in jobs:
                left = None if deadline is None else max(0.0, deadline - time.perf_counter())
                if job is not None and not job.wait(left):
                    return False
        with self._lock:  # the waiting thread is about to run the plans
            hooks = dict.fromkeys(h for c in self._compiled.values() for h in c.generated.on_thread)
        for hook in hooks:
            hook()
        return True

    @property
    def tier(self) -> str:
        """Which code the plan built last runs: "numpy" or the backend's name, with
        "building" while its kernels build ("numpy (building native)")."""
        compiled = self._last
        if compiled is None:
            return "none yet"
        job = compiled.job
        if job is not None and not job.finished.is_set():
            return f"numpy (building {self.backend.name})"
        scalars = self.backend.scalar_plans
        return scalars.name if compiled.plan.scalar and scalars else compiled.generated.backend

    def _graph_for(self, bindings: dict[str, int]) -> Graph:
        """The graph to plan: `optimized`, or, once symbolic dims are bound, the declared
        graph optimized again at these concrete shapes (as jax.jit traces per shape):
        counts fold to constants and rules that compare sizes can fire."""
        if not bindings or self.opt_level <= 0:
            return self.optimized
        concrete = bound_graph(self.graph, specialize(self.graph, bindings))
        # (the collector is paused by _compile_signature)
        concrete = optimize(
            concrete, self.opt_level, self.fast_math, self.value_changing, self.backend
        )
        same_interface = [(n.kind, n.name) for n in concrete.inputs + concrete.outputs] == [
            (n.kind, n.name) for n in self.optimized.inputs + self.optimized.outputs
        ]
        return concrete if same_interface else self.optimized

    # -- state ----------------------------------------------------------------------

    def _check_updates(self) -> None:
        names = {p.name: p for p in self.optimized.inputs}
        outputs = {o.name: o for o in self.optimized.outputs}
        for target, source in self.updates.items():
            if target not in names:
                raise GraphcError(
                    f"updates: graph '{self.graph.name}' has no placeholder '{target}'"
                )
            if source not in outputs:
                raise GraphcError(
                    f"updates: graph '{self.graph.name}' has no output '{source}' to write into "
                    f"'{target}'; its outputs are {list(outputs)}"
                )
            if outputs[source].type != names[target].type:
                # a scalar update would otherwise broadcast silently into the whole state
                raise GraphcError(
                    f"updates: output '{source}' has type {outputs[source].type} but "
                    f"placeholder '{target}' has type {names[target].type}; an update must "
                    "have exactly its state's shape and dtype"
                )

    def _states(self) -> list[np.ndarray]:
        states = []
        for p in self._state_nodes:
            value = self._state[p.name]
            if value is None:
                raise FeedError(
                    f"placeholder '{p.name}' is state of this executable and has no value yet: "
                    f"feed it once by name (exe(..., {p.name}=array)) or call exe.set_state"
                )
            states.append(value)
        return states

    def set_state(self, **values: Any) -> None:
        """Copy arrays into the state placeholders' buffers: ``exe.set_state(w=w0)``."""
        for name, value in values.items():
            if name not in self._state:
                raise FeedError(
                    f"'{name}' is not a state placeholder; state is {list(self._state)}"
                )
            p = next(p for p in self._state_nodes if p.name == name)
            array = as_feed_array(p, value)
            bind_dims(name, p.type, array.shape, {})
            current = self._state[name]
            if current is not None and current.shape == array.shape:
                np.copyto(current, array)  # plans hold this buffer: keep it, change its values
                continue
            self._state[name] = line_aligned_copy(array)
            with self._lock:  # a new buffer: plans bound to the old one are stale
                self._compiled.clear()
                self._local = threading.local()
                self._in_c = None  # (its tape points at the old buffer)
                self._entry = self._make_entry()

    @property
    def state(self) -> dict[str, np.ndarray]:
        """Copies of the current state arrays, by placeholder name."""
        return {k: np.array(v, copy=True) for k, v in self._state.items() if v is not None}

    # -- inspection -------------------------------------------------------------------

    def plan(self, *args: Any, **feeds: Any) -> Plan:
        """The plan for these example feeds, or the one built last."""
        return self._compiled_for(args, feeds).plan

    def source(self, *args: Any, **feeds: Any) -> str:
        """The code of the plan (see `plan`; example feeds may follow): the generated
        Python that runs it, or, given "c" first, the C its backend compiled for it (the
        native backend's kernels; a GraphcError says why when there is none).

        >>> import numpy as np, graphc as gc
        >>> exe = gc.compile(gc.trace(lambda x: x * 2, np.ones(3, np.float32)), backend="numpy")
        >>> exe.source().splitlines()[2]
        'def run(x):'
        """
        language = "python"
        if args and isinstance(args[0], str):  # no feed is a str
            language, args = args[0], args[1:]
        if language not in ("python", "c"):
            raise GraphcError(f'source: the language is "python" or "c", got {language!r}')
        compiled = self._compiled_for(args, feeds)
        if language == "python":
            return compiled.generated.source
        if not compiled.generated.c_source:
            raise GraphcError(self._no_c_source(compiled))
        return compiled.generated.c_source

    def _no_c_source(self, compiled: Compiled) -> str:
        """Why the plan of `compiled` has no C."""
        about = f"graph '{self.graph.name}' has no C source"
        if compiled.job is not None and not compiled.job.finished.is_set():
            return f"{about} yet: its kernels are building (exe.wait(), then ask again)"
        if self.backend.name == "numpy":
            return (
                f"{about}: its backend, numpy, runs the generated Python (exe.source()); "
                'gc.compile(graph, backend="native") compiles C kernels'
            )
        why = "; ".join(compiled.generated.notes) or "no step of its plan runs in C"
        return f"{about}: on backend {self.backend.name}, {why} (exe.explain() says more)"

    def explain(self, *args: Any, **feeds: Any) -> str:
        """Steps, buffer table with lifetimes, in-place decisions and memory of the plan."""
        from graphc.runtime.explain import format_plan, rules_header

        compiled = self._compiled_for(args, feeds)
        header = rules_header(self.opt_level, self.fast_math, self.value_changing)
        if compiled.job is not None:
            header += "\n" + compiled.job.describe()
        entry = self._entry_line(compiled)
        if entry is not None:
            header += "\n" + entry
        return format_plan(compiled.plan, header, compiled.generated)

    def _entry_line(self, compiled: Compiled) -> str | None:
        """How a call of `compiled`'s signature starts: its entry in C, or why it has
        none (None where the backend makes no entries)."""
        if compiled.entry is not None and compiled.entry is self._in_c:
            return str(compiled.entry.describe())
        if compiled.entry is not None:
            return "entry: Python (the entry in C holds the signature built last)"
        if compiled.entry_note is not None:
            return compiled.entry_note
        if compiled.entry_job is not None:
            return (
                f"entry: Python, while its entry in C is built (it starts after {WARM_CALLS} "
                "calls of this signature, or on wait())"
            )
        return None

    def profile(self, *args: Any, runs: int = 20, **feeds: Any) -> Any:
        """Where the time of a call with these feeds goes, step by step: a Profile whose
        text is the plan's steps with their median times over `runs` runs and their
        shares, then a summary per op (runtime/profile.py). The plan runs on its final
        tier (a background build is waited for), clocked, on copies of the state: the
        executable's state is as before once the profile returns (its own call, timed
        beside the clocked plan, runs on the state, which is then put back).

        >>> import numpy as np, graphc as gc
        >>> exe = gc.compile(gc.trace(lambda x: gc.tanh(x) @ x.T, np.ones((64, 64), np.float32)))
        >>> [s.op for s in exe.profile(np.ones((64, 64), np.float32), runs=3).steps]
        ['tanh', 'transpose', 'matmul']
        """
        from graphc.runtime import profile as profiling

        if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
            raise GraphcError(f"profile: runs must be a positive int, got {runs!r}")
        if any(name in self._state for name in feeds):
            raise FeedError("profile: state is not fed here; call exe.set_state(...) first")
        arrays, key = self._feeds(self._order(args, feeds))
        compiled = self._compile_signature(key)
        self.wait()  # its final tier: a finished build swaps its code into `compiled`
        plan, tier = compiled.plan, compiled.generated.backend
        one_call = compiled.entry is not None and compiled.entry is self._in_c
        entry = self._entry_line(compiled)
        own = None
        if one_call:  # an entry of the profile's own, on copies of the state
            own = profiling.clocked_entry(
                self.backend, plan, compiled.spec, self.updates, self._states()
            )
        if own is not None:  # its calls are the backend's kernels, whatever the plan's tier
            backend = self.backend.name
            return profiling.profile_entry(own, arrays, runs, self, self._states(), backend, entry)
        if plan.scalar:  # numpy scalars, one expression: its steps profiled as arrays
            plan = build_plan(
                *self._specialized(key, self._state_shapes()), key, self.updates, False
            )
            tier = "numpy"
        return profiling.profile(
            plan, get_backend(tier), self._states(), arrays, runs, self, entry, one_call
        )

    def _compiled_for(self, args: tuple, feeds: dict[str, Any]) -> Compiled:
        if args or feeds:
            examples: dict[str, np.ndarray] = {}  # example state: never stored (see _order)
            _, key = self._feeds(self._order(args, feeds, examples), layout=False)
            shapes = {name: a.shape for name, a in examples.items()}
            return self._compile_signature(key, shapes)
        if self._last is None:
            raise GraphcError(
                f"graph '{self.graph.name}' has symbolic dims and no plan yet: call the "
                f"executable once, or pass example feeds to explain()/source()/plan()"
            )
        return self._last

    def __repr__(self) -> str:
        return (
            f"<Executable '{self.graph.name}': {self.plans_built} plan(s), "
            f"backend {self.backend.name}>"
        )


def signature(shapes_and_dtypes: list[tuple[tuple, Any]]) -> tuple:
    """The cache key of a call: shape, dtype, shape, dtype, ... of the data inputs."""
    return tuple(x for shape, dtype in shapes_and_dtypes for x in (tuple(shape), np.dtype(dtype)))


def compile(
    graph: Graph,
    opt_level: int = 2,
    updates: Mapping[str, str] | None = None,
    check_numerics: bool = False,
    fast_math: bool = False,
    backend: str = "auto",
    plan_cache_size: int = 32,
    wait: bool | None = None,
) -> Executable:
    """Optimize `graph` once and return an Executable that plans per input signature.

    Every `opt_level` computes O0's results bit for bit; `fast_math=True` also allows
    rewrites that change values (see graphc/passes/simplify.py), as -ffast-math does.
    `backend` lowers the plans: "numpy" (the reference, everywhere), "native" (C
    kernels for elementwise work, built with the system C compiler: docs/backends.md),
    or "auto", the preferred one available (GRAPHC_BACKEND overrides that default).
    At most `plan_cache_size` signatures' plans are kept (least recently used dropped).
    A compiling backend never keeps a call waiting for its compiler unless `wait` is
    True (the default for an explicit ``backend="native"``; False for "auto"): until a
    plan's kernels are built in the background, it runs on numpy, and `exe.wait()`
    blocks until they are in (docs/backends.md, "Tiers").

    >>> import numpy as np, graphc as gc
    >>> g = gc.Graph("square")
    >>> with g:
    ...     x = gc.placeholder("x", shape=(2,))
    ...     _ = gc.output(x * x, name="y")
    >>> gc.compile(g)(np.array([1.0, 3.0], np.float32))
    array([1., 9.], dtype=float32)
    """
    expect_graph(graph, "compile")
    chosen = resolve(backend)  # an unknown or unusable backend fails before any work
    if wait is None:  # a backend named by the caller is waited for; the default is not
        wait = backend not in (None, "auto")
    verify(graph)  # graphs edited through the low-level API too: a named error, not a crash
    if opt_level not in (0, 1, 2):
        raise GraphcError(f"compile: opt_level must be 0, 1 or 2, got {opt_level!r}")
    with collector_paused():  # the passes make many objects too (see collector_paused)
        fired: set[str] = set()
        optimized = optimize(graph, opt_level, fast_math, fired, chosen)
    return Executable(
        graph,
        optimized,
        updates,
        check_numerics,
        opt_level,
        fast_math,
        fired,
        chosen,
        plan_cache_size,
        bool(wait),
    )
