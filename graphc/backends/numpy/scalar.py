"""Scalar plans: when every value of a call holds one element, compute on numpy scalars.

A numpy ufunc call on a one-element array costs about 0.3 us here, almost all of it
dispatch; the same operator on numpy scalars (``a + b`` on two ``np.float32``)
costs about 0.05 us and rounds identically: both are one IEEE
operation in the operands' dtype, and numpy 2 promotes scalars and arrays alike
(NEP 50). So a plan whose every value is a one-element float32 or float64 runs its
steps as scalar expressions:

- ``+ - * /`` and unary ``-`` as Python operators on the numpy scalars;
- any other ufunc op by calling the ufunc on the scalars (the same inner loop as
  on a one-element array, so the same result);
- ops with the property "one_element_identity" (reshape, transpose, broadcast_to,
  max, min) as the value itself, and those with "one_element_sum" (the adding
  reductions) as ``v + 0.0`` (numpy's sum of [-0.0] is +0.0); the tests check each
  against the op's own kernel.

Inputs are read once (``x[0]``), and each returned value gets a fresh array of its
declared shape and dtype. There is no arena, so threads share nothing. A plan with
another op, another dtype, more than one element anywhere or training state is
planned on buffers as usual (`supports` decides). Floating-point warnings (division
by zero, overflow) are numpy's, as on arrays, under the caller's ``np.errstate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import OpDef, get_op
from graphc.ir.types import TensorType
from graphc.ops.body import body_types
from graphc.runtime.backend import ScalarPlans
from graphc.runtime.codegen import Generated, Generator, nonfinite_constants, step_text
from graphc.runtime.plan import Plan
from graphc.runtime.reference import check_finite
from graphc.runtime.specialize import Specialized

DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})

# ufuncs with a Python operator that numpy scalars implement with the same rounding
BINARY = {np.add: "+", np.subtract: "-", np.multiply: "*", np.divide: "/"}
UNARY = {np.negative: "-"}


def _ufunc(node: Node, attrs: dict[str, Any]) -> np.ufunc | None:
    """The ufunc a step may call directly (no attrs), if its op's kernel is one."""
    ufunc = getattr(get_op(node.op).kernel, "ufunc", None)  # type: ignore[arg-type]
    return ufunc if ufunc is not None and not attrs else None


def _scalar_type(t: TensorType) -> bool:
    # (a node with several results, a TupleType, needs a buffer per result: no scalar plan)
    return isinstance(t, TensorType) and t.size == 1 and t.dtype in DTYPES


def _runs_its_body(opdef: OpDef) -> bool:
    """An elementwise op whose one body is all it computes (a backend's fused group)."""
    return opdef.elementwise and opdef.bodies == ("body",)


def _supported(node: Node, types: dict[Node, TensorType], attrs: dict[str, Any]) -> bool:
    """Can op `node` (typed by `types`, called with `attrs`) run on numpy scalars?"""
    if not _scalar_type(types[node]):
        return False
    opdef = get_op(node.op)
    if opdef.has("one_element_identity") or opdef.has("one_element_sum"):
        return types[node.inputs[0]].dtype == types[node].dtype
    if _runs_its_body(opdef):  # its body's ops, inlined
        body = attrs["body"]
        inner = body_types(body, [types[x] for x in node.inputs])
        return all(
            _scalar_type(inner[n])
            and (n.kind != OP or n.is_constant or _supported(n, inner, dict(n.attrs)))
            for n in body.nodes
        )
    return _ufunc(node, attrs) is not None


def supports(graph: Graph, spec: Specialized) -> bool:
    """May `graph`, typed by `spec`, run as a scalar plan? (Callers exclude state.)"""
    for node in graph.nodes:
        if node.kind == OP and not node.is_constant:
            if not _supported(node, spec.types, spec.attrs[node]):
                return False
        elif node in spec.types and not _scalar_type(spec.types[node]):
            return False
    return True


class ScalarGenerator(Generator):
    """Source for a scalar plan: one expression per step on numpy scalars."""

    def generate(self) -> Generated:
        plan = self.plan
        setup = ["# per thread: nothing to carve (every value is one element: numpy scalars)"]
        for k, name in enumerate(plan.constants):
            index = _index(plan.values[name].type.rank)
            setup.append(f"{self._bind(name, self.fresh(name))} = constants[{k}][{index}]")
        params = [self.fresh(name) for name in plan.inputs]
        body = []
        for name, param in zip(plan.inputs, params):
            index = _index(plan.values[name].type.rank)
            body.append(f"{self._bind(name, self.fresh(name + '_value'))} = {param}[{index}]")
        due = nonfinite_constants(plan) if self.check_numerics else None
        for k, step in enumerate(plan.steps):
            node = step.node
            body += self._checks(due[k]) if due is not None else []
            body.append(f"# {step.index}: {step_text(step)}")
            args = [self.expr[x] for x in step.inputs]
            types = [plan.values[x].type for x in step.inputs]
            self.expr[step.output] = self._emit(node, args, types, step.attrs, body)
        body += self._checks(due[-1]) if due is not None else []
        body += self._boxed_returns()
        source = "\n".join(
            setup + [f"def run({', '.join(params)}):"] + ["    " + line for line in body]
        )
        code = compile(source + "\n", f"<graphc scalar plan {plan.graph.name}>", "exec")
        namespace = self.namespace

        def make(arena: np.ndarray, constants: list, states: list) -> Callable[..., Any]:
            own = dict(namespace, constants=constants)
            exec(code, own)
            return own["run"]

        return Generated(source + "\n", namespace, make)

    def _emit(
        self,
        node: Node,
        args: list[str],
        types: list[TensorType],
        attrs: dict[str, Any],
        lines: list[str],
    ) -> str:
        """Append the lines computing op `node` on scalars `args` of `types`; the name of
        its result."""
        opdef = get_op(node.op)
        # (sum_to returns its input itself when there is nothing to reduce)
        if opdef.has("one_element_identity") or (
            node.op == "sum_to" and attrs["shape"] == types[0].shape
        ):
            return args[0]
        if _runs_its_body(opdef):
            return self._inline(node, args, types, attrs["body"], lines)
        ufunc = _ufunc(node, attrs)
        if opdef.has("one_element_sum"):
            expr = f"{args[0]} + 0.0"
        elif ufunc in BINARY:
            expr = f"{args[0]} {BINARY[ufunc]} {args[1]}"
        elif ufunc in UNARY:
            expr = f"{UNARY[ufunc]}{args[0]}"
        else:
            expr = f"{self.const(ufunc, f'np_{ufunc.__name__}')}({', '.join(args)})"
        out = self.fresh(node.name)
        lines.append(f"{out} = {expr}")
        if self.check_numerics:
            check = self.const(_scalar_check(node), f"check_{node.name}")
            lines.append(f"{check}({out})")
        return out

    def _inline(
        self, node: Node, args: list[str], types: list[TensorType], body: Graph, lines: list[str]
    ) -> str:
        names: dict[Node, str] = dict(zip(body.inputs, args))
        inner_types = body_types(body, types)
        for inner in body.nodes:
            if inner.is_constant:
                value = inner.value.reshape(())[()]  # the numpy scalar
                names[inner] = self.const(value, f"{node.name}_{inner.name}")
                if self.check_numerics and not np.isfinite(value):  # where gc.run checks it
                    lines += self._checks([inner], names[inner])
            elif inner.kind == OP:
                ins = [names[x] for x in inner.inputs]
                in_types = [inner_types[x] for x in inner.inputs]
                names[inner] = self._emit(inner, ins, in_types, dict(inner.attrs), lines)
        return names[body.outputs[0].inputs[0]]

    def _checks(self, constants: list[Node], value: str | None = None) -> list[str]:
        """check_numerics: a check of each of `constants` (which hold NaN or inf)."""
        lines = []
        for node in constants:
            check = self.const(_scalar_check(node), f"check_{node.name}")
            lines.append(f"{check}({value or self.expr[node.name]})")
        return lines

    def _boxed_returns(self) -> list[str]:
        lines, results = [], []
        for name in self.plan.returns:
            t = self.plan.values[name].type
            box = self.fresh(f"{name}_out")
            dtype = self.literal(t.dtype, "dtype")
            lines.append(f"{box} = empty({t.shape!r}, {dtype})")
            lines.append(f"{box}[{_index(t.rank)}] = {self.expr[name]}")
            results.append(box)
        if not results:
            lines.append("return None")
        elif len(results) == 1:
            lines.append(f"return {results[0]}")
        else:
            lines.append(f"return ({', '.join(results)},)")
        return lines


def _index(rank: int) -> str:
    """Source indexing the one element of an array of `rank` dims."""
    return "()" if rank == 0 else ", ".join(["0"] * rank)


def _scalar_check(node: Node) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not math.isfinite(value):
            check_finite(node, np.asarray(value))

    return check


def generate(plan: Plan, check_numerics: bool = False) -> Generated:
    """Source and `make` function for a scalar `plan`."""
    return ScalarGenerator(plan, check_numerics).generate()


PLANS = ScalarPlans(supports, generate, "numpy (scalar)")
