"""Gradients through cond, scan, fori_loop and their nesting, against two oracles.

Each program of tests/control_programs.py (float64) is differentiated symbolically
(gc.gradients, gc.split_backward) and compared with central finite differences of the
same function run on arrays, and with the eager side (the function on graphc.eager
tensors, `.backward()`), which runs the very same Python control flow with the ops'
gradient rules. Second derivatives: the gradient graph, called inside a traced
function, is differentiated again and compared with finite differences of the
gradient and with eager double backward (create_graph=True).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.control_programs import DIFFERENTIABLE, PROGRAMS, Program
from tests.edge_values import bits_differ
from tests.finite_differences import numeric_grad

SEEDS = (0, 1, 2)  # between them, every cond takes both branches


def eager_grads(program: Program, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    tensors = [ge.tensor(x, requires_grad=True) for x in xs]
    program.fn(*tensors).backward()
    # an input the path taken never reads has no .grad (PyTorch's None): zeros
    return [np.zeros_like(x) if t.grad is None else t.grad.numpy() for x, t in zip(xs, tensors)]


def names(g: gc.Graph) -> list[str]:
    return [p.name for p in g.inputs]


def scans(g: gc.Graph) -> list[gc.Node]:
    return [n for n in g.op_nodes if n.op == "scan"]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("program", DIFFERENTIABLE, ids=lambda p: p.name)
def test_gradients_match_finite_differences_and_eager(program: Program, seed: int) -> None:
    g = program.graph()
    xs = program.inputs(seed)
    got = gc.run(gc.gradients(g, wrt=names(g)), dict(zip(names(g), xs)))
    assert bits_differ(got[0], np.asarray(program.fn(*xs))) is None
    eager = eager_grads(program, xs)
    for i in range(len(xs)):
        what = f"{program.name}, seed {seed}: d/d{names(g)[i]}"
        want = numeric_grad(program.fn, xs, i)
        np.testing.assert_allclose(got[1 + i], want, rtol=1e-6, atol=1e-8, err_msg=what)
        np.testing.assert_allclose(got[1 + i], eager[i], rtol=1e-12, atol=1e-14, err_msg=what)


@pytest.mark.parametrize("program", DIFFERENTIABLE, ids=lambda p: p.name)
def test_split_backward_equals_gradients_and_saves_the_scan_residuals(program: Program) -> None:
    g = program.graph()
    wrt = names(g)
    joint = gc.gradients(g, wrt=wrt)
    fwd, bwd = gc.split_backward(g, wrt=wrt, seeds=False)
    for graph in (joint, fwd, bwd):
        gc.verify(graph)
    # each top-level forward scan runs once: in the joint graph and in the forward,
    # replaced by its residual-augmented twin; the backward only runs backward scans
    forward_scans = len(scans(g))
    assert len([n for n in scans(joint) if not n.attrs["body"].name.endswith("_bwd")]) == (
        forward_scans
    ), str(joint)
    assert len(scans(fwd)) == forward_scans, str(fwd)
    assert all(n.attrs["body"].name.endswith("_bwd") for n in scans(bwd)), str(bwd)
    assert len(scans(bwd)) == forward_scans, str(bwd)
    for scan in scans(fwd):  # its residuals are results the backward reads
        body = scan.attrs["body"]
        assert body.name.endswith("_fwd") and len(scan.type.items) > scan.attrs["num_carry"]
        saved = {o.inputs[0].name for o in fwd.outputs}
        readers = [n.name for n in fwd.op_nodes if n.op == "result" and n.inputs[0] is scan]
        assert saved & set(readers), f"no residual of {scan.name} is saved\n{fwd}"
    for seed in SEEDS:
        xs = program.inputs(seed)
        want = gc.run(joint, dict(zip(wrt, xs)))
        outs = gc.run(fwd, dict(zip(wrt, xs)))
        back = gc.run(bwd, dict(zip(names(bwd), outs[len(g.outputs) :])))
        assert bits_differ(outs[0], want[0]) is None
        for i, grad in enumerate(back):
            assert bits_differ(grad, want[1 + i]) is None, (program.name, seed, wrt[i])


@pytest.mark.parametrize("name", ["rnn", "decay", "cond_in_scan", "scan_in_cond"])
def test_gradients_of_a_subset_of_inputs(name: str) -> None:
    program = PROGRAMS[name]
    g = program.graph()
    xs = program.inputs(1)
    full = gc.run(gc.gradients(g, wrt=names(g)), dict(zip(names(g), xs)))
    for i, wrt in enumerate(names(g)):
        only = gc.run(gc.gradients(g, wrt=[wrt]), dict(zip(names(g), xs)))
        assert bits_differ(only[1], full[1 + i]) is None, (name, wrt)


def test_seeded_gradients_of_every_result_of_a_scan() -> None:
    """Non-scalar outputs (the final carries and the stacked ys) with cotangents."""

    def f(h: object, xs: object, w: object) -> tuple:
        (a, b), (ys, zs) = gc.scan(
            lambda c, x: ((gc.tanh(c[0] @ w + x), c[1] * x), (c[0] * c[1], gc.sum(x))), (h, h), xs
        )
        return a, b, ys, zs

    program = Program("seeded", f, ((2, 3), (4, 2, 3), (3, 3)))
    g = program.graph()
    xs = program.inputs(3)
    rng = np.random.default_rng(4)
    cts = [rng.standard_normal(o.type.shape) for o in g.outputs]
    got = gc.gradients(g, wrt=names(g), seeds=True)(*xs, *cts)
    tensors = [ge.tensor(x, requires_grad=True) for x in xs]
    outs = f(*tensors)
    ge.autograd.backward(list(outs), [ge.tensor(c) for c in cts])
    for i, t in enumerate(tensors):
        np.testing.assert_allclose(got[len(cts) + i], t.grad.numpy(), rtol=1e-12, atol=1e-14)

    def loss(*args: np.ndarray) -> float:
        return sum(float(np.sum(o * c)) for o, c in zip(f(*args), cts))

    for i in range(len(xs)):
        np.testing.assert_allclose(got[len(cts) + i], numeric_grad(loss, xs, i), rtol=1e-6)


def test_gradients_with_a_symbolic_batch_and_length() -> None:
    program = PROGRAMS["batched_rnn"]
    g = gc.trace(
        program.fn,
        gc.TensorSpec(("B", 3), "float64"),
        gc.TensorSpec(("T", "B", 3), "float64"),
        gc.TensorSpec((3, 3), "float64"),
    )
    joint = gc.gradients(g, wrt=names(g))
    fwd, bwd = gc.split_backward(g, wrt=names(g), seeds=False)
    rng = np.random.default_rng(0)
    for batch, steps in ((1, 3), (3, 1), (2, 0)):
        xs = [rng.uniform(-1, 1, s) for s in ((batch, 3), (steps, batch, 3), (3, 3))]
        got = joint(*xs)
        outs = gc.run(fwd, dict(zip(names(g), xs)))
        back = gc.run(bwd, dict(zip(names(bwd), outs[1:])))
        for i in range(3):
            want = numeric_grad(program.fn, xs, i)
            np.testing.assert_allclose(got[1 + i], want, rtol=1e-6, atol=1e-8)
            assert bits_differ(back[i], got[1 + i]) is None


def test_a_weights_step_products_are_stacked_when_the_length_is_static() -> None:
    """A const whose cotangent at each step is transpose(p) @ q (the recurrent weight)
    gets no accumulator when the loop's length is static: the gradient is one product of
    two stacks, p's and q's, each one the backward scan steps along or outputs already
    where it can, else a new y (control_ad).
    With a symbolic length it is accumulated as before. Both agree with finite
    differences, and with each other to rounding."""
    program = PROGRAMS["batched_rnn"]
    fixed = gc.trace(
        program.fn, *(gc.TensorSpec(s, "float64") for s in ((2, 3), (4, 2, 3), (3, 3)))
    )
    symbolic = gc.trace(
        program.fn, *(gc.TensorSpec(s, "float64") for s in ((2, 3), ("T", 2, 3), (3, 3)))
    )
    bodies = {}
    for label, g in (("fixed", fixed), ("symbolic", symbolic)):
        joint = gc.gradients(g, wrt=names(g))
        (backward,) = [n for n in scans(joint) if n.attrs["body"].name.endswith("_bwd")]
        bodies[label] = backward.attrs["body"]
        xs = program.inputs(2)
        xs = [xs[0][:2], xs[1][:, :2], xs[2]]
        got = joint(*xs)
        for i in range(3):
            want = numeric_grad(program.fn, xs, i)
            np.testing.assert_allclose(got[1 + i], want, rtol=1e-6, atol=1e-8, err_msg=label)
        bodies[label + "_grads"] = got[1:]
    # p, the previous state, is a residual the backward scan already steps along, and q,
    # the pre-activation's cotangent, is also x's, which it stacks already: no new y,
    # and no per-step product left in the body
    assert [o.name for o in bodies["fixed"].outputs] == ["ct_carry", "ct_x"], str(bodies["fixed"])
    assert not any(
        n.op == "matmul" and n.inputs[0].op == "transpose" for n in bodies["fixed"].op_nodes
    )
    assert not any(p.name.startswith("acc_") for p in bodies["fixed"].inputs), str(bodies["fixed"])
    assert [p.name for p in bodies["symbolic"].inputs if p.name.startswith("acc_")] == ["acc_w"]
    assert not any(o.name.startswith("step") for o in bodies["symbolic"].outputs)
    for a, b in zip(bodies["fixed_grads"], bodies["symbolic_grads"]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


SECOND_ORDER = ["rnn", "decay", "branches", "fori", "cond_in_scan", "scan_in_scan",
                "scan_in_cond", "nested", "length_only"]  # fmt: skip


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_match_finite_differences_and_eager(name: str, seed: int) -> None:
    program = PROGRAMS[name]
    g = program.graph()
    wrt = names(g)
    joint = gc.gradients(g, wrt=wrt)
    xs = program.inputs(seed)
    directions = [np.random.default_rng(seed + 10).uniform(-1, 1, x.shape) for x in xs]

    def along(*args: object) -> object:
        """<directions, gradient>: a scalar function of the inputs."""
        grads = joint(*args)[1:]
        total = gc.sum(grads[0] * directions[0])
        for grad, v in zip(grads[1:], directions[1:]):
            total = total + gc.sum(grad * v)
        return total

    h = gc.trace(along, *program.specs())
    second = gc.run(gc.gradients(h, wrt=names(h)), dict(zip(names(h), xs)))

    def along_numeric(*args: np.ndarray) -> float:
        grads = gc.run(joint, dict(zip(wrt, args)))[1:]
        return sum(float(np.sum(grad * v)) for grad, v in zip(grads, directions))

    tensors = [ge.tensor(x, requires_grad=True) for x in xs]
    grads = ge.autograd.grad(program.fn(*tensors), tensors, create_graph=True, allow_unused=True)
    total = sum((ge.sum(gr * ge.tensor(v)) for gr, v in zip(grads, directions) if gr is not None))
    eager = ge.autograd.grad(total, tensors, allow_unused=True)
    for i, x in enumerate(xs):
        what = f"{name}, seed {seed}: second derivative along d/d{wrt[i]}"
        want = numeric_grad(along_numeric, xs, i, eps=1e-5)
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(second[1 + i], want, rtol=1e-5, atol=1e-6 * scale, err_msg=what)
        e = np.zeros_like(x) if eager[i] is None else eager[i].numpy()
        np.testing.assert_allclose(second[1 + i], e, rtol=1e-10, atol=1e-12, err_msg=what)


def test_the_backward_of_a_scan_differentiates_again() -> None:
    """split_backward's backward graph (a reverse scan over residuals) is an ordinary
    graph: differentiable with seeds, its second derivative matching eager."""
    program = PROGRAMS["rnn"]
    g = program.graph()
    fwd, bwd = gc.split_backward(g, wrt=names(g))
    again = gc.gradients(bwd, wrt=[p.name for p in bwd.inputs if p.name == "w"], seeds=True)
    gc.verify(again)
    xs = program.inputs(0)
    outs = gc.run(fwd, dict(zip(names(g), xs)))
    feeds = dict(zip(names(bwd), [*outs[1:], np.float64(1.0)]))
    cts = {f"ct_{o.name}": np.ones(o.type.shape) for o in bwd.outputs}
    result = gc.run(again, {**feeds, **cts})
    assert len(result) == len(bwd.outputs) + 1 and np.all(np.isfinite(result[-1]))
    # holding the saved values fixed, the sum of the gradients is linear in the seed
    doubled = gc.run(again, {**feeds, "ct_out": np.float64(2.0), **cts})
    np.testing.assert_allclose(doubled[-1], 2.0 * result[-1], rtol=1e-12)
