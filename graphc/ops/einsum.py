"""`einsum`: Einstein summation as a builder over transpose, reshape, sum and matmul.

Operands are contracted left to right, two at a time. For each pair the labels fall
into four groups: batch (in both, still needed), contracted (in both, not needed
after), left-only and right-only. The left operand is arranged as (batch, left,
contracted) and the right one as (batch, contracted, right); each group is merged
into one dim by a reshape and the pair becomes one batched matmul, one BLAS call, as
in torch.einsum ('bhqd,bhkd->bhqk' is a matmul with a transposed operand). Labels only
one operand has and nobody needs are summed first. A pair with nothing to contract is
a broadcast product; a group that cannot be merged (two dims, one symbolic) falls back
to a broadcast product and a sum. Gradients come from the primitives' own rules.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from typing import Any

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import Dim, format_shape, is_symbol
from graphc.ops import elementwise as E
from graphc.ops import linalg as L
from graphc.ops import reduce as R
from graphc.ops import shape as S
from graphc.ops.spelling import shape_of

_LETTERS = frozenset(string.ascii_letters)
# labels standing for the dims of an ellipsis: never letters, so never a user's label
_ELLIPSIS_LABELS = [chr(0x2460 + i) for i in range(64)]


def _parse(equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output's, the ellipsis spelled out."""
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise GraphcError(f"einsum: more than one '->' in {equation!r}")
    lhs, rhs = eq.split("->") if "->" in eq else (eq, None)
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise GraphcError(
            f"einsum: {equation!r} has {len(terms)} operand(s), but {len(ranks)} were given"
        )
    for term in [*terms, rhs or ""]:
        named = term.replace("...", "", 1)
        if not set(named) <= _LETTERS:
            raise GraphcError(f"einsum: bad subscripts {term!r} in {equation!r} (letters and ...)")
    spread = 0
    for term, rank in zip(terms, ranks):
        named = len(term.replace("...", ""))
        if ("..." in term and named > rank) or ("..." not in term and named != rank):
            raise ShapeError(f"einsum: subscripts {term!r} do not fit an operand of rank {rank}")
        spread = max(spread, rank - named)
    ellipsis = _ELLIPSIS_LABELS[:spread]
    inputs = []
    for term, rank in zip(terms, ranks):
        if "..." in term:
            before, after = term.split("...")
            own = rank - len(before) - len(after)
            labels = [*before, *ellipsis[spread - own :], *after]  # aligned on the right
        else:
            labels = list(term)
        if len(set(labels)) != len(labels):
            raise GraphcError(
                f"einsum: a label repeats within {term!r} (diagonals are not supported)"
            )
        inputs.append(labels)
    if rhs is None:  # implicit output: the ellipsis, then labels used once, sorted
        counts = Counter(label for labels in inputs for label in labels)
        output = ellipsis + sorted(k for k, c in counts.items() if c == 1 and k in _LETTERS)
    else:
        before, _, after = rhs.partition("...")
        output = [*before, *(ellipsis if "..." in rhs else []), *after]
    known = {label for labels in inputs for label in labels}
    if len(set(output)) != len(output) or not set(output) <= known:
        raise GraphcError(f"einsum: the output {rhs!r} must name distinct labels of the operands")
    return inputs, output


def _label_sizes(inputs: list[list[str]], shapes: list[tuple]) -> dict[str, Dim]:
    """One size per label; a size 1 broadcasts against any other."""
    sizes: dict[str, Dim] = {}
    for labels, shape in zip(inputs, shapes):
        for label, d in zip(labels, shape):
            seen = sizes.get(label, 1)
            if seen == 1 or d == seen:
                sizes[label] = d
            elif d != 1:
                raise ShapeError(
                    f"einsum: label {label!r} has sizes {seen!r} and {d!r} "
                    f"(operand shapes {', '.join(format_shape(s) for s in shapes)})"
                )
    return sizes


def _reshape(x: Any, shape: tuple) -> Any:
    return x if shape_of(x) == tuple(shape) else S.reshape(x, tuple(shape))


def _arrange(x: Any, labels: list[str], order: list[str]) -> Any:
    perm = [labels.index(label) for label in order]
    return x if perm == sorted(perm) else S.transpose(x, tuple(perm))


def _sum_unneeded(x: Any, labels: list[str], keep: set[str]) -> tuple[Any, list[str]]:
    axes = tuple(i for i, label in enumerate(labels) if label not in keep)
    if not axes:
        return x, labels
    return R.sum(x, axis=axes), [label for label in labels if label in keep]


def _merge(dims: list[Dim]) -> Dim | None:
    """The one dim holding `dims`, or None when it would be a product with a symbol."""
    symbols = [d for d in dims if is_symbol(d)]
    if not symbols:
        return math.prod(dims)  # type: ignore[arg-type]
    return symbols[0] if len(dims) == 1 else None


def _contract(
    x: Any, xl: list[str], y: Any, yl: list[str], needed: set[str], sizes: dict[str, Dim]
) -> tuple[Any, list[str]]:
    """x (labels xl) times y (labels yl), summed over the shared labels not `needed`."""
    x, xl = _sum_unneeded(x, xl, needed | set(yl))
    y, yl = _sum_unneeded(y, yl, needed | set(xl))
    batch = [k for k in xl if k in yl and k in needed]
    summed = [k for k in xl if k in yl and k not in needed]
    left = [k for k in xl if k not in yl]
    right = [k for k in yl if k not in xl]
    groups = {"batch": batch, "left": left, "summed": summed, "right": right}
    dims = {name: [sizes[k] for k in group] for name, group in groups.items()}
    merged = [_merge(dims[name]) for name in ("left", "summed", "right")]
    if summed and None not in merged:  # one batched matmul
        m, k, n = merged
        a = _reshape(_arrange(x, xl, batch + left + summed), (*dims["batch"], m, k))
        b = _reshape(_arrange(y, yl, batch + summed + right), (*dims["batch"], k, n))
        product = L.matmul(a, b)
        return _reshape(
            product, (*dims["batch"], *dims["left"], *dims["right"])
        ), batch + left + right
    # a broadcast product over (batch, left, summed, right), summed over `summed`
    ones = {name: (1,) * len(dims[name]) for name in dims}
    a_shape = (*dims["batch"], *dims["left"], *dims["summed"], *ones["right"])
    b_shape = (*dims["batch"], *ones["left"], *dims["summed"], *dims["right"])
    a = _reshape(_arrange(x, xl, batch + left + summed), a_shape)
    b = _reshape(_arrange(y, yl, batch + summed + right), b_shape)
    product = E.mul(a, b)
    if summed:
        first = len(batch) + len(left)
        product = R.sum(product, axis=tuple(range(first, first + len(summed))))
    return product, batch + left + right


def einsum(equation: str, *operands: Any) -> Any:
    """Einstein summation over the operands' labelled dims, as np.einsum and
    torch.einsum (operands given one by one or as one list).

    Labels are letters; '...' stands for leading (broadcast) dims; without '->' the
    output is the labels used once, sorted. A label may not repeat within one operand
    (no diagonals or traces). Pairs of operands become batched matmuls (see the module
    docstring), so gradients are those of matmul, transpose, reshape and sum.

    >>> import numpy as np, graphc as gc
    >>> q, k = np.ones((2, 4, 5, 8)), np.ones((2, 4, 6, 8))
    >>> gc.einsum("bhqd,bhkd->bhqk", q, k).shape
    (2, 4, 5, 6)
    >>> gc.einsum("ij,jk", np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise GraphcError("einsum: needs at least one operand")
    shapes = [shape_of(x) for x in operands]
    inputs, output = _parse(equation, [len(s) for s in shapes])
    sizes = _label_sizes(inputs, shapes)
    terms = []
    for x, labels, shape in zip(operands, inputs, shapes):
        # a dim of size 1 against a larger one broadcasts: the operand does not have it
        kept = [i for i, (k, d) in enumerate(zip(labels, shape)) if d != 1 or sizes[k] == 1]
        if len(kept) != len(labels):
            x, labels = S.reshape(x, tuple(shape[i] for i in kept)), [labels[i] for i in kept]
        terms.append((x, labels))
    x, labels = terms[0]
    for position in range(1, len(terms)):
        later = {k for _, ls in terms[position + 1 :] for k in ls}
        y, ylabels = terms[position]
        x, labels = _contract(x, labels, y, ylabels, set(output) | later, sizes)
    x, labels = _sum_unneeded(x, labels, set(output))
    return _arrange(x, labels, output)
