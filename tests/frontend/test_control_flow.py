"""gc.cond / gc.scan / gc.while_loop / gc.fori_loop from the user's side.

One function runs three ways: traced into cond/scan/while_loop nodes, on eager
tensors and on plain arrays (Python control flow), with the same bits. Pytrees of
lists, tuples and None; closures over outer values (captured, also several bodies
out, eager tensors included); Python bools; symbolic dims. Errors in
test_control_errors.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.control_programs import PROGRAMS, Program
from tests.edge_values import bits_differ

F64 = "float64"


def ops_of(g: gc.Graph) -> list[str]:
    """The ops of g and of every body in it, depth first."""
    found = []
    for n in g.op_nodes:
        found.append(n.op)
        for value in n.attrs.values():
            if isinstance(value, gc.Graph):
                found += ops_of(value)
    return found


@pytest.mark.parametrize("program", list(PROGRAMS.values()), ids=lambda p: p.name)
def test_one_function_three_ways_same_bits(program: Program) -> None:
    g = program.graph()
    assert {"cond", "scan", "while_loop"} & set(ops_of(g)), str(g)
    for seed in range(3):
        xs = program.inputs(seed)
        static = g(*xs)
        on_arrays = program.fn(*xs)
        eager = program.fn(*[ge.tensor(x) for x in xs]).numpy()
        assert bits_differ(np.asarray(on_arrays), static) is None, (program.name, seed)
        assert bits_differ(eager, static) is None, (program.name, seed)


def test_pytrees_keep_lists_tuples_and_none() -> None:
    seen = {}

    def f(x: gc.Symbol, y: gc.Symbol) -> gc.Symbol:
        out = gc.cond(
            gc.sum(x) > 0,
            lambda p, q: [p[0] * q, (p[1], None)],
            lambda p, q: [p[1] - q, (p[0] * 2.0, None)],
            (x, x + 1.0),
            y,
        )
        carry, ys = gc.scan(
            lambda c, v: ((c[0] + v, [c[1][0] * v]), None), (x, [y]), gc.stack([x, y])
        )
        seen["cond"], seen["carry"], seen["ys"] = out, carry, ys
        return out[0] + out[1][0] + carry[0] + carry[1][0]

    g = gc.trace(f, gc.TensorSpec((2,), F64), gc.TensorSpec((2,), F64))
    cond_out, carry = seen["cond"], seen["carry"]
    assert isinstance(cond_out, list) and isinstance(cond_out[1], tuple) and cond_out[1][1] is None
    assert isinstance(carry, tuple) and isinstance(carry[1], list) and seen["ys"] is None
    x, y = np.array([0.5, -0.25]), np.array([1.0, 2.0])
    assert bits_differ(g(x, y), f(x, y)) is None


def test_captures_are_operands_at_every_level() -> None:
    g = PROGRAMS["nested"].graph()
    top = next(n for n in g.op_nodes if n.op == "cond")
    assert [x.name for x in top.inputs][:2] == ["gt", "x"]
    assert sorted(x.name for x in top.inputs[2:]) == ["w", "xs"]  # captured, in trace order
    scan = next(n for n in top.attrs["then_body"].op_nodes if n.op == "scan")
    body = scan.attrs["body"]
    inner = next(n for n in body.op_nodes if n.op == "cond")
    # the innermost branch reads w and x_t: each level in between passes them in
    assert [p.type for p in inner.attrs["then_body"].inputs][-2:] == [g.node("w").type] * 2
    assert len(inner.inputs) == 4 and len(body.inputs) == 3


def test_one_placeholder_per_captured_value_and_unused_captures_in_the_other_branch() -> None:
    def f(x: gc.Symbol, w: gc.Symbol, u: gc.Symbol) -> gc.Symbol:
        return gc.cond(gc.sum(x) > 0, lambda a: a * w + w * w, lambda a: a - u, x)

    g = gc.trace(f, *[gc.TensorSpec((3,), F64)] * 3)
    node = next(n for n in g.op_nodes if n.op == "cond")
    assert [x.name for x in node.inputs] == ["gt", "x", "w", "u"]
    for branch in ("then_body", "else_body"):
        assert len(node.attrs[branch].inputs) == 3, str(node.attrs[branch])
    x, w, u = np.ones(3), np.full(3, 2.0), np.full(3, 5.0)
    assert bits_differ(g(x, w, u), x * w + w * w) is None
    assert bits_differ(g(-x, w, u), -x - u) is None


def test_a_python_bool_predicate_traces_only_the_branch_taken() -> None:
    for flag, want in ((True, "sin"), (False, "cos")):
        g = gc.trace(lambda x, f=flag: gc.cond(f, gc.sin, gc.cos, x), gc.TensorSpec((3,), F64))
        assert ops_of(g) == [want], str(g)
    eager = gc.cond(np.bool_(False), gc.sin, gc.cos, ge.tensor([0.0]))
    assert eager.item() == 1.0


def test_scan_with_length_only_and_reverse_match_python() -> None:
    def f(x: gc.Symbol) -> tuple:
        c, ys = gc.scan(lambda c, _: (c * 0.5 + 1.0, c), x, length=4)
        r, zs = gc.scan(lambda c, v: (c + v, c * v), x, ys, reverse=True)
        return c, ys, r, zs

    x = np.array([1.0, -2.0])
    got = gc.trace(f, gc.TensorSpec((2,), F64))(x)
    c, ys = x, []
    for _ in range(4):
        ys.append(c)
        c = c * 0.5 + 1.0
    r, zs = x, [None] * 4
    for t in (3, 2, 1, 0):
        zs[t] = r * ys[t]
        r = r + ys[t]
    for a, b in zip(got, (c, np.stack(ys), r, np.stack(zs))):
        assert bits_differ(a, b) is None


def test_fori_loop_static_bounds_is_a_scan_traced_bounds_a_while_loop() -> None:
    def body(i: object, v: object) -> object:
        return v * 0.5 + gc.cast(i, "float64")

    static = gc.trace(lambda x: gc.fori_loop(2, 6, body, x), gc.TensorSpec((2,), F64))
    traced = gc.trace(
        lambda x, lo, hi: gc.fori_loop(lo, hi, body, x),
        gc.TensorSpec((2,), F64),
        gc.TensorSpec((), "int64"),
        gc.TensorSpec((), "int64"),
    )
    assert "scan" in ops_of(static) and "while_loop" not in ops_of(static)
    assert "while_loop" in ops_of(traced) and "scan" not in ops_of(traced)
    x = np.array([1.0, 3.0])
    want = gc.fori_loop(2, 6, body, x)
    assert bits_differ(static(x), want) is None
    assert bits_differ(traced(x, np.int64(2), np.int64(6)), want) is None
    assert bits_differ(traced(x, np.int64(6), np.int64(2)), x) is None  # no steps
    assert bits_differ(gc.fori_loop(2, 6, body, ge.tensor(x)).numpy(), want) is None
    empty = gc.trace(lambda x: gc.fori_loop(3, 1, body, x), gc.TensorSpec((2,), F64))
    assert bits_differ(empty(x), x) is None


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_symbolic_batch_and_length_through_scan(batch: int) -> None:
    program = PROGRAMS["batched_rnn"]
    g = gc.trace(
        program.fn,
        gc.TensorSpec(("B", 3), F64),
        gc.TensorSpec(("T", "B", 3), F64),
        gc.TensorSpec((3, 3), F64),
    )
    scan = next(n for n in g.op_nodes if n.op == "scan")
    assert scan.attrs["length"] == "T" and str(scan.type.items[0]) == "f64[B,3]"
    rng = np.random.default_rng(batch)
    for steps in (0, 1, 4):
        xs = [rng.uniform(-1, 1, s) for s in ((batch, 3), (steps, batch, 3), (3, 3))]
        assert bits_differ(g(*xs), program.fn(*xs)) is None


def test_a_none_spec_dim_through_a_traced_scan() -> None:
    def f(xs: gc.Symbol) -> gc.Symbol:
        return gc.scan(lambda c, x: (c + x, c), gc.sum(xs, axis=0) * 0.0, xs)[1]

    g = gc.trace(f, gc.TensorSpec((None, 3), F64))
    xs = np.arange(12.0).reshape(4, 3)
    assert bits_differ(g(xs), f(xs)) is None


def test_bodies_reading_an_outer_dim_capture_a_value_that_has_it() -> None:
    def f(x: gc.Symbol, xs: gc.Symbol) -> gc.Symbol:
        def step(c: gc.Symbol, v: gc.Symbol) -> tuple:
            spread = gc.sum(gc.broadcast_to(v, xs.shape), axis=0)  # xs's dim T, read inside
            inner, _ = gc.scan(lambda d, _: (d * 0.5, None), c, length=xs.shape[0])
            return inner + spread, None

        return gc.scan(step, x, xs)[0]

    g = gc.trace(f, gc.TensorSpec((3,), F64), gc.TensorSpec(("T", 3), F64))
    scan = next(n for n in g.op_nodes if n.op == "scan")
    assert [x.name for x in scan.inputs] == ["x", "xs", "xs"]  # the last: T's carrier
    for steps in (0, 1, 3):
        xs = np.linspace(-1.0, 1.0, 3 * steps).reshape(steps, 3)
        assert bits_differ(g(np.ones(3), xs), f(np.ones(3), xs)) is None


def test_eager_tensors_read_in_bodies_become_placeholders_of_the_trace() -> None:
    w = ge.tensor([0.5, -0.25, 2.0], dtype="float64", requires_grad=True)

    def f(x: object) -> object:
        c, ys = gc.scan(lambda c, v: (gc.tanh(c * w + v), c), x, gc.stack([x, x * 2.0]))
        return gc.sum(gc.cond(gc.sum(c) > 0, lambda a: a * w, lambda a: a - w, c)) + gc.sum(ys)

    g = gc.trace(f, gc.TensorSpec((3,), F64), params={"w": w})
    assert [p.name for p in g.inputs] == ["x", "w"] and list(gc.lifted_tensors(g)) == ["w"]
    for x in (np.array([0.3, 0.1, 0.2]), np.array([-0.3, -0.1, -0.9])):
        gx = gc.gradients(g, wrt=["x", "w"])
        loss, dx, dw = gx(x, **gc.lifted_feeds(g))
        xt = ge.tensor(x, requires_grad=True)
        w.grad = None
        eager = f(xt)
        eager.backward()
        assert bits_differ(loss, eager.detach().numpy()) is None
        np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(dw, w.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_jit_compiles_control_flow_once_per_signature() -> None:
    calls = []

    def f(x: object) -> object:
        calls.append(1)
        return gc.scan(lambda c, v: (c + v, c * 2.0), x[0], x)[1]

    fast = gc.jit(f)
    x = np.arange(6.0).reshape(3, 2)
    first, second = fast(x), fast(x + 1.0)
    assert len(calls) == 1
    assert bits_differ(first, f(x)) is None and bits_differ(second, f(x + 1.0)) is None


def test_scan_of_no_steps_on_arrays_and_tensors_gives_empty_ys_of_the_right_type() -> None:
    w = ge.tensor([1.0, 2.0], requires_grad=True)  # read by f: eagerly, on an empty scan too
    for init, xs in ((np.zeros(2), np.zeros((0, 2))), (ge.zeros(2), ge.zeros(0, 2))):
        carry, (ys, zs) = gc.scan(lambda c, x: (c + x * w, (c * w, gc.sum(c))), init, xs)
        assert carry is init
        assert tuple(ys.shape) == (0, 2) and tuple(zs.shape) == (0,)
    carry, ys = gc.scan(lambda c, _: (c, c), np.ones(2), length=0)
    assert ys.shape == (0, 2) and ys.dtype == np.float64


def test_while_loop_with_captures_in_both_functions_matches_python() -> None:
    def f(x: object, limit: object, step: object) -> object:
        count, value = gc.while_loop(
            lambda c: gc.sum(c[1] * c[1]) < limit,
            lambda c: (c[0] + 1, c[1] * 1.5 + step),
            (np.int64(0), x),
        )
        return value * gc.cast(count, "float64")

    spec = gc.TensorSpec((3,), F64)
    g = gc.trace(f, spec, gc.TensorSpec((), F64), spec)
    node = next(n for n in g.op_nodes if n.op == "while_loop")
    assert node.attrs["num_cond_consts"] == 1 and len(node.inputs) == 4
    x, step = np.array([0.1, 0.2, -0.3]), np.full(3, 0.05)
    for limit in (0.0, 1.0, 40.0):
        want = f(x, limit, step)
        assert bits_differ(g(x, np.float64(limit), step), want) is None
        eager = f(ge.tensor(x), limit, ge.tensor(step))
        assert bits_differ(eager.numpy(), want) is None


class ScanRNN(gc.nn.Module):
    """The tutorials' RNN with layers: their parameters are read inside the scan body."""

    def __init__(self) -> None:
        super().__init__()
        self.i2h = gc.nn.Linear(3, 4)
        self.h2h = gc.nn.Linear(4, 4)

    def forward(self, h: object, xs: object) -> object:
        last, _ = gc.scan(lambda c, x: (gc.tanh(self.i2h(x) + self.h2h(c)), None), h, xs)
        return gc.sum(last * last)


def test_a_module_whose_parameters_a_scan_body_reads_traces_and_differentiates() -> None:
    ge.manual_seed(0)
    model = ScanRNN()
    g = gc.trace(model, gc.TensorSpec((2, 4)), gc.TensorSpec((5, 2, 3)))
    params = ["i2h.weight", "i2h.bias", "h2h.weight", "h2h.bias"]
    assert [p.name for p in g.inputs] == ["h", "xs", *params]
    h = np.zeros((2, 4), np.float32)
    xs = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
    loss, *grads = gc.gradients(g, wrt=params)(h, xs, **gc.lifted_feeds(g))
    eager = model(ge.tensor(h), ge.tensor(xs))
    eager.backward()
    assert bits_differ(loss, eager.detach().numpy()) is None
    for name, grad in zip(params, grads):
        want = gc.lifted_tensors(g)[name].grad.numpy()
        np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    ("value", "dtype"),
    [(np.float64(2.0), "float64"), (np.float32(2.0), "float32"), (np.int32(2), "int32"),
     (2.0, "float32"), (2, "int64"), (True, "bool")],
)  # fmt: skip
def test_a_numpy_scalar_keeps_its_dtype_as_a_carry_or_operand(value: object, dtype: str) -> None:
    """np.float64 is a subclass of Python's float, but a numpy scalar is strongly typed: a
    carry or operand given as one keeps its dtype; Python scalars take graphc's defaults.
    (Found by the slow random programs: on arrays, x * 0.5 of a 0-d float64 array is an
    np.float64, and an empty scan traced its body on it as float32, so an inner carry
    entered as float32 and left as float64.)"""
    g = gc.Graph("scalars")
    with g:
        carry, _ = gc.scan(lambda c, x: (c, c), value, None, length=2)
        chosen = gc.cond(gc.placeholder("p", (), "bool"), lambda v: v, lambda v: v, value)
        gc.output(carry, name="carry")
        gc.output(chosen, name="chosen")
    assert [str(o.type.dtype) for o in g.outputs] == [dtype, dtype]


def test_an_empty_scan_on_arrays_traces_its_body_with_numpy_scalars_typed() -> None:
    x = np.array(1.5)  # 0-d float64
    half = x * 0.5  # numpy gives an np.float64 scalar, not a 0-d array

    def step(c: object, _: object) -> tuple:
        inner, _ = gc.scan(lambda d, __: (half, d), c, None, length=1)
        return inner, inner

    carry, ys = gc.scan(step, x, None, length=0)
    assert carry.dtype == np.float64 and ys.dtype == np.float64 and ys.shape == (0,)
