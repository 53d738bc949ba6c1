"""The plan: which kernel runs when, and where every value lives. Plain data.

Algorithm (one reverse scan, one forward walk, as in JAX's `last_used` and the ONNX
Runtime allocation planner):

1. Reverse scan: each value's last use is the last step that reads it. A value the
   call returns, or writes back into state, is used at the end (index = #steps).
2. Forward walk over the steps in the order schedule.py gives (the graph's, but that
   a step whose result is returned or written into state runs as soon as it can after
   another reader of its operand). The output of step i is placed by the first rule
   that applies:
   - a node with several results (scan, cond; a `TupleType`): each result that a
     `result` node reads gets a buffer of its own, "output" if returned, else "reused"
     or "allocated" as below (the `result` nodes are no steps of their own);
   - a transpose: always a view of its input ("view"; returned, it is copied out,
     keeping that memory order), so every value has the layout the reference gives
     it (see LAYOUT below);
   - it is returned: a fresh array per call ("output"), never written again while the
     caller can reach it (large ones are recycled once dropped: recycle.py); in a
     body's plan, the buffer the caller passes for that output ("given");
   - it updates a state placeholder whose buffer nobody reads after step i: it is
     written straight into that buffer ("state");
   - a reshape: a view of its input ("view"), unless the input is a transposed view
     (numpy would copy an arena buffer's once, at setup, and keep another's strides);
   - a slice of an arena buffer whose window is itself C-contiguous (rows of a
     matrix, a block of a row of a (1, n) array): a view ("view"), which keeps the
     layout every value has; any other slice is a copy;
   - an elementwise op that may run in place, one of whose inputs has the same type,
     dies at step i and is the only live value on an arena buffer: that buffer (of
     several, the one written last: "inplace"), never a caller's array, a constant or
     state; so may an op at the inputs it names in `inplace_inputs` (gemm's c), if
     that input is no other operand;
   - a free arena buffer of the same dtype and enough bytes, smallest first, earliest
     freed among equals ("reused"; `FreeList`: a sorted list of sizes per dtype, O(log n));
   - a new arena buffer ("allocated").
   After the step, buffers whose last live value died there join the free list.
   The step also records the bytes its kernel allocates for itself (an im2col buffer:
   the op's `scratch` rule). They are counted in the peak (explain.py), not planned:
   an arena slot passed to the kernel measured no faster (the allocator hands the
   freed block back on the next call).

LAYOUT: every value is C-contiguous except a transpose's (ops flagged `permutes`),
which is its input's memory permuted, in the plan and in the reference interpreter
alike. matmul (BLAS picks its kernels by the operands' memory order) and reductions
(numpy sums a contiguous axis pairwise, a strided one in sequence) give other last
bits for other layouts, so a layout that depended on the level or on the planner
would break exactness.

Invariant: two values whose live ranges [defined, last use] overlap never share
memory, except that an in-place step's output takes over its dying input's buffer at
that step, and a view shares its base's buffer (which stays live while either is).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.ir.graph import OP, OUTPUT, PLACEHOLDER, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType, TupleType
from graphc.ops.defop import float32_copy_bytes
from graphc.ops.indexing import parse_index
from graphc.runtime.recycle import worth_recycling
from graphc.runtime.schedule import permutes, reshape_view, schedule
from graphc.runtime.specialize import Specialized

# arena buffers this large start on a 4 KiB boundary, so a step's input and output
# never sit a few bytes apart modulo 4096 (4K aliasing, see PERF-NOTES); smaller ones
# are cache-line aligned
PAGE, LINE = 4096, 64


@dataclass
class Buffer:
    """A region of memory: a caller's array, a constant, state, arena bytes or an output."""

    id: int
    kind: str  # input | constant | state | allocated | output | given | scalar
    nbytes: int
    dtype: np.dtype
    offset: int | None = None  # into the arena, for allocated buffers
    values: list[str] = field(default_factory=list)  # the values it holds, in order
    refs: int = 0  # live values on it during planning


@dataclass
class Value:
    """One node's result: its concrete type, its buffer and its live range."""

    name: str
    type: TensorType
    kind: str  # input | state | constant | output | given | allocated | reused | inplace | view | scalar
    buffer: int
    defined: int  # step index (-1 for inputs and constants)
    last_use: int
    base: str | None = None  # the value a view or in-place result shares memory with


@dataclass
class Step:
    """Run `node`'s kernel on the `inputs` values, writing the `output` value.

    A node with several results (a `TupleType`: scan, cond) writes `results` instead:
    per result, the value of the `result` node that reads it (None when none does;
    the kernel then makes that result itself). `output` names the node."""

    index: int
    node: Node
    inputs: tuple[str, ...]
    output: str
    attrs: dict[str, Any]
    frees: tuple[int, ...] = ()  # buffers returned to the free list after this step
    results: tuple[str | None, ...] | None = None
    scratch: int = 0  # bytes the kernel allocates for itself while it runs (OpDef.scratch)

    @property
    def written(self) -> tuple[str, ...]:
        """The values this step writes."""
        if self.results is None:
            return (self.output,)
        return tuple(name for name in self.results if name is not None)


@dataclass
class Plan:
    """A specialized graph's schedule and memory layout for one input signature."""

    graph: Graph
    signature: tuple
    bindings: dict[str, int]
    inputs: list[str]  # data placeholders, in call order
    state: list[str]  # state placeholders (written back by updates)
    constants: list[str]
    steps: list[Step]
    values: dict[str, Value]
    buffers: list[Buffer]
    returns: list[str]  # the value each returned output reads
    updates: dict[str, str]  # state placeholder -> value written back into it
    late_updates: dict[str, str]  # those copied in after the last step
    arena_bytes: int = 0
    nodes: dict[str, Node] = field(default_factory=dict)
    scalar: bool = False  # every value is one element, held as a numpy scalar (scalar.py)
    # given outputs (a body's plan): value -> the output index whose buffer it is in
    given: dict[str, int] | None = None
    # the plans of the bodies of control-flow steps, by step index (backends/numpy/control.py)
    bodies: dict[int, dict[str, Plan]] = field(default_factory=dict)

    @property
    def intermediate_bytes(self) -> int:
        """What the steps' results would take if each had its own array."""
        return sum(
            v.type.nbytes or 0
            for v in self.values.values()
            if v.kind in ("allocated", "reused", "inplace")
        )

    @property
    def output_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers if b.kind == "output")

    @property
    def recycled_bytes(self) -> int:
        """Output arrays large enough to be kept for reuse between calls (recycle.py)."""
        return sum(
            b.nbytes for b in self.buffers if b.kind == "output" and worth_recycling(b.nbytes)
        )

    def __str__(self) -> str:
        from graphc.runtime.explain import format_plan

        return format_plan(self)


def last_uses(graph: Graph, steps_of: dict[Node, int], end: int) -> dict[Node, int]:
    """For each node, the index of the last step reading it (`end` if the call returns it)."""
    last: dict[Node, int] = {}
    for node in reversed(graph.nodes):
        # output nodes may sit anywhere in the order but read at the end: keep the max
        at = end if node.kind == OUTPUT else steps_of.get(node)
        if at is None:
            continue
        for x in node.inputs:
            if last.get(x, -1) < at:
                last[x] = at
    return last


def build_plan(
    graph: Graph,
    spec: Specialized,
    signature: tuple = (),
    updates: dict[str, str] | None = None,
    scalar: bool = False,
    given_outputs: bool = False,
) -> Plan:
    """Plan `graph` (typed by `spec`); `updates` maps state placeholder -> output name.

    With `scalar` (see backends/numpy/scalar.py) no result needs memory between steps: each
    is a numpy scalar ("scalar"), and only returned values get arrays. With
    `given_outputs` (a loop or branch body: backends/numpy/control.py) the caller passes one
    buffer per output, and a returned value is computed straight into the buffer of
    the first output returning it ("given"); other outputs are copied at the end."""
    updates = dict(updates or {})
    update_outputs = set(updates.values())
    # `result` nodes are no steps: each is placed by the step of the node it reads
    order = [n for n in graph.nodes if n.kind == OP and not n.is_constant and n.op != "result"]
    order = schedule(graph, order, updates)
    projections: dict[Node, dict[int, list[Node]]] = {}
    for n in graph.nodes:
        if n.kind == OP and n.op == "result":
            projections.setdefault(n.inputs[0], {}).setdefault(n.attrs["index"], []).append(n)
    steps_of = {n: i for i, n in enumerate(order)}
    end = len(order)
    last = last_uses(graph, steps_of, end)
    outputs = graph.outputs
    returned = [o.inputs[0] for o in outputs if o.name not in update_outputs]
    returned_set = set(returned)
    writes = {graph.node(p): graph.node(o).inputs[0] for p, o in updates.items()}
    state_of = {v: p for p, v in writes.items()}

    buffers: list[Buffer] = []
    values: dict[str, Value] = {}
    buffer_of: dict[Node, Buffer] = {}

    def new_buffer(kind: str, t: TensorType) -> Buffer:
        buffer = Buffer(len(buffers), kind, t.nbytes or 0, t.dtype)
        buffers.append(buffer)
        return buffer

    given: dict[str, int] = {}  # value -> the output whose given buffer it is computed into

    def returned_buffer(node: Node, t: TensorType) -> tuple[str, Buffer]:
        if not given_outputs:
            return "output", new_buffer("output", t)
        given[node.name] = returned.index(node)
        return "given", new_buffer("given", t)

    def place(node: Node, kind: str, buffer: Buffer, at: int, base: Node | None = None) -> None:
        buffer.values.append(node.name)
        buffer.refs += 1
        buffer_of[node] = buffer
        values[node.name] = Value(
            node.name,
            spec.types[node],
            kind,
            buffer.id,
            at,
            last.get(node, at),
            base.name if base is not None else None,
        )

    data_inputs, state_inputs, constants = [], [], []
    for node in graph.nodes:
        if node.kind == PLACEHOLDER:
            kind = "state" if node.name in updates else "input"
            (state_inputs if kind == "state" else data_inputs).append(node.name)
            place(node, kind, new_buffer(kind, spec.types[node]), -1)
        elif node.is_constant:
            constants.append(node.name)
            place(node, "constant", new_buffer("constant", spec.types[node]), -1)

    free = FreeList()
    steps: list[Step] = []
    direct_updates: dict[str, str] = {}
    for i, node in enumerate(order):
        t = spec.types[node]
        opdef = get_op(node.op)  # type: ignore[arg-type]
        target = state_of.get(node)
        base = node.inputs[0] if node.inputs else None
        readers = projections.get(node, {})
        if isinstance(t, TupleType):
            # each result read by a result node gets a buffer here; no result shares
            # memory with an input (the kernel reads its inputs while it writes)
            for nodes in readers.values():
                first = nodes[0]
                if first in returned_set:
                    place(first, *returned_buffer(first, spec.types[first]), i)
                else:
                    reuse = free.take(spec.types[first])
                    if reuse is not None:
                        place(first, "reused", reuse, i)
                    else:
                        place(first, "allocated", new_buffer("allocated", spec.types[first]), i)
                for twin in nodes[1:]:  # another result node for the same result: an alias
                    place(twin, "view", buffer_of[first], i, base=first)
        elif scalar:
            kind = "output" if node in returned_set else "scalar"
            place(node, kind, new_buffer(kind, t), i)
        elif opdef.permutes:
            place(node, "view", buffer_of[base], i, base=base)
        elif node in returned_set:
            place(node, *returned_buffer(node, t), i)
        elif target is not None and _state_is_free(target, node, i, buffer_of, values, spec):
            place(node, "state", buffer_of[target], i, base=target)
            direct_updates[target.name] = node.name
        elif target is None and (
            # a reshape or a slice of a transposed view is computed: numpy would reshape
            # that into a strided view where the strides allow (not C-contiguous, as
            # the reference's reshape is), else into a copy (made once at setup for an
            # arena or state buffer)
            reshape_view(node)
            or node.op == "slice"
            and not permutes(base)  # type: ignore[arg-type]
            and buffer_of[base].kind == "allocated"
            and contiguous_window(spec.types[base].shape, spec.attrs[node]["index"])
        ):
            place(node, "view", buffer_of[base], i, base=base)
        else:
            donor = (
                _inplace_donor(node, i, opdef, buffer_of, values, spec) if target is None else None
            )
            if donor is not None:
                place(node, "inplace", buffer_of[donor], i, base=donor)
            else:
                reuse = free.take(t)
                if reuse is not None:
                    place(node, "reused", reuse, i)
                else:
                    place(node, "allocated", new_buffer("allocated", t), i)
        frees = []
        # in the inputs' order, so the free list (and so the plan) is the same every run
        dying = dict.fromkeys(x for x in node.inputs if last.get(x) == i)
        written = [n for nodes in readers.values() for n in nodes] if readers else [node]
        if isinstance(t, TupleType) and not readers:
            written = []
        dying.update(dict.fromkeys(n for n in written if n not in last))  # nothing reads it
        for x in dying:
            buffer = buffer_of[x]
            buffer.refs -= 1
            if buffer.refs == 0 and buffer.kind == "allocated":
                free.add(buffer)
                frees.append(buffer.id)
        steps.append(
            Step(
                i,
                node,
                tuple(x.name for x in node.inputs),
                node.name,
                spec.attrs[node],
                tuple(frees),
                results=_result_names(t, readers),
                scratch=_scratch(opdef, node, spec),
            )
        )

    plan = Plan(
        graph=graph,
        signature=signature,
        bindings=spec.bindings,
        inputs=data_inputs,
        state=state_inputs,
        constants=constants,
        steps=steps,
        values=values,
        buffers=buffers,
        returns=[n.name for n in returned],
        updates={p.name: v.name for p, v in writes.items()},
        late_updates={p.name: v.name for p, v in writes.items() if p.name not in direct_updates},
        nodes={n.name: n for n in graph.nodes},
        scalar=scalar,
        given=given if given_outputs else None,
    )
    plan.arena_bytes = _lay_out(buffers)
    return plan


def _scratch(opdef: Any, node: Node, spec: Specialized) -> int:
    """The working memory step `node`'s kernel allocates, by its op's scratch rule."""
    t = spec.types[node]
    if opdef.scratch is None:  # a bfloat16 step computed in float32 holds float32 copies
        return float32_copy_bytes(opdef.kernel, t, [spec.types[x] for x in node.inputs])
    if isinstance(t, TupleType):
        return 0
    return opdef.scratch_bytes(t, *(spec.types[x] for x in node.inputs), **spec.attrs[node])


def _result_names(t: Any, readers: dict[int, list[Node]]) -> tuple[str | None, ...] | None:
    """Per result of a tuple-typed step, the value holding it (None if unread)."""
    if not isinstance(t, TupleType):
        return None
    return tuple(readers[k][0].name if k in readers else None for k in range(len(t.items)))


def _state_is_free(
    target: Node,
    node: Node,
    i: int,
    buffer_of: dict[Node, Buffer],
    values: dict[str, Value],
    spec: Specialized,
) -> bool:
    """May step i write its result straight into `target`'s state buffer?"""
    if spec.types[target] != spec.types[node]:
        return False
    buffer = buffer_of[target]
    live = [values[name] for name in buffer.values if values[name].last_use >= i]
    if any(v.last_use > i for v in live):
        return False
    read_here = [v for v in live if v.name in {x.name for x in node.inputs}]
    if not read_here:
        return True
    # reading the old value in the very step that overwrites it is safe only elementwise,
    # or at an input the op reads element for element (gemm's c)
    opdef = get_op(node.op)  # type: ignore[arg-type]
    if not all(v.kind == "state" and v.type == spec.types[node] for v in read_here):
        return False
    if opdef.elementwise and opdef.inplace:
        return True
    names = {v.name for v in read_here}
    return bool(opdef.inplace_inputs) and all(
        k in opdef.inplace_inputs for k, x in enumerate(node.inputs) if x.name in names
    )


def _inplace_donor(
    node: Node,
    i: int,
    opdef: Any,
    buffer_of: dict[Node, Buffer],
    values: dict[str, Value],
    spec: Specialized,
) -> Node | None:
    """An input whose arena buffer step i may overwrite with its result, if any: of
    several, the one written last, whose lines are likeliest still in the cache of the
    core that wrote them (an older one may since have been read by both cores, and each
    line written then first takes the other core's copy away)."""
    elementwise = opdef.elementwise and opdef.inplace
    if not (elementwise or opdef.inplace_inputs):
        return None
    t = spec.types[node]
    donor = None
    for k, x in enumerate(node.inputs):
        v = values[x.name]
        buffer = buffer_of[x]
        # an elementwise op may read its donor at several operands (x * x); another op
        # only at the inputs it names, and nowhere else (a BLAS output is no operand)
        if not elementwise and (
            k not in opdef.inplace_inputs or sum(y is x for y in node.inputs) > 1
        ):
            continue
        if (
            v.last_use == i
            and buffer.kind == "allocated"
            and buffer.refs == 1
            and v.kind != "view"
            and v.type == t
            and (donor is None or v.defined > values[donor.name].defined)
        ):
            donor = x
    return donor


def _fake(shape: tuple) -> np.ndarray | None:
    """A C-contiguous array of `shape` over no memory (WINDOW_BASE, one byte an element,
    so strides and the offset count elements); None for a symbolic shape."""
    if not all(isinstance(d, int) for d in shape):
        return None
    strides = tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))
    return np.lib.stride_tricks.as_strided(WINDOW_BASE, shape, strides)


def window(shape: tuple, index: str) -> np.ndarray | None:
    """`slice`'s window x[index] of a C-contiguous x of `shape`, as a view of no memory
    whose strides and offset count elements (its data address, less that of
    `WINDOW_BASE`, is the offset); None for a symbolic shape or an index out of range."""
    fake = _fake(shape)
    if fake is None:
        return None
    try:
        found = fake[parse_index(index)]
    except IndexError:
        return None
    return found if isinstance(found, np.ndarray) else None


WINDOW_BASE = np.zeros(1, np.uint8)  # the memory `window` pretends to view (one byte an element)


def view_chain(plan: Plan, name: str) -> tuple[str, list[Node]]:
    """The plan value holding `name`'s memory (`name` itself unless it is a view), and
    the view nodes leading from that value to `name`, in order."""
    chain = []
    v = plan.values[name]
    while v.kind == "view" and v.base is not None:
        chain.append(plan.nodes[v.name])
        v = plan.values[v.base]
    return v.name, chain[::-1]


def fake_view(plan: Plan, name: str) -> tuple[str, np.ndarray] | None:
    """(root, view): `view_chain`'s root, and `name` as a view of no memory over it
    (`window`'s kind: strides and the offset count elements); None for a symbolic shape
    or a chain numpy could not follow without copying. The views are those the
    generated code makes (runtime/codegen.py, Generator._view)."""
    root, chain = view_chain(plan, name)
    view = _fake(plan.values[root].type.shape)
    if view is None:
        return None
    for node in chain:
        if node.op == "result":  # a second result node for one result: the same array
            continue
        if node.op == "reshape":
            # the planner makes a reshape a view of C-ordered values only; of any other,
            # numpy would copy, reading memory the fake view does not have
            if not view.flags.c_contiguous:
                return None
            view = view.reshape(tuple(plan.values[node.name].type.shape))
        elif node.op == "slice":  # a C-contiguous window (contiguous_window): a view
            view = view[parse_index(node.attrs["index"])]
        else:
            view = view.transpose(tuple(node.attrs["axes"]))
    return root, view


def contiguous_window(shape: tuple, index: str) -> bool:
    """Whether `slice`'s window x[index] of a C-contiguous x of `shape` is itself
    C-contiguous and not empty (so a view of it has the layout a copy would have)."""
    found = window(shape, index)
    return found is not None and found.size > 0 and found.flags.c_contiguous


class FreeList:
    """Dead arena buffers, for best-fit reuse in O(log s) per operation (s: the distinct
    sizes free at once, per dtype) instead of a scan of every free buffer.

    `take` gives the free buffer of the dtype with the fewest bytes that still holds
    the request, the earliest freed among equal sizes (what a scan of the free buffers
    in order of freeing, keeping the first minimum, gives)."""

    def __init__(self) -> None:
        self._sizes: dict[np.dtype, list[int]] = {}  # sorted distinct sizes with buffers
        self._buffers: dict[tuple[np.dtype, int], deque[Buffer]] = {}

    def add(self, buffer: Buffer) -> None:
        key = (buffer.dtype, buffer.nbytes)
        queue = self._buffers.get(key)
        if queue is None:
            queue = self._buffers[key] = deque()
            insort(self._sizes.setdefault(buffer.dtype, []), buffer.nbytes)
        queue.append(buffer)

    def take(self, t: TensorType) -> Buffer | None:
        """Remove and return the best-fitting free buffer for a value of type `t`."""
        sizes = self._sizes.get(t.dtype)
        if not sizes:
            return None
        at = bisect_left(sizes, t.nbytes or 0)
        if at == len(sizes):
            return None
        key = (t.dtype, sizes[at])
        queue = self._buffers[key]
        buffer = queue.popleft()
        if not queue:
            del self._buffers[key]
            del sizes[at]
        return buffer

    def __len__(self) -> int:
        return sum(len(q) for q in self._buffers.values())


def _lay_out(buffers: list[Buffer]) -> int:
    """Give every arena buffer its own aligned offset; returns the arena's size."""
    offset = 0
    for buffer in buffers:
        if buffer.kind != "allocated":
            continue
        align = PAGE if buffer.nbytes >= PAGE else LINE
        offset = -(-offset // align) * align
        buffer.offset = offset
        offset += buffer.nbytes
    return offset
