"""Code for fused nodes: elementwise groups in cache-sized chunks, matmul epilogues in place.

A `fused` node's body runs its member kernels one chunk of the output at a time,
so every intermediate lives in a small scratch buffer that stays in cache (PERF-NOTES:
chunks beat whole-array passes once arrays leave the cache). Operands are sliced
along the flattened output when each is either full-size or a single element, else
along the output's leading axis (operands that broadcast along it are passed whole).
Inside a chunk the body is planned like a small plan (`BodySlots`, shared with
conv2d_fused's kernel): a scratch buffer is reused in place by an elementwise member
whose input dies there, else taken from the dead scratch of the same type. Scratch
belongs to one thread's instantiation.

Invariant: the result chunk [lo, hi) is written only by the body's last member,
after every read of the operands' chunk [lo, hi), so the output may share memory
with a full-size operand.
"""

from __future__ import annotations

import numpy as np

from graphc.backends.numpy.nodes.fused import BodySlots
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.runtime.backend import register_lowering
from graphc.runtime.codegen import Generator, shown
from graphc.runtime.plan import Step, view_chain

# elements per chunk: measured with the GELU chain on float32 (tools/chunk_sweep.py)
CHUNK = 65536


@register_lowering("fused")
def lower_fused(gen: Generator, step: Step, out: str) -> list[str]:
    body: Graph = step.attrs["body"]
    out_t = gen.plan.values[step.output].type
    root = body.outputs[0].inputs[0]
    if root.kind != OP or root.is_constant or not _all_elementwise(body):
        return _generic(gen, step, out)
    leaves: list[tuple[Node, str, TensorType]] = [
        (p, gen.array(x), gen.plan.values[x].type) for p, x in zip(body.inputs, step.inputs)
    ]
    # operands whose arrays exist before the call (arena, state, constants): views of
    # them are made once, in the per-thread setup, not on every call
    static = {p for p, x in zip(body.inputs, step.inputs) if x in gen.static}
    for node in body.nodes:
        if node.is_constant:
            leaves.append(
                (node, gen.const(node.value, f"{step.output}_c"), TensorType.of(node.value))
            )
            static.add(node)
    n = out_t.size or 0
    lines = [f"# fused {shown(step.output)}: {_members(body)} over {n} elements"]
    flat = all(t.shape == out_t.shape or t.size == 1 for _, _, t in leaves)
    # flattening a transposed view would copy it on every call: keep its shape instead
    flat = flat and not any(transposed_view(gen, x) for x in step.inputs)
    if flat and out_t.rank != 1:
        out_view = gen.fresh(f"{step.output}_flat")
        where = gen.setup_lines if step.output in gen.static else lines
        where.append(f"{out_view} = {out}.reshape(-1)")
        out, out_t = out_view, TensorType((n,), out_t.dtype)
        reshaped = []
        for node, expr, t in leaves:
            name = gen.fresh(f"{step.output}_{node.name}")
            shape = (n,) if t.shape != () and t.size == n and n != 1 else ()
            where = gen.setup_lines if node in static else lines
            where.append(f"{name} = {expr}.reshape({shape!r})")
            reshaped.append((node, name, TensorType(shape, t.dtype)))
        leaves = reshaped
    rows = out_t.shape[0] if out_t.rank else 1
    per_row = n // rows if rows else 0
    chunk_rows = max(1, CHUNK // per_row) if per_row else rows
    sliced = [
        out_t.rank > 0 and t.rank == out_t.rank and t.shape[0] == rows and rows > 1
        for _, _, t in leaves
    ]
    if n <= CHUNK or chunk_rows >= rows or not any(sliced):
        env = {node: expr for node, expr, _ in leaves}
        types = {node: t for node, _, t in leaves}
        return lines + _chunk(gen, body, env, types, out, step.output)
    full_end = rows - rows % chunk_rows
    lines.append(f"for lo in range(0, {full_end}, {chunk_rows}):")
    lines.append(f"    hi = lo + {chunk_rows}")
    lines += [
        "    " + line
        for line in _sliced_chunk(
            gen, body, leaves, sliced, chunk_rows, "lo", "hi", out, step.output
        )
    ]
    if full_end < rows:
        lines += _sliced_chunk(
            gen, body, leaves, sliced, rows - full_end, str(full_end), str(rows), out, step.output
        )
    return lines


def transposed_view(gen: Generator, value: str) -> bool:
    """Is `value` a view through a transpose that changes the memory order (strided, so
    reshape(-1) would copy)? One that keeps the dims longer than 1 in their order (a
    0-d or identity transpose, which O1 removes, or one moving only dims of length 1)
    leaves the elements in C order: the native kernels read it as they read its base,
    at every level alike."""
    _, chain = view_chain(gen.plan, value)
    return any(node.op == "transpose" and _reorders(node) for node in chain)


def _reorders(transpose: Node) -> bool:
    """Whether a transpose node moves a dim longer than 1 past another (a symbolic dim
    counts as longer than 1)."""
    shape = transpose.inputs[0].type.shape
    kept = [a for a in transpose.attrs["axes"] if shape[a] != 1]
    return kept != sorted(kept)


def _sliced_chunk(
    gen: Generator,
    body: Graph,
    leaves: list[tuple[Node, str, TensorType]],
    sliced: list[bool],
    count: int,
    lo: str,
    hi: str,
    out: str,
    hint: str,
) -> list[str]:
    lines, env, types = [], {}, {}
    for (node, expr, t), cut in zip(leaves, sliced):
        if cut:
            name = gen.fresh(f"{hint}_{node.name}_chunk")
            lines.append(f"{name} = {expr}[{lo}:{hi}]")
            env[node], types[node] = name, t.with_shape((count, *t.shape[1:]))
        else:
            env[node], types[node] = expr, t
    return lines + _chunk(gen, body, env, types, f"{out}[{lo}:{hi}]", hint)


def _chunk(
    gen: Generator,
    body: Graph,
    env: dict[Node, str],
    types: dict[Node, TensorType],
    out: str,
    hint: str,
) -> list[str]:
    """The body's members on one chunk, intermediates in scratch, the root into `out`.
    Which member writes where is the body's `BodySlots`; each slot takes a scratch of
    its chunk type that no step running before it still holds."""
    slots = BodySlots(body)
    members = [n for n in body.nodes if n.kind == OP and not n.is_constant]
    named: dict[int, str] = {}  # slot -> its scratch in this chunk
    # fused steps run one after another: scratch is shared by all of a plan's chunks
    shared = gen.scratch
    used: list[tuple] = []
    lines = []
    # on the body's own types (a chunk that is the whole output) each member has the
    # type the body holds for it: no rule to run again
    own = all(t == node.type for node, t in types.items())
    for node in members:
        if own:
            t = node.type
        else:
            opdef = get_op(node.op)  # type: ignore[arg-type]
            t = opdef.infer(*(types[x] for x in node.inputs), **node.attrs)
        types[node] = t
        if node is slots.root:
            target = out
        elif slots.slot[node] in named:
            target = named[slots.slot[node]]
        else:
            target = named[slots.slot[node]] = _scratch(gen, shared, used, t)
        lines.append(_member_call(gen, node, [env[x] for x in node.inputs], target))
        env[node] = target
    for shape, dtype, name in used:
        shared.setdefault((shape, dtype), []).append(name)
    return _rolled(gen, lines)


# a block of member calls repeated this many times in a row runs as a loop, a block of
# at most MAX_PERIOD calls (a traced chain repeats a few ops on the same scratch)
ROLL_FROM = 8
MAX_PERIOD = 16


def _rolled(gen: Generator, lines: list[str]) -> list[str]:
    """`lines` (member calls, one statement each) with every block repeated ROLL_FROM
    times or more in a row written once, in a loop: the same calls in the same order,
    but the source of a long repetitive body (the 5,000-op chain: 5,000 lines, compiled
    at about 8 us a line) is the length of its distinct blocks."""
    rolled: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        best = (0, 0)  # (repeats, period) covering the most lines from i
        for period in range(1, MAX_PERIOD + 1):
            if i + ROLL_FROM * period > n:
                break
            block = lines[i : i + period]
            repeats = 1
            while lines[i + repeats * period : i + (repeats + 1) * period] == block:
                repeats += 1
            if repeats >= ROLL_FROM and repeats * period > best[0] * best[1]:
                best = (repeats, period)
        repeats, period = best
        if not repeats:
            rolled.append(lines[i])
            i += 1
            continue
        rolled.append(f"for {gen.fresh('repeat')} in range({repeats}):")
        rolled += ["    " + line for line in lines[i : i + period]]
        i += repeats * period
    return rolled


def _scratch(
    gen: Generator, shared: dict[tuple, list[str]], used: list[tuple], t: TensorType
) -> str:
    """A scratch buffer of type `t` for one slot: a free one of the plan's, a view of a
    larger free one (a tail chunk: warm in cache), or a new one; recorded in `used`."""
    if shared.get((t.shape, t.dtype)):
        target = shared[(t.shape, t.dtype)].pop()
        used.append((t.shape, t.dtype, target))
        return target
    larger = _larger(shared, t)
    if larger is not None:
        key, big = larger
        shared[key].remove(big)
        used.append((*key, big))
        target = gen.fresh("scratch_view")
        gen.setup_lines.append(f"{target} = {big}.reshape(-1)[:{t.size or 0}].reshape({t.shape!r})")
        return target
    target = gen.fresh("scratch")
    dtype = gen.literal(t.dtype, "dtype")
    gen.setup_lines.append(f"{target} = empty({t.shape!r}, {dtype})")
    used.append((t.shape, t.dtype, target))
    return target


def _larger(shared: dict[tuple, list[str]], t: TensorType) -> tuple[tuple, str] | None:
    """A free shared scratch of t's dtype with room for t, the smallest such."""
    fits = [
        (int(np.prod(shape)), (shape, dtype), name)
        for (shape, dtype), names in shared.items()
        for name in names
        if dtype == t.dtype and int(np.prod(shape)) >= (t.size or 0)
    ]
    if not fits:
        return None
    _, key, name = min(fits, key=lambda f: f[0])
    return key, name


# the ufuncs numpy 2.x warns about when given their output positionally (it is to become
# an error): numpy's own deprecation, of these two only
_OUT_BY_KEYWORD = (np.maximum, np.minimum)


def _member_call(gen: Generator, node: Node, args: list[str], out: str) -> str:
    """One member's call: a plain ufunc takes `out` as its last argument (a long body's
    lines compile a quarter faster than with `out=`), but for those numpy deprecates it
    for (_OUT_BY_KEYWORD), and any other kernel as `out=`."""
    fn, args, plain = gen.callee(node, node.attrs, args)
    positional = plain and gen.namespace[fn] not in _OUT_BY_KEYWORD
    return f"{fn}({', '.join(args + [out if positional else f'out={out}'])})"


def _all_elementwise(body: Graph) -> bool:
    return all(
        get_op(n.op).elementwise  # type: ignore[arg-type]
        for n in body.nodes
        if n.kind == OP and not n.is_constant
    )


def _members(body: Graph, first: int = 12) -> str:
    """The body's ops in order, for a comment: the first `first` of a long one."""
    ops = [n.op for n in body.nodes if n.kind == OP and not n.is_constant]
    if len(ops) <= first:
        return " ".join(ops)  # type: ignore[arg-type]
    return f"{len(ops)} ops: {' '.join(ops[:first])} ..."  # type: ignore[arg-type]


def _generic(gen: Generator, step: Step, out: str) -> list[str]:
    kernel = gen.const(get_op("fused").kernel, "kernel_fused")
    body = gen.const(step.attrs["body"], f"{step.output}_body")
    args = ", ".join([gen.array(x) for x in step.inputs] + [f"out={out}", f"body={body}"])
    return [f"{kernel}({args})"]


@register_lowering("matmul_epilogue")
def lower_matmul_epilogue(gen: Generator, step: Step, out: str) -> list[str]:
    """The product into the output buffer, then bias and activation in place on it."""
    args = [gen.array(x) for x in step.inputs]
    matmul = gen.const(get_op("matmul").kernel, "kernel_matmul")
    lines = [f"{matmul}({args[0]}, {args[1]}, out={out})"]
    if step.attrs.get("bias"):
        add = gen.const(get_op("add").kernel.ufunc, "np_add")  # type: ignore[attr-defined]
        lines.append(f"{add}({out}, {args[2]}, out={out})")
    activation = step.attrs.get("activation")
    if activation is not None:
        kernel = get_op(activation).kernel
        fn = gen.const(getattr(kernel, "ufunc", kernel), f"act_{activation}")
        lines.append(f"{fn}({out}, out={out})")
    return lines
