"""How each op carries the batch axis: the batch split's per-op rules (split.py).

A rule looks at one op node whose inputs include at least one *mapped* value (a value
that carries the batch dim on one axis, row i depending only on row i of the batch)
and says what the node's value is:

- ``Mapped(axis)``: mapped again, the batch on `axis` of the result;
- ``Reduce(kind)``: the node combines the batch's rows into a value without the batch
  dim, and ``kind`` says how per-chunk partials of it combine (see `Reduce`);
- or it raises `UnsplittableError` with the reason (a value that would depend on two rows,
  or on a row's position in the batch).

Each rule is registered on the ops it serves, as their "batch_split" rule
(`OpDef.rules`), when this module is imported; `batch_rule` looks it up. Elementwise ops
need none: they share the broadcasting rule. Rules go by kind of op: reductions reduce
the axes their attrs name, matmul contracts its inner axes, shape ops move the axis
where they move data. An op without a rule that touches a mapped value is unsplittable:
the conservative default, since a wrong answer is worse than an error.

``axes`` holds, per input of the node, the batch axis of that input, or None for an
input that does not depend on the batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graphc.ir.graph import Node
from graphc.ir.registry import get_op, register_rule
from graphc.ops.indexing import parse_index


@dataclass(frozen=True)
class Mapped:
    """The node's value carries the batch dim on `axis`."""

    axis: int


@dataclass(frozen=True)
class Reduce:
    """The node reduces the batch away. `kind` is a reduction op (sum, max, min, prod,
    logsumexp) whose result on a chunk is the chunk's partial and which merges the
    partials of all chunks, or "mean": a chunk's partial is its sum, the partials are
    merged by sum and divided by the whole batch's count."""

    kind: str


class UnsplittableError(Exception):
    """Raised by a rule with the reason the node cannot be computed chunk by chunk."""


Outcome = Mapped | Reduce
SplitRule = Callable[[Node, Sequence[int | None]], Outcome]
KIND = "batch_split"  # the rules' kind in `OpDef.rules`


def carries_batch(*ops: str) -> Callable[[SplitRule], SplitRule]:
    """Register the decorated function as the batch-split rule of each op in `ops`."""

    def register(fn: SplitRule) -> SplitRule:
        for op in ops:
            register_rule(op, KIND, fn)
        return fn

    return register


def batch_rule(node: Node) -> SplitRule | None:
    """The rule of `node`'s op: its own, or the broadcasting one for elementwise ops."""
    opdef = get_op(node.op)
    own = opdef.rules.get(KIND)
    if own is None and opdef.elementwise:
        return elementwise
    return own


def _rank(node: Node, index: int) -> int:
    return len(node.inputs[index].type.shape)


# -- elementwise and broadcasting -----------------------------------------------------


def _aligned(node: Node, axes: Sequence[int | None]) -> int:
    """The output axis every mapped input's batch axis lands on under numpy's
    right-aligned broadcasting; two different ones would pair row i with row j."""
    rank = len(node.type.shape)
    landed = {a + rank - _rank(node, i) for i, a in enumerate(axes) if a is not None}
    if len(landed) != 1:
        raise UnsplittableError(
            "its operands carry the batch on different axes, pairing different rows"
        )
    return landed.pop()


@carries_batch("broadcast_to")  # elementwise ops find it without an entry
def elementwise(node: Node, axes: Sequence[int | None]) -> Outcome:
    # out[i] depends on the operands' elements i (broadcast): row i on row i
    return Mapped(_aligned(node, axes))


@carries_batch("sum_to")
def sum_to(node: Node, axes: Sequence[int | None]) -> Outcome:
    # sum_to sums the leading axes away and those the target shape has as 1
    axis = axes[0]
    target = node.attrs["shape"]
    lead = _rank(node, 0) - len(target)
    if axis < lead or target[axis - lead] == 1:
        return Reduce("sum")
    return Mapped(axis - lead)


# -- reductions -----------------------------------------------------------------------


def _reduced_axes(node: Node) -> tuple[int, ...]:
    axis = node.attrs.get("axis")
    rank = _rank(node, 0)
    if axis is None:
        return tuple(range(rank))
    return tuple(axis) if isinstance(axis, (tuple, list)) else (axis % max(rank, 1),)


def _after_reduction(node: Node, axis: int) -> Mapped:
    if node.attrs.get("keepdims"):
        return Mapped(axis)
    return Mapped(axis - sum(1 for a in _reduced_axes(node) if a < axis))


@carries_batch("sum", "mean", "max", "min", "prod", "logsumexp")
def reduction(node: Node, axes: Sequence[int | None]) -> Outcome:
    if axes[0] in _reduced_axes(node):
        return Reduce(node.op)
    return _after_reduction(node, axes[0])


@carries_batch("argmax", "argmin")
def index_reduction(node: Node, axes: Sequence[int | None]) -> Outcome:
    if axes[0] in _reduced_axes(node):
        raise UnsplittableError("it finds a position along the batch axis, which no chunk knows")
    return _after_reduction(node, axes[0])


# -- along one axis ---------------------------------------------------------------------


def _along(node: Node, axes: Sequence[int | None], why: str) -> Outcome:
    axis = node.attrs.get("axis")
    rank = _rank(node, 0)
    touched = range(rank) if axis is None else [a % rank for a in _as_tuple(axis)]
    if axes[0] in touched:
        raise UnsplittableError(f"it {why} along the batch axis")
    return Mapped(axes[0])


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@carries_batch("softmax", "log_softmax")
def normalizes(node: Node, axes: Sequence[int | None]) -> Outcome:
    return _along(node, axes, "normalizes over rows")


@carries_batch("cumsum", "cumprod")
def scans(node: Node, axes: Sequence[int | None]) -> Outcome:
    return _along(node, axes, "accumulates earlier rows")


@carries_batch("flip", "argsort")
def reorders(node: Node, axes: Sequence[int | None]) -> Outcome:
    return _along(node, axes, "reorders rows")


@carries_batch("layer_norm", "layer_norm_grad")
def layer_norm(node: Node, axes: Sequence[int | None]) -> Outcome:
    mapped = {a for a in axes if a is not None}
    if len(mapped) != 1 or axes[0] is None:
        raise UnsplittableError("its weights carry the batch")
    if axes[0] >= node.attrs["axis"] % _rank(node, 0):  # it normalizes over axis and after
        raise UnsplittableError("it normalizes over rows along the batch axis")
    return Mapped(axes[0])


@carries_batch("tril", "triu")
def triangle(node: Node, axes: Sequence[int | None]) -> Outcome:
    if axes[0] >= _rank(node, 0) - 2:
        raise UnsplittableError("its triangle spans the batch axis")
    return Mapped(axes[0])


@carries_batch("one_hot")
def one_hot(node: Node, axes: Sequence[int | None]) -> Outcome:
    return Mapped(axes[0])  # a class axis is appended last


# -- contractions ---------------------------------------------------------------------


@carries_batch("matmul")
def matmul(node: Node, axes: Sequence[int | None]) -> Outcome:
    """x @ y with numpy's rules: each operand's last two axes are the matrix (a 1-D
    operand is promoted to one), the leading ones broadcast. The batch on the contracted
    axis of both operands is a sum over rows (x.T @ dy); on one operand's rows, columns
    or a leading axis it stays mapped; anything else pairs rows of both (x @ x.T)."""
    rx, ry = _rank(node, 0), _rank(node, 1)
    px, py = max(rx, 2), max(ry, 2)  # promoted ranks
    rank = max(px, py)  # the promoted result's rank: leading axes, then (n, m)

    def role(axis: int | None, promoted: int, own: int, contracted: int) -> int | str | None:
        """ "k" for the contracted axis, else the promoted result's axis it lands on."""
        if axis is None:
            return None
        if own == 1 or axis == promoted - 2 + contracted:
            return "k"
        if axis == promoted - 2 + (1 - contracted):  # x's rows (n) or y's columns (m)
            return rank - 2 + (1 - contracted)
        return axis + rank - promoted

    role_x = role(axes[0], px, rx, 1)
    role_y = role(axes[1], py, ry, 0)
    if role_x == "k" and role_y == "k":
        return Reduce("sum")
    if "k" in (role_x, role_y):
        raise UnsplittableError("it contracts the batch axis of one operand against a fixed axis")
    if role_x is not None and role_y is not None and role_x != role_y:
        raise UnsplittableError("it pairs every row of one operand with every row of the other")
    landed = role_x if role_x is not None else role_y
    if rx == 1 and landed == rank - 1:  # a 1-D x's row axis is dropped from the result
        landed -= 1
    return Mapped(landed)


@carries_batch("contract_rows")
def contract_rows(node: Node, axes: Sequence[int | None]) -> Outcome:
    # x (..., k) and y (..., n) -> x^T y (k, n), the leading axes flattened and contracted
    ax, ay = axes
    lead_x = ax is not None and ax < _rank(node, 0) - 1
    lead_y = ay is not None and ay < _rank(node, 1) - 1
    if lead_x and lead_y and ax == ay:
        return Reduce("sum")
    if ax == _rank(node, 0) - 1 and ay is None:
        return Mapped(0)
    if ay == _rank(node, 1) - 1 and ax is None:
        return Mapped(1)
    raise UnsplittableError("it contracts rows of one operand against fixed rows of the other")


# -- shape ops --------------------------------------------------------------------------


@carries_batch("transpose")
def transpose(node: Node, axes: Sequence[int | None]) -> Outcome:
    return Mapped(tuple(node.attrs["axes"]).index(axes[0]))


def _prefix(dims: Sequence[Any]) -> tuple[int, list[str]]:
    known = math.prod(d for d in dims if isinstance(d, int))
    return known, sorted(d for d in dims if isinstance(d, str))


@carries_batch("reshape")
def reshape(node: Node, axes: Sequence[int | None]) -> Outcome:
    """A reshape keeps rows apart when the batch dim stays a whole axis with the same
    number of elements before it; merging it with another axis (B*3) or splitting it
    would regroup elements across rows."""
    batch = node.inputs[0].type.shape[axes[0]]
    target = tuple(node.attrs["shape"])
    if target.count(batch) != 1:
        raise UnsplittableError("it merges the batch axis with another axis")
    axis = target.index(batch)
    if _prefix(node.inputs[0].type.shape[: axes[0]]) != _prefix(target[:axis]):
        raise UnsplittableError("it moves elements across the batch axis")
    return Mapped(axis)


def _basic_index(node: Node, rank: int) -> list[tuple[int | None, int | None, Any]]:
    """(input axis, output axis, item) for each item of a basic index over `rank` axes."""
    items = parse_index(node.attrs["index"])
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (rank - used) + items[at + 1 :]
    else:
        items = items + (slice(None),) * (rank - used)
    walk, i, o = [], 0, 0
    for item in items:
        if item is None:
            walk.append((None, o, item))
            o += 1
        elif isinstance(item, slice):
            walk.append((i, o, item))
            i, o = i + 1, o + 1
        else:
            walk.append((i, None, item))
            i += 1
    return walk


def _full(item: Any) -> bool:
    return isinstance(item, slice) and item in (slice(None), slice(None, None, 1))


@carries_batch("slice")
def slice_(node: Node, axes: Sequence[int | None]) -> Outcome:
    for i, o, item in _basic_index(node, _rank(node, 0)):
        if i == axes[0]:
            if o is None or not _full(item):
                raise UnsplittableError("it selects rows by their position in the batch")
            return Mapped(o)
    raise UnsplittableError("its index does not reach the batch axis")  # not reached: rank checks


@carries_batch("unslice")
def unslice(node: Node, axes: Sequence[int | None]) -> Outcome:
    # the adjoint of slice: ct's axis o is written into the result's axis i
    for i, o, item in _basic_index(node, len(node.type.shape)):
        if o == axes[0]:
            if i is None or not _full(item):
                raise UnsplittableError("it places rows by their position in the batch")
            return Mapped(i)
    raise UnsplittableError("its index does not reach the batch axis")


@carries_batch("concat")
def concat(node: Node, axes: Sequence[int | None]) -> Outcome:
    if any(a is None for a in axes) or len(set(axes)) != 1:
        raise UnsplittableError("its pieces do not all carry the batch on one axis")
    if axes[0] == node.attrs["axis"]:
        raise UnsplittableError("it joins along the batch axis")
    return Mapped(axes[0])


# -- gathering --------------------------------------------------------------------------


@carries_batch("take")
def take(node: Node, axes: Sequence[int | None]) -> Outcome:
    # x.take(indices, axis): the result's axes are x's before axis, indices', x's after
    ax, ai = axes
    axis = node.attrs["axis"]
    if ax is not None and ai is not None:
        raise UnsplittableError("both the data and the indices carry the batch")
    if ax is not None:
        if ax == axis:
            raise UnsplittableError("it gathers rows by their position in the batch")
        return Mapped(ax if ax < axis else ax + _rank(node, 1) - 1)
    return Mapped(axis + ai)


@carries_batch("scatter_add")
def scatter_add(node: Node, axes: Sequence[int | None]) -> Outcome:
    # scatter_add(ct, indices, shape, axis): ct's rows along `axis` (indices' dims there)
    # are added into the output at the positions the indices name. Rows of the batch
    # among the indices' (an embedding's gradient) add into one output: each chunk's
    # scatter is a partial, and the partials sum, as the op is linear in ct
    ac, ai = axes
    axis = node.attrs["axis"]
    if ai is not None and ac == axis + ai:
        return Reduce("sum")
    raise UnsplittableError(
        "it scatters rows of the batch to positions its indices do not carry the batch for"
    )


@carries_batch("embedding")
def embedding(node: Node, axes: Sequence[int | None]) -> Outcome:
    if axes[1] is not None:
        raise UnsplittableError("its table carries the batch")
    return Mapped(axes[0])


@carries_batch("take_along_axis")
def take_along_axis(node: Node, axes: Sequence[int | None]) -> Outcome:
    if axes[0] == node.attrs["axis"] or axes[1] == node.attrs["axis"]:
        raise UnsplittableError("it gathers along the batch axis")
    if axes[0] is not None and axes[1] is not None and axes[0] != axes[1]:
        raise UnsplittableError("its operands carry the batch on different axes")
    return Mapped(axes[0] if axes[0] is not None else axes[1])


# -- images -----------------------------------------------------------------------------


@carries_batch("conv2d", "conv_transpose2d")
def convolution(node: Node, axes: Sequence[int | None]) -> Outcome:
    # NCHW: images are independent along N; channels and pixels are mixed
    if axes[0] != 0 or axes[1] is not None:
        raise UnsplittableError("the batch is not the images' axis N, or the kernel carries it")
    return Mapped(0)


@carries_batch("max_pool2d", "avg_pool2d")
def pooling(node: Node, axes: Sequence[int | None]) -> Outcome:
    if axes[0] >= _rank(node, 0) - 2:
        raise UnsplittableError("its windows slide along the batch axis")
    return Mapped(axes[0])


# -- linearity in values reduced over the batch -------------------------------------------

# A loop's body may add, at every step, values reduced over the batch into a carry (the
# weight gradients a recurrent layer's backward scan accumulates): split.py runs the loop
# on each chunk and sums the chunks' results, which is the whole batch's result only if
# every step's increment is linear in the body's sums over the batch. Each op below is
# linear in the operands that may be reduced: "every" (a sum of reduced operands, where
# a batch-free term would be counted once a chunk), "first" (its data operand, the rest
# batch-free: a division's divisor), or "one" (one operand, the other a batch-free factor).
LINEAR = "batch_split_linear"  # the facts' kind in `OpDef.rules`


def linear_in(which: str, *ops: str) -> None:
    """Register that each op in `ops` is linear in `which` of its operands."""
    for op in ops:
        register_rule(op, LINEAR, which)


linear_in("every", "add", "sub")
linear_in("first", "neg", "transpose", "reshape", "sum", "sum_to", "broadcast_to", "div")
linear_in("one", "mul", "matmul")


def linear(node: Node, reduced: Sequence[bool]) -> bool:
    """Whether `node` is linear in its operands flagged `reduced` (the others batch-free)."""
    which = get_op(node.op).rules.get(LINEAR)
    if which == "every":
        return all(reduced)
    if which == "first":
        return reduced[0] and not any(reduced[1:])
    return which == "one" and sum(reduced) == 1
