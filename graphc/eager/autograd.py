"""The autograd engine: `backward` and `grad` over the tape (`graphc.eager.autograd`).

Algorithm. Starting from the roots' nodes, one iterative walk over `next_functions`
counts, for every reachable node, how many edges point at it. Nodes then run in
Kahn's order: a node runs once every node that feeds it gradients has run, with the
sum of those gradients. Running a node calls its VJP and adds the results into the
buffers of its `next_functions`. There is no recursion, so chain length is bounded by
memory only.

Invariants: each reachable node is popped exactly once; a node's saved values are
released right after it runs unless `retain_graph`; with `create_graph` the whole pass
runs in grad mode, so every VJP is itself recorded, otherwise in no_grad.

`grad(outputs, inputs)` runs only the nodes from which some input is reachable and
captures the gradient arriving at each input's edge; it never touches `.grad`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from graphc.eager.errors import ArgumentError, TensorTypeError
from graphc.eager.grad_fn import AccumulateGrad, GradFn, accumulate_into, edge
from graphc.eager.grad_mode import no_grad, set_grad_enabled
from graphc.eager.tensor import Tensor, as_array, make
from graphc.ir.errors import AutodiffError, DTypeError, ShapeError
from graphc.ops import elementwise as E

Edge = tuple[GradFn | None, int]


def _tensors(value: Any, what: str) -> list[Tensor]:
    items = [value] if isinstance(value, Tensor) else list(value)
    for item in items:
        if not isinstance(item, Tensor):
            raise AutodiffError(f"{what} must be tensors, got {type(item).__name__}")
    return items


def _seed(output: Tensor, grad: Any, index: int) -> Tensor:
    """The gradient a root starts with: ones for a scalar, else the one given."""
    if not output._requires_grad:
        raise AutodiffError(
            f"element {index} of tensors does not require grad and does not have a grad_fn"
        )
    if grad is None:
        if output._data.size != 1:
            raise AutodiffError(
                f"grad can be implicitly created only for scalar outputs; output {index} has "
                f"shape {output.shape}: pass gradient= (a tensor of that shape)"
            )
        return make(np.ones_like(output._data))
    if not isinstance(grad, Tensor):
        grad = make(as_array(grad, output.dtype))
    if grad.shape != output.shape:
        raise ShapeError(
            f"gradient for output {index} has shape {grad.shape}, the output has {output.shape}"
        )
    return grad


def _per_output(grads: Any, count: int) -> list[Any]:
    if grads is None:
        return [None] * count
    if isinstance(grads, (list, tuple)):
        return list(grads)
    return [grads]


def _count_dependencies(roots: Sequence[GradFn]) -> dict[GradFn, int]:
    deps: dict[GradFn, int] = {}
    seen = set(roots)
    stack = list(seen)
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return deps


def _leading_to(roots: Sequence[GradFn], deps: dict[GradFn, int], targets: set) -> set:
    """The nodes from which a target node can be reached (the ones grad() must run)."""
    remaining = dict(deps)
    ready = [n for n in roots if remaining.get(n, 0) == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for nxt, _ in node.next_functions:
            if nxt is not None:
                remaining[nxt] -= 1
                if remaining[nxt] == 0:
                    ready.append(nxt)
    useful: set = set()
    for node in reversed(order):
        for nxt, _ in node.next_functions:
            if nxt is not None and (nxt in targets or nxt in useful):
                useful.add(node)
                break
    return useful


def _run_hooks(node: GradFn, grads: list[Any]) -> None:
    if isinstance(node, AccumulateGrad):
        leaf_hooks = node.variable._hooks
        tables = {0: leaf_hooks} if leaf_hooks else None
    else:
        tables = node._output_hooks
    if not tables:
        return
    for nr, table in tables.items():
        grad = grads[nr]
        if grad is None:
            continue
        for hook in list(table.values()):
            replaced = hook(grad)
            if replaced is not None:
                _check_hooked(hook, grad, replaced)
                grad = replaced
        grads[nr] = grad


def _check_hooked(hook: Any, grad: Tensor, replaced: Any) -> None:
    """A hook may change a gradient's values, never its kind, dtype or shape (torch)."""
    name = getattr(hook, "__name__", repr(hook))
    if not isinstance(replaced, Tensor):
        raise TensorTypeError(
            f"hook '{name}' returned a {type(replaced).__name__}: a hook returns a tensor "
            "(the new gradient) or None"
        )
    if replaced.dtype != grad.dtype:
        raise DTypeError(
            f"hook '{name}' has changed the type of value (was {grad.dtype}, got "
            f"{replaced.dtype}); cast the gradient it returns back"
        )
    if replaced.shape != grad.shape:
        raise ShapeError(
            f"hook '{name}' has changed the size of value (was {grad.shape}, got {replaced.shape})"
        )


def _run_node_hooks(node: GradFn, hooks: dict, count: int, grads: Any, *more: Any) -> Any:
    """Run a node's pre-hooks (`hook(grad_outputs)`) or post-hooks (`hook(grad_inputs,
    grad_outputs)`) in order; a hook returning a sequence of `count` replaces the grads."""
    grads = list(grads)
    for hook in list(hooks.values()):
        replaced = hook(tuple(grads), *more)
        if replaced is None:
            continue
        if not isinstance(replaced, (tuple, list)):
            raise TensorTypeError(
                f"hook '{getattr(hook, '__name__', hook)}' of {node.name()} returned a "
                f"{type(replaced).__name__}: a node's hook returns a tuple of gradients or None"
            )
        if len(replaced) != count:
            got = len(replaced)
            raise AutodiffError(
                f"hook '{getattr(hook, '__name__', hook)}' of {node.name()} has returned an "
                f"incorrect number of values (got {got}, but expected {count})"
            )
        grads = list(replaced)
    return grads


def _retain(node: GradFn, grads: list[Any]) -> None:
    for nr, ref in node._retained.items():  # type: ignore[union-attr]
        tensor = ref()
        if tensor is not None and grads[nr] is not None:
            accumulate_into(tensor, grads[nr], in_place=False)


def run_backward(
    roots: list[Edge],
    seeds: list[Tensor],
    *,
    retain_graph: bool,
    create_graph: bool,
    targets: list[Edge] | None = None,
    accumulate: bool = True,
) -> list[Any]:
    """Propagate `seeds` from `roots`; return the gradients arriving at `targets`."""
    with set_grad_enabled(create_graph):
        return _propagate(roots, seeds, retain_graph, targets, accumulate)


def _propagate(
    roots: list[Edge],
    seeds: list[Tensor],
    retain_graph: bool,
    targets: list[Edge] | None,
    accumulate: bool,
) -> list[Any]:
    root_nodes = list(dict.fromkeys(node for node, _ in roots if node is not None))
    deps = _count_dependencies(root_nodes)
    buffers: dict[GradFn, list] = {}
    for (node, nr), seed in zip(roots, seeds):
        _add(buffers, node, nr, seed)

    capture: dict[GradFn, list[tuple[int, int]]] = {}
    useful: set | None = None
    wanted: set | None = None
    if targets is not None:
        for slot, (node, nr) in enumerate(targets):
            capture.setdefault(node, []).append((nr, slot))
        useful = _leading_to(root_nodes, deps, set(capture))
        wanted = useful | capture.keys()
    captured: list[Any] = [None] * (len(targets) if targets is not None else 0)

    ready = [n for n in root_nodes if deps.get(n, 0) == 0]
    while ready:
        node = ready.pop()
        grads = buffers.pop(node, None)
        results: tuple = ()
        if grads is not None:
            runs = useful is None or node in useful
            # torch's engine (evaluate_function): grad() captures what reaches a node that
            # runs anyway before the node's tensor hooks, and after them at a node that
            # runs only to be captured (a leaf's, or an input's that nothing else needs)
            early = node in capture and runs and not accumulate
            if early:
                _capture(capture[node], grads, captured)
            _run_hooks(node, grads)
            if accumulate and node._retained:
                _retain(node, grads)
            if node in capture and not early:
                _capture(capture[node], grads, captured)
            if runs:
                if node._pre_hooks:
                    grads = _run_node_hooks(node, node._pre_hooks, len(grads), tuple(grads))
                results = node.apply(grads, wanted)
                if node._post_hooks:
                    count = len(node.next_functions)
                    results = _run_node_hooks(node, node._post_hooks, count, results, grads)
                if not retain_graph:
                    node.release()
        for i, (nxt, nr) in enumerate(node.next_functions):
            if nxt is None:
                continue
            if results and results[i] is not None:
                _add(buffers, nxt, nr, results[i])
            count = deps[nxt] - 1
            deps[nxt] = count
            if count == 0:
                ready.append(nxt)
    return captured


def _capture(slots: list[tuple[int, int]], grads: list[Any], captured: list[Any]) -> None:
    for nr, slot in slots:
        captured[slot] = grads[nr]


def _add(buffers: dict[GradFn, list], node: GradFn, nr: int, grad: Tensor) -> None:
    buffer = buffers.get(node)
    if buffer is None:
        buffer = buffers[node] = [None] * node.num_outputs
    old = buffer[nr]
    buffer[nr] = grad if old is None else E.add(old, grad)


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Accumulate the gradients of `tensors` into the `.grad` of the leaves.

    >>> from graphc.eager import tensor, autograd
    >>> a = tensor([1.0, 2.0], requires_grad=True)
    >>> c = 2 * a + 1
    >>> autograd.backward(c, grad_tensors=tensor([1.0, 1.0]))
    >>> a.grad
    tensor([2., 2.])
    """
    outputs = _tensors(tensors, "backward: tensors")
    seeds_given = _per_output(grad_tensors, len(outputs))
    if len(seeds_given) != len(outputs):
        raise AutodiffError(f"backward: {len(outputs)} tensors but {len(seeds_given)} gradients")
    seeds = [_seed(t, g, i) for i, (t, g) in enumerate(zip(outputs, seeds_given))]
    roots = [edge(t) for t in outputs]
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        run_backward(roots, seeds, retain_graph=retain, create_graph=create_graph)
        return
    wanted = _tensors(inputs, "backward: inputs")
    for x in wanted:
        if not x._requires_grad:
            raise AutodiffError("backward: an element of inputs does not require grad")
    got = run_backward(
        roots,
        seeds,
        retain_graph=retain,
        create_graph=create_graph,
        targets=[edge(x) for x in wanted],
    )
    with set_grad_enabled(create_graph):  # accumulate as the engine's AccumulateGrad would
        for x, grad in zip(wanted, got):
            if grad is not None:
                accumulate_into(x, grad)


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of `outputs` with respect to `inputs`, without touching `.grad`.

    An input the outputs do not depend on is an error, or with `allow_unused` gets None,
    or with `materialize_grads` zeros (which implies allow_unused, as in torch).

    >>> from graphc.eager import tensor, autograd
    >>> x = tensor([3.0], requires_grad=True)
    >>> (g,) = autograd.grad(x ** 2, x, create_graph=True)
    >>> g
    tensor([6.], grad_fn=<MulBackward0>)
    >>> autograd.grad(g, x)
    (tensor([2.]),)
    """
    if materialize_grads and allow_unused is False:
        raise ArgumentError(
            "grad: allow_unused=False contradicts materialize_grads=True (zeros for unused "
            "inputs); leave allow_unused out or pass True"
        )
    if is_grads_batched:
        raise AutodiffError(
            "grad: is_grads_batched=True is not supported; loop over the grad_outputs, or "
            "use graphc.vmap over graphc.vjp"
        )
    outs = _tensors(outputs, "grad: outputs")
    wanted = _tensors(inputs, "grad: inputs")
    if not wanted:
        raise AutodiffError("grad: inputs cannot be empty (name the tensors to differentiate by)")
    given = _per_output(grad_outputs, len(outs))
    if len(given) != len(outs):
        raise AutodiffError(f"grad: {len(outs)} outputs but {len(given)} grad_outputs")
    for i, x in enumerate(wanted):
        if not x._requires_grad:
            raise AutodiffError(f"grad: input {i} does not require grad")
    seeds = [_seed(t, g, i) for i, (t, g) in enumerate(zip(outs, given))]
    got = run_backward(
        [edge(t) for t in outs],
        seeds,
        retain_graph=create_graph if retain_graph is None else retain_graph,
        create_graph=create_graph,
        targets=[edge(x) for x in wanted],
        accumulate=False,
    )
    for i, g in enumerate(got):
        if g is None and materialize_grads:
            got[i] = make(np.zeros_like(wanted[i]._data))
        elif g is None and not allow_unused:
            raise AutodiffError(
                f"grad: input {i} appears not to have been used in the graph; "
                "pass allow_unused=True if this is intended"
            )
    return tuple(got)


# the rest of PyTorch's torch.autograd namespace
from graphc.eager import grad_mode  # noqa: E402
from graphc.eager.function import Function, FunctionCtx  # noqa: E402
from graphc.eager.grad_mode import enable_grad, inference_mode  # noqa: E402
from graphc.eager.gradcheck import gradcheck, gradgradcheck  # noqa: E402

__all__ = [
    "Function",
    "FunctionCtx",
    "Variable",
    "backward",
    "enable_grad",
    "grad",
    "grad_mode",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "no_grad",
    "set_grad_enabled",
]


class _VariableMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, Tensor)  # every tensor is a Variable, as in torch


class Variable(metaclass=_VariableMeta):
    """torch's Variable, merged into Tensor since PyTorch 0.4: `Variable(t, requires_grad)`
    is a new leaf sharing t's memory.

    >>> from graphc.eager import ones
    >>> Variable(ones(2), requires_grad=True)
    tensor([1., 1.], requires_grad=True)
    """

    def __new__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Any:
        if not isinstance(data, Tensor):
            raise TensorTypeError(f"Variable data has to be a tensor, got {type(data).__name__}")
        leaf = data.detach()
        leaf.requires_grad = requires_grad
        return leaf


def zero_grads(tensors: Iterable[Tensor], set_to_none: bool = True) -> None:
    """Forget accumulated gradients: set `.grad` to None, or zero it in place.

    What `Module.zero_grad()` and `Optimizer.zero_grad()` both do.
    """
    for t in tensors:
        if t.grad is None:
            continue
        if set_to_none:
            t.grad = None
        else:
            with no_grad():
                t.grad.zero_()
