"""The native backend: elementwise steps and fused groups as C kernels (docs/backends.md).

Each step the backend accepts becomes one C function (kernels.py, with the C of each op
in cexpr.py); every other step falls back to numpy's lowering. When a plan's steps are
all lowered, `finish` builds its kernels, each distinct source a library of its own
(toolchain.py: cached on disk by a hash of its text, so a warm cache only loads them),
binds them into the generated code's namespace, and keeps their C for
`exe.source("c")`. A plan built while its kernels are missing runs on numpy first
(runtime/tiers.py builds them in the background). Without a working compiler, or when a
build fails, the plan is generated on numpy instead, with one warning (codegen.generate).
"""

from __future__ import annotations

import contextlib
import platform
from dataclasses import replace
from typing import Any

import numpy as np

from graphc.backends.native import (
    attention,
    calls,
    conv,
    copies,
    entry,
    fusion,
    loops,
    matmul,
    norm,
    one_hot,
    pool,
    rows,
    slices,
    threads,
    toolchain,
    unslice,
)
from graphc.backends.native.cexpr import NATIVE_OPS
from graphc.backends.native.kernels import (
    BLOCK,
    FULL,
    PITCHED,
    SCALAR,
    STRIDED,
    TRANSPOSED,
    DeclinedError,
    Kernel,
    block_of,
    build_kernel,
    contiguous_descriptor,
    epilogue_body,
)
from graphc.backends.numpy import scalar as numpy_scalar
from graphc.backends.numpy.chunked import lower_matmul_epilogue as numpy_epilogue
from graphc.backends.numpy.chunked import transposed_view
from graphc.ir.graph import OP, Graph
from graphc.ir.registry import get_op, register_rule
from graphc.ir.types import TensorType
from graphc.runtime.backend import (
    Backend,
    BackendUnavailableError,
    KernelsNotBuiltError,
    register_backend,
    register_lowering,
    warn_once,
)
from graphc.runtime.codegen import Generator, shown
from graphc.runtime.plan import Step

NAME = "native"


def _unsupported_platform() -> str | None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"native kernels are built for x86-64 Linux, this is {platform.system()} {platform.machine()}"
    return None


def _unavailable() -> str | None:
    found = _unsupported_platform() or toolchain.toolchain()
    return found if isinstance(found, str) else None


def _quick_unavailable() -> str | None:
    """What `_unavailable` would say, where that is known without a look for the
    compiler: the platform, a usable cache directory (a misconfigured one is said once,
    as a warning, at the user's line: the user asked for it), or the probe when it has
    run. The compiler is looked for by the first background build (a process's first
    "auto" plan then runs on numpy, as it would, and says why in explain()): searching
    the PATH took 0.1-0.2 ms of every process's first result."""
    if toolchain.probed():
        return _unavailable()
    why = _unsupported_platform()
    if why is None:
        why = toolchain.cache_dir_problem()
        if why is not None:
            warn_once(f"graphc: the native backend is off: {why}; plans run on numpy")
    return why


def _allows_scalar(graph: Graph) -> bool:
    """A one-element graph may run on numpy scalars unless it holds an op whose native
    bits differ from numpy's: its values would then depend on the batch size."""
    return not any(n.kind == OP and _inexact(n) for n in graph.nodes)


def _scalar_supports(graph: Graph, spec: Any) -> bool:
    """numpy's scalar plans, for the graphs `_allows_scalar` lets run on them."""
    return _allows_scalar(graph) and numpy_scalar.supports(graph, spec)


# each elementwise op's native C, registered on the op (cexpr.py: one entry per op)
for _op, _rule in NATIVE_OPS.items():
    register_rule(_op, "native", _rule)


def _inexact(node: Any) -> bool:
    """Whether native may compute `node` with other bits than numpy: as its op's lowering
    declared (a product only where matmul.py's kernel computes it), or a fused group
    holding such an op."""
    declared = BACKEND.inexact_lowerings.get(node.op)
    if declared is not None:
        return declared.covers(node)
    body = node.attrs.get("body") if node.op == "fused" else None
    return body is not None and not _allows_scalar(body)


# below this many elements a step of exact ops stays on numpy: its ufunc call costs less
# than finding the addresses of arrays made per call (measured: a (32, 10) add 2.2 us on
# numpy, 5.2 us native). Exact ops give numpy's bits either way; a step with an op whose
# native bits differ (an ulp bound) is always native, so its values never depend on size
SMALL = 4096


def lower_step(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One C kernel call for an elementwise step or fused group, or None (numpy runs it)."""
    reads_blocks = any(x in slices.pitched(gen) for x in step.inputs)
    copied: list[tuple[str, str]] = []
    try:
        kernel, operands = _kernel_for(gen, step, copied)
    except DeclinedError as exc:
        if reads_blocks:  # its slices were not copied: numpy cannot run it (not expected)
            raise BackendUnavailableError(
                f"step {step.index} read slices in place: {exc}"
            ) from None
        calls.plan_state(gen)["declined"][step.index] = str(exc)
        return None
    if not reads_blocks and not _worth_it(gen, step, kernel) and not loops.every_step_native(gen):
        # not counted as declined: numpy is simply the better choice at this size. The
        # kernel is built all the same, so that a plan at a larger batch finds it
        calls.plan_state(gen)["spares"][kernel.name] = kernel
        return None
    # a full operand is read lane by lane with the output it has the shape of
    full = {
        k for k, operand in enumerate(kernel.operands[: len(step.inputs)]) if operand.mode == FULL
    }
    calls.alias_safe(gen, step, full)
    lines = [line for name, value in copied for line in copies.into_buffer(gen, value, name)]
    return [*lines, *_call(gen, step, kernel, operands, out)]


def _worth_it(gen: Generator, step: Step, kernel: Kernel) -> bool:
    size = gen.plan.values[step.output].type.size or 0
    return size >= SMALL or any(op in BACKEND.inexact_lowerings for op in kernel.ops)


def _reads_in_place(gen: Generator, reader: Step) -> bool:
    """Will `reader` run as one kernel here, so that it can read a slice's block in place?
    (lower_step runs a reader of such a block natively at every size.)"""
    if BACKEND.lowerings.get(reader.node.op) is not lower_step:
        return False
    try:
        _kernel_for(gen, reader, ahead=True)
    except DeclinedError:
        return False
    return True  # at any size: so the reader's kernel (PITCHED) is one at every batch


def _call(
    gen: Generator,
    step: Step,
    kernel: Kernel,
    operands: list[tuple[str, bool, tuple, bool]],
    out: str,
) -> list[str]:
    """The lines calling `kernel` on the step's operands into `out`."""
    calls.record(gen, kernel)
    fn = kernel.name
    lines = [f"# native kernel {kernel.name}: {' '.join(kernel.ops)}"]
    out_t = gen.plan.values[step.output].type
    n = out_t.size or 0
    args = [str(n)]
    if any(o.mode == TRANSPOSED for o in kernel.operands):
        args += [str(out_t.shape[0]), str(out_t.shape[1])]
    args.append(calls.address(gen, out, step.output in gen.static, lines))
    for k, ((expr, static, shape, _), operand) in enumerate(zip(operands, kernel.operands)):
        if operand.mode == PITCHED:  # the wide array's address, and the block's place
            _, offset, width, pitch = slices.pitched(gen)[step.inputs[k]]
            args += [calls.operand(gen, expr, static, lines), str(offset), str(width), str(pitch)]
            continue
        if operand.mode == SCALAR:
            args.append(calls.address(gen, expr, static, lines))
        else:  # made per call: C-contiguous (copied if the caller's is not)
            args.append(calls.operand(gen, expr, static, lines))
        if operand.mode == BLOCK:
            out_shape = gen.plan.values[step.output].type.shape
            inner, size = block_of(tuple(shape), tuple(out_shape))  # type: ignore[misc]
            args += [str(inner), str(size)]
        if operand.mode == STRIDED:
            out_shape = gen.plan.values[step.output].type.shape
            # operands are C-contiguous here (transposed views are declined; a caller's
            # array is made contiguous per call)
            desc = gen.const(contiguous_descriptor(tuple(shape), tuple(out_shape)), "strides")
            args.append(calls.address(gen, desc, True, lines))
    lines.append(f"{fn}({', '.join(args)})")
    return lines


def lower_matmul(gen: Generator, step: Step, out: str) -> list[str] | None:
    """A float32 product by a matrix in C (matmul.py), else numpy's."""
    return matmul.lower(gen, step, out, None, False)


def lower_matmul_epilogue(gen: Generator, step: Step, out: str) -> list[str] | None:
    """Where matmul.py computes the product: in C, with a bias (per column, or a matrix of
    the product's shape) and a relu on its tiles, and what remains (another bias,
    another activation) as a C pass after.
    Else numpy's matmul into the output (the same BLAS call, the same bits), then the
    bias add and the activation in one C pass over it instead of numpy's two."""
    attrs = step.attrs
    out_t = gen.plan.values[step.output].type
    bias = step.inputs[2] if attrs.get("bias") else None
    activation = attrs.get("activation")
    if matmul.reason(step.node) is None:
        fits = bias is None or matmul.tiles_add(gen, bias, out_t)
        if fits and activation in (None, "relu"):
            return matmul.lower(gen, step, out, bias, activation == "relu")
        rest_bias = None if fits else bias
        after = _epilogue(gen, step, out, out_t, rest_bias, activation)
        if after is None:  # numpy's ufuncs in place, as the numpy backend runs them
            product = matmul.lower(gen, step, out, None, False)
            return [*product, *numpy_epilogue(gen, step, out)[1:]]  # type: ignore[misc]
        return [*matmul.lower(gen, step, out, bias if fits else None, False), *after]  # type: ignore[misc]
    if bias is None and activation is None:
        return None
    after = _epilogue(gen, step, out, out_t, bias, activation)
    if after is None:
        return None
    product = gen.const(get_op("matmul").kernel, "kernel_matmul")
    x, w = gen.array(step.inputs[0]), gen.array(step.inputs[1])
    return [f"{product}({x}, {w}, out={out})", *after]


def _epilogue(
    gen: Generator,
    step: Step,
    out: str,
    out_t: TensorType,
    bias: str | None,
    activation: str | None,
) -> list[str] | None:
    """One C pass over the product in `out`, in place: plan value `bias` added (unless
    None), then the activation (unless None); None, the reason recorded, when the
    kernel cannot be built."""
    leaves = [(out, step.output in gen.static, out_t.shape, False)]
    types = [out_t]
    bias_t = None
    if bias is not None:
        bias_t = gen.plan.values[bias].type
        leaves.append((gen.array(bias), bias in gen.static, bias_t.shape, False))
        types.append(bias_t)
    try:
        kernel = build_kernel(epilogue_body(out_t, bias_t, activation), types, out_t, {})
    except DeclinedError as exc:
        calls.plan_state(gen)["declined"][step.index] = str(exc)
        return None
    return _call(gen, step, kernel, leaves, out)


def _kernel_for(
    gen: Generator,
    step: Step,
    copied: list[tuple[str, str]] | None = None,
    ahead: bool = False,
) -> tuple[Kernel, list[tuple[str, bool, tuple, bool]]]:
    """The step's kernel, and per operand: expression, static?, shape, transposed view?
    Given `copied`, an operand that is a transposed view other than a matrix's
    transpose is read from a buffer it is to be copied into first (the caller emits
    copies.into_buffer for each (buffer, value) added to `copied`); else such an
    operand declines the step. `ahead`: asked before the step's turn (a slice's reader),
    when an operand made by a step in between (an output) has no expression yet: its
    name stands in, as only the kernel is wanted."""
    plan = gen.plan

    def array(x: str) -> str:
        return gen.expr.get(x, x) if ahead else gen.array(x)

    out_t = plan.values[step.output].type
    node = step.node
    if node.op == "fused":
        body: Graph = step.attrs["body"]
        if not all(
            get_op(n.op).elementwise for n in body.nodes if n.kind == OP and not n.is_constant
        ):  # type: ignore[arg-type]
            raise DeclinedError("the fused body is not elementwise")
    else:
        body = _single(node, step.attrs, [plan.values[x].type for x in step.inputs])
    operands, types, known = [], [], {}
    blocks = slices.pitched(gen)
    for k, x in enumerate(step.inputs):
        value = plan.values[x]
        if x in blocks:  # a slice not copied: its column block of the wide array
            source = blocks[x][0]
            operands.append((array(source), source in gen.static, value.type.shape, False))
        else:
            operands.append((array(x), x in gen.static, value.type.shape, transposed_view(gen, x)))
        types.append(value.type)
        if x in plan.constants:
            known[k] = np.asarray(plan.nodes[x].value)
    for c in (n for n in body.nodes if n.is_constant):
        array = np.ascontiguousarray(c.value)
        operands.append((gen.const(array, f"{step.output}_c"), True, array.shape, False))
        types.append(TensorType.of(array))
    transposed = set()
    for k, (_, static, shape, is_transposed) in enumerate(operands):
        if not is_transposed:
            continue
        value = step.inputs[k] if k < len(step.inputs) else None
        if static and _plain_transpose(gen, value):
            transposed.add(k)
            continue
        if copied is None or value is None or not copies.copyable(gen, value):
            raise DeclinedError("an operand is a transposed view not of a contiguous matrix")
        name = gen.fresh(f"{value}_copy")
        copied.append((name, value))
        operands[k] = (name, True, shape, False)
    pitched = {k for k, x in enumerate(step.inputs) if x in blocks}
    return build_kernel(body, types, out_t, known, transposed, pitched), operands


def _single(node: Any, attrs: dict[str, Any], types: list[TensorType]) -> Graph:
    """A one-op body for a step that is not fused."""
    g = Graph(f"{node.op}_body")
    xs = [g.add_placeholder(f"x{k}", t) for k, t in enumerate(types)]
    op = get_op(node.op)
    g.add_output(g.add_op(node.op, xs, attrs, op.infer(*types, **attrs)), name="y")
    return g


def _plain_transpose(gen: Generator, value: str | None) -> bool:
    """Is `value` a 2-D transpose, made at setup, of a value that is not a view (so
    C-contiguous by the planner's layout rule)?"""
    if value is None:
        return False
    v = gen.plan.values[value]
    node = gen.plan.nodes[value]
    if v.kind != "view" or node.op != "transpose" or tuple(node.attrs["axes"]) != (1, 0):
        return False
    base = gen.plan.values[v.base]  # type: ignore[index]
    return base.kind not in ("view", "input") and value in gen.static


def finish(gen: Generator) -> None:
    """Build the kernels of this plan and of its control-flow bodies (one request: each
    distinct source a library of its own, cached by its text: toolchain.py) and bind
    them; explain's notes. A body's plan leaves its kernels to the outermost plan, which
    builds them all. Without `gen.compile_kernels`, raises KernelsNotBuiltError where a
    library is neither loaded nor on disk."""
    if gen.parent is not None:
        outer = gen.parent
        while outer.parent is not None:
            outer = outer.parent
        calls.plan_state(outer).setdefault("bodies", []).append(gen)
        return
    state = gen.state.get(NAME)
    if not state:
        return
    plans = [gen, *state.get("bodies", [])]
    kernels: dict[str, Kernel] = {}
    spares: dict[str, Kernel] = {}  # kernels of steps numpy runs at this size
    for plan_gen in plans:
        kernels.update(calls.plan_state(plan_gen)["kernels"])
        spares.update(calls.plan_state(plan_gen)["spares"])
    if not kernels:  # nothing lowered: still say why, for explain()
        for plan_gen in plans:
            plan_gen.notes.append("native: no step of this plan runs native")
            _declined_notes(plan_gen)
        if spares and gen.compile_kernels:  # for the plans at larger sizes
            _build_spares(spares)
        return
    # kernels of one file (matmul.py's product and packing) share its source: one unit
    units = list(dict.fromkeys(k.source for k in kernels.values()))
    if loops.has_loops(gen):  # the runner of loops whose steps run in C (loops.py)
        units.append(loops.SOURCE)
    prelude = rows.prelude()
    try:
        built = toolchain.build_units(units, prelude, compile=gen.compile_kernels)
    except toolchain.NotBuiltError as exc:
        raise KernelsNotBuiltError(f"native: {exc}") from None
    except toolchain.BuildError as exc:
        raise BackendUnavailableError(f"building the native kernels failed: {exc}") from None
    statuses = frozenset(n for n, k in kernels.items() if k.status)
    bound: dict[str, Any] = {}
    for unit, library in built.items():
        names = {n: k.params for n, k in kernels.items() if k.source == unit}
        bound.update(calls.bind(library.path, library.library, names, statuses & set(names)))
    how = _how_built(list(built.values()))
    if spares and gen.compile_kernels:
        _build_spares(spares)
    for plan_gen in plans:
        own = calls.plan_state(plan_gen)
        plan_gen.namespace.update({name: bound[name] for name in own["kernels"]})
        if not own["kernels"]:
            plan_gen.notes.append("native: no step of this plan runs native")
            _declined_notes(plan_gen)
            continue
        if plan_gen is gen:
            bodies = f" (with {len(plans) - 1} control-flow bodies)" if len(plans) > 1 else ""
            note = f"{len(kernels)} C kernel(s) for {own['calls']} step(s){bodies}, {how}"
        else:
            count = f"{len(own['kernels'])} C kernel(s) for {own['calls']} step(s)"
            note = f"{count}, in the enclosing plan's libraries"
        plan_gen.notes.append(f"native: {note} (called through {calls.via()})")
        _declined_notes(plan_gen)
    loops.check_loops(gen)
    # numpy's BLAS on the kernels' threads (its callback is built like a unit)
    gen.notes.append(f"native: {threads.install(compile=gen.compile_kernels)}")
    gen.on_thread.append(threads.join)
    compiler = f"{shown(toolchain.toolchain().compiler)} {' '.join(toolchain.FLAGS)}"  # type: ignore[union-attr]
    gen.c_source = f"/* native kernels, compiled with {compiler} */\n{prelude}" + "\n".join(units)
    gen.c_source += "\n"


def _build_spares(spares: dict[str, Kernel]) -> None:
    """Build (not bind) the kernels of steps that numpy runs at this plan's size, so that
    the plan of a larger batch finds them built; a failure there is that plan's to report."""
    units = list(dict.fromkeys(k.source for k in spares.values()))
    with contextlib.suppress(toolchain.BuildError):
        toolchain.build_units(units, rows.prelude())


def _how_built(built: list[toolchain.Built]) -> str:
    """What the plan's libraries took: "2 libraries: 1 compiled in 0.41 s, 1 loaded
    from the disk cache in 0.3 ms"."""
    parts = []
    compiled = [b for b in built if b.cached == "compiled"]
    if compiled:
        parts.append(f"{len(compiled)} compiled in {sum(b.seconds for b in compiled):.3f} s")
    disk = [b for b in built if b.cached == "disk"]
    if disk:
        seconds = sum(b.seconds for b in disk)
        parts.append(f"{len(disk)} loaded from the disk cache in {seconds * 1e3:.1f} ms")
    memory = [b for b in built if b.cached == "memory"]
    if memory:
        parts.append(f"{len(memory)} already loaded in this process")
    return f"{len(built)} {'library' if len(built) == 1 else 'libraries'}: {', '.join(parts)}"


def _declined_notes(gen: Generator) -> None:
    declined = calls.plan_state(gen)["declined"]
    gen.notes += [f"  step {i} stays on numpy: {why}" for i, why in sorted(declined.items())]


BACKEND = register_backend(
    Backend(
        NAME,
        fallback="numpy",
        priority=10,
        unavailable=_unavailable,
        quick_unavailable=_quick_unavailable,
        ready=toolchain.probed,
        finish=finish,
        scalar_plans=replace(numpy_scalar.PLANS, supports=_scalar_supports),
        entries=entry.ENTRIES,
        fusion=lambda fast_math: fusion.passes(BACKEND.inexact, fast_math),
    )
)

# Each registration below that may give other bits than numpy's says so (`inexact`, with
# its bound where one is stated): the backend's inexact ops are those (backend.py).

# elementwise steps and fused groups: one C kernel (kernels.py). An op's C (cexpr.py)
# gives numpy's bits unless its native rule has an ulp bound: libmvec's functions,
# graphc's float32 tanh, and the sigmoid and gelu built on them
for _op, _rule in NATIVE_OPS.items():
    _why = None
    if _rule.ulp_bound is not None:  # with what the bound leaves out, where it says
        _why = "libmvec's function or graphc's own (cexpr.py)" + _rule.beyond
    register_lowering(_op, lower_step, backend=NAME, inexact=_why, bound=_rule.ulp_bound)
register_lowering("fused", lower_step, backend=NAME)  # inexact where its body is: _inexact
# float32 products by a matrix: a chain of fused multiply-adds over k (matmul.py), not the
# order of numpy's BLAS call; the products it declines (matmul.reason) are numpy's call
_FMA_CHAIN = "a chain of fused multiply-adds over k (matmul.py)"
register_lowering(
    "matmul",
    lower_matmul,
    backend=NAME,
    inexact=_FMA_CHAIN,
    inexact_when=matmul.inexact_product,
)
register_lowering(
    "matmul_epilogue",
    lower_matmul_epilogue,
    backend=NAME,
    inexact=_FMA_CHAIN,
    inexact_when=matmul.inexact_product,
)
# a weight gradient of rows times a matrix, x^T y over every row: the same product
register_lowering(
    "contract_rows",
    lower_matmul,
    backend=NAME,
    inexact=_FMA_CHAIN,
    inexact_when=matmul.inexact_product,
)


def lower_slice(gen: Generator, step: Step, out: str) -> list[str] | None:
    """No copy for a column block that only kernels here read (slices.py); any other
    window of the input copied by one C call (copies.py)."""
    return slices.lower_slice(gen, step, out, _reads_in_place) or copies.lower(gen, step, out)


register_lowering("slice", lower_slice, backend=NAME)
# a reshape that is not a view (of a transposed view): one C call copying it (copies.py)
register_lowering("reshape", copies.lower, backend=NAME)
# zeros with a slice's cotangent put back in its window: one C call, numpy's bits (unslice.py)
register_lowering("unslice", unslice.lower_unslice, backend=NAME)
# a loop whose body's steps all run here: one C call walking the steps (loops.py), the
# body's own kernels in the same order, so the bits of its steps
register_lowering("scan", loops.lower_scan, backend=NAME)
register_lowering("while_loop", loops.lower_while, backend=NAME)
# sums in numpy's own orders: numpy's bits (rows.py)
for _op in ("sum", "mean", "sum_to"):
    register_lowering(_op, rows.lower_reduction, backend=NAME)
# softmax follows graphc's numpy kernel step by step but for exp (libmvec's, 4 ulp): on
# the element and on the sum it is divided by, plus the roundings, 12 ulp of the result
register_lowering(
    "softmax", rows.lower_softmax, backend=NAME, inexact="libmvec's exp (rows.py)", bound=12
)
# log_softmax: exp, and the sum's log by glibc's scalar log. Its bound is an absolute
# error in units of the float's epsilon times (1 + |result|): x - max - log(sum) cancels
# near 0, so a relative bound would not hold
register_lowering(
    "log_softmax",
    rows.lower_softmax,
    backend=NAME,
    inexact="libmvec's exp and glibc's log (rows.py); bound in eps (1 + |result|)",
    bound=8,
)
# attention's softmax is the row kernel's
register_lowering(
    "attention", attention.lower, backend=NAME, inexact="the row kernel's softmax (rows.py)"
)
from graphc.backends.native import blas  # noqa: E402


def lower_gemm(gen: Generator, step: Step, out: str) -> list[str] | None:
    """A float32 gemm without transposing flags whose c the tiles can add (or none):
    matmul.py's product with alpha and c in its epilogue, the operations of gemm's
    numpy kernel on that product, so the bits of the product and the elementwise ops it
    was folded from (gemm_rules.fold_sgd_updates, exact). c may be the output's own
    buffer (an SGD update written over its weight): each tile reads its elements of c
    before it writes them. Any other gemm is one BLAS call (blas.py)."""
    if matmul.gemm_reason(step.node) is None:
        c = step.inputs[2] if len(step.inputs) == 3 and step.attrs["beta"] != 0.0 else None
        if c is None or matmul.tiles_add(gen, c, gen.plan.values[step.output].type):
            return matmul.lower(gen, step, out, c, False, step.attrs["alpha"])
    return blas.lower_gemm(gen, step, out)


# the product's own accumulation order: graphc's chain (matmul.py) or BLAS's
register_lowering(
    "gemm",
    lower_gemm,
    backend=NAME,
    inexact="the product's accumulation order: matmul.py's chain, or BLAS's (blas.py)",
)

# the convolutions: the direct C convolution sums in its own order (direct_conv.py), the
# wide one in its own (wide_conv.py), Winograd's F(2x2, 3x3) through its transforms
# (winograd.py, with its bound), with the epilogue or body in C (conv.py)
_CONV_ORDER = (
    "the direct or wide kernel's own summation order, or Winograd's transforms within "
    "2.02 (C + 7) eps sum_c |w[o, c]|_1 |x[c, window]|_1 (conv.py, winograd.py)"
)
register_lowering("conv2d", conv.lower_conv, backend=NAME, inexact=_CONV_ORDER)
register_lowering("conv2d_epilogue", conv.lower_conv, backend=NAME, inexact=_CONV_ORDER)
register_lowering("conv2d_fused", conv.lower_conv, backend=NAME, inexact=_CONV_ORDER)
# stride 1: the direct kernel on the flipped weight (conv.py)
register_lowering(
    "conv_transpose2d",
    conv.lower_conv_transpose,
    backend=NAME,
    inexact="the direct kernel on the flipped weight (conv.py)",
)
# numpy's bits (pool.py)
register_lowering("max_pool2d", pool.lower_max_pool2d, backend=NAME)
register_lowering("max_pool2d_backward", pool.lower_max_pool2d_backward, backend=NAME)
# numpy's bits: the rows zeroed, a one at each label (one_hot.py)
register_lowering("one_hot", one_hot.lower_one_hot, backend=NAME)
# the variance's sum of squares (and the gradient's dot product) in lanes (norm.py)
_LANES = "sums in lanes where numpy calls sdot (norm.py)"
register_lowering("layer_norm", norm.lower_layer_norm, backend=NAME, inexact=_LANES)
register_lowering("layer_norm_grad", norm.lower_layer_norm, backend=NAME, inexact=_LANES)
