"""Pictures of eager tapes: leaves, grad_fn nodes and AccumulateGrad, as in the tutorials."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.viz import style
from tests.viz.dotsource import parse_dot


def leaf(value: float) -> object:
    import graphc.eager as eager

    if callable(getattr(eager, "tensor", None)):
        return eager.tensor(value, requires_grad=True)
    import graphc.eager.value_kind  # noqa: F401 - registers the tensor kind with dispatch
    from graphc.eager.tensor import Tensor

    return Tensor(np.array(value, np.float32), requires_grad=True)


def test_tape_of_the_tutorial_graph() -> None:
    x, w = leaf(1.0), leaf(2.0)
    y = (x + w) * (w + 1)  # type: ignore[operator]
    dot = parse_dot(gc.viz.to_dot(y, names={"x": x, "w": w}).source)
    labels = {i: n["label"] for i, n in dot.nodes.items() if not i.startswith("legend/")}
    names = sorted(label.split("</b>")[0].removeprefix("<b>") for label in labels.values())
    assert names == sorted(
        [
            "x",
            "w",
            "result",
            "AccumulateGrad",
            "AccumulateGrad",
            "AddBackward0",
            "AddBackward0",
            "MulBackward0",
        ]
    )
    by_name = {label.split("</b>")[0].removeprefix("<b>"): i for i, label in labels.items()}
    assert dot.nodes[by_name["x"]]["fillcolor"] == style.ROLES["tensor"]["fillcolor"]
    assert dot.nodes[by_name["result"]]["fillcolor"] == style.ROLES["root"]["fillcolor"]
    # values flow forward: leaf -> AccumulateGrad -> ... -> MulBackward0 -> result
    assert any(a == by_name["w"] for a, _, _ in dot.edges)
    assert dot.edges_between(by_name["MulBackward0"], by_name["result"])[0]["label"] == "f32[]"
    # w feeds both additions, through its single AccumulateGrad node
    w_acc = next(b for a, b, _ in dot.edges if a == by_name["w"])
    assert len([b for a, b, _ in dot.edges if a == w_acc]) == 2


def test_the_same_tape_gives_the_same_dot_text() -> None:
    def picture() -> str:
        x, w = leaf(1.0), leaf(2.0)
        return gc.viz.to_dot((x + w) * (w + 1)).source  # type: ignore[operator]

    assert picture() == picture()  # committed pictures do not churn when regenerated


def test_a_tensor_without_tape_is_one_box() -> None:
    x = leaf(3.0)
    dot = parse_dot(gc.viz.to_dot(x, legend=False).source)
    assert len(dot.nodes) == 1 and not dot.edges


def test_tensors_with_a_tape_show_it_in_notebooks() -> None:
    x = leaf(2.0)
    y = x * x  # type: ignore[operator]
    bundle = y._repr_mimebundle_()  # type: ignore[attr-defined]
    assert bundle["text/plain"] == repr(y)
    if gc.viz.have_dot():
        assert "MulBackward0" in bundle["image/svg+xml"]
    assert set(x._repr_mimebundle_()) == {"text/plain"}  # type: ignore[attr-defined]


def test_names_that_would_label_nothing_are_refused() -> None:
    x = leaf(2.0)
    y = x * x
    with pytest.raises(gc.GraphcError, match=r"names\['x'\] is a ndarray"):
        gc.viz.to_dot(y, names={"x": np.array(2.0)})  # an array, not the tensor
    g = gc.trace(lambda v: v * 2, gc.TensorSpec((2,)))
    with pytest.raises(gc.GraphcError, match="names labels an eager tensor's tape"):
        gc.viz.to_dot(g, names={"x": x})
    assert "<b>x</b>" in gc.viz.to_dot(y, names={"x": x}).source


def _rnn_tape(steps: int) -> object:
    """An eager RNN's loss: every step reads the same weight leaves, so their edges
    span the whole tape (the layout dot found slowest: minutes at 40 steps)."""
    import graphc.eager as ge

    rng = np.random.default_rng(0)
    shapes = [(steps, 2, 3), (2, 4), (3, 4), (4, 4), (4,)]
    xs, h, w_ih, w_hh, b = (ge.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes)
    for t in range(steps):
        h = (xs[t] @ w_ih + h @ w_hh + b).tanh()
    return (h * h).mean()


def _tape_size(tensor: object) -> int:
    """Backward nodes behind `tensor`, AccumulateGrad included, walked here."""
    seen: set[object] = set()
    todo = [tensor.grad_fn]  # type: ignore[attr-defined]
    while todo:
        fn = todo.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            todo += [next_fn for next_fn, _ in fn.next_functions]
    return len(seen)


def _labels(dot: object) -> list[str]:
    parsed = parse_dot(dot.source)  # type: ignore[attr-defined]
    return [n["label"] for i, n in parsed.nodes.items() if not i.startswith("legend/")]


def test_a_long_tape_draws_the_part_nearest_the_result_and_counts_the_rest() -> None:
    # a notebook shows an eager tensor's tape: an RNN of 200 steps (1,207 backward
    # nodes) kept the kernel busy in dot for more than ten minutes
    loss = _rnn_tape(200)
    total = _tape_size(loss)
    assert total > 1000
    dot = gc.viz.to_dot(loss)
    labels = _labels(dot)
    backward = [label for label in labels if "Backward" in label or "AccumulateGrad" in label]
    assert len(backward) == gc.viz.dot.Options.max_tape_nodes
    (more,) = [label for label in labels if "more backward nodes" in label]
    assert f"{total - len(backward)} more backward nodes" in more
    assert "max_tape_nodes=None" in dot.source  # the title says how to draw it all
    whole = _labels(gc.viz.to_dot(loss, max_tape_nodes=None))
    assert sum("Backward" in label or "AccumulateGrad" in label for label in whole) == total


def test_a_short_tape_is_drawn_whole() -> None:
    labels = _labels(gc.viz.to_dot(_rnn_tape(3)))
    assert not any("more backward nodes" in label for label in labels)
