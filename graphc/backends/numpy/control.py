"""Compiled control flow: cond, scan and while_loop run planned bodies on fixed buffers.

A body is planned once per shape signature, like a graph (`compile_body`): its plan
has *given* outputs (plan.py), so each call writes its results straight into buffers
the loop passes in. The generated step calls a loop object made per thread (its
body's arena is that thread's), which

- scan: alternates two sets of carry buffers (a body never writes the carries it
  reads), writes the last step's carries into the node's result buffers, and each
  step's ys into row t of the stacked results; so no step allocates, and the plan's
  size does not depend on the number of steps;
- cond: runs the plan of the branch the predicate picks, into the result buffers;
- while_loop: runs the condition's plan into a one-element flag and the body's plan
  on alternating carry buffers while the flag holds, then copies the carries out.

Results nobody reads get scratch buffers of the loop object. The body plans are kept
on the outer plan (`plan.bodies`), so `explain()` shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.ops.body import bind_body_dims
from graphc.runtime.backend import register_lowering
from graphc.runtime.codegen import Generated, Generator, generate
from graphc.runtime.plan import Plan, Step, build_plan
from graphc.runtime.specialize import specialize


@dataclass
class CompiledBody:
    """A body's plan and code for one set of input types."""

    plan: Plan
    generated: Generated
    constants: list[np.ndarray]
    output_types: list[TensorType]

    def instance(self) -> Any:
        """The body's run function, on an arena of its own (one per thread)."""
        return self.generated.instantiate(self.plan.arena_bytes, self.constants, [])


def compile_body(gen: Generator, body: Graph, types: Sequence[TensorType]) -> CompiledBody:
    """`body` planned and generated for `types`, inside the plan `gen` is generating."""
    bindings = bind_body_dims(body, types, "body")
    spec = specialize(body, bindings)  # type: ignore[arg-type]
    plan = build_plan(body, spec, given_outputs=True)
    constants = [np.asarray(plan.nodes[name].value, order="C") for name in plan.constants]
    output_types = [spec.types[o] for o in body.outputs]
    generated = generate(plan, gen.check_numerics, gen.backend, parent=gen)
    return CompiledBody(plan, generated, constants, output_types)  # type: ignore[arg-type]


class Scratch:
    """Buffers for the results nobody reads, made on first use and kept."""

    def __init__(self, types: Sequence[TensorType]) -> None:
        self.types = types
        self.arrays: dict[int, np.ndarray] = {}

    def fill(self, out: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        filled = []
        for k, o in enumerate(out):
            if o is None:
                o = self.arrays.get(k)
                if o is None:
                    t = self.types[k]
                    o = self.arrays[k] = np.empty(t.shape, t.dtype)  # type: ignore[arg-type]
            filled.append(o)
        return filled


class ScanLoop:
    """One thread's compiled scan (see the module docstring); `attrs` are the scan node's
    (its length, direction and numbers of carries and xs)."""

    def __init__(
        self, body: CompiledBody, attrs: dict[str, Any], result_types: list[TensorType]
    ) -> None:
        self.run = body.instance()
        self.length, self.reverse = attrs["length"], attrs["reverse"]
        self.num_carry, self.num_xs = attrs["num_carry"], attrs["num_xs"]
        carries = result_types[: self.num_carry]
        self.buffers = tuple([np.empty(t.shape, t.dtype) for t in carries] for _ in range(2))  # type: ignore[arg-type]
        self.scratch = Scratch(result_types)

    def __call__(self, *arrays: np.ndarray, out: Sequence[np.ndarray | None]) -> tuple:
        nc, nx = self.num_carry, self.num_xs
        results = self.scratch.fill(out)
        finals, ys = results[:nc], results[nc:]
        xs, consts = arrays[nc : nc + nx], arrays[nc + nx :]
        length = self.length
        if length == 0:
            for final, init in zip(finals, arrays[:nc]):
                np.copyto(final, init)
            return tuple(results)
        run, (a, b) = self.run, self.buffers
        current: Sequence[np.ndarray] = arrays[:nc]
        steps = range(length - 1, -1, -1) if self.reverse else range(length)
        last = length - 1
        for s, t in enumerate(steps):
            following = finals if s == last else (a if s % 2 == 0 else b)
            # [t, ...]: a row of a 1-d stack is a 0-d view, not a numpy scalar
            run(*current, *[x[t, ...] for x in xs], *consts, *following, *[y[t, ...] for y in ys])
            current = following
        return tuple(results)


class CondBranches:
    """One thread's compiled cond."""

    def __init__(
        self, then_body: CompiledBody, else_body: CompiledBody, result_types: list[TensorType]
    ) -> None:
        self.then_run, self.else_run = then_body.instance(), else_body.instance()
        self.scratch = Scratch(result_types)

    def __call__(
        self, pred: np.ndarray, *operands: np.ndarray, out: Sequence[np.ndarray | None]
    ) -> tuple:
        results = self.scratch.fill(out)
        (self.then_run if pred else self.else_run)(*operands, *results)
        return tuple(results)


class WhileLoop:
    """One thread's compiled while_loop."""

    def __init__(
        self,
        cond_body: CompiledBody,
        body: CompiledBody,
        num_carry: int,
        num_cond_consts: int,
        result_types: list[TensorType],
    ) -> None:
        self.test, self.run = cond_body.instance(), body.instance()
        self.num_carry, self.num_cond_consts = num_carry, num_cond_consts
        self.flag = np.empty((), np.bool_)
        self.buffers = tuple([np.empty(t.shape, t.dtype) for t in result_types] for _ in range(2))  # type: ignore[arg-type]
        self.scratch = Scratch(result_types)

    def __call__(self, *arrays: np.ndarray, out: Sequence[np.ndarray | None]) -> tuple:
        nc, k = self.num_carry, self.num_cond_consts
        results = self.scratch.fill(out)
        cond_consts, body_consts = arrays[nc : nc + k], arrays[nc + k :]
        test, run, flag, (a, b) = self.test, self.run, self.flag, self.buffers
        current: Sequence[np.ndarray] = arrays[:nc]
        test(*current, *cond_consts, flag)
        s = 0
        while flag:
            following = a if s % 2 == 0 else b
            run(*current, *body_consts, *following)
            current, s = following, s + 1
            test(*current, *cond_consts, flag)
        for result, value in zip(results, current):
            np.copyto(result, value)
        return tuple(results)


# -- lowerings ----------------------------------------------------------------------


def input_types(gen: Generator, names: Sequence[str]) -> list[TensorType]:
    return [gen.plan.values[x].type for x in names]


def result_types_of(gen: Generator, step: Step) -> list[TensorType]:
    """The step's result types at this plan's sizes (symbolic dims bound)."""
    return list(step.node.type.bind(gen.plan.bindings).items)  # type: ignore[union-attr]


def scan_body_types(gen: Generator, step: Step) -> list[TensorType]:
    """The types a scan step's body is planned for: its carries, a row of each xs, its
    constants."""
    nc, nx = step.attrs["num_carry"], step.attrs["num_xs"]
    types = input_types(gen, step.inputs)
    rows = [t.with_shape(t.shape[1:]) for t in types[nc : nc + nx]]
    return types[:nc] + rows + types[nc + nx :]


def emit_loop(gen: Generator, step: Step, loop: Any, out: str) -> list[str]:
    """Make `loop` per thread (in the setup) and call it with the step's arrays."""
    factory = gen.const(loop, f"{step.output}_factory")
    name = gen.fresh(f"{step.output}_loop")
    gen.setup_lines.append(f"{name} = {factory}()")
    args = [*(gen.array(x) for x in step.inputs), f"out={out}"]  # a scan may have no input
    return [f"{name}({', '.join(args)})"]


def record_bodies(gen: Generator, step: Step, **bodies: CompiledBody) -> None:
    """Keep a step's compiled bodies on the outer plan and code, for explain()."""
    gen.plan.bodies[step.index] = {attr: body.plan for attr, body in bodies.items()}
    gen.bodies[step.index] = {attr: body.generated for attr, body in bodies.items()}


@register_lowering("scan")
def lower_scan(gen: Generator, step: Step, out: str) -> list[str]:
    attrs = step.attrs
    body = compile_body(gen, attrs["body"], scan_body_types(gen, step))
    record_bodies(gen, step, body=body)
    result_types = result_types_of(gen, step)

    def loop() -> ScanLoop:
        return ScanLoop(body, attrs, result_types)

    return emit_loop(gen, step, loop, out)


@register_lowering("cond")
def lower_cond(gen: Generator, step: Step, out: str) -> list[str]:
    types = input_types(gen, step.inputs[1:])
    then_body = compile_body(gen, step.attrs["then_body"], types)
    else_body = compile_body(gen, step.attrs["else_body"], types)
    record_bodies(gen, step, then_body=then_body, else_body=else_body)
    result_types = result_types_of(gen, step)
    return emit_loop(gen, step, lambda: CondBranches(then_body, else_body, result_types), out)


@register_lowering("while_loop")
def lower_while(gen: Generator, step: Step, out: str) -> list[str]:
    attrs = step.attrs
    nc, k = attrs["num_carry"], attrs["num_cond_consts"]
    types = input_types(gen, step.inputs)
    cond_body = compile_body(gen, attrs["cond_body"], types[:nc] + types[nc : nc + k])
    body = compile_body(gen, attrs["body"], types[:nc] + types[nc + k :])
    record_bodies(gen, step, cond_body=cond_body, body=body)
    result_types = result_types_of(gen, step)
    return emit_loop(gen, step, lambda: WhileLoop(cond_body, body, nc, k, result_types), out)
