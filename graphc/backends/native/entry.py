"""A small plan as one C call: the executable's entry in C (csrc/entry.c).

An executable's call on native runs its plan's generated Python: a key lookup, then per
step a kernel call through cffi, with the addresses of the arrays made per call. For a
graph of a few small steps that interpreter work is most of the call (the tutorials'
tiny graph: 2.8 us, of which the arithmetic is nothing). Here a plan whose every step
runs native is made an entry in C:

- **Planning.** The signature's graph is planned again as a body is (its outputs are
  buffers the caller gives) with every step it can lower a kernel whatever its size, as
  a loop's body in C is (loops.py); a step native declines keeps the plan out.
- **Recording.** Its code is run once on scratch arrays with each kernel replaced by a
  recorder (loops.record): the calls become a tape whose slots are the feeds, then the
  outputs. Calls that only pack constants (the prologue) are made once, here.
- **Calling.** The entry (an extension type, built once per interpreter and numpy)
  checks that each feed is an exact ndarray of the recorded dtype, shape and layout,
  allocates the outputs, and replays the tape (csrc/loop.c's gc_tape_once). Anything
  else goes to the Python entry, which checks, converts or raises as before.
- **Profiling.** `Executable.profile` builds an entry of its own on copies of the state
  and replays its tape with the clock read after each call (gc_tape_clocked); each call
  counts for the step whose lines of `run` made it (the recording notes the line).

Bits: the tape makes the calls the plan's native code makes, on the same kernels; a
step that numpy's ufunc would have run at this size (native/__init__.py's SMALL) runs
its kernel instead, which gives numpy's bits wherever native is exact (docs/trust.md).

State: a plan holding state (a training step's weights, updated in place) reads and
writes the executable's state buffers, which keep their addresses while their shapes
do (Executable.set_state copies into them): they are slots of the tape filled once,
when the entry is made, and an entry whose state buffers were replaced is dropped.
Its calls take the executable's call lock, as the Python entry's do.

The GIL: a plan of fewer than NOGIL_BYTES of arena and outputs runs holding it (taking
and giving it back would cost more than most of its kernels); a larger one releases it
through its tape, under a lock of its own, so other Python threads run meanwhile.

Limits: a plan of at most MAX_STEPS steps, no loops or branches (their Python objects
cannot be recorded), and Python's C headers installed (python3-dev on Debian). explain
says which entry a plan has, or why none.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphc.backends.native import calls, loops, rows, toolchain
from graphc.backends.native.c_sources import c_source
from graphc.runtime import forks
from graphc.runtime.backend import Backend, BackendUnavailableError, Entries
from graphc.runtime.codegen import Generated, Generator
from graphc.runtime.plan import Plan, build_plan
from graphc.runtime.recycle import worth_recycling

SOURCE = c_source("entry.c")
MAX_STEPS = 256
# arena and outputs from which the tape runs with the GIL released (the digits MLP's
# per-example gradients at batch 256 write 4.9 MB of outputs in about 150 us)
NOGIL_BYTES = 1 << 20
MAX_ARRAYS = 256  # feeds and outputs (GC_ENTRY_MAX_ARRAYS)

_lock = forks.lock()
_module: list[Any] = []  # the loaded extension module, once
_runners: dict[str, int] = {}  # csrc/loop.c's gc_tape_once and gc_tape_clocked, by name


def headers() -> tuple[list[str], str | None]:
    """The include directories the module builds with, or why it cannot be built here."""
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return [], "this interpreter is free-threaded (the entry relies on the GIL)"
    python = sysconfig.get_paths()["include"]
    if not (Path(python) / "Python.h").exists():
        return [], f"Python's C headers are not installed ({python}/Python.h is missing)"
    return [python, np.get_include()], None


def module() -> Any:
    """The extension module, built (or found on disk) and loaded once per process."""
    with _lock:
        if _module:
            return _module[0]
        includes, why = headers()
        if why is not None:
            raise BackendUnavailableError(why)
        tag = f"{sys.version} numpy {np.__version__}"
        for attempt in range(2):  # a damaged cached file is built again, once
            try:
                path = toolchain.build_extension(SOURCE, includes, tag)
            except toolchain.BuildError as exc:
                raise BackendUnavailableError(f"building the entry module failed: {exc}") from None
            loader = importlib.machinery.ExtensionFileLoader("_graphc_entry", str(path))
            spec = importlib.util.spec_from_file_location("_graphc_entry", path, loader=loader)
            try:
                found = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
                loader.exec_module(found)
            except ImportError as exc:
                if attempt == 0:
                    path.unlink(missing_ok=True)
                    continue
                raise BackendUnavailableError(f"the entry module does not load: {exc}") from None
            _module.append(found)
            return found
        raise AssertionError("unreachable")  # pragma: no cover


def runner(name: str = "gc_tape_once") -> int:
    """The address of csrc/loop.c's gc_tape_once (or gc_tape_clocked), from the loops'
    runner library."""
    with _lock:
        if name not in _runners:
            try:
                built = toolchain.build_units([loops.SOURCE], rows.prelude())
            except toolchain.BuildError as exc:
                raise BackendUnavailableError(f"building the tape runner failed: {exc}") from None
            found = ctypes.cast(getattr(built[loops.SOURCE].library, name), ctypes.c_void_p)
            _runners[name] = int(found.value or 0)
        return _runners[name]


def refuses(backend: Backend, plan: Plan, generated: Generated) -> str | None:
    """Why `plan` (a signature's plan on its final tier, `generated` its code) gets no
    entry in C; None when one is worth building (the recording may still refuse it).
    A step its code runs on numpy keeps the plan out unless the reason is its size (a
    step planned for C then runs its kernel): an op native has no kernel for, or a step
    it declined, is found here rather than by planning and recording it again."""
    if plan.bodies:  # (filled as the plan was generated)
        return "the plan has loops or branches"
    if len(plan.steps) > MAX_STEPS:
        return f"the plan has {len(plan.steps)} steps (an entry in C takes at most {MAX_STEPS})"
    if len(plan.inputs) + len(plan.returns) > MAX_ARRAYS:
        return f"it has more than {MAX_ARRAYS} inputs and outputs"
    if plan.scalar:  # numpy scalars: every step is planned for C afresh
        return None
    declined = calls.recorded(generated, "declined")
    for step in plan.steps:
        if generated.step_backends.get(step.index, backend.name) == backend.name:
            continue
        op = step.node.op
        if op not in backend.lowerings:
            return f"step {step.index} ({op}) has no native kernel"
        if step.index in declined:
            return f"step {step.index} ({op}) stays on numpy: {declined[step.index]}"
    return None


def _types(plan: Plan, names: list[str]) -> list[Any]:
    return [plan.values[name].type for name in names]


@dataclass
class Made:
    """A signature's entry in C, before it is bound to its executable's Python entry:
    its tape and the memory the tape points into (`keep`)."""

    tape: loops.Tape
    slots: np.ndarray
    specs: np.ndarray
    keep: tuple
    nin: int
    nout: int
    steps: int
    states: list[np.ndarray]  # the state buffers its slots point at (after the outputs)
    nogil: bool  # whether its tape runs with the GIL released
    recycled: bytes  # per output, 1 where it is recycled (runtime/recycle.py's rule)
    plan: Plan  # the plan it was recorded from (its outputs given: build_plan's given_outputs)
    # per call of the tape, the index of the step that makes it (the plan's step count
    # for a call made after the steps: a late state update, a copy into an output)
    call_steps: list[int]
    outputs: list[tuple[tuple[int, ...], np.dtype]]  # each output's shape and dtype
    # the tape's buffers while the GIL is not held: one lock however often it is bound
    # (an executable binds its entry again when another signature's tier comes in)
    lock: Any = field(default_factory=forks.lock)

    def bind(self, fallback: Any, lock: Any = None) -> Any:
        """The callable entry: this signature in C, every other call `fallback`'s.
        `lock` is the executable's call lock when the plan holds state."""
        at = calls.address_int
        returns = 0 if self.nout == 0 else 1 if self.nout == 1 else 2
        if lock is None and (self.nogil or self.tape.repairs):
            lock = self.lock  # a repair (Kernel.repairs) runs Python code mid-tape
        return module().make(
            fallback,
            self.failed,
            (self.keep, self.specs),
            runner(),
            at(self.tape.words),
            at(self.tape.args),
            at(self.slots),
            at(self.specs),
            self.nin,
            self.nout,
            returns,
            lock,
            self.nogil,
            self.recycled,
        )

    def failed(self, index: int) -> None:
        self.tape.failed(index)

    def clock(self, feeds: list[np.ndarray]) -> list[float]:
        """The seconds each step of `plan` takes in one run of the tape on `feeds`
        (arrays of the recorded dtypes and shapes), clocked call by call in C
        (gc_tape_clocked): by step index, 0 for a step with no call, then the calls made
        after the steps. For a profile: this entry must be one of its own (bound to no
        executable), whose state buffers the run may write."""
        run = _TAPE_CLOCKED(runner("gc_tape_clocked"))
        at = calls.address_int
        arrays = [np.ascontiguousarray(a) for a in feeds]
        outputs = [np.empty(shape, dtype) for shape, dtype in self.outputs]
        self.slots[: self.nin + self.nout] = [at(a) for a in arrays + outputs]
        clock = np.zeros(len(self.call_steps) + 1, np.int64)
        start = 0
        while failed := int(
            run(at(self.tape.words), at(self.tape.args), at(self.slots), start, at(clock))
        ):
            self.tape.failed(failed - 1)  # raises, or returns when the kernel repaired it
            start = failed
        seconds = [0.0] * (len(self.plan.steps) + 1)
        for call, step in enumerate(self.call_steps):
            seconds[step] += (clock[call + 1] - clock[call]) * 1e-9
        return seconds

    def describe(self) -> str:
        gil = ", the GIL released" if self.nogil else ""
        return (
            f"entry: one C call ({len(self.tape.ops)} kernel call(s) for {self.steps} step(s){gil})"
        )


def build(
    backend: Backend,
    plan: Plan,
    spec: Any,
    updates: dict[str, str],
    states: list[np.ndarray],
) -> Made:
    """`plan`'s signature planned for C, recorded and made an entry (on the builder
    thread: it may run the compiler); `updates` and `states` are the executable's (its
    state placeholders' outputs, and their buffers in `plan.state` order). Raises
    loops.NotRecordedError when a call cannot be recorded, BackendUnavailableError where
    the module cannot be built."""
    module()
    run_tape = runner()
    given = build_plan(plan.graph, spec, plan.signature, updates, given_outputs=True)
    gen = Generator(given, False, backend)
    calls.plan_state(gen)["whole"] = True
    generated = gen.generate()
    if generated.backend != backend.name:  # pragma: no cover - generate raised instead
        raise BackendUnavailableError("the plan was generated on another backend")
    constants = [np.asarray(given.nodes[name].value, order="C") for name in given.constants]
    run = generated.instantiate(given.arena_bytes, constants, states)
    kernels = calls.recorded(generated, "kernels")
    written = set(updates.values())
    returned = [o for o in plan.graph.outputs if o.name not in written]
    types = _types(given, given.inputs) + [spec.types[o] for o in returned]
    slots = [np.empty(t.shape, t.dtype) for t in types]
    tape = loops.record(run, kernels, slots, range(0), held=states, resumable=True)
    words = np.zeros(len(types) + len(states) + 1, np.int64)
    words[len(types) : len(types) + len(states)] = [calls.address_int(a) for a in states]
    pro_words, pro_args = tape.prologue
    if int(pro_words[0]):  # constants packed once (loops.record's prologue)
        at = calls.address_int
        failed = _call_runner(run_tape, at(pro_words), at(pro_args), at(words), 0)
        if failed:
            calls.scratch_failed("a constant's packing")
    specs: list[int] = []
    for t in types:
        specs += [np.dtype(t.dtype).num, len(t.shape), *(int(d) for d in t.shape)]
    nin = len(given.inputs)
    # what the tape's fixed addresses point into (the scratch slots are relocated: not kept)
    keep = (tape, words, constants, run, states)
    steps = len(given.steps)
    nogil = given.arena_bytes + sum(int(t.nbytes or 0) for t in types[nin:]) >= NOGIL_BYTES
    specs_array = np.array([*specs, 0], np.int64)
    recycled = bytes(worth_recycling(t.nbytes) for t in types[nin:])
    step_of_line = {line: k for k, lines in generated.step_lines.items() for line in lines}
    call_steps = [step_of_line.get(line, len(given.steps)) for line in tape.lines]
    return Made(
        tape,
        words,
        specs_array,
        keep,
        nin,
        len(types) - nin,
        steps,
        states,
        nogil,
        recycled,
        given,
        call_steps,
        [(tuple(int(d) for d in t.shape), np.dtype(t.dtype)) for t in types[nin:]],
    )


_TAPE_ONCE = ctypes.CFUNCTYPE(
    ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64
)


_TAPE_CLOCKED = ctypes.CFUNCTYPE(
    ctypes.c_int64,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_void_p,
)


def _call_runner(address: int, *words: int) -> int:
    return int(_TAPE_ONCE(address)(*words))


ENTRIES = Entries(refuses=refuses, build=build)
