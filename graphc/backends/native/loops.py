"""Loops in C: a scan or while_loop whose body runs natively is one call (csrc/loop.c).

numpy's lowering of a loop (backends/numpy/control.py) runs the body's plan from Python
once per step: for a small body that is most of the loop's time (an RNN step at batch
1, about 30 us forward and backward). Here the steps run in C:

- **Lowering.** The body is planned as numpy's lowering plans it, with one difference:
  every step native can run is lowered to its kernel whatever its size (at a small size
  numpy's ufunc is the cheaper call from Python, native/__init__.py's SMALL, but not from
  C). A body with a step native declines keeps numpy's loop; explain says which step.
- **Recording.** Per thread, the body's plan is set up on an arena of its own (as for
  numpy's loop) and run once on scratch arrays with each kernel replaced by a recorder:
  the calls it makes, in order, with their arguments, become a tape. An address that
  points into one of the body's parameters (a carry, an xs row, a constant, an output)
  is kept as a relocation (slot, offset); any other address must point into an array the
  thread's plan owns (its arena, constants, packed weights), which the tape keeps alive.
  Any other call (a numpy ufunc, a kernel called through a Python hook, an address of
  an array made during the call) would be missing from the tape: the recording refuses
  it, and numpy's loop runs that body (explain says why). A `copyto` between two
  C-ordered arrays of one type is recorded as a copy.
- **Running.** One C call per loop (`gc_scan_run`, `gc_while_run`) walks the steps,
  points the relocated arguments at the step's arrays and makes the tape's calls.

Bits: the calls are those the body's plan makes on native, on the same arrays in the
same order; only the interpreter between them is gone. So a loop computes on native
what its body computes there: numpy's bits wherever the body's ops are exact on native.

A while loop that never ends cannot be interrupted with Ctrl-C while it runs in C, as in
jax.jit; its Python loop on numpy can be.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.backends.native import calls, matmul, rows, toolchain
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel
from graphc.backends.numpy import control
from graphc.backends.numpy.control import CompiledBody, ScanLoop, Scratch, WhileLoop
from graphc.ir.types import TensorType
from graphc.runtime import forks
from graphc.runtime.backend import warn_once
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

SOURCE = c_source("loop.c")
MAX_WORDS = 128  # a call's arguments the runner passes at most (GC_TAPE_MAX_ARGS)
# after the step count: tape, args, slots, bases, rows, buf0, buf1, the prologue's tape
# and args; reverse, nc, nx, nk, ny
SCAN = Kernel("gc_scan_run", SOURCE, [], ["scan"], "p" * 9 + "i" * 5, status=True)
# after nc: the condition's tape, args, slots; the body's; init, buf0, buf1, results,
# nbytes, flag; the condition's prologue's tape and args, the body's; nk
WHILE = Kernel("gc_while_run", SOURCE, [], ["while_loop"], "p" * 16 + "i", status=True)


# False: every loop runs numpy's way, its body's plan called from Python per step (for a
# comparison: the two give the same bits)
IN_C = True


class NotRecordedError(Exception):
    """A body whose calls cannot be replayed from C (the message says why)."""


# -- lowering -------------------------------------------------------------------------


def every_step_native(gen: Generator) -> bool:
    """Is `gen` planning a body that is to run in C (so every step it can lower is a
    kernel, whatever its size)?"""
    return calls.loop_constants(gen) is not None


def _compile(gen: Generator, graph: Any, types: list[TensorType], constants: range) -> CompiledBody:
    """`graph` planned as a body to run in C; the inputs at positions `constants` are the
    same at every step (calls.loop_constants)."""
    bodies = calls.plan_state(gen).setdefault("taping", [])
    bodies.append(frozenset(constants))
    try:
        return control.compile_body(gen, graph, types)
    finally:
        bodies.pop()


def _marks(gen: Generator) -> dict[str, int]:
    """How many bodies and loops the outermost plan has noted so far (for `_forget`)."""
    state = calls.plan_state(_outermost(gen))
    return {key: len(state.get(key, [])) for key in ("bodies", "loops")}


def _forget(gen: Generator, marks: dict[str, int]) -> None:
    """Drop the bodies (and their loops) noted since `marks`: planned for C, they are
    planned again by numpy's lowering, whose plans alone are to be built."""
    state = calls.plan_state(_outermost(gen))
    for key, count in marks.items():
        del state.setdefault(key, [])[count:]


def _python_step(body: CompiledBody) -> str | None:
    """Why `body` cannot be a tape, seen from its plan: a step numpy runs. None if none."""
    backends = body.generated.step_backends
    for step in body.plan.steps:
        if _is_view(body.plan, step):
            continue
        if backends.get(step.index) != "native":
            return f"step {step.index} ({step.node.op}) runs on numpy"
    return None


def _is_view(plan: Any, step: Step) -> bool:
    """A step that only names memory (a view): no call of its own."""
    return step.results is None and plan.values[step.output].kind == "view"


def _outermost(gen: Generator) -> Generator:
    while gen.parent is not None:
        gen = gen.parent
    return gen


@dataclass
class Loop:
    """A loop step lowered here: its bodies, and whether their calls record (`check`,
    once the kernels are bound: None when they do, else why not)."""

    kind: str
    index: int
    bodies: dict[str, CompiledBody]
    make_c: Callable[[], Any]
    make_python: Callable[[], Any]
    notes: list[str]
    verdict: str | None = "its kernels were not built"

    def check(self) -> None:
        """Record the bodies once (as a thread would) and say in explain's notes how the
        loop runs."""
        if not IN_C:
            self.verdict = "loops.IN_C is False"
            return
        try:
            made = self.make_c()
        except NotRecordedError as exc:
            self.verdict = str(exc)
            self.notes.append(
                f"native: the {self.kind} of step {self.index} runs from Python: {exc}"
            )
            return
        self.verdict = None
        sizes = ", ".join(f"{attr} {int(tape.words[0])}" for attr, tape in made.tapes.items())
        self.notes.append(
            f"native: the {self.kind} of step {self.index} runs in C (calls a step: {sizes})"
        )

    def __call__(self) -> Any:
        """This thread's loop: in C where `check` found the bodies record, else numpy's."""
        if self.verdict is None:
            try:
                return self.make_c()
            except NotRecordedError as exc:  # pragma: no cover - check recorded the same
                warn_once(f"graphc: a native loop runs from Python: {exc}")
        return self.make_python()


def _lower(
    gen: Generator,
    step: Step,
    out: str,
    marks: dict[str, int],
    bodies: dict[str, CompiledBody],
    make_c: Callable[[], Any],
    make_python: Callable[[], Any],
) -> list[str] | None:
    """The loop step's lines: its loop made per thread (in C where its bodies record,
    else numpy's), or None (numpy's lowering plans it again) when a body has a step
    numpy runs."""
    kind = step.node.op
    why = next(filter(None, (_python_step(body) for body in bodies.values())), None)
    if why is not None:
        _forget(gen, marks)
        gen.notes.append(f"native: the {kind} of step {step.index} runs from Python: {why}")
        return None
    loop = Loop(kind, step.index, bodies, make_c, make_python, gen.notes)
    calls.plan_state(_outermost(gen)).setdefault("loops", []).append(loop)
    control.record_bodies(gen, step, **bodies)
    return control.emit_loop(gen, step, loop, out)


def lower_scan(gen: Generator, step: Step, out: str) -> list[str] | None:
    """A scan whose body runs natively as one C call; else None (numpy's loop)."""
    attrs = step.attrs
    nc, nx = attrs["num_carry"], attrs["num_xs"]
    types = control.scan_body_types(gen, step)
    results = control.result_types_of(gen, step)
    marks = _marks(gen)
    body = _compile(gen, attrs["body"], types, range(nc + nx, len(types)))

    def make_c() -> ScanInC:
        return ScanInC(body, types, attrs, results)

    def make_python() -> ScanLoop:
        return ScanLoop(body, attrs, results)

    return _lower(gen, step, out, marks, {"body": body}, make_c, make_python)


def lower_while(gen: Generator, step: Step, out: str) -> list[str] | None:
    """A while_loop whose condition and body run natively as one C call; else None."""
    attrs = step.attrs
    nc, k = attrs["num_carry"], attrs["num_cond_consts"]
    types = control.input_types(gen, step.inputs)
    cond_types, body_types = types[: nc + k], types[:nc] + types[nc + k :]
    results = control.result_types_of(gen, step)
    marks = _marks(gen)
    cond_body = _compile(gen, attrs["cond_body"], cond_types, range(nc, len(cond_types)))
    body = _compile(gen, attrs["body"], body_types, range(nc, len(body_types)))

    def make_c() -> WhileInC:
        return WhileInC(cond_body, body, cond_types, body_types, nc, k, results)

    def make_python() -> WhileLoop:
        return WhileLoop(cond_body, body, nc, k, results)

    bodies = {"cond_body": cond_body, "body": body}
    return _lower(gen, step, out, marks, bodies, make_c, make_python)


def check_loops(gen: Generator) -> None:
    """After the kernels of `gen` (an outermost plan) are bound: record each loop's
    bodies once, to say how it runs (Loop.check)."""
    for loop in calls.plan_state(gen).get("loops", []):
        loop.check()


def has_loops(gen: Generator) -> bool:
    return bool(calls.plan_state(gen).get("loops"))


# -- recording ------------------------------------------------------------------------


@dataclass
class Tape:
    """A body's calls as the runner reads them (csrc/loop.c): `words` the tape, `args`
    the arguments (relocated ones rewritten per step: one per thread), `ops` each call's
    op (for an error), `keep` the namespace whose arrays fixed addresses point into;
    `prologue` the calls made once before the steps (a constant weight's packing), as
    words and arguments; `lines` the line of the body's `run` each call was made from
    (as its frame reported it: Generated.step_lines says whose step it is)."""

    words: np.ndarray
    args: np.ndarray
    ops: list[str]
    keep: dict[str, Any]
    prologue: tuple[np.ndarray, np.ndarray]
    # each call's kernel (None: a copy) and its arguments' place in `args`
    calls: list[tuple[Kernel | None, int, int]]
    lines: list[int] = field(default_factory=list)

    def failed(self, index: int) -> None:
        """Raise the error of call `index`, whose status the runner found nonzero: its
        kernel's own (Kernel.failure, from the arguments it was called with: the runner
        left them in `args`), else a failed allocation; or return when the kernel's
        failure finished the call's work (Kernel.repairs: the tape goes on)."""
        kernel, first, count = self.calls[index]
        if kernel is not None and kernel.failure is not None:
            kernel.failure([int(v) for v in self.args[first : first + count]])
            if kernel.repairs:
                return
        calls.scratch_failed(self.ops[index])

    @property
    def repairs(self) -> bool:
        """Whether a call's failure may run Python code that finishes its work."""
        return any(kernel is not None and kernel.repairs for kernel, _, _ in self.calls)


class _RefusedError(Exception):
    pass


def _pure_helpers() -> list[Any]:
    """The functions a body's code may call from Python while being recorded: they only
    look at arrays (addresses, layouts, copies of what is not C-ordered) or settings."""
    helpers = [
        calls.contiguous,
        calls.static_address,
        calls.address_now,
        matmul.rows_layout,
        matmul.stack_layout,
        np.getbufsize,
    ]
    if calls.FFI is not None:
        helpers.append(calls.FFI.from_buffer)
    return helpers


def _function(value: Any) -> bool:
    """Whether the body's code could call `value` (cffi's pointers are callable objects)."""
    if calls.FFI is not None and isinstance(value, calls.FFI.CData):
        return calls.FFI.typeof(value).kind == "function"
    return callable(value)


def _owned(value: Any, found: list[tuple[int, int]], depth: int = 0) -> None:
    """The memory ranges of the arrays `value` holds (lists and tuples looked into)."""
    if isinstance(value, np.ndarray):
        base = value
        while isinstance(base.base, np.ndarray):
            base = base.base
        start = calls.address_int(base)
        found.append((start, start + base.nbytes))
    elif isinstance(value, (list, tuple)) and depth < 3:
        for item in value:
            _owned(item, found, depth + 1)


def record(
    run: Callable[..., Any],
    kernels: dict[str, Kernel],
    slots: Sequence[np.ndarray],
    constants: range,
    held: Sequence[np.ndarray] = (),
    resumable: bool = False,
) -> Tape:
    """The tape of the calls `run` (a body's run function, on its own arena) makes when
    called on `slots` (one C-ordered array per parameter, its outputs last; those at
    `constants` the same at every step). `held` are arrays `run`'s namespace holds whose
    contents change between calls (an executable's state): slots after `slots`, which
    the caller fills, so that no call reading them is taken for a constant's packing.
    `resumable`: the runner can go on after a call whose failure repaired it (an
    entry's; Kernel.repairs), else such a call is not recorded (a loop's).
    `run`'s namespace is spent: its kernels are replaced by recorders."""
    own = run.__globals__
    addresses = {name: calls.function_address(own[name]) for name in kernels}
    fixed: list[tuple[int, int]] = []
    for name, value in own.items():
        if not name.startswith("__"):
            _owned(value, fixed)
    recorded: list[tuple[Kernel | None, tuple]] = []
    lines: list[int] = []  # per recorded call, the line of `run` it was made from

    def note_line() -> None:
        frame = sys._getframe(2)  # the recorded call's caller (a helper, or run itself)
        while frame is not None and frame.f_code is not run.__code__:
            frame = frame.f_back
        lines.append(frame.f_lineno if frame is not None else 0)

    def recorder(kernel: Kernel) -> Callable[..., int]:
        def call(*args: Any) -> int:
            if kernel.repairs and not resumable:
                raise _RefusedError(f"{kernel.name} may have numpy finish its work mid-loop")
            recorded.append((kernel, args))
            note_line()
            return 0  # a status kernel's success

        return call

    def copy(dst: Any, src: Any, **options: Any) -> None:
        same = isinstance(dst, np.ndarray) and isinstance(src, np.ndarray) and not options
        if not (same and dst.dtype == src.dtype and dst.shape == src.shape):
            raise _RefusedError("a copy that converts or broadcasts")
        if not (dst.flags.c_contiguous and src.flags.c_contiguous):
            raise _RefusedError("a copy of an array that is not C-ordered")
        recorded.append((None, (calls.address_now(dst), calls.address_now(src), dst.nbytes)))
        note_line()

    def refuse(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise _RefusedError(f"it calls {name} from Python")

        return call

    pure = _pure_helpers()
    for name, value in list(own.items()):
        if name in kernels:
            own[name] = recorder(kernels[name])
        elif value is np.copyto:
            own[name] = copy
        elif name.startswith("__") or name == "run" or not _function(value):
            continue
        elif not any(value is h or value == h for h in pure):
            own[name] = refuse(name)
    try:
        run(*slots)
    except _RefusedError as exc:
        raise NotRecordedError(str(exc)) from None
    spans = []
    for k, array in enumerate([*slots, *held]):
        start = calls.address_int(array)
        spans.append((start, start + _extent(array), k))
    steps, prologue = _Words(), _Words()
    step_lines = []
    for (kernel, raw), line in zip(recorded, lines):
        words = [
            _word(kernel, pos, kind, value, spans, fixed) for pos, kind, value in _args(kernel, raw)
        ]
        once = kernel is not None and kernel.writes_only is not None and not kernel.status
        if once and all(slot is None or slot in constants for _, slot, _ in words):
            prologue.add(kernel, addresses, words)
        else:
            steps.add(kernel, addresses, words)
            step_lines.append(line)
    return Tape(*steps.arrays(), steps.ops, own, prologue.arrays(), steps.calls, step_lines)


def _args(kernel: Kernel | None, raw: tuple) -> list[tuple[int, str, Any]]:
    """A recorded call's arguments: (position, 'p' an address or 'i' an int64, value)."""
    kinds = "ppi" if kernel is None else "i" + kernel.params
    if len(raw) != len(kinds) or len(raw) > MAX_WORDS:
        what = "a copy" if kernel is None else f"kernel {kernel.name}"
        raise NotRecordedError(f"{what} takes {len(raw)} arguments")
    return [(pos, kind, value) for pos, (kind, value) in enumerate(zip(kinds, raw))]


def _word(
    kernel: Kernel | None,
    pos: int,
    kind: str,
    value: Any,
    spans: list[tuple[int, int, int]],
    fixed: list[tuple[int, int]],
) -> tuple[int, int | None, int]:
    """An argument as (its value, the slot it points into or None, the offset there)."""
    if kind == "i":
        return int(value), None, 0
    address = calls.word(value)
    for lo, hi, k in spans:
        if lo <= address <= hi:
            return 0, k, address - lo
    if address == 0 or any(lo <= address <= hi for lo, hi in fixed):
        return address, None, 0
    what = "a copy" if kernel is None else f"kernel {kernel.name}"
    raise NotRecordedError(f"{what} reads an array made during the call (argument {pos})")


class _Words:
    """Calls being laid out as a tape (loop.c's format)."""

    def __init__(self) -> None:
        self.entries: list[int] = []
        self.relocations: list[int] = []
        self.args: list[int] = []
        self.ops: list[str] = []
        self.calls: list[tuple[Kernel | None, int, int]] = []

    def add(self, kernel: Kernel | None, addresses: dict[str, int], words: list) -> None:
        first = len(self.args)
        fn = 0 if kernel is None else addresses[kernel.name]
        self.entries += [fn, int(kernel is not None and kernel.status), first, len(words)]
        self.ops.append("copy" if kernel is None else " ".join(kernel.ops))
        self.calls.append((kernel, first, len(words)))
        for pos, (value, slot, offset) in enumerate(words):
            if slot is not None:
                self.relocations += [first + pos, slot, offset]
            self.args.append(value)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        count = len(self.entries) // 4
        header = [count, len(self.relocations) // 3]
        return (
            np.array([*header, *self.entries, *self.relocations], np.int64),
            np.array([*self.args, 0], np.int64),
        )


# -- running --------------------------------------------------------------------------

_runners: dict[str, Any] = {}
_runners_lock = forks.lock()


def runner(kernel: Kernel) -> Any:
    """The bound loop runner `kernel` (SCAN or WHILE), from the library finish built."""
    with _runners_lock:
        if kernel.name not in _runners:
            built = toolchain.build_units([SOURCE], rows.prelude(), compile=False)[SOURCE]
            names = {k.name: k.params for k in (SCAN, WHILE)}
            _runners.update(calls.bind(built.path, built.library, names, frozenset(names)))
        return _runners[kernel.name]


def _words(values: Sequence[int]) -> np.ndarray:
    return np.array([*values, 0], np.int64)  # never empty: its address is always valid


class _Addresses:
    """The addresses of the arrays a loop is called with, each taken once while the same
    array comes again (an enclosing plan's own buffers are the same arrays at every
    call). A remembered array is kept alive, so no other array can take its id."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[np.ndarray, int]] = {}

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[int]:
        known, found = self.known, []
        for a in arrays:
            hit = known.get(id(a))
            if hit is None or hit[0] is not a:
                if len(known) > 64:  # a caller's new arrays at every call
                    known.clear()
                hit = known[id(a)] = (a, calls.address_int(a))
            found.append(hit[1])
        return found


def _scratch(types: Sequence[TensorType]) -> list[np.ndarray]:
    return [np.empty(t.shape, t.dtype) for t in types]  # type: ignore[arg-type]


def in_place_carries(body: CompiledBody, num_carry: int) -> list[bool]:
    """Per carry, whether the body may write its new value over the old one: every read of
    the old value (its placeholder's buffer, views included) comes before the first write
    of the new one's output buffer, or in that write itself where the writing kernel
    reads each element only for the element it writes there (calls.alias_safe). The
    copies of outputs that are not computed in place (`Generator._into_given`) come
    last, in order. Such a carry needs no second buffer and no copy between steps: the
    loop runs it in its result's buffer (the accumulators of a backward scan)."""
    plan = body.plan
    safe = calls.recorded(body.generated, "alias_safe")
    given = plan.given or {}
    buffers = {k: plan.values[name].buffer for name, k in given.items()}
    found = []
    for k in range(num_carry):
        old, new = plan.values[plan.inputs[k]].buffer, buffers.get(k)
        written, ok = False, True
        for step in plan.steps:
            if _is_view(plan, step):
                continue
            reads = {i for i, x in enumerate(step.inputs) if plan.values[x].buffer == old}
            writes = any(plan.values[w].buffer == new for w in step.written)
            if reads and (written or (writes and not reads <= safe.get(step.index, set()))):
                ok = False
                break
            written = written or writes
        for j, name in enumerate(plan.returns):
            if not ok or given.get(name) == j:
                continue
            source = plan.values[name].buffer
            if source == old and written and j != k:
                ok = False
            written = written or j == k
        found.append(ok)
    return found


def _kernels(body: CompiledBody) -> dict[str, Kernel]:
    return calls.recorded(body.generated, "kernels")


def _write_back(results: list[np.ndarray], targets: list[np.ndarray]) -> None:
    for result, target in zip(results, targets):
        if result is not target:
            np.copyto(result, target)


def _plain(strides: tuple[int, ...]) -> bool:
    """Strides a constant's slot can be laid out with for a recording: all positive."""
    return all(s > 0 for s in strides)


def _strided(t: TensorType, strides: tuple[int, ...]) -> np.ndarray:
    """A scratch array of type `t` laid out with (positive) `strides`."""
    shape = tuple(int(d) for d in t.shape)  # type: ignore[arg-type]
    span = sum((n - 1) * s for n, s in zip(shape, strides)) + np.dtype(t.dtype).itemsize
    raw = np.empty(max(span, 1), np.uint8)
    return np.ndarray(shape, t.dtype, buffer=raw, strides=strides)


def _extent(a: np.ndarray) -> int:
    """The bytes from an array's first element to past its last (strides all positive or
    C order)."""
    if a.flags.c_contiguous:
        return a.nbytes
    return sum((n - 1) * abs(s) for n, s in zip(a.shape, a.strides)) + a.itemsize if a.size else 0


class _Carries:
    """A loop's carry buffers: two sets, for even and odd steps (their addresses as the
    runner's words), except for the carries that run in place (in_place_carries), which
    `point` sends to their result buffers at each call."""

    def __init__(self, body: CompiledBody, types: Sequence[TensorType]) -> None:
        self.buffers = [_scratch(types) for _ in range(2)]
        self.own = [[calls.address_int(a) for a in bufs] for bufs in self.buffers]
        self.words = [_words(own) for own in self.own]
        self.in_place = [j for j, ok in enumerate(in_place_carries(body, len(types))) if ok]

    def point(
        self, inputs: Sequence[np.ndarray], results: Sequence[np.ndarray], addresses: list[int]
    ) -> None:
        """Point the carries run in place at their result buffers (`addresses`: the
        inputs' then the results'), where every step then reads and writes them; a
        result buffer that overlaps one of the loop's inputs (a caller's own in-place
        plan) keeps the loop's own two."""
        if not self.in_place:
            return
        n = len(inputs)
        spans = [(at, _extent(a)) for at, a in zip(addresses[:n], inputs)]
        for j in self.in_place:
            start, size = addresses[n + j], _extent(results[j])
            if any(start < at + length and at < start + size for at, length in spans):
                self.words[0][j], self.words[1][j] = self.own[0][j], self.own[1][j]
            else:
                self.words[0][j] = self.words[1][j] = start


class ScanInC:
    """One thread's scan, run by gc_scan_run on its body's tape."""

    def __init__(
        self,
        body: CompiledBody,
        types: list[TensorType],
        attrs: dict[str, Any],
        result_types: list[TensorType],
    ) -> None:
        """`types` are the body's inputs' (carries, a row of each xs, constants), `attrs`
        the scan node's."""
        outputs = body.output_types
        nc, nx = attrs["num_carry"], attrs["num_xs"]
        length, reverse = attrs["length"], attrs["reverse"]
        nk, ny = len(types) - nc - nx, len(outputs) - nc
        self.body, self.types = body, [*types, *outputs]
        self.constants = range(nc + nx, nc + nx + nk)
        self.tape = self._record({})
        self.length, self.num_carry = length, nc
        self.counts = (int(reverse), nc, nx, nk, ny)
        self.carries = _Carries(body, result_types[:nc])
        rows = [0] * nc + [t.nbytes for t in types[nc : nc + nx]] + [0] * (nk + nc)
        rows += [t.nbytes for t in outputs[nc:]]
        self.rows = _words(rows)  # type: ignore[arg-type]
        self.bases = np.zeros(len(rows) + 1, np.int64)
        self.slots = np.zeros(len(rows) + 1, np.int64)
        self.scratch = Scratch(result_types)
        self.addresses = _Addresses()
        # per layout of the strided constants (their strides by position), the tape
        # recorded for it and its call; None: they are copied to C order for this one
        self.layouts: dict[tuple, tuple[Tape, tuple] | None] = {
            (): (self.tape, self._call(self.tape))
        }
        self.run = runner(SCAN)

    @property
    def tapes(self) -> dict[str, Tape]:
        return {"body": self.tape}

    def _record(self, strides: dict[int, tuple[int, ...]]) -> Tape:
        """The body's tape for constants laid out with `strides` (by slot), others C-ordered."""
        slots = _scratch(self.types)
        for k, each in strides.items():
            slots[k] = _strided(self.types[k], each)
        return record(self.body.instance(), _kernels(self.body), slots, self.constants)

    def _call(self, tape: Tape) -> tuple:
        at = calls.static_address
        arrays = (tape.words, tape.args, self.slots, self.bases, self.rows, *self.carries.words)
        return (self.length, *map(at, (*arrays, *tape.prologue)), *self.counts)

    def _layout(self, arrays: Sequence[np.ndarray]) -> tuple[Tape, tuple] | None:
        """The tape and call for constants laid out as `arrays`' are (a constant that is a
        transposed view is read where it lies: no copy at every call); None where they are
        to be copied to C order."""
        strides = {k: arrays[k].strides for k in self.constants if not arrays[k].flags.c_contiguous}
        key = tuple(sorted(strides.items()))
        if key not in self.layouts:
            try:
                tape = self._record(strides) if all(_plain(s) for s in strides.values()) else None
            except NotRecordedError:
                tape = None
            self.layouts[key] = None if tape is None else (tape, self._call(tape))
        return self.layouts[key]

    def __call__(self, *arrays: np.ndarray, out: Sequence[np.ndarray | None]) -> tuple:
        results = self.scratch.fill(out)
        if self.length == 0:
            for final, init in zip(results, arrays[: self.num_carry]):
                np.copyto(final, init)
            return tuple(results)
        layout = self._layout(arrays)
        if layout is None:
            tape, call = self.layouts[()]  # type: ignore[misc]
            inputs = [calls.contiguous(a) for a in arrays]
        else:
            tape, call = layout
            keep = self.constants
            inputs = [a if k in keep else calls.contiguous(a) for k, a in enumerate(arrays)]
        targets = [calls.contiguous(a) for a in results]
        addresses = self.addresses((*inputs, *targets))
        self.bases[:-1] = addresses
        self.carries.point(inputs, targets, addresses)
        failed = self.run(*call)
        if failed:
            tape.failed(failed - 1)
        _write_back(results, targets)
        return tuple(results)


class WhileInC:
    """One thread's while_loop, run by gc_while_run on its condition's and body's tapes."""

    def __init__(
        self,
        cond_body: CompiledBody,
        body: CompiledBody,
        cond_types: list[TensorType],
        body_types: list[TensorType],
        num_carry: int,
        num_cond_consts: int,
        result_types: list[TensorType],
    ) -> None:
        nc, k = num_carry, num_cond_consts
        self.flag = np.zeros((), np.bool_)
        cond_slots = [*_scratch(cond_types), self.flag]
        self.cond = record(
            cond_body.instance(), _kernels(cond_body), cond_slots, range(nc, len(cond_types))
        )
        body_slots = _scratch([*body_types, *body.output_types])
        self.body = record(body.instance(), _kernels(body), body_slots, range(nc, len(body_types)))
        self.num_carry, self.num_cond_consts = nc, k
        self.carries = _Carries(body, result_types)
        self.cond_slots = np.zeros(nc + k + 2, np.int64)
        self.cond_slots[nc + k] = calls.address_int(self.flag)
        self.body_slots = np.zeros(len(body_types) + nc + 1, np.int64)
        self.ends = np.zeros(2 * nc + 1, np.int64)  # the initial carries, then the results
        self.nbytes = _words([t.nbytes for t in result_types])  # type: ignore[misc]
        self.scratch = Scratch(result_types)
        self.addresses = _Addresses()
        at = calls.static_address
        cond = (self.cond.words, self.cond.args, self.cond_slots)
        loop = (self.body.words, self.body.args, self.body_slots)
        init, results = self.ends[:nc], self.ends[nc:]
        arrays = (
            *cond,
            *loop,
            init,
            *self.carries.words,
            results,
            self.nbytes,
            self.flag,
            *self.cond.prologue,
            *self.body.prologue,
        )
        self.call = (nc, *map(at, arrays), len(body_types) - nc)
        self.run = runner(WHILE)

    @property
    def tapes(self) -> dict[str, Tape]:
        return {"cond_body": self.cond, "body": self.body}

    def __call__(self, *arrays: np.ndarray, out: Sequence[np.ndarray | None]) -> tuple:
        nc, k = self.num_carry, self.num_cond_consts
        results = self.scratch.fill(out)
        inputs = [calls.contiguous(a) for a in arrays]
        targets = [calls.contiguous(a) for a in results]
        addresses = self.addresses((*inputs, *targets))
        n = len(inputs)
        self.ends[:-1] = addresses[:nc] + addresses[n:]
        self.cond_slots[nc : nc + k] = addresses[nc : nc + k]
        self.body_slots[nc : n - k] = addresses[nc + k : n]
        self.carries.point(inputs, targets, addresses)
        failed = self.run(*self.call)
        if failed:
            tape = self.cond if failed < 0 else self.body
            tape.failed(abs(failed) - 1)
        _write_back(results, targets)
        return tuple(results)
