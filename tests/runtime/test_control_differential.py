"""Random programs with cond and scan: the reference, O0, O1, O2 and eager agree.

The generator draws a *program*, a small tree of instructions, rather than a graph:
one Python function (`run_block`) evaluates it with graphc's op functions and
gc.cond / gc.scan, so the very same code is traced into a graph (nested bodies,
values captured from any enclosing level, several carries, reverse scans, length-only
scans of 0 to 3 steps, branch and body results that are captured values or operands
passed through) and runs eagerly on graphc.eager tensors and on arrays. Then:

- `check_levels` (tests/differential.py): gc.compile at O0, O1 and O2 equals the
  reference interpreter gc.run bit for bit, on tame and on hostile feeds;
- eager tensors and plain arrays give the reference's bits (they run the same
  kernels, step by step, in Python control flow);
- the gradient graph of the program's loss agrees across levels bit for bit, and with
  the eager side's gradients (rtol 1e-9: the two sum cotangents in other orders).

Values stay tame as in tests/strategies.py (exp of tanh, products with a tanh'd
factor, divisors 1 + |y|). A dim of size 5 is the symbolic dim "B" when the program
is traced with `symbolic`, fed then with other sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
import graphc.eager as ge
from graphc.ir.errors import ShapeError
from graphc.ir.types import broadcast_shapes
from tests.budget import draws
from tests.control_programs import PROGRAMS
from tests.control_programs import Program as NamedProgram
from tests.differential import check_levels, check_round_trip, describe_feeds, quiet
from tests.edge_values import bits_differ, edge_feeds

BATCH = 5  # a dim of this size is "B" in symbolic programs (no other dim has it)
SHAPES = ((), (3,), (2,), (2, 3), (1, 3), (3, 1), (4, 3), (BATCH,), (BATCH, 3), (BATCH, 1))
UNARY = ("tanh", "sin", "sigmoid", "neg", "abs", "relu", "exp_tanh", "scale")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "where")
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Block:
    """Instructions over an environment of values; `outputs` index that environment.

    A body's environment starts with every value of the enclosing one (so reading one
    captures it), then the body's own operands: a branch's operands, or a scan body's
    carries then x slices."""

    instrs: tuple[tuple, ...]
    outputs: tuple[int, ...]


def run_block(block: Block, env: Sequence[Any]) -> list[Any]:
    values = list(env)
    for instr in block.instrs:
        values.extend(_apply(instr, values))
    return [values[i] for i in block.outputs]


def _apply(instr: tuple, env: list[Any]) -> list[Any]:
    kind = instr[0]
    if kind == "unary":
        _, name, i = instr
        x = env[i]
        if name == "exp_tanh":
            return [gc.exp(gc.tanh(x))]
        if name == "scale":
            return [x * 0.5 + 1.0]
        return [getattr(gc, name)(x)]
    if kind == "binary":
        _, name, i, j = instr
        x, y = env[i], env[j]
        if name == "mul":
            return [x * gc.tanh(y)]
        if name == "div":
            return [x / (1.0 + gc.abs(y))]
        if name == "where":
            return [gc.where(x > y, x, y * 0.5)]
        return [getattr(gc, name)(x, y)]
    if kind == "reduce":
        _, name, i, axis, keepdims = instr
        return [getattr(gc, name)(env[i], axis=axis, keepdims=keepdims)]
    if kind == "cond":
        _, p, threshold, operands, then_block, else_block = instr
        outer = list(env)
        return list(
            gc.cond(
                gc.sum(env[p]) > threshold,
                lambda *ops: run_block(then_block, outer + list(ops)),
                lambda *ops: run_block(else_block, outer + list(ops)),
                *[env[i] for i in operands],
            )
        )
    _, carries, xs, length, reverse, body = instr
    outer = list(env)

    def step(carry: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
        out = run_block(body, outer + carry + x)
        return out[: len(carries)], out[len(carries) :]

    carry, ys = gc.scan(
        step,
        [env[i] for i in carries],
        [env[i] for i in xs],
        length=None if xs else length,
        reverse=reverse,
    )
    return list(carry) + list(ys)


# -- drawing programs ---------------------------------------------------------------
# The values a block will compute are stood for by zero arrays of their shapes: each
# instruction drawn is applied to them at once (on arrays: Python control flow), which
# gives the shapes the next draws need.

Draw = Any


def _broadcasts(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        broadcast_shapes(a.shape, b.shape)
    except ShapeError:
        return False
    return True


def _recent(draw: Draw, env: Sequence[np.ndarray]) -> int:
    """An index into env, favouring recent values so that results feed each other."""
    back = draw(st.integers(0, len(env) - 1))
    return len(env) - 1 - (back // 3 if draw(st.booleans()) else back)


def _draw_instrs(draw: Draw, env: list[np.ndarray], count: int, depth: int) -> list[tuple]:
    instrs = []
    for _ in range(count):
        kinds = ["unary", "binary", "binary", "reduce"] + ["cond", "scan"] * (depth > 0)
        instr = _draw_instr(draw, draw(st.sampled_from(kinds)), env, depth)
        instrs.append(instr)
        with quiet():
            env.extend(np.asarray(v) for v in _apply(instr, env))
    return instrs


def _draw_instr(draw: Draw, kind: str, env: list[np.ndarray], depth: int) -> tuple:
    i = _recent(draw, env)
    if kind == "unary":
        return ("unary", draw(st.sampled_from(UNARY)), i)
    if kind == "binary":
        j = draw(st.sampled_from([j for j, v in enumerate(env) if _broadcasts(env[i], v)]))
        return ("binary", draw(st.sampled_from(BINARY)), i, j)
    if kind == "reduce":
        rank = env[i].ndim
        axis = draw(st.one_of(st.none(), st.integers(-rank, rank - 1))) if rank else None
        names = ["sum", "mean", "max"] if env[i].size else ["sum"]  # max of nothing: an error
        return ("reduce", draw(st.sampled_from(names)), i, axis, draw(st.booleans()))
    if kind == "cond":
        return _draw_cond(draw, env, depth)
    return _draw_scan(draw, env, depth)


def _draw_body(
    draw: Draw, env: list[np.ndarray], wanted: Sequence[tuple], extra: int, depth: int
) -> Block:
    """A block whose outputs have the `wanted` shapes, then `extra` of any shape. An
    output may be a value of the enclosing block (captured) or an operand."""
    values = list(env)
    instrs = _draw_instrs(draw, values, draw(st.integers(0, 4)), depth - 1)
    outputs = [
        draw(st.sampled_from([k for k, v in enumerate(values) if v.shape == shape]))
        for shape in wanted
    ]
    outputs += [_recent(draw, values) for _ in range(extra)]
    return Block(tuple(instrs), tuple(outputs))


def _draw_cond(draw: Draw, env: list[np.ndarray], depth: int) -> tuple:
    operands = tuple(draw(st.lists(st.integers(0, len(env) - 1), max_size=2)))
    inner = env + [env[i] for i in operands]
    wanted = [v.shape for v in draw(st.lists(st.sampled_from(inner), min_size=1, max_size=2))]
    branches = [_draw_body(draw, inner, wanted, 0, depth) for _ in range(2)]
    threshold = draw(st.sampled_from([-0.5, 0.0, 0.5]))
    return ("cond", _recent(draw, env), threshold, operands, *branches)


def _draw_scan(draw: Draw, env: list[np.ndarray], depth: int) -> tuple:
    carries = tuple(draw(st.lists(st.integers(0, len(env) - 1), min_size=1, max_size=2)))
    sequences = [k for k, v in enumerate(env) if v.ndim and v.shape[0]]
    xs: tuple[int, ...] = ()
    if sequences and draw(st.booleans()):
        first = draw(st.sampled_from(sequences))
        same = [k for k in sequences if env[k].shape[0] == env[first].shape[0]]
        xs = (first, *draw(st.lists(st.sampled_from(same), max_size=1)))
    length = env[xs[0]].shape[0] if xs else draw(st.integers(0, 3))
    inner = env + [env[i] for i in carries] + [env[i][0] for i in xs]
    body = _draw_body(draw, inner, [env[i].shape for i in carries], draw(st.integers(0, 2)), depth)
    return ("scan", carries, xs, length, draw(st.booleans()), body)


@dataclass(frozen=True)
class Program:
    """Inputs of `shapes` (a dim of size BATCH is "B" when `symbolic`) and the block
    computing the outputs from them, in `dtype`."""

    shapes: tuple[tuple[int, ...], ...]
    block: Block
    dtype: str
    symbolic: bool

    def specs(self) -> list[gc.TensorSpec]:
        batch = "B" if self.symbolic else BATCH
        return [
            gc.TensorSpec([batch if d == BATCH else d for d in s], self.dtype) for s in self.shapes
        ]

    def outputs(self, *inputs: Any) -> tuple:
        return tuple(run_block(self.block, inputs))

    def loss(self, *inputs: Any) -> Any:
        total = None
        for value in self.outputs(*inputs):
            total = gc.sum(value) if total is None else total + gc.sum(value)
        return total

    def graph(self) -> gc.Graph:
        return gc.trace(self.outputs, *self.specs(), name="random")

    def feeds(self, g: gc.Graph, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        batch = int(rng.choice([1, 3, BATCH])) if self.symbolic else BATCH
        return {
            p.name: rng.uniform(-1.0, 1.0, [batch if d == BATCH else d for d in s]).astype(
                self.dtype
            )
            for p, s in zip(g.inputs, self.shapes)
        }


def _has_control(block: Block) -> bool:
    return any(instr[0] in ("cond", "scan") for instr in block.instrs)


@st.composite
def programs(draw: Draw, dtype: str | None = None, max_depth: int = 2) -> Program:
    """A program of 1-3 inputs, 2-8 instructions, at least one cond or scan, bodies
    nested up to `max_depth` deep; 1-3 outputs."""
    shapes = tuple(draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3)))
    env = [np.zeros(s) for s in shapes]
    depth = draw(st.integers(1, max_depth))
    instrs = _draw_instrs(draw, env, draw(st.integers(2, 8)), depth)
    if not _has_control(Block(tuple(instrs), ())):
        kind = draw(st.sampled_from(["cond", "scan"]))
        instrs.append(_draw_instr(draw, kind, env, depth))
        with quiet():
            env.extend(np.asarray(v) for v in _apply(instrs[-1], env))
    outputs = (len(env) - 1, *draw(st.lists(st.integers(0, len(env) - 1), max_size=2)))
    return Program(
        shapes,
        Block(tuple(instrs), outputs),
        dtype or draw(st.sampled_from(["float64", "float32"])),
        draw(st.booleans()),
    )


# -- the checks -----------------------------------------------------------------------


def _eager_outputs(program: Program, g: gc.Graph, feeds: dict[str, np.ndarray]) -> list:
    tensors = [ge.tensor(feeds[p.name]) for p in g.inputs]
    return [t.numpy() for t in program.outputs(*tensors)]


def _array_outputs(program: Program, g: gc.Graph, feeds: dict[str, np.ndarray]) -> list:
    return [np.asarray(v) for v in program.outputs(*[feeds[p.name] for p in g.inputs])]


def check_program(program: Program, seed: int) -> None:
    g = program.graph()
    tame = program.feeds(g, seed)
    hostile = edge_feeds(g, seed=seed, dims=2)
    check_levels(g, [tame, hostile])
    check_round_trip(g, [tame])  # text and JSON give back a graph that runs the same
    for feeds in (tame, hostile):
        with quiet():
            try:
                want = gc.run(g, feeds)
            except gc.GraphcError:
                continue
            for how, run in (("eager", _eager_outputs), ("arrays", _array_outputs)):
                got = run(program, g, feeds)
                for k, (a, b) in enumerate(zip(got, want)):
                    why = bits_differ(a, b)
                    assert why is None, (
                        f"{how} output {k}: {why}\n{g}\nfeeds = {describe_feeds(feeds)}"
                    )


@settings(max_examples=draws(300), derandomize=True)
@given(programs(), st.integers(0, 2**16))
def test_levels_reference_and_eager_agree(program: Program, seed: int) -> None:
    check_program(program, seed)


@pytest.mark.slow
@settings(max_examples=draws(1000))
@given(programs(max_depth=3), st.integers(0, 2**16))
def test_levels_reference_and_eager_agree_slow(program: Program, seed: int) -> None:
    check_program(program, seed)


def check_gradients(program: Program, seed: int) -> None:
    g = gc.trace(program.loss, *program.specs(), name="random_loss")
    wrt = [p.name for p in g.inputs]
    joint = gc.gradients(g, wrt=wrt)
    feeds = program.feeds(g, seed)
    check_levels(joint, [feeds])
    with quiet():
        want = gc.run(joint, feeds)
        fwd, bwd = gc.split_backward(g, wrt=wrt, seeds=False)
        saved = gc.run(fwd, feeds)[len(g.outputs) :]
        back = gc.run(bwd, dict(zip([p.name for p in bwd.inputs], saved)))
    for name, split, grad in zip(wrt, back, want[1:]):
        why = bits_differ(split, grad)
        assert why is None, f"split_backward d/d{name}: {why}\n{g}\n{describe_feeds(feeds)}"
    with quiet():
        tensors = [ge.tensor(feeds[name], requires_grad=True) for name in wrt]
        loss = program.loss(*tensors)
        if loss.requires_grad:  # not when only empty ys (a scan of no steps) reach it
            loss.backward()
    for name, t, grad in zip(wrt, tensors, want[1:]):
        eager = np.zeros_like(grad) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(
            grad, eager, rtol=1e-9, atol=1e-12, err_msg=f"d/d{name}\n{g}\n{describe_feeds(feeds)}"
        )


@settings(max_examples=draws(100), derandomize=True)
@given(programs(dtype="float64"), st.integers(0, 2**16))
def test_gradients_agree_across_levels_and_with_eager(program: Program, seed: int) -> None:
    check_gradients(program, seed)


@pytest.mark.slow
@settings(max_examples=draws(250))
@given(programs(dtype="float64", max_depth=3), st.integers(0, 2**16))
def test_gradients_agree_across_levels_and_with_eager_slow(program: Program, seed: int) -> None:
    check_gradients(program, seed)


@pytest.mark.parametrize("named", list(PROGRAMS.values()), ids=lambda p: p.name)
def test_named_programs_and_their_gradients_at_every_level(named: NamedProgram) -> None:
    """The programs of tests/control_programs.py, their gradient graphs and the two
    halves of split_backward, compiled at every level, against the reference."""
    g = named.graph()
    wrt = [p.name for p in g.inputs]
    feed_sets = [dict(zip(wrt, named.inputs(seed))) for seed in range(3)]
    check_levels(g, feed_sets)
    if not named.differentiable:
        return
    check_levels(gc.gradients(g, wrt=wrt), feed_sets)
    fwd, bwd = gc.split_backward(g, wrt=wrt, seeds=False)
    check_levels(fwd, feed_sets)
    saved = [gc.run(fwd, feeds)[len(g.outputs) :] for feeds in feed_sets]
    check_levels(bwd, [dict(zip([p.name for p in bwd.inputs], values)) for values in saved])
