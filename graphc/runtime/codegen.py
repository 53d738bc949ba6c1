"""Code generation: a Plan becomes straight-line Python source, compiled once.

The source is a module: its top level carves the arena into the plan's buffers and
precomputes views of them; it defines ``run(<data inputs>)``, one line per step
calling a kernel (a numpy ufunc directly where the op's kernel is one) with ``out=``
a preallocated buffer. The code is compiled once per plan and executed once per
thread in a namespace of that thread's own (``Generated.make``), so the buffers are
that namespace's globals and ``run`` interprets nothing at call time.

User text never reaches the source except as an escaped literal: identifiers are
generated (`Generator.fresh` keeps only ASCII letters, digits and underscores of a
name, never a leading underscore), attribute strings are `repr` literals, and names
shown in comments go through `shown`, which JSON-escapes anything but plain
characters, so a name holding a newline cannot start a line of code.
"""

from __future__ import annotations

import json
import keyword
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.ir.graph import Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TupleType, is_float, is_half
from graphc.ops.indexing import parse_index
from graphc.runtime.backend import (
    Backend,
    BackendUnavailableError,
    KernelsNotBuiltError,
    chain,
    get_backend,
    page_aligned_arena,
    warn_once,
)
from graphc.runtime.plan import Plan, Step, Value
from graphc.runtime.recycle import Recycler, worth_recycling

STATIC_KINDS = ("allocated", "constant", "state")
_PLAIN = re.compile(r"[A-Za-z0-9_.]+")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def shown(name: str) -> str:
    """A value name as it may appear in a comment of generated source: itself when it is
    plain, else a one-line JSON string (newlines, quotes, non-ASCII escaped)."""
    return name if _PLAIN.fullmatch(name) else json.dumps(name, ensure_ascii=True)


@dataclass
class Generated:
    """The executor's source and the namespace it runs in.

    `backend` is the backend that generated it (after any fallback), `step_backends`
    the backend whose lowering emitted each step (by step index), `step_notes` what a
    lowering says of its step beyond that (a slice read in place: no copy), `notes` what the
    backend reports (kernels built, compile time), `allocate_arena` its allocator,
    `bodies` the code of control-flow steps' bodies (by step index, then attribute),
    `state` what each backend recorded while generating it (`Generator.state`),
    `c_source` the C its backend compiled for it ("" when none: `exe.source("c")`),
    `step_lines` the line numbers each step's code has in `run` (as its frames report
    them), by step index, its comment first."""

    source: str
    namespace: dict[str, Any]
    make: Callable[..., Callable[..., Any]] = field(repr=False)
    backend: str = "numpy"
    step_backends: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    allocate_arena: Callable[[int], Any] = field(default=page_aligned_arena, repr=False)
    bodies: dict[int, dict[str, Generated]] = field(default_factory=dict, repr=False)
    state: dict[str, Any] = field(default_factory=dict, repr=False)
    c_source: str = field(default="", repr=False)
    step_notes: dict[int, str] = field(default_factory=dict)
    # what the backend does on a thread about to run the plan: before the plan's first
    # call there, and when exe.wait() returns there (native: hand numpy's BLAS its
    # thread pool, where that is safe)
    on_thread: tuple[Callable[[], None], ...] = ()
    step_lines: dict[int, range] = field(default_factory=dict, repr=False)

    def instantiate(self, arena_bytes: int, constants: list, states: list) -> Callable[..., Any]:
        """The plan's `run` function on a fresh arena (one per thread)."""
        for hook in self.on_thread:
            hook()
        return self.make(self.allocate_arena(arena_bytes), constants, states)


class Generator:
    """Turns one Plan into source; lowerings call `name`, `const` and `array` on it."""

    def __init__(
        self,
        plan: Plan,
        check_numerics: bool = False,
        backend: Backend | None = None,
        parent: Generator | None = None,
        compile_kernels: bool = True,
        laps: list[float] | None = None,
    ) -> None:
        self.plan = plan
        self.parent = parent  # the generator of the plan holding this one, for a body
        # a profile's clock (runtime/profile.py): the seconds of step k are added to
        # laps[k] as the plan runs; None (every plan a call runs): no clock at all
        self.laps = laps
        # may the backend's finish run its build tool (else: KernelsNotBuiltError)?
        self.compile_kernels = compile_kernels
        self.check_numerics = check_numerics
        self.backend = backend if backend is not None else get_backend("numpy")
        self.chain = chain(self.backend)
        xp = self.backend.array_module  # the generated code allocates with this module
        self.namespace: dict[str, Any] = {
            "empty": xp.empty,
            "copyto": xp.copyto,
            "Recycler": Recycler,
        }
        self.namespace["array_copy"] = lambda x: xp.array(x, copy=True)
        self.step_backends: dict[int, str] = {}  # which backend lowered each step
        self.step_notes: dict[int, str] = {}  # a lowering's word on its step, for explain()
        self.notes: list[str] = []  # what the backend reports for explain()
        self.on_thread: list[Callable[[], None]] = []  # (Generated.on_thread)
        self.bodies: dict[int, dict[str, Generated]] = {}  # control flow's compiled bodies
        self.state: dict[str, Any] = {}  # per-backend working data of this generation
        self._globals: dict[int, str] = {}
        self._taken: set[str] = set(self.namespace) | {
            "run",
            "arena",
            "constants",
            "states",
            "lo",
            "hi",
        }
        # base -> the last suffix `fresh` tried for it, so a base asked for again resumes
        # there instead of probing base_1, base_2, ... from the start (quadratic)
        self._suffix: dict[str, int] = {}
        self.expr: dict[str, str] = {}  # value name -> the Python name holding its array
        self.static: set[str] = set()  # values whose arrays exist before run is called
        self.setup_lines: list[str] = []  # per-thread scratch that lowerings allocate
        self.scratch: dict[tuple, list[str]] = {}  # scratch free between fused steps
        self._snapshots: dict[str, str] = {}  # returned state values, copied before updates

    # -- names ------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        """A new identifier derived from `base`: ASCII word characters only, never a
        keyword, never starting with a digit or an underscore (no dunder globals)."""
        name = _NOT_IDENTIFIER.sub("_", base)
        if not name or not name[0].isalpha() or keyword.iskeyword(name):
            name = "v_" + name
        k = self._suffix.get(name, 0)
        candidate = f"{name}_{k}" if k else name
        while candidate in self._taken:
            k += 1
            candidate = f"{name}_{k}"
        self._suffix[name] = k
        self._taken.add(candidate)
        return candidate

    def const(self, obj: Any, hint: str) -> str:
        """A global name bound to `obj` (one per distinct object)."""
        key = id(obj)
        if key not in self._globals:
            name = self.fresh(hint)
            self.namespace[name] = obj
            self._globals[key] = name
        return self._globals[key]

    def literal(self, obj: Any, hint: str) -> str:
        """Source for an attribute value: a literal where it is one, else a global."""
        if _is_literal(obj):
            return repr(obj)
        if isinstance(obj, np.dtype):
            return self.const(obj, f"dtype_{obj.name}")
        return self.const(obj, hint)

    def array(self, value: str) -> str:
        return self.expr[value]

    # -- source -----------------------------------------------------------------

    def generate(self) -> Generated:
        plan = self.plan
        setup = self._setup()
        params = [self._bind(name, self.fresh(name)) for name in plan.inputs]
        if plan.given is not None:  # a body: the caller passes a buffer per output
            self.out_params = [self.fresh(f"out{k}") for k in range(len(plan.returns))]
            params += self.out_params
            for name, k in plan.given.items():
                self._bind(name, self.out_params[k])
        body: list[str] = []
        due = nonfinite_constants(plan) if self.check_numerics else None
        clock = self._clock()
        spans: dict[int, tuple[int, int]] = {}  # each step's lines, as indices into body
        for k, step in enumerate(plan.steps):
            if due is not None:
                body.extend(self._constant_checks(due[k], step))
            if clock is not None:
                body.append(f"{clock[0]} = {clock[1]}()")
            first = len(body)
            body.extend(self._step(step))
            spans[step.index] = (first, len(body))
            if clock is not None:
                body.append(f"{clock[2]}[{k}] += {clock[1]}() - {clock[0]}")
        if due is not None:
            body.extend(self._constant_checks(due[-1], None))
        body.extend(self._snapshot_state_returns())
        body.extend(self._late_updates())
        body.extend(self._into_given() if plan.given is not None else [self._return()])
        setup_lines = ["# per thread: carve this thread's arena, bind constants and state"]
        setup_lines += setup + self.setup_lines
        run_lines = [f"def run({', '.join(params)}):"] + ["    " + line for line in body]
        # the line (from 1) each body entry starts on in run_code, whose text is preceded
        # by one line per setup line, then the def
        starts = [len(setup_lines) + 2]
        for line in body:
            starts.append(starts[-1] + line.count("\n") + 1)
        step_lines = {k: range(starts[a], starts[b]) for k, (a, b) in spans.items()}
        source = "\n".join(setup_lines + run_lines) + "\n"
        for backend in self.chain:
            if backend.finish is not None:
                backend.finish(self)  # may bind compiled kernels into the namespace
        # two code objects: CPython compiles one module holding both markedly slower
        where = f"<graphc plan {plan.graph.name}>"
        setup_code = compile("\n".join(setup_lines) + "\n", where, "exec")
        run_code = compile("\n" * len(setup_lines) + "\n".join(run_lines) + "\n", where, "exec")
        namespace = self.namespace

        def make(arena: np.ndarray, constants: list, states: list) -> Callable[..., Any]:
            # buffers are globals of a namespace of their own: a closure with one cell
            # per buffer would make CPython's compiler quadratic in the plan's length
            own = dict(namespace, arena=arena, constants=constants, states=states)
            exec(setup_code, own)
            exec(run_code, own)
            return own["run"]

        return Generated(
            source,
            self.namespace,
            make,
            self.backend.name,
            self.step_backends,
            self.notes,
            self.backend.allocate_arena,
            self.bodies,
            self.state,
            self.c_source,
            step_notes=self.step_notes,
            on_thread=tuple(self.on_thread),
            step_lines=step_lines,
        )

    c_source = ""  # the C a backend's finish compiled for the plan (native: its kernels)

    def lower(self, step: Step, out: str) -> list[str] | None:
        """The first lowering along the backend chain that accepts `step`, or None
        (then the step is a call of its op's kernel)."""
        op = step.node.op
        for backend in self.chain:
            emit = backend.lowerings.get(op)  # type: ignore[arg-type]
            if emit is None:
                continue
            lines = emit(self, step, out)
            if lines is not None:
                self.step_backends[step.index] = backend.name
                return lines
        self.step_backends[step.index] = self.chain[-1].name
        return None

    def _bind(self, value: str, name: str, static: bool = False) -> str:
        self.expr[value] = name
        if static:
            self.static.add(value)
        return name

    def _setup(self) -> list[str]:
        plan = self.plan
        lines: list[str] = []
        for k, name in enumerate(plan.constants):
            lines.append(f"{self._bind(name, self.fresh(name), True)} = constants[{k}]")
        for k, name in enumerate(plan.state):
            lines.append(f"{self._bind(name, self.fresh(name), True)} = states[{k}]")
        carved: dict[tuple, str] = {}
        for step in plan.steps:
            for written in (*step.written, *self._twins(step)):
                value = plan.values[written]
                buffer = plan.buffers[value.buffer]
                if value.kind in ("allocated", "reused", "inplace"):
                    t = value.type
                    key = (buffer.id, t.shape, t.dtype)
                    if key not in carved:
                        dtype = self.literal(t.dtype, "dtype")
                        stop = buffer.offset + (t.nbytes or 0)  # type: ignore[operator]
                        carved[key] = self.fresh(written)
                        lines.append(
                            f"{carved[key]} = arena[{buffer.offset}:{stop}]"
                            f".view({dtype}).reshape({t.shape!r})"
                        )
                    self._bind(written, carved[key], True)
                elif value.kind == "state":
                    self._bind(written, self.expr[value.base], True)  # type: ignore[index]
                elif value.kind == "view" and value.base in self.static:
                    name = self._bind(written, self.fresh(written), True)
                    lines.append(f"{name} = {self._view(written)}")
        return lines

    def _twins(self, step: Step) -> list[str]:
        """Further result nodes reading the same result as one a tuple step writes."""
        if step.results is None:
            return []
        first = set(step.written)
        return [
            v.name
            for v in self.plan.values.values()
            if v.kind == "view" and v.base in first and self.plan.nodes[v.name].op == "result"
        ]

    def _view(self, name: str) -> str:
        # the views plan.fake_view follows over no memory: the two change together
        value = self.plan.values[name]
        node = self.plan.nodes[name]
        base = self.expr[value.base]  # type: ignore[index]
        if node.op == "result":  # a second result node for one result: the same array
            return base
        if node.op == "reshape":
            return f"{base}.reshape({tuple(value.type.shape)!r})"
        if node.op == "slice":  # a window that is C-contiguous (plan.contiguous_window)
            return f"{base}[{self.const(parse_index(node.attrs['index']), 'window')}]"
        return f"{base}.transpose({tuple(node.attrs['axes'])!r})"

    def _step(self, step: Step) -> list[str]:
        if step.results is not None:
            return self._tuple_step(step)
        value = self.plan.values[step.output]
        node = step.node
        comment = f"# {step.index}: {step_text(step)}"
        if value.kind != "output":
            comment += f"  [{value.kind}]"
        lines = [comment]
        if value.kind == "view":
            if step.output not in self.static:
                name = self._bind(step.output, self.fresh(step.output))
                lines.append(f"{name} = {self._view(step.output)}")
            return lines
        if value.kind == "output":
            out = self._bind(step.output, self.fresh(step.output))
        else:
            out = self.expr[step.output]
        lowered = self.lower(step, out)
        if lowered is not None:
            if value.kind == "output":
                lines.append(self._new_output(out, value))
            lines += lowered
        else:
            lines += self._call(step, value, out)
        if self.check_numerics and is_float(value.type.dtype):
            check = self.const(_numerics_check(node), f"check_{node.name}")
            lines.append(f"{check}({out})")
        return lines

    def _clock(self) -> tuple[str, str, str] | None:
        """With `laps`: the names of a step's start time, the clock and the laps list."""
        if self.laps is None:
            return None
        return (
            self.fresh("step_started"),
            self.const(time.perf_counter, "clock"),
            self.const(self.laps, "laps"),
        )

    def _constant_checks(self, constants: list[Node], step: Step | None) -> list[str]:
        """check_numerics: the checks of `constants` (holding NaN or inf) due before
        `step`; then, when `step` is a backend's fused node whose body holds such a
        constant, its body run node by node on the step's inputs, checked as gc.run
        checks the members (a member before the constant may be the first to give NaN)."""
        lines = []
        for node in constants:
            check = self.const(_numerics_check(node), f"check_{node.name}")
            lines.append(f"{check}({self.expr[node.name]})")  # bound at setup
        if step is not None and "members" in step.node.meta:
            for key, body in step.attrs.items():
                if isinstance(body, Graph) and any(
                    n.is_constant and not _finite(n.value) for n in body.nodes
                ):
                    check = self.const(_body_check(body), f"check_{step.node.name}_{key}")
                    lines.append(f"{check}({', '.join(self.expr[x] for x in step.inputs)})")
        return lines

    def _tuple_step(self, step: Step) -> list[str]:
        """A node with several results: its kernel (or lowering) writes them all at once,
        given a tuple of buffers (None for a result nobody reads)."""
        lines = [f"# {step.index}: {step_text(step)}"]
        outs = []
        for name in step.results:  # type: ignore[union-attr]
            if name is None:
                outs.append("None")
                continue
            value = self.plan.values[name]
            if value.kind == "output":
                out = self._bind(name, self.fresh(name))
                lines.append(self._new_output(out, value))
            else:
                out = self.expr[name]
            lines[0] += f"  {shown(name)}: [{value.kind}]"
            outs.append(out)
        out_tuple = f"({', '.join(outs)}{',' if outs else ''})"
        lowered = self.lower(step, out_tuple)
        if lowered is not None:
            lines += lowered
        else:
            fn, args, _ = self.callee(step.node, step.attrs, [self.expr[x] for x in step.inputs])
            lines.append(f"{fn}({', '.join(args + [f'out={out_tuple}'])})")
        for twin in self._twins(step):
            if twin not in self.static:
                self._bind(twin, self.expr[self.plan.values[twin].base])  # type: ignore[index]
        if self.check_numerics:
            for name in step.written:
                if is_float(self.plan.values[name].type.dtype):
                    check = self.const(_numerics_check(self.plan.nodes[name]), f"check_{name}")
                    lines.append(f"{check}({self.expr[name]})")
        return lines

    def callee(
        self, node: Node, attrs: dict[str, Any], args: list[str]
    ) -> tuple[str, list[str], bool]:
        """The function a step of `node` calls, its arguments, and whether it is a plain
        ufunc: the ufunc itself when the op's kernel is one (and takes no attrs), the
        reduce of a reduction's ufunc, else the op's kernel with its attrs as keywords."""
        kernel = get_op(node.op).kernel  # type: ignore[arg-type]
        half = any(is_half(dtype) for dtype in _dtypes(node))
        if not half:  # the planned types hold no 16-bit float: skip in_float32's look
            kernel = getattr(kernel, "unwidened", kernel)
        ufunc = getattr(kernel, "ufunc", None)
        reduce = getattr(kernel, "reduce_ufunc", None)
        keywords = [f"{k}={self.literal(v, f'{node.name}_{k}')}" for k, v in attrs.items()]
        if ufunc is not None and not attrs:
            return self.const(ufunc, f"np_{ufunc.__name__}"), args, True
        if (
            reduce is not None
            and set(attrs) <= {"axis", "keepdims"}
            and not half  # its ufunc would sum in the 16-bit dtype: the kernel sums in float32
        ):
            fn = self.const(reduce.reduce, f"np_{reduce.__name__}_reduce")
            return fn, args + keywords, False
        return self.const(kernel, f"kernel_{node.op}"), args + keywords, False

    def _call(self, step: Step, value: Value, out: str) -> list[str]:
        node = step.node
        fn, args, direct = self.callee(node, step.attrs, [self.expr[x] for x in step.inputs])
        if value.kind != "output":
            return [f"{fn}({', '.join(args + [f'out={out}'])})"]
        t = value.type
        if direct and t.rank > 0 and not worth_recycling(t.nbytes):
            # numpy allocates the fresh result, C-contiguous as every other non-transpose
            # value (its default order K would follow a transposed input, and what reads
            # the result, a sum say, would then round as the reference does not)
            return [f"{out} = {fn}({', '.join([*args, 'order=' + repr('C')])})"]
        return [self._new_output(out, value), f"{fn}({', '.join(args + [f'out={out}'])})"]

    def _new_output(self, out: str, value: Value) -> str:
        """The line giving output `out` a fresh array (a recycled one when it is large)."""
        t = value.type
        dtype = self.literal(t.dtype, "dtype")
        if not worth_recycling(t.nbytes):
            return f"{out} = empty({t.shape!r}, {dtype})"
        recycler = self.fresh(f"recycle_{out}")
        self.setup_lines.append(f"{recycler} = Recycler({t.shape!r}, {dtype})  # see recycle.py")
        return f"{out} = {recycler}()"

    def _snapshot_state_returns(self) -> list[str]:
        """Copy returned values that live in a state buffer before the updates overwrite
        it: an output that is the state placeholder itself (or simplifies to it, w * 1.0)
        returns the value the call started with, not the updated one."""
        plan = self.plan
        lines = []
        for name in dict.fromkeys(plan.returns):
            value = plan.values[name]
            if plan.buffers[value.buffer].kind == "state" and value.kind != "output":
                if plan.given is not None:  # into the caller's buffer (an entry in C)
                    snapshot = self.out_params[plan.returns.index(name)]
                    lines.append(f"copyto({snapshot}, {self.expr[name]})")
                else:
                    snapshot = self.fresh(f"returned_{name}")
                    lines.append(f"{snapshot} = array_copy({self.expr[name]})")
                self._snapshots[name] = snapshot
        return lines

    def _late_updates(self) -> list[str]:
        plan = self.plan
        lines, sources = [], {}
        for target, value in plan.late_updates.items():
            source = self.expr[value]
            if plan.buffers[plan.values[value].buffer].kind == "state":
                # another update may overwrite this state first: read it beforehand
                snapshot = self.fresh(f"old_{value}")
                lines.append(f"{snapshot} = array_copy({source})")
                source = snapshot
            sources[target] = source
        for target, source in sources.items():
            lines.append(f"copyto({self.expr[target]}, {source})  # update {shown(target)}")
        return lines

    def _into_given(self) -> list[str]:
        """A body's end: outputs not computed into their given buffer are copied there."""
        lines = []
        for k, name in enumerate(self.plan.returns):
            source = self._snapshots.get(name, self.expr[name])
            if self.plan.given.get(name) != k and source != self.out_params[k]:  # type: ignore[union-attr]
                lines.append(f"copyto({self.out_params[k]}, {source})")
        return lines + ["return None"]

    def _return(self) -> str:
        plan = self.plan
        results, given = [], set()
        for name in plan.returns:
            fresh = name not in given and (
                plan.values[name].kind == "output" or name in self._snapshots
            )
            expr = self._snapshots.get(name, self.expr[name])
            results.append(expr if fresh else f"array_copy({expr})")
            given.add(name)
        if not results:
            return "return None"
        if len(results) == 1:
            return f"return {results[0]}"
        return f"return ({', '.join(results)},)"


def step_text(step: Step) -> str:
    """What a step computes, for a comment: `name = op(inputs)`, names escaped."""
    inputs = ", ".join(shown(x) for x in step.inputs)
    return f"{shown(step.output)} = {step.node.op}({inputs})"


def _is_literal(obj: Any) -> bool:
    if type(obj) is float:
        return math.isfinite(obj)  # repr(inf) is not Python source
    if obj is None or type(obj) in (bool, int, str):
        return True
    if isinstance(obj, tuple):
        return all(_is_literal(x) for x in obj)
    return False


def nonfinite_constants(plan: Plan) -> list[list[Node]]:
    """For check_numerics: the constants of `plan` holding NaN or inf, in lists per step
    of those due before it (one more list: due after the last step). Due where the
    reference interpreter meets them, in graph order, so a plan names the node gc.run
    names; the rest are finite for good, and need no check as the plan runs."""
    position = {id(n): i for i, n in enumerate(plan.graph.nodes)}
    places = [position.get(id(step.node), len(position)) for step in plan.steps]
    due: list[list[Node]] = [[] for _ in range(len(places) + 1)]
    k = 0
    for name in plan.constants:  # in graph order
        node = plan.nodes[name]
        if _finite(node.value):
            continue
        while k < len(places) and places[k] < position[id(node)]:
            k += 1
        due[k].append(node)
    return due


def _finite(value: np.ndarray) -> bool:
    return not is_float(value.dtype) or bool(np.isfinite(value).all())


def _body_check(body: Graph) -> Callable[..., None]:
    """Run a fused `body` on its inputs through the reference interpreter's walk, which
    raises the NumericsError naming the first member (or constant) to give NaN or inf:
    one of its constants does."""
    from graphc.ops.body import evaluate

    def check(*arrays: np.ndarray) -> None:
        evaluate(body, arrays, check_numerics=True)

    return check


def _numerics_check(node: Node) -> Callable[[np.ndarray], None]:
    from graphc.runtime.reference import check_finite

    def check(value: np.ndarray) -> None:
        if not np.isfinite(value).all():
            check_finite(node, value)

    return check


new_arena = page_aligned_arena


def generate(
    plan: Plan,
    check_numerics: bool = False,
    backend: Backend | None = None,
    parent: Generator | None = None,
    compile_kernels: bool = True,
) -> Generated:
    """Source and `make` function for `plan` on `backend` (numpy by default); `parent` is
    the generator of the enclosing plan when `plan` is a control-flow body (a backend's
    `finish` may then leave its build to the enclosing plan's). When the backend cannot
    build this plan (`BackendUnavailableError`: no compiler, a failed build) the plan is
    generated on its fallback instead, with one warning per reason. With
    `compile_kernels` False a backend that would have to build kernels first raises
    `KernelsNotBuiltError` instead (runtime/tiers.py)."""
    backend = backend if backend is not None else get_backend("numpy")
    try:
        return Generator(plan, check_numerics, backend, parent, compile_kernels).generate()
    except KernelsNotBuiltError:
        raise
    except BackendUnavailableError as exc:
        if backend.fallback is None:
            raise
        warn_once(f"graphc: backend '{backend.name}' fell back to '{backend.fallback}': {exc}")
        return generate(plan, check_numerics, get_backend(backend.fallback))


def _dtypes(node: Node) -> list:
    """The dtypes of `node`'s operands and results."""
    types = [x.type for x in node.inputs] + [node.type]
    return [t.dtype for u in types for t in (u.items if isinstance(u, TupleType) else (u,))]
