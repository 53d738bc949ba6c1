"""passes/custom.py: a backend's fusion step puts each custom-gradient node's forward ops
in its place, so they fuse with their neighbours; the values stay the bits of O0."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.passes.custom import inline_custom_forwards
from tests.edge_values import bits_differ

X = np.array([-2.0, -0.0, 0.5, 3.0, np.inf, np.nan])


@gc.custom_vjp
def clipped(x):
    return gc.exp(x) * 2.0


clipped.defvjp(lambda x: (clipped(x), x), lambda x, ct: (gc.clip(ct, -1.0, 1.0),))


def test_text_in_and_out() -> None:
    g = gc.trace(lambda x: gc.tanh(clipped(x)), gc.TensorSpec((3,), "float64"))
    inlined = inline_custom_forwards(g)
    assert [n.op for n in inlined.op_nodes] == ["exp", "constant", "mul", "tanh"]
    assert str(inlined) == (
        "graph lambda(%x: f64[3]) {\n"
        "  %custom_vjp_exp: f64[3] = exp(%x)\n"
        "  %custom_vjp_const: f64[] = constant(value=2.0)\n"
        "  %custom_vjp_mul: f64[3] = mul(%custom_vjp_exp, %custom_vjp_const)\n"
        "  %tanh: f64[3] = tanh(%custom_vjp_mul)\n"
        "  output %out = %tanh\n"
        "}"
    )
    assert inline_custom_forwards(inlined) is inlined  # nothing left: the graph itself


def test_copied_names_never_clash() -> None:
    text = """
    graph g(%x: f32[2]) {
      %s: f32[2] = exp(%x)
      output %s_out = %s
    }"""
    body = gc.parse(text.replace("graph g", "graph body"))
    with gc.Graph("outer") as outer:
        x = gc.placeholder("x", (2,), "float32")
        held = gc.ops.bind("custom_vjp", x, forward=body, backward=_zeros(), function="f")
        clash = gc.exp(x)
        gc.output(held * clash, "out")
    outer = gc.parse(
        str(outer).replace("%exp:", "%custom_vjp_s:").replace("(%exp)", "(%custom_vjp_s)")
    )
    inlined = inline_custom_forwards(outer)
    names = [n.name for n in inlined.nodes]
    assert len(names) == len(set(names))
    gc.verify(inlined)
    feeds = np.array([0.5, -1.0], np.float32)
    # on numpy: inlining moves exp out of the custom forward's body (run by numpy's
    # kernels) into a step of its own, which native computes by its own exp; native's
    # fusion keeps such bodies whole for that reason (backends/native/fusion.py)
    assert (
        bits_differ(
            gc.compile(inlined, opt_level=0, backend="numpy")(feeds),
            gc.compile(outer, opt_level=0, backend="numpy")(feeds),
        )
        is None
    )


def _zeros() -> gc.Graph:
    return gc.parse(
        """
        graph zeros(%x: f32[2], %out: f32[2], %ct: f32[2]) {
          %z: f32[2] = full_like(%ct, value=0)
          output %ct_x = %z
        }"""
    )


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_o2_fuses_through_them_with_the_bits_of_o0(backend: str) -> None:
    def f(x):
        with ge.no_grad():  # traced under no_grad: held behind stop_gradient
            scale = gc.exp(x) * 0.5
        return gc.tanh(clipped(x) + gc.stop_gradient(x * x)) * scale

    g = gc.trace(f, X)
    ops = [n.op for n in gc.fuse(gc.optimize(g), backend=backend).op_nodes]
    if backend == "numpy":
        assert "custom_vjp" not in ops and ops.count("fused") == 1, ops
    else:  # clipped's forward holds exp, which native computes with its own bits: kept,
        # so every level runs numpy's exp there (its node's kernel); the others inlined
        assert ops.count("custom_vjp") == 1, ops
    with np.errstate(all="ignore"):
        got = gc.compile(g, opt_level=2, backend=backend, wait=True)(X)
        expected = gc.compile(g, opt_level=0, backend=backend, wait=True)(X)
    assert bits_differ(got, expected) is None


def test_inside_a_scan_body_and_gradients_taken_before() -> None:
    def loop(xs):
        return gc.scan(lambda c, x: (c + clipped(x), c), np.float64(0.0), xs)[0]

    g = gc.trace(loop, gc.TensorSpec((4,), "float64"))
    joint = gc.gradients(g, wrt=["xs"])
    xs = np.array([0.1, -3.0, 0.2, 5.0])
    reference = gc.compile(joint, opt_level=0)(xs)
    fused = gc.fuse(gc.optimize(joint), backend="numpy")
    bodies = [n.attrs["body"] for n in fused.op_nodes if n.op == "scan"]
    assert bodies and all("custom_vjp" not in [b.op for b in body.op_nodes] for body in bodies)
    got = gc.compile(joint, opt_level=2, backend="numpy")(xs)
    for a, b in zip(got, reference):
        assert bits_differ(a, b) is None
    # the user's backward still shaped the gradient: clip(ct) is 1 where exp(x)*2 > 1
    np.testing.assert_array_equal(got[1][:3], [1.0, 1.0, 1.0])
