"""How each op computes on a batch of examples: its "vmap" rule (gc.vmap, passes/vmap.py).

A rule sees one op node of a per-example graph and its operands as ``(value,
batched)`` pairs: a batched value carries the batch on its axis 0, the per-example
value being ``value[i]``; an unbatched one is the same for every example. It returns
the node's value for the whole batch, built with graphc's op functions, and whether
that value is batched (for a node with several results, a tuple of its results'
values and a tuple of flags). Rules run only on nodes with at least one batched
operand: a node whose operands are all unbatched is copied unchanged.

Rules go by kind of op, as the batch split's (graphc/distributed/rules.py), but
here the batch is an axis every rule may move: it is put first, so that

- elementwise ops (the op contract's `elementwise` flag, one generic rule) give a
  batched operand ones after its batch axis to reach the result's rank: numpy's
  right-aligned broadcasting then pairs example i with example i, and unbatched
  operands broadcast over the batch;
- reductions and ops along one axis shift their axes by one (axis=None becomes every
  axis but the batch);
- shape ops prepend the batch to the shapes and indices their attrs hold;
- matmul reshapes a 1-D operand so that the batch never meets the contracted axis;
- convolutions and pooling merge the batch into the images' axis N (a batched weight
  becomes a grouped convolution); where that merge has no name (a symbolic batch
  times N), they loop over the examples (a scan, `loop_over_examples`), as do random
  draws from per-example keys;
- custom_vjp batches its forward and its backward bodies (the user's backward, run per
  example);
- control flow batches its bodies (through the pass, `set_body_batching`): a cond with
  a batched predicate computes both branches and selects per example (gc.where); a
  while_loop with a batched predicate runs while any example's holds, and an example
  whose condition no longer holds keeps its carries (JAX's semantics). So under vmap
  a branch also runs on the examples that do not take it: one that fails on them (an
  index out of range, which take refuses rather than clamps as JAX does) fails the
  whole batch. The nodes computing those branches carry the cond's name in their
  meta (`BOTH_BRANCHES`), and gc.vmap's errors point there.

An op without a rule here (see WITHOUT_RULE["vmap"] in tests/ir/test_op_contract.py)
is refused by the pass with a `VmapError` naming the node, never computed wrongly;
a backend's fused nodes never reach vmap (it runs before fusion) and are refused by
name. Random ops with a batched key draw each example's numbers from its own key (a
scan over the examples); with an unbatched key every example draws the same numbers
(as in JAX).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph, Node, active_graph
from graphc.ir.registry import get_op, register_rule
from graphc.ir.types import Dim, is_float, is_symbol
from graphc.ops.dispatch import bind
from graphc.ops.indexing import format_index, parse_index

KIND = "vmap"  # the rules' kind in `OpDef.rules`
# meta key of the nodes computing a cond's branches for every example (its predicate
# batched): the per-example cond's name, for errors that one of them raises
BOTH_BRANCHES = "vmap_both_branches"
Batched = tuple[Any, Any]  # (value, batched?) ; for several results (tuple, tuple of bools)
VmapRule = Callable[[Node, list[Batched], Dim], Batched]


class VmapError(GraphcError, ValueError):
    """vmap cannot batch a node, or was given axes that do not fit its arguments."""


def batches(*ops: str) -> Callable[[VmapRule], VmapRule]:
    """Register the decorated function as the vmap rule of each op in `ops`."""

    def register(fn: VmapRule) -> VmapRule:
        for op in ops:
            register_rule(op, KIND, fn)
        return fn

    return register


def vmap_rule(node: Node) -> VmapRule:
    """The rule of `node`'s op: its own, or the broadcasting one for elementwise ops;
    a `VmapError` naming the node for a fused node or an op without one."""
    opdef = get_op(node.op)
    if opdef.has("fusion"):
        raise VmapError(
            f"vmap: {node.describe()} is a backend's fused node (made by gc.fuse / gc.compile "
            "at O2); vmap the graph before fusion (the declared or traced one)"
        )
    own = opdef.rules.get(KIND)
    if own is not None:
        return own
    if opdef.elementwise:
        return elementwise
    raise VmapError(
        f"vmap: {node.describe()} has no batching rule, so vmap cannot compute it for a "
        "batch of examples (graphc/ops/batching.py); compute it outside the vmapped "
        "function, or loop over the examples"
    )


# -- helpers ----------------------------------------------------------------------------


def _rank(node: Node, index: int) -> int:
    """The per-example rank of the node's operand `index`."""
    return len(node.inputs[index].type.shape)


def _shape(value: Any) -> tuple:
    return tuple(value.shape)


def ones_after_batch(value: Any, count: int) -> Any:
    """A batched value with `count` axes of size 1 inserted after its batch axis."""
    if count <= 0:
        return value
    shape = _shape(value)
    return bind("reshape", value, shape=(shape[0], *(1,) * count, *shape[1:]))


def batched(value: Any, flag: bool, size: Dim) -> Any:
    """`value` as a batched value: an unbatched one broadcast over `size` examples."""
    if flag:
        return value
    return bind("broadcast_to", value, shape=(size, *_shape(value)))


def move_axis(value: Any, source: int, target: int) -> Any:
    """`value` with its axis `source` moved to `target` (numpy's moveaxis)."""
    rank = len(_shape(value))
    source, target = source % rank, target % rank
    if source == target:
        return value
    order = [a for a in range(rank) if a != source]
    order.insert(target, source)
    return bind("transpose", value, axes=tuple(order))


def _shifted(axis: Any, rank: int) -> Any:
    """A per-example axis attr (None, an int or a tuple) for the batched value; None
    becomes every axis but the batch."""
    if axis is None:
        return tuple(range(1, rank + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a % max(rank, 1) + 1 for a in axis)
    return axis % max(rank, 1) + 1


def _attrs(node: Node, **changed: Any) -> dict[str, Any]:
    return {**node.attrs, **changed}


def _product(dims: Sequence[Dim]) -> Dim:
    """The number of elements of a shape of known dims, or its one (symbolic) dim."""
    if len(dims) == 1:
        return dims[0]
    size = 1
    for d in dims:
        size *= int(d)
    return size


def _known(*dims: Dim) -> bool:
    """Whether every dim is a number: reshapes that merge the batch with another axis
    need it (a symbolic product has no name); else a rule loops over the examples."""
    return not any(is_symbol(d) for d in dims)


# -- elementwise ops -------------------------------------------------------------------


def elementwise(node: Node, args: list[Batched], size: Dim) -> Batched:
    # out[i] = f(a[i], b[i]) under right-aligned broadcasting once every batched operand
    # has the result's rank after its batch axis; unbatched operands broadcast
    rank = len(node.type.shape)
    values = [
        ones_after_batch(v, rank - _rank(node, k)) if flag else v
        for k, (v, flag) in enumerate(args)
    ]
    return bind(node.op, *values, **node.attrs), True


# -- reductions and ops along axes -------------------------------------------------------


@batches("sum", "mean", "max", "min", "prod", "logsumexp")
def reduction(node: Node, args: list[Batched], size: Dim) -> Batched:
    (x, _), rank = args[0], _rank(node, 0)
    if rank == 0:
        return _on_columns(node, [x], axis=1, keepdims=False), True
    return bind(node.op, x, **_attrs(node, axis=_shifted(node.attrs["axis"], rank))), True


def _on_columns(node: Node, values: list[Any], **attrs: Any) -> Any:
    """The op on 0-d examples: each a row of one element, (B, 1), then back to (B,)."""
    columns = [bind("reshape", v, shape=(_shape(v)[0], 1)) for v in values]
    result = bind(node.op, *columns, **_attrs(node, **attrs))
    return bind("reshape", result, shape=(_shape(result)[0],))


@batches("argmax", "argmin")
def index_reduction(node: Node, args: list[Batched], size: Dim) -> Batched:
    (x, _), rank = args[0], _rank(node, 0)
    axis, keepdims = node.attrs["axis"], node.attrs["keepdims"]
    if axis is not None:
        return bind(node.op, x, axis=axis + 1, keepdims=keepdims), True
    # the index into the flattened example: flatten each example, then find along it
    if rank > 1 and not _known(*_shape(x)[1:]):
        return loop_over_examples(node, args, size), True
    # every size written out: a -1 beside a batch of 0 examples has no one value
    flat = bind("reshape", x, shape=(_shape(x)[0], _product(_shape(x)[1:])))
    found = bind(node.op, flat, axis=1, keepdims=False)
    return ones_after_batch(found, rank) if keepdims else found, True


@batches("softmax", "log_softmax", "cumsum", "cumprod", "argsort", "flip", "layer_norm_grad")
def along_axes(node: Node, args: list[Batched], size: Dim) -> Batched:
    values = [batched(v, flag, size) for v, flag in args]  # layer_norm_grad's g, x alike
    if _rank(node, 0) == 0:  # an op along the one axis a 0-d example does not have
        return _on_columns(node, values, axis=(1,) if node.op == "flip" else 1), True
    axis = _shifted(node.attrs["axis"], _rank(node, 0))
    return bind(node.op, *values, **_attrs(node, axis=axis)), True


@batches("tril", "triu", "one_hot")
def trailing(node: Node, args: list[Batched], size: Dim) -> Batched:
    # they act on the last axes (a triangle) or append one (classes): a leading batch is
    # one more leading axis
    return bind(node.op, args[0][0], **node.attrs), True


@batches("layer_norm")
def layer_norm(node: Node, args: list[Batched], size: Dim) -> Batched:
    (x, bx), (w, bw), (b, bb) = args
    rank = _rank(node, 0)
    x = batched(x, bx, size)
    axis = node.attrs["axis"] + 1
    if not (bw or bb):  # weight and bias broadcast over the leading axes, the batch among them
        return bind("layer_norm", x, w, b, axis=axis, eps=node.attrs["eps"]), True
    # per-example weights: normalize, then scale and shift with them aligned to x's rank
    normed = bind("layer_norm", x, 1.0, 0.0, axis=axis, eps=node.attrs["eps"])
    w = ones_after_batch(w, rank - _rank(node, 1)) if bw else w
    b = ones_after_batch(b, rank - _rank(node, 2)) if bb else b
    return bind("add", bind("mul", normed, w), b), True


# -- shape ops ---------------------------------------------------------------------------


@batches("reshape")
def reshape(node: Node, args: list[Batched], size: Dim) -> Batched:
    x = args[0][0]
    return bind("reshape", x, shape=(_shape(x)[0], *node.attrs["shape"])), True


@batches("transpose")
def transpose(node: Node, args: list[Batched], size: Dim) -> Batched:
    axes = (0, *(a + 1 for a in node.attrs["axes"]))
    return bind("transpose", args[0][0], axes=axes), True


@batches("broadcast_to")
def broadcast_to(node: Node, args: list[Batched], size: Dim) -> Batched:
    x = args[0][0]
    target = tuple(node.attrs["shape"])
    x = ones_after_batch(x, len(target) - _rank(node, 0))
    return bind("broadcast_to", x, shape=(_shape(x)[0], *target)), True


@batches("sum_to")
def sum_to(node: Node, args: list[Batched], size: Dim) -> Batched:
    # sum_to sums the leading axes an example has beyond the target's: the batch axis
    # goes after them, where it lines up with the batch put first in the target
    x = args[0][0]
    target = tuple(node.attrs["shape"])
    lead = _rank(node, 0) - len(target)
    return bind("sum_to", move_axis(x, 0, max(lead, 0)), shape=(_shape(x)[0], *target)), True


def _with_batch(index: str) -> str:
    return format_index((slice(None), *parse_index(index)))


@batches("slice")
def slice_(node: Node, args: list[Batched], size: Dim) -> Batched:
    return bind("slice", args[0][0], index=_with_batch(node.attrs["index"])), True


@batches("unslice")
def unslice(node: Node, args: list[Batched], size: Dim) -> Batched:
    ct = args[0][0]
    shape = (_shape(ct)[0], *node.attrs["shape"])
    return bind("unslice", ct, shape=shape, index=_with_batch(node.attrs["index"])), True


@batches("concat")
def concat(node: Node, args: list[Batched], size: Dim) -> Batched:
    values = [batched(v, flag, size) for v, flag in args]
    return bind("concat", *values, axis=_shifted(node.attrs["axis"], _rank(node, 0))), True


@batches("pad", "unpad")
def pad(node: Node, args: list[Batched], size: Dim) -> Batched:
    widths = ((0, 0), *node.attrs["pad_width"])
    return bind(node.op, args[0][0], **_attrs(node, pad_width=widths)), True


# -- gathering ---------------------------------------------------------------------------


def _gather_per_example(x: Any, indices: Any, axis: int, index_rank: int) -> Any:
    """take(x[i], indices[i], axis) for every example i, both batched: x's axis `axis`
    (of an example) indexed by indices' dims, as take_along_axis of x shaped (B, pre, n,
    1.., post) and indices shaped (B, 1.., ids, 1..)."""
    shape = _shape(x)
    pre, post = shape[1 : axis + 1], shape[axis + 2 :]
    ids = _shape(indices)[1:]
    extra = max(index_rank - 1, 0)
    x = bind("reshape", x, shape=(shape[0], *pre, shape[axis + 1], *(1,) * extra, *post))
    lined = (_shape(indices)[0], *(1,) * len(pre), *(ids or (1,)), *(1,) * len(post))
    indices = bind("reshape", indices, shape=lined)
    full = (shape[0], *pre, *(ids or (1,)), *post)
    x = bind("broadcast_to", x, shape=(*full[: axis + 1], _shape(x)[axis + 1], *full[axis + 2 :]))
    indices = bind("broadcast_to", indices, shape=full)
    taken = bind("take_along_axis", x, indices, axis=axis + 1)
    if not ids:
        taken = bind("reshape", taken, shape=(shape[0], *pre, *post))
    return taken


def _scatter_per_example(node: Node, ct: Any, indices: Any, size: Dim) -> Any:
    """scatter_add(ct[i], indices[i], shape, axis) for every example i, both batched:
    the adjoint of `_gather_per_example`, a scatter_add_along_axis into (B, pre, n,
    ids[1:], post) (each example's rows, the indices' range checked as the example's),
    then the sum over the indices' other axes."""
    axis, shape = node.attrs["axis"], tuple(node.attrs["shape"])
    pre, n, post = shape[:axis], shape[axis], shape[axis + 1 :]
    ids = _shape(indices)[1:] or (1,)
    full = (size, *pre, *ids, *post)
    ct = bind("reshape", ct, shape=full)
    lined = (size, *(1,) * len(pre), *ids, *(1,) * len(post))
    indices = bind("broadcast_to", bind("reshape", indices, shape=lined), shape=full)
    target = (size, *pre, n, *ids[1:], *post)
    added = bind("scatter_add_along_axis", ct, indices, shape=target, axis=axis + 1)
    if len(ids) > 1:
        added = bind("sum", added, axis=tuple(range(axis + 2, axis + 1 + len(ids))))
    return added


@batches("take")
def take(node: Node, args: list[Batched], size: Dim) -> Batched:
    # x.take(indices, axis): x's axes before axis, then indices' axes, then x's after
    (x, bx), (i, bi) = args
    axis = node.attrs["axis"]
    if bx and not bi:
        return bind("take", x, i, axis=axis + 1), True
    if bi and not bx:  # the batch lands at `axis`, the first of indices' axes
        return move_axis(bind("take", x, i, axis=axis), axis, 0), True
    if not _known(*_shape(x), *_shape(i)):
        return loop_over_examples(node, args, size), True
    return _gather_per_example(x, i, axis, _rank(node, 1)), True


@batches("take_along_axis")
def take_along_axis(node: Node, args: list[Batched], size: Dim) -> Batched:
    (x, bx), (i, bi) = args
    x, i = batched(x, bx, size), batched(i, bi, size)
    if _rank(node, 0) == 0:
        return _on_columns(node, [x, i], axis=1), True
    return bind("take_along_axis", x, i, axis=node.attrs["axis"] + 1), True


@batches("scatter_add_along_axis")
def scatter_add_along_axis(node: Node, args: list[Batched], size: Dim) -> Batched:
    (ct, bc), (i, bi) = args
    ct, i = batched(ct, bc, size), batched(i, bi, size)
    if _rank(node, 0) == 0:
        return _on_columns(node, [ct, i], axis=1, shape=(_shape(ct)[0], 1)), True
    shape = (_shape(ct)[0], *node.attrs["shape"])
    return bind("scatter_add_along_axis", ct, i, shape=shape, axis=node.attrs["axis"] + 1), True


@batches("scatter_add")
def scatter_add(node: Node, args: list[Batched], size: Dim) -> Batched:
    # the adjoint of take: ct's rows added into a zero array at the indices
    (ct, bc), (i, bi) = args
    if bi and not _known(size, *node.attrs["shape"], *_shape(i)):
        return loop_over_examples(node, args, size), True
    if bi:
        return _scatter_per_example(node, batched(ct, bc, size), i, size), True
    shape = (_shape(ct)[0], *node.attrs["shape"])
    return bind("scatter_add", ct, i, shape=shape, axis=node.attrs["axis"] + 1), True


@batches("embedding")
def embedding(node: Node, args: list[Batched], size: Dim) -> Batched:
    (i, bi), (w, bw) = args
    if not bw:
        return bind("embedding", i, w, **node.attrs), True
    if node.attrs["padding_idx"] is not None:  # its gradient skips that row: take's does not
        raise VmapError(
            f"vmap: {node.describe()} has a weight that differs per example and a "
            "padding_idx; give vmap an unbatched table (in_axes=None)"
        )
    if not _known(*_shape(w), *_shape(i)):
        return loop_over_examples(node, args, size), True
    return _gather_per_example(w, batched(i, bi, size), 0, _rank(node, 0)), True


# -- contractions ------------------------------------------------------------------------


def batched_matmul(a: Any, ra: int, ba: bool, b: Any, rb: int, bb: bool) -> Any:
    """The batched value of a @ b, given each operand's per-example rank and whether it
    is batched. The batch must never be numpy's contracted axis nor a matrix row of the
    other operand, so 1-D operands are made matrices explicitly."""
    if ba and bb:
        if ra == 1:  # a row (B, 1, k)
            a = bind("reshape", a, shape=(_shape(a)[0], 1, _shape(a)[1]))
        if rb == 1:  # a column (B, k, 1)
            b = bind("reshape", b, shape=(*_shape(b), 1))
        pa, pb = max(ra, 2), max(rb, 2)
        # (an outer product, one contracted term, stays a matmul: as a broadcast
        # multiply the native tier ran the digits MLP's per-example gradients 5x slower)
        product = bind("matmul", ones_after_batch(a, pb - pa), ones_after_batch(b, pa - pb))
        if ra == 1 or rb == 1:  # drop the axes numpy drops for a 1-D operand
            shape = _shape(product)
            keep = (
                shape[:-2] + (() if ra == 1 else (shape[-2],)) + (() if rb == 1 else (shape[-1],))
            )
            product = bind("reshape", product, shape=keep)
        return product
    if ba:  # b the same for every example
        if ra == 1:  # the batch becomes a's matrix rows
            product = bind("matmul", a, b)  # (..., B, m) or (B,)
            return product if rb <= 2 else move_axis(product, -2, 0)
        if rb == 2:  # the examples' rows as the rows of one matrix: one product
            return _rows_times(a, b)
        return bind("matmul", ones_after_batch(a, rb - ra), b)
    # a the same for every example
    if rb == 1:  # b's examples become the columns of a matrix (k, B)
        product = bind("matmul", a, bind("transpose", b, axes=(1, 0)))
        return move_axis(product, -1, 0)
    return bind("matmul", a, ones_after_batch(b, ra - rb))


def _rows_times(a: Any, b: Any) -> Any:
    """a (B, ..., n, k) @ b (k, m) as one (B*...*n, k) @ (k, m) product where the merged
    size can be written down (known, or the batch alone); else a stack of products."""
    shape = _shape(a)
    rows = shape[1:-1]
    # the merged size spelled out, not -1: reshape cannot infer a -1 beside a 0 (k = 0)
    if all(d == 1 for d in rows):
        merged = bind("reshape", a, shape=(shape[0], shape[-1]))
    elif not any(is_symbol(d) for d in shape[:-1]):
        merged = bind("reshape", a, shape=(math.prod(shape[:-1]), shape[-1]))
    else:
        return bind("matmul", a, b)
    product = bind("matmul", merged, b)
    return bind("reshape", product, shape=(*shape[:-1], _shape(b)[-1]))


@batches("matmul")
def matmul(node: Node, args: list[Batched], size: Dim) -> Batched:
    (a, ba), (b, bb) = args
    return batched_matmul(a, _rank(node, 0), ba, b, _rank(node, 1), bb), True


@batches("contract_rows")
def contract_rows(node: Node, args: list[Batched], size: Dim) -> Batched:
    # x (..., k), y (..., n) -> x^T y (k, n) over the flattened leading axes
    (x, bx), (y, by) = args
    x, y = batched(x, bx, size), batched(y, by, size)
    k, n = node.type.shape
    rows_x = bind("reshape", x, shape=(_shape(x)[0], -1, k))
    rows_y = bind("reshape", y, shape=(_shape(y)[0], -1, n))
    return bind("matmul", bind("transpose", rows_x, axes=(0, 2, 1)), rows_y), True


@batches("gemm")
def gemm(node: Node, args: list[Batched], size: Dim) -> Batched:
    # alpha op(a) @ op(b) + beta c, spelled with the batched matmul
    (a, ba), (b, bb), *rest = args
    attrs = node.attrs

    def side(v: Any, flag: bool, trans: bool) -> Any:
        if not trans:
            return v
        return bind("transpose", v, axes=(0, 2, 1) if flag else (1, 0))

    a, b = side(a, ba, attrs["trans_a"]), side(b, bb, attrs["trans_b"])
    product = batched_matmul(a, 2, ba, b, 2, bb) if ba or bb else bind("matmul", a, b)
    result = bind("mul", product, attrs["alpha"]) if attrs["alpha"] != 1.0 else product
    if rest:
        c, bc = rest[0]
        c = ones_after_batch(c, 2 - _rank(node, 2)) if bc else c
        result = bind("add", result, bind("mul", c, attrs["beta"]) if attrs["beta"] != 1.0 else c)
    return result, True


# -- images: merge the batch into N --------------------------------------------------------


def _merge_batch(value: Any) -> Any:
    """(B, N, ...) as (B*N, ...): the batch joins the images' axis."""
    shape = _shape(value)
    return bind("reshape", value, shape=(shape[0] * shape[1], *shape[2:]))


def _split_batch(value: Any, size: int, count: int) -> Any:
    """(B*N, ...) as (B, N, ...), N = `count` (given: B may be 0)."""
    return bind("reshape", value, shape=(size, count, *_shape(value)[1:]))


@batches(
    "max_pool2d", "avg_pool2d", "max_pool2d_backward", "max_pool2d_select", "avg_pool2d_backward"
)
def pooling(node: Node, args: list[Batched], size: Dim) -> Batched:
    if not _known(size, *(x.type.shape[0] for x in node.inputs)):
        return loop_over_examples(node, args, size), True
    values = [_merge_batch(batched(v, flag, size)) for v, flag in args]
    return _split_batch(bind(node.op, *values, **node.attrs), size, node.type.shape[0]), True


@batches("conv2d", "conv_transpose2d")
def convolution(node: Node, args: list[Batched], size: Dim) -> Batched:
    """An unbatched weight: the batch joins the images' axis N. A batched weight: one
    convolution of `size` times as many groups, each example's channels a block."""
    (x, bx), (w, bw) = args
    images, weight = node.inputs[0].type.shape, node.inputs[1].type.shape
    # (no examples: groups=0 is no convolution, and the loop of no steps is empty)
    if not _known(size, images[0]) or bw and (not _known(*images, *weight) or size == 0):
        return loop_over_examples(node, args, size), True
    if not bw:
        y = bind(node.op, _merge_batch(x), w, **node.attrs)
        return _split_batch(y, size, images[0]), True
    x = batched(x, bx, size)
    n, c = _shape(x)[1:3]
    # images (N, B*C, H, W), example b's channels the b-th block
    x = bind("reshape", move_axis(x, 0, 1), shape=(n, size * c, *_shape(x)[3:]))
    w = bind("reshape", w, shape=(size * _shape(w)[1], *_shape(w)[2:]))
    groups = node.attrs["groups"] * size
    y = bind(node.op, x, w, **_attrs(node, groups=groups))  # (N, B*O, Ho, Wo)
    y = bind("reshape", y, shape=(n, size, node.type.shape[1], *_shape(y)[2:]))
    return move_axis(y, 1, 0), True


# -- random draws: one stream per example ------------------------------------------------


@batches("random_uniform", "random_normal", "fold_in")
def per_example_draws(node: Node, args: list[Batched], size: Dim) -> Batched:
    """A key that differs per example draws each example's numbers from its own key,
    the bits it draws alone (a batched draw would number its counters across examples)."""
    return loop_over_examples(node, args, size), True


def loop_over_examples(node: Node, args: list[Batched], size: Dim) -> Any:
    """The node run example by example: a scan over the batched operands (its xs), the
    unbatched ones its consts, the node itself its body; the ys are the batched value.
    Exact, and slower than a batched op: for what has no batched form (random draws
    per key) or none nameable (a merge of a symbolic batch with another axis)."""
    batched_args = [v for v, flag in args if flag]
    shared = [v for v, flag in args if not flag]
    order = [k for k, (_, flag) in enumerate(args) if flag]
    order += [k for k, (_, flag) in enumerate(args) if not flag]
    types = [node.inputs[k].type for k in order]

    def body(values: list[Batched]) -> list[Any]:
        inputs: list[Any] = [None] * len(values)
        for k, (value, _) in zip(order, values):
            inputs[k] = value
        return [bind(node.op, *inputs, **node.attrs)]

    graph = _hook("new_body")(node.op, types, [False] * len(types), size, body)
    value = bind(
        "scan",
        *batched_args,
        *shared,
        body=graph,
        length=size,
        num_carry=0,
        num_xs=len(batched_args),
    )
    return bind("result", value, index=0)


# -- nodes with several results, and control flow -------------------------------------------


@batches("result")
def result(node: Node, args: list[Batched], size: Dim) -> Batched:
    value, flags = args[0]
    index = node.attrs["index"]
    if isinstance(value, tuple):
        return value[index], flags[index]
    return bind("result", value, index=index), flags[index]


# the pass (graphc.passes.vmap) installs how bodies are batched, as passes/control_ad.py
# installs how they are differentiated: batching a body is batching a graph
_BODY: dict[str, Callable[..., Any]] = {}


def set_body_batching(
    walk: Callable[[Graph, list[Batched], Dim], list[Batched]],
    new_body: Callable[..., Graph],
) -> None:
    """`walk(graph, args, size)`: a graph's outputs batched, recorded in the graph being
    built; `new_body(name, types, flags, size, build)`: a closed body whose placeholders
    have `types` (batched where `flags` say), its outputs `build(args)`'s values."""
    _BODY["walk"], _BODY["new_body"] = walk, new_body


def _hook(name: str) -> Callable[..., Any]:
    if name not in _BODY:
        raise VmapError("vmap of control flow needs graphc.passes (import graphc)")
    return _BODY[name]


def batch_body(
    body: Graph, flags: Sequence[bool], size: Dim, force: Sequence[bool] | None = None
) -> tuple[Graph, list[bool]]:
    """`body` batched for operands batched where `flags` say: the new body, and which
    of its results are batched (at least those `force` asks for, broadcast if need be)."""
    found: list[bool] = []

    def build(args: list[Batched]) -> list[Any]:
        outs = _hook("walk")(body, args, size)
        wanted = force if force is not None else [False] * len(outs)
        found[:] = [bool(flag or want) for (_, flag), want in zip(outs, wanted)]
        return [batched(v, flag, size) if want else v for (v, flag), want in zip(outs, wanted)]

    types = [p.type for p in body.inputs]
    names = [p.name for p in body.inputs]
    return _hook("new_body")(body.name, types, list(flags), size, build, names), found


def _select(pred: Any, then: Any, other: Any, rank: int) -> Any:
    """Example by example, `then` where the (B,) predicate holds, else `other`."""
    pred = bind("reshape", pred, shape=(_shape(pred)[0], *(1,) * rank))
    return bind("where", pred, then, other)


def _forwarded(body: Graph, k: int) -> int | None:
    """The input of `body` that its output `k` is, unchanged, if it is one."""
    source = body.outputs[k].inputs[0]
    return body.inputs.index(source) if source in body.inputs else None


def _held_where_not_taken(
    node: Node, pred: Any, operands: Sequence[Batched], taken: bool
) -> list[Batched]:
    """A branch's float operands behind stop_gradient for the examples that do not take
    it, as JAX's batched cond does: their cotangent there is 0, and 0 times an infinite
    derivative inside the branch (sqrt at 0) would be NaN, where the per-example cond
    sends the branch no gradient at all."""
    from graphc.ops.custom import stop_gradient  # custom builds bodies: imported late

    guarded: list[Batched] = []
    for k, (value, flag) in enumerate(operands, start=1):
        if not is_float(value.type.dtype):
            guarded.append((value, flag))
            continue
        held = stop_gradient(value)
        pair = (value, held) if taken else (held, value)
        guarded.append((_select(pred, *pair, _rank(node, k)), True))
    return guarded


@batches("cond")
def cond(node: Node, args: list[Batched], size: Dim) -> Batched:
    (pred, batched_pred), operands = args[0], args[1:]
    then_body, else_body = node.attrs["then_body"], node.attrs["else_body"]
    ranks = [len(t.shape) for t in node.type.items]
    if batched_pred:  # both branches for every example, then each example's own
        walk, graph = _hook("walk"), active_graph()
        start = len(graph.nodes) if graph is not None else 0
        taken = walk(then_body, _held_where_not_taken(node, pred, operands, True), size)
        other = walk(else_body, _held_where_not_taken(node, pred, operands, False), size)
        for made in graph.nodes[start:] if graph is not None else ():
            made.meta.setdefault(BOTH_BRANCHES, node.name)
        values, flags = [], []
        for k, ((t, _), (o, _), rank) in enumerate(zip(taken, other, ranks)):
            j = _forwarded(then_body, k)
            if j is not None and j == _forwarded(else_body, k):  # operand j, either way
                values.append(operands[j][0])
                flags.append(operands[j][1])  # (unbatched stays so, as in JAX)
            else:
                values.append(_select(pred, t, o, rank))
                flags.append(True)
        return tuple(values), tuple(flags)
    flags = [flag for _, flag in operands]
    _, then_out = batch_body(then_body, flags, size)
    _, else_out = batch_body(else_body, flags, size)
    force = [a or b for a, b in zip(then_out, else_out)]  # both branches give one type
    then_new, _ = batch_body(then_body, flags, size, force)
    else_new, _ = batch_body(else_body, flags, size, force)
    value = bind("cond", pred, *(v for v, _ in operands), then_body=then_new, else_body=else_new)
    return _results(value), tuple(force)


@batches("custom_vjp")
def custom_vjp(node: Node, args: list[Batched], size: Dim) -> Batched:
    """The forward body batched; the backward body batched on the forward's batched
    output and cotangent, its cotangent of an unbatched input summed over the batch
    (every example's contribution to the one shared value)."""
    flags = [flag for _, flag in args]
    forward, _ = batch_body(node.attrs["forward"], flags, size, [True])
    old = node.attrs["backward"]

    def backward_body(cts: list[Batched]) -> list[Any]:
        grads = _hook("walk")(old, cts, size)
        return [
            v if flag and was else bind("sum", batched(v, was, size), axis=0)
            for (v, was), flag in zip(grads, flags)
        ]

    types = [p.type for p in old.inputs]
    names = [p.name for p in old.inputs]
    backward = _hook("new_body")(old.name, types, [*flags, True, True], size, backward_body, names)
    values = [v for v, _ in args]
    return bind("custom_vjp", *values, **_attrs(node, forward=forward, backward=backward)), True


def _results(value: Any) -> tuple:
    return tuple(bind("result", value, index=k) for k in range(len(value.type.items)))


def _carried(
    body: Graph, carries: list[bool], others: list[bool], size: Dim, extra: int
) -> tuple[Graph, list[bool], list[bool]]:
    """The carries' flags at the fixed point: a carry is batched if its initial value
    is, or if the body makes it so from batched values; the batched body with them."""
    while True:
        force = carries + [False] * extra
        new_body, found = batch_body(body, carries + others, size, force)
        grown = [a or b for a, b in zip(carries, found)]
        if grown == carries:
            return new_body, carries, found[len(carries) :]
        carries = grown


@batches("scan")
def scan(node: Node, args: list[Batched], size: Dim) -> Batched:
    attrs = node.attrs
    nc, nx = attrs["num_carry"], attrs["num_xs"]
    carries, xs, consts = args[:nc], args[nc : nc + nx], args[nc + nx :]
    others = [flag for _, flag in xs] + [flag for _, flag in consts]
    ny = len(node.type.items) - nc
    body, flags, ys = _carried(attrs["body"], [f for _, f in carries], others, size, ny)
    values = [batched(v, was, size) if flag else v for (v, was), flag in zip(carries, flags)]
    values += [move_axis(v, 0, 1) if flag else v for v, flag in xs]  # steps along axis 0
    values += [v for v, _ in consts]
    value = bind("scan", *values, **_attrs(node, body=body))
    outs = _results(value)
    stacked = tuple(move_axis(y, 1, 0) if flag else y for y, flag in zip(outs[nc:], ys))
    return outs[:nc] + stacked, tuple(flags) + tuple(ys)


@batches("while_loop")
def while_loop(node: Node, args: list[Batched], size: Dim) -> Batched:
    attrs = node.attrs
    nc, ncc = attrs["num_carry"], attrs["num_cond_consts"]
    carries, cond_consts, body_consts = args[:nc], args[nc : nc + ncc], args[nc + ncc :]
    body, flags, _ = _carried(
        attrs["body"], [f for _, f in carries], [f for _, f in body_consts], size, 0
    )
    cond_flags = flags + [f for _, f in cond_consts]
    cond_body, (batched_pred,) = batch_body(attrs["cond_body"], cond_flags, size)
    if not batched_pred:
        values = [batched(v, was, size) if flag else v for (v, was), flag in zip(carries, flags)]
        values += [v for v, _ in cond_consts] + [v for v, _ in body_consts]
        value = bind("while_loop", *values, **_attrs(node, cond_body=cond_body, body=body))
        return _results(value), tuple(flags)
    return _while_any(node, carries, cond_consts, body_consts, size)


def _while_any(
    node: Node,
    carries: list[Batched],
    cond_consts: list[Batched],
    body_consts: list[Batched],
    size: Dim,
) -> Batched:
    """A while_loop whose condition differs per example: every carry batched, the loop
    runs while any example's condition holds, and a step keeps the carries of the
    examples whose condition no longer holds."""
    walk, new_body = _hook("walk"), _hook("new_body")
    old_cond, old_body = node.attrs["cond_body"], node.attrs["body"]
    nc, ncc = len(carries), len(cond_consts)
    carry_types = [p.type for p in old_cond.inputs[:nc]]
    cc_types = [p.type for p in old_cond.inputs[nc:]]
    bc_types = [p.type for p in old_body.inputs[nc:]]
    cc_flags = [f for _, f in cond_consts]
    bc_flags = [f for _, f in body_consts]

    def any_holds(args: list[Batched]) -> list[Any]:
        # any over no examples is False: the loop runs no step (x.any() counts)
        ((pred, _),) = walk(old_cond, args, size)
        return [pred.any()]

    def step(args: list[Batched]) -> list[Any]:
        carry, cc, bc = args[:nc], args[nc : nc + ncc], args[nc + ncc :]
        ((pred, _),) = walk(old_cond, carry + cc, size)
        stepped = walk(old_body, carry + bc, size)
        return [
            _select(pred, batched(new, flag, size), old, len(t.shape))
            for (new, flag), (old, _), t in zip(stepped, carry, carry_types)
        ]

    cond_graph = new_body(
        old_cond.name, carry_types + cc_types, [True] * nc + cc_flags, size, any_holds
    )
    body_graph = new_body(
        old_body.name,
        carry_types + cc_types + bc_types,
        [True] * nc + cc_flags + bc_flags,
        size,
        step,
    )
    values = [batched(v, flag, size) for v, flag in carries]
    values += [v for v, _ in cond_consts] * 2 + [v for v, _ in body_consts]
    value = bind(
        "while_loop",
        *values,
        cond_body=cond_graph,
        body=body_graph,
        num_carry=nc,
        num_cond_consts=ncc,
    )
    return _results(value), (True,) * nc
