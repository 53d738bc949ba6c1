"""The onnx package's backend node tests, for every op type graphc imports.

A case is run when every op type in its model is one graphc imports: imported, run by
the reference interpreter and compiled at O2, each output compared with the case's
expected output at the case's tolerances (a bfloat16 output within one bfloat16 step, a
float16 one within two float16 steps: the expected values hold the roundings of whatever
computed them, step by step, where graphc computes each op in float32 and rounds once). The only failures allowed are the named error
for an element type graphc does not have (the float8 and int4 kinds, string, and
bfloat16 without ml_dtypes) and the few forms in REFUSED, each refused by name for its
stated reason.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import graphc as gc  # noqa: E402
from graphc.onnx import OnnxError  # noqa: E402
from graphc.onnx.importer import SUPPORTED_TYPES  # noqa: E402
from tests.budget import sample  # noqa: E402
from tests.onnx.node_cases import load_cases, op_types  # noqa: E402

SUPPORTED = set(gc.onnx.supported_op_types())
CASES = [c for c in load_cases() if set(op_types(c.model.graph)) <= SUPPORTED]

# forms graphc refuses by name, each for a stated reason (docs/onnx.md)
REFUSED = {
    "Dropout in training mode is not supported": "Dropout: inference only (random masks)",
    "(diagonals are not supported)": "Einsum: graphc's einsum has no diagonals (ii)",
}


def as_array(value: object) -> object:
    """Test data as arrays (some cases store a TensorProto)."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value


def run_case(case: object) -> str:
    """'passed', or 'element type' when the model uses a dtype graphc refuses by name."""
    inputs_of = [i.name for i in case.model.graph.input]
    for inputs, outputs in case.data_sets:
        values = dict(zip(inputs_of, (as_array(v) for v in inputs)))
        fixed: dict[str, object] = {}
        while True:  # inputs the graph's shapes depend on are fixed, as a static graph needs
            try:
                graph = gc.onnx.import_model(case.model, fixed=fixed)
                break
            except OnnxError as exc:
                if exc.needs is None or exc.needs in fixed:
                    if any(phrase in str(exc) for phrase in REFUSED):
                        return "refused"
                    assert SUPPORTED_TYPES in str(exc), f"{case.name}: {exc}"
                    return "element type"
                fixed[exc.needs] = values[exc.needs]
        exe = gc.compile(graph, opt_level=2)
        feeds = {p.name: values[p.name] for p in graph.inputs}
        with np.errstate(all="ignore"):
            reference = gc.run(graph, feeds)
            compiled = exe(**feeds)
        compiled = list(compiled) if isinstance(compiled, tuple) else [compiled]
        for k, want in enumerate(as_array(o) for o in outputs):
            rtol, atol, wide = case.rtol, case.atol, want.dtype
            if want.dtype.name == "bfloat16":  # its maker's roundings: one bfloat16 step
                rtol, atol, wide = max(rtol, 2**-7), max(atol, 2**-8), np.dtype(np.float64)
            elif want.dtype == np.float16:  # the maker rounds each step of a composite
                # (an expanded attention: 2 float16 steps), graphc each op once in float32
                rtol, atol, wide = max(rtol, 2**-9), max(atol, 2**-14), np.dtype(np.float64)
            for how, got in (("reference", reference[k]), ("O2", compiled[k])):
                assert got.dtype == want.dtype, (
                    f"{case.name} output {k} ({how}): dtype {got.dtype}, expected {want.dtype}"
                )
                np.testing.assert_allclose(
                    got.astype(wide), want.astype(wide), rtol=rtol, atol=atol,
                    equal_nan=True, err_msg=f"{case.name} output {k} ({how})",
                )  # fmt: skip
    return "passed"


@pytest.mark.parametrize(
    "case",
    sample(CASES, key=lambda c: tuple(op_types(c.model.graph)), ident=lambda c: c.name),
    ids=lambda c: c.name,
)
def test_node_case(case: object) -> None:
    run_case(case)
