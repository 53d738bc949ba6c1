"""The executor seam: backends, and the lowering tables that turn plan steps into code.

A `Plan` is backend-neutral data (steps, buffers, lifetimes), and nothing in runtime/
knows a particular backend: each lives in graphc/backends/ and registers itself here
(`graphc.backends` is imported with graphc). A backend says how a
step becomes code: its lowering table maps op names to emitters, and an op it does
not lower (or a step whose emitter declines by returning None, say for a dtype it
has no kernel for) falls through to the backend it names as `fallback`, ending at
numpy, whose default for any op is a call of the op's own kernel with ``out=``. So a
backend lowers what it is good at and nothing else.

A backend also supplies the array module the generated code allocates with and the
arena allocator, and may `finish` a generated plan (the native backend compiles all
its kernels for the plan in one compiler call there, and binds them in).

A backend also owns its fusion (`fusion`): the passes that turn the backend-free graph
of `gc.optimize` into the fused nodes its kernels run (matmul epilogues, fused
elementwise groups and convolutions, attention, gemm folds). `gc.compile` runs them at O2
just before planning, so nothing before the plan (gradients, ONNX export, the batch
split, pictures of a graph) ever meets a fused node; `fuse` below shows the result.

A lowering whose kernel may give other bits than numpy's says so where it is registered
(`register_lowering(op, fn, backend=name, inexact="why")`, with its bound where one is
stated); the backend's `inexact` ops are derived from those declarations, and its
fusion keeps them out of groups numpy's kernels would compute.

Adding a backend (docs/layout.md has the steps): make a `Backend`, `register_backend`
it, and `register_lowering(op, backend=name)` its emitters.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from graphc.ir.errors import GraphcError

if TYPE_CHECKING:
    from graphc.ir.graph import Node
    from graphc.passes.pipeline import Pass
    from graphc.runtime.codegen import Generator
    from graphc.runtime.plan import Step

# an emitter: (generator, step, output expression) -> source lines, or None to decline
Lowering = Callable[["Generator", "Step", str], "list[str] | None"]


def aligned_bytes(nbytes: int, align: int) -> np.ndarray:
    """`nbytes` uninitialized bytes (uint8) starting on a multiple of `align`."""
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + nbytes]


def page_aligned_arena(nbytes: int) -> np.ndarray:
    """A uint8 arena aligned to a page, so the planner's offsets keep their alignment."""
    return aligned_bytes(nbytes, 4096)


def line_aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialized C-ordered array starting on a cache line (64 bytes), as the
    arena's buffers do, where numpy's own allocation starts on 16 bytes: a kernel storing
    whole vectors into it then has none straddle two lines. (Its `base` is the bytes.)"""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * math.prod(shape)
    return aligned_bytes(nbytes, 64).view(dtype).reshape(shape)


def line_aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-ordered copy of `array` on a cache line (`line_aligned_empty`). An executable
    keeps its state so: a kernel that writes a state in place (a weight's SGD update in a
    product's epilogue) stores whole vectors within lines, where numpy's own allocation
    had one store in two straddle two lines."""
    copy = line_aligned_empty(array.shape, array.dtype)
    np.copyto(copy, array)
    return copy


@dataclass(frozen=True)
class Inexact:
    """A lowering's declaration that its kernel may give other bits than numpy's kernel.

    `why` says how its results come to differ (its own summation order, libmvec's exp);
    `bound`, where one is stated, by how much, in ulp of the result unless `why` names
    another unit; `when`, where only some of the op's steps run on that kernel (the
    others declined to numpy's), says of a node whether it does (None: every one)."""

    why: str
    bound: int | None = None
    when: Callable[[Node], bool] | None = None

    def covers(self, node: Node) -> bool:
        """Whether this backend may compute `node` (a node of the declared op) with other
        bits than numpy's."""
        return self.when is None or self.when(node)


@dataclass(frozen=True)
class ScalarPlans:
    """A backend's way of running a plan whose every value is one element with no
    buffers at all (numpy's: on numpy scalars, backends/numpy/scalar.py).
    `supports(graph, spec)` says whether this specialized graph may run so;
    `generate(plan, check_numerics)` gives its `Generated`; `name` is what
    `exe.tier` says of it."""

    supports: Callable[[Any, Any], bool]
    generate: Callable[[Any, bool], Any]
    name: str


@dataclass(frozen=True)
class Entries:
    """A backend's way of running a whole small plan as one call of its own, without the
    generated Python (native's: its kernels' calls replayed from C, native/entry.py).
    `refuses(backend, plan, generated)` says why a signature's plan (on its final tier,
    `generated` its code) gets none (None: try); `build(backend, plan, spec, updates,
    states)` makes one (`updates` and `states` the executable's: its state placeholders'
    outputs and their buffers, in `plan.state` order), on the builder thread of
    runtime/tiers.py (it may run a build tool), or raises; what it returns has
    `bind(fallback, lock)`, the callable entry (the executable's positional feeds in, its
    results out; any call it does not take goes to `fallback` unchanged; `lock` is the
    executable's call lock, or None), `states` (the buffers it was made for),
    `describe()`, a line for explain, and for a profile (runtime/profile.py's
    `profile_entry`, on an entry built for it) `plan`, the plan it runs, `call_steps`,
    the step each of its calls belongs to, and `clock(feeds)`, each step's seconds in
    one run."""

    refuses: Callable[[Backend, Any, Any], str | None]
    build: Callable[[Backend, Any, Any, dict[str, str], list[np.ndarray]], Any]


@dataclass
class Backend:
    """How plans run on one kind of executor.

    `unavailable()` says why the backend cannot run here (None when it can);
    `priority` orders the available backends for ``backend="auto"`` (highest wins);
    `finish(gen)` runs after every step is lowered (None: nothing to do) and may
    raise `BackendUnavailableError` to have the plan generated again on the fallback,
    or, when the generator may not run a build tool (`gen.compile_kernels` False),
    `KernelsNotBuiltError` to say that the plan needs a build first.
    `quick_unavailable()` is `unavailable()` without starting anything (no compiler
    run): what ``backend="auto"`` asks, so that choosing a backend costs nothing; and
    `ready()` says whether plans can be finished now without such a tool's probe."""

    name: str
    array_module: Any = np
    allocate_arena: Callable[[int], Any] = page_aligned_arena
    fallback: str | None = "numpy"
    priority: int = 0
    unavailable: Callable[[], str | None] = lambda: None
    quick_unavailable: Callable[[], str | None] = lambda: None
    ready: Callable[[], bool] = lambda: True
    finish: Callable[[Generator], None] | None = None
    lowerings: dict[str, Lowering] = field(default_factory=dict)
    # how a plan whose every value is one element runs without buffers (None: as any
    # other plan)
    scalar_plans: ScalarPlans | None = None
    # how a small plan runs as one call, without the generated Python (None: it does not)
    entries: Entries | None = None
    # per op, what its lowering here declared about bits other than numpy's (the
    # register_lowering call's `inexact`): the source of `inexact` below
    inexact_lowerings: dict[str, Inexact] = field(default_factory=dict)
    # its fusion step: fast_math -> the passes run at O2 on gc.optimize's result before
    # planning (passes/pipeline.run_fusion runs them in bodies too); none by default
    fusion: Callable[[bool], Sequence[Pass]] = lambda fast_math: ()

    @property
    def inexact(self) -> frozenset[str]:
        """The ops whose kernels here give other bits than numpy's (on some of their steps
        at least), each declared by its lowering's registration
        (`register_lowering(..., inexact=...)`)."""
        return frozenset(self.inexact_lowerings)


class BackendUnavailableError(GraphcError):
    """A backend cannot compile this plan here (no compiler, a failed build)."""


class KernelsNotBuiltError(GraphcError):
    """A plan's kernels are not built yet, and the generator was told not to build them
    (the executable then runs the plan on numpy while they build in the background)."""


BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    if backend.name in BACKENDS:
        raise GraphcError(f"backend '{backend.name}' is registered already")
    BACKENDS[backend.name] = backend
    return backend


def register_lowering(
    op: str,
    fn: Lowering | None = None,
    *,
    backend: str = "numpy",
    inexact: str | None = None,
    bound: int | None = None,
    inexact_when: Callable[[Node], bool] | None = None,
) -> Any:
    """Register `fn` as `backend`'s emitter for steps of `op` (usable as a decorator).

    Where the kernel it emits may give other bits than numpy's kernel, `inexact` says why
    (the op is then in the backend's `inexact`), `bound` by how much where that is stated
    (in ulp of the result unless `inexact` names another unit), and `inexact_when` which
    nodes of the op that kernel computes, where it declines some to numpy (see
    `Inexact`). A registration replaces the op's earlier one, declaration included."""
    if inexact is None and (bound is not None or inexact_when is not None):
        raise GraphcError(f"lowering of '{op}': a bound or inexact_when without inexact=")
    declared = None if inexact is None else Inexact(inexact, bound, inexact_when)

    def decorate(fn: Lowering) -> Lowering:
        target = get_backend(backend)
        target.lowerings[op] = fn
        if declared is None:
            target.inexact_lowerings.pop(op, None)
        else:
            target.inexact_lowerings[op] = declared
        return fn

    return decorate(fn) if fn is not None else decorate


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise GraphcError(
            f"unknown backend '{name}'; the backends are {sorted(BACKENDS)} (or 'auto')"
        ) from None


def chain(backend: Backend) -> list[Backend]:
    """`backend` and the backends it falls back to, in order (numpy last)."""
    out = [backend]
    while out[-1].fallback is not None:
        out.append(get_backend(out[-1].fallback))
    return out


def available_backends(quick: bool = False) -> list[str]:
    """The backends that can run here, preferred first. With `quick`, those that may:
    what each can tell without starting a build tool (a compiler found, say, but not
    yet probed)."""
    ready = [
        b for b in BACKENDS.values() if (b.quick_unavailable if quick else b.unavailable)() is None
    ]
    return [b.name for b in sorted(ready, key=lambda b: -b.priority)]


def resolve(name: str | None) -> Backend:
    """The backend for `compile(backend=name)`: a registered name, or "auto"/None for
    the preferred one that may run here, asked without starting a compiler (the
    GRAPHC_BACKEND environment variable, when set, names the default instead). A named
    backend that cannot run here gives way to its fallback, with one warning saying why."""
    if name is None or name == "auto":
        env = os.environ.get("GRAPHC_BACKEND", "").strip()
        if env and env != "auto":
            if env not in BACKENDS:  # the caller never typed this name: say where it is from
                raise GraphcError(
                    f"the environment variable GRAPHC_BACKEND={env!r} names no backend; the "
                    f"backends are {sorted(BACKENDS)} (or 'auto'); unset it for the default"
                )
            return resolve(env)
        return get_backend(available_backends(quick=True)[0])
    backend = get_backend(name)
    why = backend.unavailable()
    if why is None:
        return backend
    if backend.fallback is None:
        raise BackendUnavailableError(f"backend '{name}' cannot run here: {why}")
    warn_once(f"graphc: backend '{name}' is not available ({why}); using '{backend.fallback}'")
    return resolve(backend.fallback)


_WARNED: set[str] = set()


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_stacklevel() -> int:
    """The stacklevel of the innermost caller outside graphc (what the warning points at)."""
    frame, level = sys._getframe(2), 2  # warn_once's caller is level 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def warn_once(message: str) -> None:
    """A RuntimeWarning, once per distinct message in this process, attributed to the
    user's line that led to it."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=_user_stacklevel())
