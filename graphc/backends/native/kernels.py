"""Lowering an elementwise step (one op, or a `fused` group) to one C kernel and its call.

A kernel computes the step's output element by element over the flattened output: each
operand is FULL (C-contiguous, the output's shape: loaded eight lanes at a time),
SCALAR (one element: loaded once, in every lane), BLOCK (its dims are a run of the
output's, repeated over the dims before and after the run: a bias (N,) over (B, N), a
(B, 1) sum, a per-channel (C, 1, 1) over (N, C, H, W): element (idx / inner) % size),
or STRIDED (any other broadcast: each lane's element found from a descriptor of shape
and strides). BLOCK takes one division per block of lanes for all operands of one
shape, two where its runs wrap (then a contiguous load or a splat when the block does
not wrap), STRIDED a few per lane. Sizes and
strides are arguments, never part of the C source, so a plan at another batch size
reuses the compiled kernel.

A full-size operand that is the transpose of a C-contiguous matrix (a weight gradient
subtracted from its weight: `w - transpose(g)`) is TRANSPOSED: the kernel then walks
the (rows, cols) output in tiles of GC_W x GC_W, copies each tile of the operand into a
small buffer in the output's order (rows of the source are contiguous, so each read
is a cache line), and runs the same block code on each tile row. The elements are
computed by the same code in another order, so the bits are the same; numpy's strided
loop for such a subtraction takes 16x its contiguous time (250 us against 15 us for
256 x 784 float32). Any other transposed view (a conv weight's gradient through a 4-d
transpose) is copied into a buffer of the thread's by copies.py's C first, and read
from there (native/__init__.py, `_kernel_for`).

Blocks of lanes run in parallel under OpenMP when the output is large enough for the
kernel's work to pay for waking the pool (10-20 us with idle threads asleep): at least
`PARALLEL_WORK` / (the kernel's work per element) elements, the work counting each op
by its cost (its native rule's, cexpr.py): a single multiply stays on the calling thread
below about a million elements, where two threads measured slower (a 784 x 256 scale:
16 us alone, 24 us in parallel), a GELU chain goes parallel from about 120,000 (at 1e5
elements one thread took 66-72 us with two, numpy's chunked plan 65). While the pool is warm (a
region ended moments ago and its workers still spin: calls.POOL_CLOCK) a region costs a
microsecond or two, and kernels go parallel from `WARM_WORK` / (work per element)
elements. The last block loads its lanes into zero-padded vectors, so every element is
computed by the same code (see cexpr.py), on one thread or two.

Whole blocks go eight at a time (`INTERLEAVE`, fewer for long groups): each statement of
the block is written for all eight before the next, so the out-of-order core finds
independent work beside a long dependent chain (GELU at 1e6 on one core: 208 -> 164 us).
The elements' operations are the same, so are the bits. Kernels that may call a function
(libmvec, a BLOCK operand's lane-by-lane path) go a block at a time: the callee may
clobber every vector register, and eight blocks' live values would be spilled. For the
same reason a kernel that calls libmvec computes its block in stages, each ending with
a call (`_stages`): every other statement waits for the stage of its first reader, each
stage loads the leaves it reads, and a scalar leaf is splat where it is read, so that
little is held in a register across a call.

A kernel of more than `SEGMENT_OPS` ops (too long to interleave) computes a block of
lanes by calls to segment functions of at most SEGMENT_OPS ops each, kept out of line:
gcc's time on one function grows faster than the function (a chain of 1,000 ops took
17-21 s to build unsegmented, one of 5,000 did not build in 300 s). The block loads the
array operands and passes their values as vector arguments (a scalar operand as its
address: the segment splats it); values made in one segment and read in a later one
come back through pointers. Identical segments (a repeated chain's) are one function.
Each op is the same C on the same operands, so the bits are the same.

An operand that is a column block of a wider C-contiguous array (a gate of an LSTM's
(B, 4H) pre-activation, which the planner would copy out by a slice step) may be
PITCHED: the kernel reads the wide array in place, element i of the block at
o + (i / w) * p + i % w (offset, width, pitch in elements, all arguments). The width
is a multiple of 16, so every block of lanes lies in one row and loads as a vector.
The native backend decides which slices to read so (`__init__.py`, `lower_slice`).

A step is declined (None: numpy's lowering runs it) when an op has no emitter here, a
value is not float32, float64 or bool, or pow's exponent is not a constant 2 or 3.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from graphc.backends.native.cexpr import (
    AS_IS,
    CONDITION,
    CTYPE,
    INT64_OPS,
    LOGICAL,
    RESULT,
    Call,
    DeclinedError,
    convert,
    native_rule,
)
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType

FULL, SCALAR, BLOCK, STRIDED, TRANSPOSED = "full", "scalar", "block", "strided", "transposed"
PITCHED = "pitched"
CTYPE_NAME = {"f32": "float", "f64": "double", "b": "uint8_t", "i64": "int64_t"}


@dataclass
class Operand:
    mode: str
    ctype: str
    ndim: int = 0


@dataclass
class Kernel:
    """One kernel's C text (named by its hash) and its operands."""

    name: str
    source: str
    operands: list[Operand]
    ops: list[str] = field(default_factory=list)
    params: str = ""  # after the count: 'p' an address, 'i' an int64, in order
    # returns an int64, nonzero when it could not allocate its scratch memory (the call
    # is then checked: calls.checked); else returns nothing
    status: bool = False
    # a kernel whose call reads only its other arguments' memory and writes only the
    # buffer of this argument (counted after the count), a buffer of its own that no other
    # call writes: a weight's packing. A loop in C makes such a call once, before its
    # steps, when what it reads is the same at every step (loops.py)
    writes_only: int | None = None
    # a status kernel whose nonzero status is the op's own error, not a failed
    # allocation: called with the failing call's arguments (the count first, addresses as
    # ints) when a tape's call fails (loops.Tape.failed), it raises that error
    failure: Callable[[list[int]], None] | None = None
    # `failure` finishes the call's work instead (it returns): a tape that can go on
    # from the next call (an entry's, entry.py) records such a call, a loop's does not
    repairs: bool = False


def epilogue_body(out: TensorType, bias: TensorType | None, activation: str | None) -> Graph:
    """The body of a matmul's or convolution's epilogue: its result (placeholder 0), plus
    the bias (placeholder 1) when there is one, then the activation."""
    body = Graph("epilogue")
    value = body.add_placeholder("y", out)
    if bias is not None:
        b = body.add_placeholder("b", bias)
        value = body.add_op("add", (value, b), {}, get_op("add").infer(out, bias))
    if activation is not None:
        value = body.add_op(activation, (value,), {}, get_op(activation).infer(value.type))
    body.add_output(value, name="result")
    return body


def build_kernel(
    body: Graph,
    leaf_types: list[TensorType],
    out_type: TensorType,
    leaf_values: dict[int, np.ndarray],
    transposed: set[int] = frozenset(),  # type: ignore[assignment]
    pitched: set[int] = frozenset(),  # type: ignore[assignment]
) -> Kernel:
    """The kernel computing `body` (placeholders then constants are the leaves, in the
    order of `leaf_types`); `leaf_values` holds the known values of constant leaves;
    leaves in `transposed` are transposed views (declined unless one element); leaves in
    `pitched` are read as column blocks of a wider array (PITCHED)."""
    out_ctype = ctype_of(out_type)
    leaves = body.inputs + [n for n in body.nodes if n.is_constant]
    operands = [_operand(t, out_type, k in transposed) for k, t in enumerate(leaf_types)]
    for k, leaf in enumerate(leaves):
        # a known constant whose elements are all one value (a (B, 1) fill of -1/B that
        # folding materialized at a small batch) is that value: SCALAR, so the kernel's
        # text does not depend on whether the batch was small enough to fold
        value = _known(leaf, leaves, leaf_values)
        if k not in transposed and k not in pitched and _uniform(value):
            operands[k] = Operand(SCALAR, operands[k].ctype)
    for k in pitched:
        if operands[k].mode != FULL:
            raise DeclinedError("a column block read in place must have the output's shape")
        operands[k] = Operand(PITCHED, operands[k].ctype)
    members = [n for n in body.nodes if n.kind == OP and not n.is_constant]
    root = body.outputs[0].inputs[0]
    calls = any(_calls(node) for node in members)  # does the kernel call libmvec?
    # a kernel that calls never interleaves, so it is segmented when longer than
    # SEGMENT_OPS (below); shorter, it computes its block in stages, each ending with a
    # call (`_stages`), and loads each leaf in every stage that reads it
    stage = _stages(members, root) if calls and len(members) <= SEGMENT_OPS else {}
    placed: dict[tuple, int] = {}  # a BLOCK shape -> the operand whose z, y place it
    for k in range(len(leaves)):
        if operands[k].mode == BLOCK:
            placed.setdefault(tuple(leaf_types[k].shape), k)

    def load(k: int, suffix: str) -> list[str]:
        """The C lines loading the block's lanes of array leaf k into x{k}{suffix}`."""
        ct, mode, v = operands[k].ctype, operands[k].mode, f"x{k}{suffix}`"
        if mode == FULL:
            return [f"    v{ct} {v} = ld_{ct}(a{k}, i`, m);"]
        if mode == BLOCK:
            j = placed[tuple(leaf_types[k].shape)]
            r, w = f"r{j}{suffix}`", f"w{j}{suffix}`"
            return [
                f"    int64_t {r}, {w}; bk_at(z{j}, y{j}, i`, &{r}, &{w});",
                f"    v{ct} {v} = bk_{ct}(a{k}, z{j}, y{j}, {r}, {w}, m);",
            ]
        if mode == PITCHED:  # whole blocks lie in one row: w{k} % GC_W == 0
            return [f"    v{ct} {v} = ld_{ct}(a{k}, o{k} + (i` / w{k}) * p{k} + i` % w{k}, m);"]
        if mode == TRANSPOSED:  # a{k} is the row of this block in its tile
            return [f"    v{ct} {v} = ld_{ct}(a{k}, 0, m);"]
        return [f"    v{ct} {v} = gd_{ct}(a{k}, d{k}, {operands[k].ndim}, i`, m);"]

    expr: dict[Node, tuple[str, str]] = {}  # node -> (C variable, C type)
    loads: list[str] = []
    scalars = []
    for k, (node, operand) in enumerate(zip(leaves, operands)):
        ct = operand.ctype
        if operand.mode == SCALAR and calls:
            expr[node] = (_splat_from(ct, f"a{k}"), ct)  # splat where read: see _stages
        elif operand.mode == SCALAR:
            scalars.append(f"v{ct} s{k}")
            expr[node] = (f"s{k}", ct)
        else:
            if not stage:  # (a kernel in stages loads its leaves per stage, below)
                loads += [line for line in load(k, "") if line not in loads]  # bk_at once a shape
            expr[node] = (f"x{k}`", ct)
    number = {node: k for k, node in enumerate(leaves)}
    types = {node: t for node, t in zip(leaves, leaf_types)}
    lines, ops = [], []
    staged: dict[int, tuple[list[str], list[str]]] = {}  # a stage's loads, statements
    for j, node in enumerate(members):
        opdef = get_op(node.op)  # type: ignore[arg-type]
        t = opdef.infer(*(types[x] for x in node.inputs), **node.attrs)
        types[node] = t
        ct = ctype_of(t)
        args = [expr[x] for x in node.inputs]
        if stage:
            p = stage[node]
            stage_loads, _ = staged.setdefault(p, ([], []))
            for a, x in enumerate(node.inputs):
                k = number.get(x)
                if k is not None and operands[k].mode != SCALAR:
                    args[a] = (f"x{k}_{p}`", operands[k].ctype)
                    stage_loads += [c for c in load(k, f"_{p}") if c not in stage_loads]
        value = _emit(
            node,
            args,
            [types[x] for x in node.inputs],
            t,
            [_known(x, leaves, leaf_values) for x in node.inputs],
        )
        (staged[stage[node]][1] if stage else lines).append(f"    v{ct} t{j}` = {value};")
        expr[node] = (f"t{j}`", ct)
        ops.append(node.op)  # type: ignore[arg-type]
    root_expr, root_ct = expr[root]
    if root_ct != out_ctype:
        raise DeclinedError(f"the group's result is {root_ct}, its buffer {out_ctype}")
    # kernels that may call a function go a block at a time: every vector register is
    # the callee's to clobber, and eight blocks' values live across a call are
    # spilled (libmvec: an LSTM's gates 2.30 -> 2.48 ms; a BLOCK operand's lane by
    # lane path: a bias add over (64, 32, 128) 31 -> 58 us)
    inline = all(o.mode in (FULL, SCALAR, PITCHED) for o in operands)
    together = interleave(ops) if inline and not calls else 1
    # a long kernel's block calls segment functions; a kernel that interleaves blocks is
    # short enough already (INTERLEAVE_WORK bounds its copies) and keeps its C
    segmented = len(members) > SEGMENT_OPS and together == 1 and root in members
    if segmented:

        def statement(node: Node, args: list[tuple[str, str]]) -> str:
            return _emit(
                node,
                args,
                [types[x] for x in node.inputs],
                types[node],
                [_known(x, leaves, leaf_values) for x in node.inputs],
            )

        # the segments splat their SCALAR operands from the addresses: a long group's
        # constants passed down as vectors through the entry and the block made those the
        # slowest functions of the source to build (167 constants: 0.65 s of 1.5 s)
        pointers = {
            node: f"a{k}" for k, (node, o) in enumerate(zip(leaves, operands)) if o.mode == SCALAR
        }
        segments, lines = _segments(members, expr, root, statement, pointers)
        scalars = []  # the entry splats none
    params = ["char *out"]
    args = ["out"]
    for k, operand in enumerate(operands):
        params.append(f"const char *a{k}")
        args.append(f"a{k}")
        if operand.mode == STRIDED:
            params.append(f"const int64_t *d{k}")
            args.append(f"d{k}")
        elif operand.mode == BLOCK:
            params += [f"int64_t z{k}", f"int64_t y{k}"]
            args += [f"z{k}", f"y{k}"]
        elif operand.mode == PITCHED:
            params += [f"int64_t o{k}", f"int64_t w{k}", f"int64_t p{k}"]
            args += [f"o{k}", f"w{k}", f"p{k}"]
    block_params = ["int64_t i", "int64_t m", *params, *scalars]
    block_args = [*args, *(s.split()[1] for s in scalars)]
    init = [
        f"    v{o.ctype} s{k} = {_splat_from(o.ctype, f'a{k}')};"
        for k, o in enumerate(operands)
        if o.mode == SCALAR and not segmented and not calls
    ]
    store = f"    st_{out_ctype}(out, i`, m, {root_expr});"
    if stage:
        body_lines = [*(c for p in sorted(staged) for part in staged[p] for c in part), store]
    else:
        body_lines = [*loads, *lines, store]
    if segmented:
        block = [*segments, *_segmented_block(block_params, block_args, body_lines)]
    else:
        block = [
            "GC_INLINE void NAME_block(" + ", ".join(block_params) + ") {",
            *(line.replace("`", "") for line in body_lines),
            "}",
        ]
    tiled = [k for k, o in enumerate(operands) if o.mode == TRANSPOSED]
    par = f"gc_parallel(n, {parallel_min(ops)}, {warm_min(ops)})"
    if tiled:
        main = _tiled_main(params, init, block_args, tiled, operands, par)
    else:
        if together > 1:
            block += _interleaved(block_params, body_lines, together)
        main = _main(params, init, block_args, par, together)
    text = "\n".join(block + main)
    name = "gk_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    kinds = ("ii" if tiled else "") + "".join(
        "i" if p.startswith("int64_t") else "p" for p in params
    )
    return Kernel(name, text.replace("NAME", name) + "\n", operands, ops, kinds)


# gcc's time on one C function grows faster than the function's length (a fused chain of
# 1,000 ops as one function, not inlined: 4.5 s at -O3; of 5,000 ops, not built in 300
# s), so the block of a longer kernel is a sequence of calls to segment functions of at
# most SEGMENT_OPS ops each, and its build time grows with the number of ops, not faster.
# Measured (the compiler's CPU time, min of 3): a random DAG of 1,000 float32 and float64
# ops with comparisons and where, 6.1-7.6 s with segments of 12 to 100 ops, 8.7-10 s with
# 160 or 200; a random float32 chain of 1,000 ops, 0.8-1.2 s with segments of 25 to 400
# ops, 8 s as one function. Kernels that interleave (under 160 ops) are never segmented.
SEGMENT_OPS = 100


def _segments(
    members: list[Node],
    expr: dict[Node, tuple[str, str]],
    root: Node,
    statement: Callable[[Node, list[tuple[str, str]]], str],
    pointers: dict[Node, str],
) -> tuple[list[str], list[str]]:
    """The segment functions of a long kernel, each distinct text once, and the lines of
    its block that call them in order. `members` are the kernel's ops in topological
    order, `expr` the C names and types of its leaves and members, `statement` a node's
    C expression from its operands' names and types, `pointers` the address of each
    SCALAR leaf.

    A segment is SEGMENT_OPS consecutive members. Its operands from outside come in as
    arguments, in the order of their first use: a leaf the block loaded, or a value of an
    earlier segment, as a vector; a SCALAR leaf as its address (splat in the segment as
    the kernel's entry splats it). The values that later segments or the store read go
    out through pointers, in the order they are made. Its temporaries are numbered from
    0, so its text does not depend on where it stands, and it is named by that text's
    hash: the segments of a repeated chain are one function. Each op is the same C on
    the same operands as in the unsegmented block, and a value passed to a function or
    through memory keeps its bits, so the results are the same bits."""
    groups = [members[k : k + SEGMENT_OPS] for k in range(0, len(members), SEGMENT_OPS)]
    made_in = {node: g for g, group in enumerate(groups) for node in group}
    read_later = {root}  # values a later segment or the store reads
    for g, group in enumerate(groups):
        read_later.update(x for node in group for x in node.inputs if made_in.get(x, g) < g)
    functions: dict[str, list[str]] = {}  # by name: each distinct segment once
    calls = []
    for g, group in enumerate(groups):
        live_in = list(dict.fromkeys(x for n in group for x in n.inputs if made_in.get(x) != g))
        live_out = [node for node in group if node in read_later]
        params, lines = [], []
        local: dict[Node, tuple[str, str]] = {}  # node -> (C name in the segment, C type)
        for k, x in enumerate(live_in):
            ct = expr[x][1]
            if x in pointers:
                params.append(f"const char *p{k}")
                lines.append(f"    v{ct} u{k} = {_splat_from(ct, f'p{k}')};")
                local[x] = (f"u{k}", ct)
            else:
                params.append(f"v{ct} p{k}")
                local[x] = (f"p{k}", ct)
        params += [f"v{expr[node][1]} *q{k}" for k, node in enumerate(live_out)]
        for j, node in enumerate(group):
            ct = expr[node][1]
            lines.append(f"    v{ct} t{j} = {statement(node, [local[x] for x in node.inputs])};")
            local[node] = (f"t{j}", ct)
        lines += [f"    *q{k} = {local[node][0]};" for k, node in enumerate(live_out)]
        signature = "(" + ", ".join(params) + ") {"
        digest = hashlib.sha256("\n".join([signature, *lines]).encode()).hexdigest()[:16]
        name = f"NAME_s{digest}"
        functions.setdefault(name, [f"{NOINLINE} {name}{signature}", *lines, "}"])
        # the block names a member's value as the unsegmented block would, t{j}
        outs = [expr[node][0].replace("`", "") for node in live_out]
        args = [pointers.get(x) or expr[x][0].replace("`", "") for x in live_in]
        calls += [f"    v{expr[node][1]} {v};" for node, v in zip(live_out, outs)]
        calls.append(f"    {name}(" + ", ".join([*args, *(f"&{v}" for v in outs)]) + ");")
    return [line for text in functions.values() for line in text], calls


def _segmented_block(
    block_params: list[str], block_args: list[str], body_lines: list[str]
) -> list[str]:
    """NAME_block of a segmented kernel. NAME_calls, its loads, segment calls and store,
    is inlined twice: for a whole block, with a literal lane count so that the loads and
    stores are vectors, and for the partial last one. NAME_block itself is not inlined:
    the kernel's entry calls it in three places (four when tiled), and with three copies
    of the calls the entry of a random DAG of 1,000 ops (its segments pass 30 to 50
    values each) took 0.75 s to build, 0.15 s with one."""
    whole = ", ".join(["i", "GC_W", *block_args])
    partial = ", ".join(["i", "m", *block_args])
    return [
        "GC_INLINE void NAME_calls(" + ", ".join(block_params) + ") {",
        *(line.replace("`", "") for line in body_lines),
        "}",
        f"{NOINLINE} NAME_block(" + ", ".join(block_params) + ") {",
        "    if (m == GC_W)",
        f"        NAME_calls({whole});",
        "    else",
        f"        NAME_calls({partial});",
        "}",
    ]


def _stages(members: list[Node], root: Node) -> dict[Node, int]:
    """The stage of each member of a kernel that calls libmvec, in the block's order:
    stage p ends with the p-th member whose C calls, and every other member goes in the
    stage of its first reader (the root in the last). Every vector register is the
    callee's to clobber, so a value made before a call and read after it is spilled and
    reloaded around it; gcc keeps loads and arithmetic on the side of a call where the
    source puts them. So each stage loads the leaves it reads (one load, where a value
    held across the call costs a store and a load), and a scalar leaf is splat where it
    is read. A splat made once and spilled
    around every call halved the speed of cross-entropy's gradient, where(one_hot, c, 0)
    - exp(y) * s over 4096 x 1000 float32: on one thread 2.69 ms against 1.43 for exp(y)
    alone, 1.71 with the splat and the mask's load after the call. The statements are
    the same, in an order that keeps every dependence: the same bits."""
    callers = [node for node in members if _calls(node)]
    stage = {node: p for p, node in enumerate(callers)}
    last = stage.get(root, len(callers))
    readers: dict[Node, list[Node]] = {}
    for node in members:
        for x in node.inputs:
            readers.setdefault(x, []).append(node)
    for node in reversed(members):  # readers are staged before what they read
        if node not in stage:
            stage[node] = min((stage[r] for r in readers.get(node, [])), default=last)
    return stage


def _calls(node: Node) -> bool:
    """Whether the C of member `node` calls libmvec out of line."""
    rule = native_rule(node.op)  # type: ignore[arg-type]
    return rule is not None and CTYPE.get(np.dtype(node.type.dtype)) in rule.calls


def _splat_from(ct: str, pointer: str) -> str:
    """The C of a vector holding, in every lane, the element of C type `ct` at `pointer`."""
    load = {
        "f32": "*(const float *)",
        "f64": "*(const double *)",
        "b": "0 != *(const uint8_t *)",
        "i64": "*(const int64_t *)",
    }
    return f"sp_{ct}({load[ct]}{pointer})"


# a function a long kernel keeps out of line, so that no function of it grows with the
# kernel's length
NOINLINE = "static __attribute__((noinline)) void"


# whole blocks of lanes computed together, statement by statement: a long dependent chain
# (a GELU's cube and tanh) leaves the out-of-order core idle unless the next blocks'
# independent chains stand beside it in the program (GELU at 1e6 on one core: 208 us a
# block at a time, 180 us four at a time, 164 us eight at a time). The C grows with the
# copies, and gcc's time faster than that: a group of 300 ops took 0.8 s to build alone
# and 10 s eight times over, so the copies of a kernel's work stay within INTERLEAVE_WORK
# (a GELU's work, 33, eight times; a group longer than that has chains of its own).
INTERLEAVE = 8
INTERLEAVE_WORK = 320


def interleave(ops: list[str]) -> int:
    """How many blocks of lanes a kernel of `ops` computes together: a power of two, at
    most INTERLEAVE, whose copies of the kernel's work stay within INTERLEAVE_WORK."""
    together = INTERLEAVE
    while together > 1 and together * work(ops) > INTERLEAVE_WORK:
        together //= 2
    return together


def _interleaved(block_params: list[str], body_lines: list[str], together: int) -> list[str]:
    """NAME_blocks: `together` whole blocks of lanes from element i, each statement of
    the block written for every block before the next statement. Every element is
    computed by the same operations as in NAME_block, so the bits are the same."""
    params = [p for p in block_params if p != "int64_t m"]
    offsets = ", ".join(f"i_{u} = i + {u} * GC_W" for u in range(together))
    lines = ["    const int64_t m = GC_W;", f"    const int64_t {offsets};"]
    for line in body_lines:
        lines += [line.replace("`", f"_{u}") for u in range(together)]
    return ["GC_INLINE void NAME_blocks(" + ", ".join(params) + ") {", *lines, "}"]


def _main(
    params: list[str], init: list[str], block_args: list[str], par: str, together: int
) -> list[str]:
    """The kernel's entry over the flattened output: `together` blocks of lanes at a
    time by NAME_blocks (NAME_block when 1), the blocks left over and the partial last
    block by NAME_block."""
    if together == 1:
        loop = parallel_for(
            par,
            "for (int64_t b = 0; b < nb; b++)",
            ["    NAME_block(" + ", ".join(["GC_W * b", "GC_W", *block_args]) + ");"],
        )
    else:
        loop = parallel_for(
            par,
            f"for (int64_t b = 0; b < nb / {together}; b++)",
            ["    NAME_blocks(" + ", ".join([f"GC_W * {together} * b", *block_args]) + ");"],
        )
        loop += [
            f"    for (int64_t b = nb - nb % {together}; b < nb; b++)",
            "        NAME_block(" + ", ".join(["GC_W * b", "GC_W", *block_args]) + ");",
        ]
    return [
        "GC_EXPORT void NAME(" + ", ".join(["int64_t n", *params]) + ") {",
        *init,
        "    int64_t nb = n / GC_W;",
        *loop,
        "    if (n % GC_W)",
        "        NAME_block(" + ", ".join(["GC_W * nb", "n % GC_W", *block_args]) + ");",
        "}",
    ]


# a kernel's work per element: one for its loads and stores, plus each op's cost (its
# native rule's: about its time relative to an add)
PARALLEL_WORK = 1 << 22  # elements x work per element from which two threads pay off
PARALLEL_MIN = 1 << 15
# the same while the pool is warm (its workers still spin after a region: calls.POOL_CLOCK):
# a multiply-subtract of 2**17 elements took 17.8 us on one thread, 8.6 on two. 2**16
# on an AVX2 machine of two cores (interleaved medians, 2026-12-04): the ONNX LSTM at
# batch 64 5.25 -> 4.49 ms (its 64 x 512 gate sum and 64 x 128 tanh and product a
# step), the MLP step at batch 32 619 -> 575 us, at 512 4.46 -> 4.42 ms; the GRU, the
# RNN at batch 32, cross-entropy 512x10, GELU 1e5 and the CNN the same
WARM_WORK = 1 << 16
# the fewest elements for which a warm pool is entered: a kernel of costly ops (a GRU's
# gates, two sigmoids and a tanh an element) is worth two threads from a few thousand
# elements while the workers spin (the ONNX GRU at batch 64, 64 x 128 gates a step
# after each step's product, interleaved medians on an AVX2 machine of two cores:
# 5.05 -> 3.73 ms a call with 2**12 instead of PARALLEL_MIN; the LSTM 5.86 -> 5.54 ms)
WARM_MIN = 1 << 12


def work(ops: list[str]) -> int:
    """A kernel's work per element: its loads and stores, and its ops by their cost."""
    return 1 + sum(native_rule(op).cost for op in ops)  # type: ignore[union-attr]


def parallel_min(ops: list[str]) -> int:
    """The fewest output elements for which a kernel of `ops` runs in parallel."""
    return max(PARALLEL_MIN, PARALLEL_WORK // work(ops))


def warm_min(ops: list[str]) -> int:
    """The fewest output elements for which a kernel of `ops` runs in parallel while
    the pool is warm."""
    return max(WARM_MIN, WARM_WORK // work(ops))


def parallel_flag(work: int, cold: int, warm: int) -> int:
    """The `parallel` argument of a kernel whose C decides by `gc_parallel_flag`, for
    this much work: 1 on the pool (from `cold`), 2 there while it is warm (from `warm`),
    0 on the calling thread."""
    return 1 if work >= cold else 2 if work >= warm else 0


def _tiled_main(
    params: list[str],
    init: list[str],
    block_args: list[str],
    tiled: list[int],
    operands: list[Operand],
    par: str,
) -> list[str]:
    """The kernel's entry walking a (rows, cols) output in GC_W x GC_W tiles, each
    TRANSPOSED operand's tile copied into a buffer in the output's order first."""
    args = list(block_args)
    buffers, fills = [], []
    for k in tiled:
        c_type = CTYPE_NAME[operands[k].ctype]
        buffers.append(f"        {c_type} tile{k}[GC_W][GC_W];")
        scalar_fill = [
            "for (int64_t c = 0; c < m; c++) {",
            f"    const {c_type} *src = (const {c_type} *)a{k} + (tj + c) * rows + ti;",
            f"    for (int64_t r = 0; r < tr; r++) tile{k}[r][c] = src[r];",
            "}",
        ]
        if operands[k].ctype == "f32":  # whole tiles: 8 x 8 blocks transposed in registers
            fills += [
                "            if (m == GC_W && tr == GC_W) {",
                "                for (int bc = 0; bc < GC_W; bc += 8)",
                "                    for (int br = 0; br < GC_W; br += 8)",
                f"                        tr8_f32((const float *)a{k} + (tj + bc) * rows + ti + br, rows, &tile{k}[br][bc], GC_W);",
                "            } else {",
                *("                " + line for line in scalar_fill),
                "            }",
            ]
        else:
            fills += ["            " + line for line in scalar_fill]
        args[args.index(f"a{k}")] = f"(const char *)tile{k}[r]"
    return [
        "GC_EXPORT void NAME("
        + ", ".join(["int64_t n", "int64_t rows", "int64_t cols", *params])
        + ") {",
        *init,
        *parallel_for(
            par,
            "for (int64_t ti = 0; ti < rows; ti += GC_W) {",
            [
                *(line[4:] for line in buffers),
                "    int64_t tr = rows - ti < GC_W ? rows - ti : GC_W;",
                "    for (int64_t tj = 0; tj < cols; tj += GC_W) {",
                "        int64_t m = cols - tj < GC_W ? cols - tj : GC_W;",
                *(line[4:] for line in fills),
                # a literal lane count for whole blocks, so their loads and stores are vectors
                "        for (int64_t r = 0; r < tr; r++) {",
                "            if (m == GC_W)",
                "                NAME_block("
                + ", ".join(["(ti + r) * cols + tj", "GC_W", *args])
                + ");",
                "            else",
                "                NAME_block("
                + ", ".join(["(ti + r) * cols + tj", "m", *args])
                + ");",
                "        }",
                "    }",
                "}",
            ],
        ),
        "}",
    ]


def parallel_for(condition: str, loop: str, body: list[str]) -> list[str]:
    """C lines running `loop` (a for statement) over `body` on the OpenMP pool when
    `condition` holds, else on the calling thread without entering OpenMP at all: an
    `if` clause still sets up a team of one, which measured 0.5 us a call."""
    return [
        f"    if ({condition}) {{",
        "        #pragma omp parallel for schedule(static)",
        f"        {loop}",
        *("        " + line for line in body),
        "        gc_pool_used();",
        "    } else {",
        f"        {loop}",
        *("        " + line for line in body),
        "    }",
    ]


def ctype_of(t: TensorType) -> str:
    ct = CTYPE.get(np.dtype(t.dtype))
    if ct is None:
        raise DeclinedError(f"no native kernels for {t.dtype}")
    return ct


def _operand(t: TensorType, out: TensorType, transposed: bool) -> Operand:
    ct = ctype_of(t)
    if t.size == 1:
        return Operand(SCALAR, ct)
    if transposed:
        if t.shape == out.shape and out.rank == 2:
            return Operand(TRANSPOSED, ct)
        raise DeclinedError("an operand is a transposed view (numpy's strided loops are faster)")
    if t.shape == out.shape:
        return Operand(FULL, ct)
    return Operand(broadcast_mode(t.shape, out.shape), ct, out.rank)


def broadcast_mode(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> str:
    """BLOCK or STRIDED for an operand of `shape` broadcast to `out_shape`."""
    return BLOCK if block_of(shape, out_shape) is not None else STRIDED


def block_of(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(inner, size) when the operand's dims other than 1 are a run of the output's dims
    (its element for output index idx is then (idx / inner) % size), else None."""
    padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    kept = [k for k, d in enumerate(padded) if d != 1]
    if not kept:
        return None
    first, last = kept[0], kept[-1]
    if padded[first : last + 1] != tuple(out_shape[first : last + 1]):
        return None
    # math.prod: a chunk epilogue asks on every call (np.prod took 1.5 us a call)
    return int(math.prod(out_shape[last + 1 :])), int(math.prod(padded[first : last + 1]))


def _uniform(value: np.ndarray | None) -> bool:
    """Is `value` a non-empty array whose elements all have the same bits?"""
    if value is None or value.size == 0:
        return False
    bits = np.ascontiguousarray(value).view(np.uint8).reshape(value.size, -1)
    return bool((bits == bits[0]).all())


def _known(x: Node, leaves: list[Node], values: dict[int, np.ndarray]) -> np.ndarray | None:
    if x.is_constant:
        return np.asarray(x.value)
    if x in leaves and leaves.index(x) in values:
        return values[leaves.index(x)]
    return None


def _emit(
    node: Node,
    args: list[tuple[str, str]],
    types: list[TensorType],
    out: TensorType,
    known: list[np.ndarray | None],
) -> str:
    """The C expression of `node`'s result, by its op's native rule (cexpr.NATIVE_OPS)."""
    op = node.op
    out_ct = ctype_of(out)
    opdef = get_op(op)  # type: ignore[arg-type]
    rule = opdef.rules.get("native")
    if rule is None:
        raise DeclinedError(f"no native kernel for '{op}'")
    ct = out_ct
    if opdef.has("comparison"):  # in the operands' common type, as the property says
        ct = ctype_of(TensorType((), np.promote_types(types[0].dtype, types[1].dtype)))
    elif rule.operands == LOGICAL:
        ct = "b"
    elif rule.operands == RESULT:
        if node.attrs:
            raise DeclinedError(f"no native kernel for '{op}' with attrs")
        if out_ct == "b":
            raise DeclinedError(f"'{op}' on bools")
    if "i64" in (ct, *(c for _, c in args if rule.operands == AS_IS)) and op not in INT64_OPS:
        raise DeclinedError(f"no native kernel for '{op}' in int64")
    if rule.operands == AS_IS:
        exprs = [e for e, _ in args]
    elif rule.operands == CONDITION:  # a bool condition, then the branches
        exprs = [args[0][0], *(convert(e, c, ct) for e, c in args[1:])]
    else:
        exprs = [convert(e, c, ct) for e, c in args]
    return rule.emit(Call(exprs, ct, node.attrs, [c for _, c in args], out, known))


def contiguous_descriptor(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    """The descriptor of a C-contiguous array of `shape` broadcast to `out_shape`."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    strides.reverse()
    pad = len(out_shape) - len(shape)
    aligned = [0] * pad + [0 if d == 1 else s for d, s in zip(shape, strides)]
    return np.array([*out_shape, *aligned], dtype=np.int64)
