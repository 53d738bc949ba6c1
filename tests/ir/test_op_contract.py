"""The op contract: every fact of an op lives in its `OpDef`.

Checks that the property vocabulary (`PROPS`) is declared and asked for, that unknown
properties are refused, that each property keeps its promise on the ops declaring it
(with real data, special values included), that every op lacking a rule of some kind
is listed here with a reason, and that the op-name side sets the contract replaced
are gone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.ir.errors import DTypeError
from graphc.ir.registry import PROPS, REQUIRED, OpDef, all_ops, get_op, ops_with
from graphc.ir.types import TensorType
from graphc.ops.defop import defop
from tests.op_cases import all_cases, build_graph, cases_for
from tests.runtime.test_scratch import traced

SOURCE = Path(gc.__file__).parent
RNG = np.random.default_rng(32)

FLOATS = (np.float32, np.float64)
INTS = (np.int32, np.int64)  # graphc's dtypes


def _specials(dtype: Any) -> np.ndarray:
    """Values that break careless promises: zeros of both signs, extremes, inf, nan."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([False, True])
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.array([0, 1, 2, info.max, info.max - 1, info.min, info.min + 1], dtype)
    info = np.finfo(dtype)
    return np.array(
        [0.0, -0.0, 1.0, -1.0, 0.5, info.tiny, -info.tiny, info.smallest_subnormal,
         info.max, -info.max, np.inf, -np.inf, np.nan, 1e4, -1e4, 88.0, -88.0, 710.0],
        dtype,
    )  # fmt: skip


def _values(dtype: Any, n: int = 200) -> np.ndarray:
    """Special values, then random ones of several magnitudes."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.concatenate([_specials(dtype), RNG.random(n) < 0.5])
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        drawn = RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        return np.concatenate([_specials(dtype), drawn])
    drawn = RNG.standard_normal(n) * 10.0 ** RNG.integers(-3, 4, n)
    return np.concatenate([_specials(dtype), drawn.astype(dtype)])


def _pairs(dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, and random pairs."""
    specials = _specials(dtype)
    a, b = np.meshgrid(specials, specials)
    drawn = _values(dtype)
    return np.concatenate([a.ravel(), drawn]), np.concatenate([b.ravel(), RNG.permutation(drawn)])


def _defaults(opdef: OpDef) -> dict[str, Any] | None:
    """The op's attrs at their defaults, or None if one is required."""
    if any(v is REQUIRED for v in opdef.attrs.values()):
        return None
    return dict(opdef.attrs)


def _accepts(opdef: OpDef, *dtypes: Any) -> bool:
    """Whether the op's type rule takes inputs of these dtypes (one element each)."""
    try:
        opdef.infer(*(TensorType((1,), np.dtype(d)) for d in dtypes), **(_defaults(opdef) or {}))
    except DTypeError:
        return False
    return True


# -- the vocabulary -------------------------------------------------------------------


def test_every_property_has_a_promise_and_a_declaring_op() -> None:
    for prop, promise in PROPS.items():
        assert re.fullmatch(r"[a-z_]+", prop), prop
        assert promise.strip(), f"property '{prop}' promises nothing"
        assert ops_with(prop), f"no op declares '{prop}': declare it or drop it from PROPS"


def test_every_property_is_asked_for_in_graphc() -> None:
    """A property nobody asks about is a promise nobody keeps: some module of graphc
    asks `has("prop")` or `ops_with("prop")`."""
    text = "\n".join(p.read_text() for p in SOURCE.rglob("*.py"))
    for prop in PROPS:
        asked = f'has("{prop}")' in text or f'ops_with("{prop}")' in text
        assert asked, f"nothing in graphc/ asks an op for '{prop}'"


def test_unknown_properties_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown props"):
        OpDef(
            "bogus_op",
            1,
            infer=lambda x: x,
            kernel=lambda x, out=None: x,
            props=frozenset({"shiny"}),
        )
    with pytest.raises(ValueError, match="unknown props"):
        defop("bogus_op", infer=lambda x: x, kernel=lambda x, out=None: x, props=("shiny",))
    assert "bogus_op" not in all_ops()  # refused before it was registered
    with pytest.raises(ValueError, match="unknown op property"):
        get_op("add").has("shiny")
    with pytest.raises(ValueError, match="unknown op property"):
        ops_with("shiny")


# -- each promise, on the ops that declare it -----------------------------------------


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _words(array: np.ndarray) -> np.ndarray:
    """A 1-D array's elements as unsigned integers of their bits."""
    return np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")


def _commutative_cases() -> list[Any]:
    return [
        pytest.param(op, dtype, id=f"{op}-{np.dtype(dtype)}")
        for op in sorted(ops_with("commutative"))
        for dtype in (*FLOATS, *INTS, np.bool_)
    ]


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_an_order_sensitive_tie_keeps_both_orders_through_the_passes(op: str) -> None:
    """numpy's maximum and minimum return x on a tie, so maximum(0.0, -0.0) is -0.0 and
    maximum(-0.0, 0.0) is 0.0: they are not declared commutative, and CSE keeps both."""
    assert not get_op(op).has("commutative")
    g = gc.Graph("ties")
    with g:
        a = gc.placeholder("a", shape=(2,), dtype="float64")
        b = gc.placeholder("b", shape=(2,), dtype="float64")
        fn = getattr(gc, op)
        gc.output(fn(a, b), name="ab")
        gc.output(fn(b, a), name="ba")
    feeds = {"a": np.array([0.0, -0.0]), "b": np.array([-0.0, 0.0])}
    want = gc.run(g, feeds)
    for level in (0, 1, 2):
        got = gc.compile(g, opt_level=level)(**feeds)
        for w, x in zip(want, got):
            assert _words(w).tolist() == _words(x).tolist(), (op, level, w, x)
    assert _words(want[0]).tolist() != _words(want[1]).tolist()  # the case bites


@pytest.mark.parametrize(("op", "dtype"), _commutative_cases())
def test_commutative_ops_give_the_same_bits_either_way(op: str, dtype: Any) -> None:
    opdef = get_op(op)
    if not _accepts(opdef, dtype, dtype):
        pytest.skip(f"{op} takes no {np.dtype(dtype)}")
    a, b = _pairs(dtype)
    with np.errstate(all="ignore"):
        one, other = opdef.kernel(a, b), opdef.kernel(b, a)
    assert one.dtype == other.dtype
    differ = np.flatnonzero(_words(one) != _words(other))
    assert not differ.size, f"{op}({a[differ][:3]}, {b[differ][:3]}) differs when swapped"


def _non_negative(result: np.ndarray) -> bool:
    result = np.asarray(result)
    if np.issubdtype(result.dtype, np.inexact):
        return bool(np.all(np.isnan(result) | (result >= 0)))
    return bool(np.all(result >= 0))


@pytest.mark.parametrize("op", sorted(ops_with("non_negative")))
def test_non_negative_ops_give_no_negative_result(op: str) -> None:
    opdef = get_op(op)
    for case in cases_for(op):
        for seed in range(4):
            result = case.build(*case.inputs(seed))
            assert _non_negative(result), f"{case.id} seed {seed}: {result}"
    attrs = _defaults(opdef)
    if opdef.arity != 1 or attrs is None:
        return  # (the cases above are its data)
    for dtype in (*FLOATS, *INTS):
        if not _accepts(opdef, dtype):
            continue
        x = _values(dtype)
        if np.issubdtype(dtype, np.signedinteger):
            x = x[x != np.iinfo(dtype).min]  # abs(int32 min) wraps, as PROPS says
        with np.errstate(all="ignore"):
            result = opdef.kernel(x.reshape(1, -1), **attrs)
        assert _non_negative(result), f"{op} on {np.dtype(dtype)}: {result}"


@pytest.mark.parametrize("op", sorted(ops_with("activation")))
def test_activations_keep_the_type_and_run_in_place(op: str) -> None:
    opdef = get_op(op)
    assert opdef.elementwise and opdef.arity == 1 and not opdef.attrs and opdef.inplace
    for dtype in FLOATS:
        x = _values(dtype)
        assert opdef.infer(TensorType(x.shape, x.dtype)) == TensorType(x.shape, x.dtype)
        with np.errstate(all="ignore"):
            fresh = opdef.kernel(x)
            in_place = x.copy()
            opdef.kernel(in_place, out=in_place)
        assert _bits(fresh) == _bits(in_place), f"{op} in place differs on {np.dtype(dtype)}"


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(ops_with("allocates_one_temporary")))
def test_one_temporary_is_what_the_kernel_allocates(op: str, dtype: Any) -> None:
    kernel = get_op(op).kernel
    x = RNG.standard_normal(1 << 16).astype(dtype)
    out = np.empty_like(x)
    peak = traced(lambda: kernel(x, out=out))
    assert x.nbytes <= peak <= x.nbytes + 32768, f"{op} on {np.dtype(dtype)}: {peak} bytes"


@pytest.mark.parametrize("op", sorted(ops_with("reads_only_type")))
def test_type_only_ops_ignore_their_inputs_values(op: str) -> None:
    opdef = get_op(op)
    attrs = _defaults(opdef)
    assert attrs is not None, f"{op}: give this test the attrs it needs"
    for dtype in (*FLOATS, *INTS, np.bool_):
        one, other = _values(dtype), RNG.permutation(_values(dtype))
        inputs = [one] * (opdef.arity or 1)
        others = [other] * (opdef.arity or 1)
        assert _bits(opdef.kernel(*inputs, **attrs)) == _bits(opdef.kernel(*others, **attrs))


_MIXED = [
    (np.int64, np.float32), (np.int32, np.float64), (np.bool_, np.int32),
    (np.int32, np.int64), (np.float32, np.float64), (np.int64, np.int64), (np.bool_, np.bool_),
]  # fmt: skip


@pytest.mark.parametrize("dtypes", _MIXED, ids=lambda d: f"{np.dtype(d[0])}-{np.dtype(d[1])}")
@pytest.mark.parametrize("op", sorted(ops_with("comparison")))
def test_comparisons_compare_in_the_common_dtype(op: str, dtypes: tuple) -> None:
    opdef = get_op(op)
    a, b = _values(dtypes[0]), RNG.permutation(_values(dtypes[1]))
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    assert opdef.infer(TensorType(a.shape, a.dtype), TensorType(b.shape, b.dtype)).dtype == bool
    common = np.result_type(a.dtype, b.dtype)
    with np.errstate(all="ignore"):
        want = opdef.kernel(a.astype(common), b.astype(common))
        got = opdef.kernel(a, b)
    assert got.dtype == np.bool_ and _bits(got) == _bits(want)


# properties whose promise another test checks, with real data on every declaring op
CHECKED_ELSEWHERE = {
    # its table of one-element cases must name exactly the ops declaring these
    "one_element_identity": "tests/backends/numpy/test_scalar.py",
    "one_element_sum": "tests/backends/numpy/test_scalar.py",
}


def test_every_promise_is_checked() -> None:
    here = Path(__file__).read_text()
    for prop in PROPS:
        if prop in CHECKED_ELSEWHERE:
            assert (SOURCE.parent / CHECKED_ELSEWHERE[prop]).exists()
        else:
            assert f'ops_with("{prop}")' in here, f"no test here checks '{prop}'"


# -- fused nodes: a backend's, made after every transformation ----------------------


def _fusion_examples() -> list[gc.Graph]:
    """Graphs whose fusion makes each kind of fused node: an elementwise chain, a layer
    (matmul, bias, relu), a convolution with bias and relu then a residual add, an
    attention chain, a cross-entropy loss (its picked log-probabilities)."""
    rng = np.random.default_rng(0)
    chain = gc.trace(lambda x: gc.tanh(gc.exp(x) * 2.0 + x), gc.TensorSpec(("B", 5)))
    w1 = rng.standard_normal((5, 4)).astype(np.float32)
    layer = gc.trace(lambda x, b: gc.relu(x @ w1 + b), gc.TensorSpec(("B", 5)), gc.TensorSpec((4,)))
    k = rng.standard_normal((3, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)

    def block(x: Any) -> Any:
        h = gc.relu(gc.conv2d(x, k, bias, padding=1))
        return gc.relu(gc.conv2d(h, k, padding=1) * 0.5 + x)

    conv = gc.trace(block, gc.TensorSpec((2, 3, 6, 6)))

    def sdpa(q: Any, kk: Any, v: Any) -> Any:
        scores = q @ gc.transpose(kk, (0, 2, 1)) * 0.5
        return gc.softmax(scores, axis=-1) @ v

    spec = gc.TensorSpec((2, 4, 8))
    xent = gc.trace(gc.cross_entropy, gc.TensorSpec(("B", 5)), gc.TensorSpec(("B",), "int64"))
    return [chain, layer, conv, gc.trace(sdpa, spec, spec, spec), xent]


def test_fused_nodes_are_made_only_by_a_backends_fusion_step() -> None:
    """Guards the "fusion" promise: gc.optimize at every level (fast_math too) never
    makes one of these ops, a backend's fusion step makes every one of them from these
    graphs, and they carry no gradient, ONNX or batch-split rule; the translators refuse
    a graph holding one, naming the node and saying to translate before fusion."""
    from graphc.distributed import rules
    from graphc.distributed.split import BatchSplitError, split_batch

    fusion = ops_with("fusion")
    made: set[str] = set()
    for graph in _fusion_examples():
        for level in (0, 1, 2):
            for fast_math in (False, True):
                optimized = gc.optimize(graph, level, fast_math=fast_math)
                assert not {n.op for n in _op_nodes(optimized)} & fusion, (level, fast_math)
        fused = gc.fuse(gc.optimize(graph), backend="numpy")
        new = {n.op for n in _op_nodes(fused)} - {n.op for n in _op_nodes(graph)}
        assert new <= fusion, new - fusion  # what fusion makes is declared so
        made |= new
        if not new:
            continue
        names = "|".join(re.escape(n.name) for n in fused.op_nodes if n.op in fusion)
        said = f"'({names})'.*fused node.*before fusion"  # names the node, says what to do
        with pytest.raises(gc.GraphcError, match=said):
            gc.gradients(fused, wrt=[fused.inputs[0].name], seeds=True)
        if importable("onnx"):
            with pytest.raises(gc.GraphcError, match=said):
                gc.onnx.export_model(fused)
        if "B" in fused.inputs[0].type.shape:
            with pytest.raises(BatchSplitError, match=said):
                split_batch(fused)
    assert made == fusion, fusion - made  # every declared op is a fusion's product
    for name in fusion:
        opdef = get_op(name)
        assert opdef.vjp is None and "onnx" not in opdef.rules and rules.KIND not in opdef.rules


def importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# -- rules every op should have, and the ops allowed to lack them ---------------------

# ops without a gradient rule (vjp), by reason; a new op lacking one fails the test
# below until someone decides whether it needs one
WITHOUT_VJP = {
    "integer or bool results, flat wherever defined": {
        "argmax", "argmin", "argsort",
        "eq", "ne", "lt", "le", "gt", "ge",
        "logical_and", "logical_or", "logical_xor", "logical_not",
    },
    "no tensor inputs to differentiate": {"arange", "constant", "count"},
    "inputs are integer random keys": {"fold_in", "random_normal", "random_uniform"},
    "a backend's fused nodes, made after every transformation": ops_with("fusion"),
}  # fmt: skip

# for each kind of rule in `OpDef.rules`, the ops allowed to lack one, by reason
WITHOUT_RULE: dict[str, dict[str, set[str]]] = {}


def _lacking(allowed: dict[str, set[str]], has: Callable[[OpDef], bool]) -> tuple[set, set]:
    """(ops lacking the rule but not allowed to, allowed ops that have it after all)."""
    listed = set().union(*allowed.values()) if allowed else set()
    lacking = {name for name, opdef in all_ops().items() if not has(opdef)}
    return lacking - listed, listed - lacking


def test_every_op_has_a_gradient_or_a_reason() -> None:
    unlisted, stale = _lacking(WITHOUT_VJP, lambda opdef: opdef.vjp is not None)
    assert not unlisted, (
        f"ops without a vjp: give them one or list them in WITHOUT_VJP: {sorted(unlisted)}"
    )
    assert not stale, f"listed in WITHOUT_VJP but have a vjp (or are gone): {sorted(stale)}"


def test_every_op_has_each_kind_of_rule_or_a_reason() -> None:
    kinds = {kind for opdef in all_ops().values() for kind in opdef.rules}
    for kind in sorted(kinds):
        assert kind in WITHOUT_RULE, f"new rule kind '{kind}': list the ops that may lack it"
        unlisted, stale = _lacking(WITHOUT_RULE[kind], lambda opdef, kind=kind: kind in opdef.rules)
        assert not unlisted, f"ops without a '{kind}' rule: {sorted(unlisted)}"
        assert not stale, f"listed as lacking a '{kind}' rule but have one: {sorted(stale)}"


# -- bodies: the attrs of an op that hold Graphs --------------------------------------


def _op_nodes(graph: gc.Graph) -> list[gc.Node]:
    """The op nodes of `graph` and of every body within it."""
    found = []
    for n in graph.op_nodes:
        found.append(n)
        for value in n.attrs.values():
            if isinstance(value, gc.Graph):
                found.extend(_op_nodes(value))
    return found


def test_every_op_whose_attrs_hold_graphs_declares_them_as_bodies() -> None:
    """In the nodes the op cases build (gc.cond, gc.scan, gc.while_loop on traced
    functions, fused groups...), every attr an op declares in `bodies` holds a Graph,
    and every attr holding a Graph is declared."""
    seen: set[str] = set()
    for case in all_cases():
        for n in _op_nodes(build_graph(case)):
            declared = get_op(n.op).bodies
            graphs = {key for key, value in n.attrs.items() if isinstance(value, gc.Graph)}
            assert set(declared) == graphs, f"{n.describe()}: bodies {declared}, Graphs {graphs}"
            seen.add(n.op)
    declaring = {name for name, opdef in all_ops().items() if opdef.bodies}
    assert {"cond", "scan", "while_loop", "fused", "conv2d_fused", "custom_vjp"} <= declaring
    assert declaring <= seen, f"no case builds a node of {sorted(declaring - seen)}"


def test_bodies_are_among_the_attrs() -> None:
    with pytest.raises(ValueError, match="not among its attrs"):
        OpDef("bogus_op", 1, infer=lambda x: x, kernel=lambda x, out=None: x, bodies=("body",))
    assert "bogus_op" not in all_ops()


# -- the side sets the contract replaced ----------------------------------------------

# the op-name sets the properties replaced, by the module that kept them
REPLACED = {
    "passes/cse.py": ("COMMUTATIVE",),
    "passes/patterns.py": ("COMMUTATIVE",),
    "passes/simplify.py": ("NON_NEGATIVE",),
    "backends/numpy/nodes/epilogue.py": ("ACTIVATIONS",),
    "backends/numpy/fusion/epilogue.py": ("ACTIVATIONS",),
    "backends/numpy/nodes/conv_epilogue.py": ("_COPYING",),
    "onnx/exporters.py": ("_COMPARISONS", "_ACTIVATIONS"),
    "backends/numpy/scalar.py": ("IDENTITY_OPS", "SUM_OPS"),
    "passes/fold.py": ("TYPE_ONLY",),
    "passes/control.py": ("BODY_ATTRS",),
    "eager/grad_fn.py": ("TORCH_NAMES",),
    "eager/views.py": ("VIEW_KERNELS",),
}

# module-level tables of op names a module may keep: a pass's dispatch of its per-op
# functions, each about its op's semantics (the facts it asks come from the op)
DISPATCH = {"passes/control.py": {"REWRITES"}}


def _literal_op_tables(path: Path) -> set[str]:
    """Module-level names bound to a literal set, tuple, list or dict of op names."""
    ops = set(all_ops())
    found = set()
    for stmt in ast.parse(path.read_text()).body:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("frozenset", "set"):
            value = value.args[0] if value.args else value
        items = value.keys if isinstance(value, ast.Dict) else getattr(value, "elts", [])
        if any(isinstance(e, ast.Constant) and e.value in ops for e in items):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return found


@pytest.mark.parametrize("module", sorted(REPLACED))
def test_no_side_set_of_op_names_is_left(module: str) -> None:
    path = SOURCE / module
    tables = _literal_op_tables(path) - DISPATCH.get(module, set())
    assert not tables, f"{module}: op-name sets {tables}"
    for name in REPLACED[module]:
        assert not re.search(rf"\b{name}\b", path.read_text()), f"{module} has {name}"


# every literal table of two or more op names in graphc/ (besides `__all__`), by where
# it is (a module and the name it is bound to, or the function comparing against it),
# with why it is not a fact the op contract should hold
OP_NAME_TABLES = {
    "the method table: each op's method spellings, part of the contract (docs/layout.md)": {
        ("ops/methods.py", "UNARY"), ("ops/methods.py", "BINARY"), ("ops/methods.py", "REDUCE"),
    },
    "PyTorch's method signatures: the reductions taking dtype=, div's rounding_mode= values": {
        ("ops/methods.py", "TAKES_DTYPE"), ("ops/methods.py", "ROUNDING_MODES"),
    },
    "the native backend's elementwise C per op, registered as each op's 'native' rule": {
        ("backends/native/cexpr.py", "NATIVE_OPS"),
    },
    "C helper names of the prelude a row-kernel template calls (exp_t, gt_t), not ops": {
        ("backends/native/rows.py", "HELPERS"),
    },
    "the direct convolution's C opcodes for its epilogue program (the kernel's encoding)": {
        ("backends/native/direct_conv.py", "CODES"),
    },
    "a pass's rewrite function per control-flow op, each about that op's semantics": {
        ("passes/control.py", "REWRITES"),
    },
    "forward mode's tangent function per control-flow op whose body holds a while_loop "
    "(which has no VJP to transpose): each about that op's semantics, as REWRITES": {
        ("passes/forward.py", "_RULES"),
    },
    "the extrema whose NaN check (ONNX's, read back) a simplify rule removes (a pattern)": {
        ("passes/simplify.py", "in nan_where_extremum_is"),
    },
    "the arithmetic chain batch-norm folding matches (a pattern, as simplify's rules are)": {
        ("passes/batchnorm.py", "AFFINE"), ("passes/batchnorm.py", "SCALES"),
        ("passes/batchnorm.py", "in _next"), ("passes/batchnorm.py", "in find_chains"),
    },
    "the attention op's mask steps: values of its `mask` attr": {
        ("backends/numpy/nodes/attention.py", "MASK_OPERANDS"),
    },
    "PyTorch's argument values (nonlinearity=, activation=), which name functions": {
        ("nn/recurrent.py", "in __init__"), ("nn/transformer.py", "_ACTIVATIONS"),
    },
    "the roles a picture styles its nodes by, three named as the ops drawn in them": {
        ("viz/style.py", "ROLES"), ("viz/style.py", "LEGEND_TEXT"),
    },
    "the normalizations over the batch that a pass over the data spells out as a "
    "logsumexp of the batch and ops on rows (distributed/stages.py)": {
        ("distributed/stages.py", "in _spell_out_softmax"),
    },
    "PyTorch's reduction= values of the losses ('mean', 'sum', 'none'), and EmbeddingBag's "
    "mode= values ('sum', 'mean', 'max')": {
        ("nn/functional/loss.py", "REDUCTIONS"), ("nn/functional/bags.py", "in embedding_bag"),
        ("nn/sparse.py", "in __init__"),
    },
    "ONNX's reduction attribute values (ScatterND, ScatterElements)": {
        ("onnx/handlers_index.py", "COMBINE"),
    },
    "PyTorch's grad_fn name for an overload taking dim= (sum, mean)": {
        ("eager/grad_fn.py", "in name"),
    },
}  # fmt: skip


def _op_name_tables() -> set[tuple[str, str]]:
    """(module, where) of every literal collection of two or more op names in graphc/."""
    ops = set(all_ops())

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Call) and node.args:  # frozenset({...}), set(...)
            node = node.args[0]
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
        return [e.value for e in items if isinstance(e, ast.Constant) and e.value in ops]

    found = set()
    for path in sorted(SOURCE.rglob("*.py")):
        module = str(path.relative_to(SOURCE))
        tree = ast.parse(path.read_text())
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]
        for scope in scopes:
            where = "" if isinstance(scope, ast.Module) else f"in {scope.name}"
            body = scope.body
            for node in (n for stmt in body for n in ast.walk(stmt)):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    label = ",".join(t.id for t in targets if isinstance(t, ast.Name))
                    if label != "__all__" and len(names(node.value)) >= 2:
                        found.add((module, label or where))
                elif (
                    isinstance(node, ast.Compare)
                    and where
                    and any(len(names(c)) >= 2 for c in node.comparators)
                ):
                    found.add((module, where))
    return found


def test_no_op_name_table_outside_the_contract() -> None:
    """What `grep` would find: literal tables of op names, each listed with its reason
    in OP_NAME_TABLES (a new one fails until it moves onto the ops or is listed)."""
    allowed = set().union(*OP_NAME_TABLES.values())
    found = _op_name_tables()
    assert found - allowed == set(), "op-name tables to move onto the ops (or list)"
    assert allowed - found == set(), "listed in OP_NAME_TABLES but gone: unlist them"


# -- the native backend's C, on each elementwise op -----------------------------------

# elementwise ops without native C (a "native" rule: graphc/backends/native/cexpr.py's
# NATIVE_OPS), by reason; a new elementwise op lacking one fails the test below until
# someone decides. Ops that are not elementwise have no "native" rule: their native
# lowerings, if any, are in the backend's lowering table (register_lowering)
WITHOUT_NATIVE = {
    "a fused group: the backend compiles its body, each op by its own rule": {"fused"},
    "attrs the C has no form for yet: numpy runs them": {
        "clip", "elu", "softplus",
    },
    "no C yet: numpy runs them": {
        "erf", "gelu_exact", "silu", "fmod", "remainder", "floor_divide",
    },
    "no C yet (libmvec has them; each needs its thresholds and ranges in "
    "tests/backends/test_native_ulp.py first): numpy runs them": {
        "tan", "asin", "acos", "atan2", "cosh", "asinh", "acosh", "atanh",
    },
    "no C yet (numpy's own kernels; libmvec has log2 and log10, each needs its thresholds "
    "and ranges in tests/backends/test_native_ulp.py first): numpy runs them": {
        "log2", "log10", "logaddexp",
    },
}  # fmt: skip
WITHOUT_RULE["stepwise"] = {
    "one result: the op function computes it on tensors (stepwise is for the nodes of "
    "several results, each its own Python loop or branch)": {
        name for name in all_ops() if name not in ("cond", "scan", "while_loop")
    },
}
WITHOUT_RULE["native"] = {
    **WITHOUT_NATIVE,
    "not elementwise: the lowering table or numpy runs them": {
        name for name, opdef in all_ops().items() if not opdef.elementwise
    },
}


def test_every_elementwise_op_has_native_c_or_a_reason() -> None:
    from graphc.backends.native.cexpr import NATIVE_OPS

    unlisted, stale = _lacking(
        WITHOUT_NATIVE, lambda opdef: not opdef.elementwise or "native" in opdef.rules
    )
    assert not unlisted, (
        f"elementwise ops without native C: add it (cexpr.NATIVE_OPS) or list them in "
        f"WITHOUT_NATIVE: {sorted(unlisted)}"
    )
    assert not stale, f"listed in WITHOUT_NATIVE but have native C (or are gone): {sorted(stale)}"
    ops = all_ops()
    for name, rule in NATIVE_OPS.items():
        assert name in ops, f"native C for '{name}', which is not an op"
        assert ops[name].rules.get("native") is rule, f"'{name}': its native C is not on the op"
    for name, opdef in ops.items():
        if "native" in opdef.rules:
            assert opdef.elementwise and name in NATIVE_OPS, f"'{name}': a stray native rule"


# -- the ONNX form of each op ---------------------------------------------------------

# ops without an "onnx" rule (a `Direct` entry of graphc/onnx/direct.py or an exporter
# function), by reason; a new op lacking one fails the test below until someone decides
WITHOUT_RULE["onnx"] = {
    "no ONNX form: ONNX's random ops draw from another stream than graphc's counters": {
        "fold_in", "random_normal", "random_uniform",
    },
    "written by the writer itself, as an initializer or a Constant node": {"constant"},
    "a backend's fused nodes: the writer refuses them (export before fusion)": ops_with("fusion"),
}  # fmt: skip


def test_every_op_has_an_onnx_form_or_a_reason() -> None:
    from graphc.onnx.direct import DIRECT
    from graphc.onnx.importer import HANDLERS

    unlisted, stale = _lacking(WITHOUT_RULE["onnx"], lambda opdef: "onnx" in opdef.rules)
    assert not unlisted, (
        f"ops without an ONNX form: add one (graphc/onnx/direct.py for one ONNX op, an "
        f"@exporter otherwise) or list them in WITHOUT_RULE['onnx']: {sorted(unlisted)}"
    )
    assert not stale, f"listed as lacking an ONNX form but have one: {sorted(stale)}"
    for name, opdef in all_ops().items():
        if "onnx" in opdef.rules:  # the writer calls it: (writer, node, input names) -> names
            assert callable(opdef.rules["onnx"]), f"'{name}': its ONNX form is no function"
    for entry in DIRECT:
        rule = get_op(entry.op).rules["onnx"]
        assert (rule is entry) == entry.writes, f"'{entry.op}': written by {rule}"
        readers = [fn for _, fn in HANDLERS.get(entry.op_type, [])]
        assert readers, f"{entry.op_type}, written for '{entry.op}', is not read back"
        assert (entry.read in readers) == entry.reads, f"{entry.op_type}: read by {readers}"


# -- the batch split's rule for each op -----------------------------------------------

# ops without a "batch_split" rule (graphc/distributed/rules.py, registered on the ops
# when graphc.distributed is imported), by reason: elementwise ops are covered
# generically, by the one broadcasting rule the split falls back to; the split refuses
# the others wherever a row of the batch reaches them
WITHOUT_RULE["batch_split"] = {
    "elementwise: the generic rule": {
        name for name, opdef in all_ops().items() if opdef.elementwise
    },
    "no tensor inputs, so no row reaches them (the split makes count a size input)": {
        "arange", "constant", "count",
    },
    "control flow and its results: split.py walks a scan's body itself (its rules per op "
    "within), refuses cond and while_loop, and reads a result's role off its scan's": {
        "cond", "result", "scan", "while_loop",
    },
    "a custom-gradient node: the split runs its forward ops instead (passes/custom.py)": {
        "custom_vjp",
    },
    "a backend's fused nodes: the split refuses them (split before fusion)": ops_with("fusion"),
    "no rule yet, refused (docs/distributed.md, What is missing)": {
        "gemm", "pad", "unpad", "scatter_add_along_axis",
        "avg_pool2d_backward", "max_pool2d_backward", "max_pool2d_select",
        "fold_in", "random_normal", "random_uniform",
    },
}  # fmt: skip


LINEAR_IN_REDUCED = {
    "add", "sub", "neg", "transpose", "reshape", "sum", "sum_to", "broadcast_to", "div", "mul",
    "matmul",
}  # fmt: skip
WITHOUT_RULE["batch_split_linear"] = {
    "not linear in a value reduced over the batch (or not needed: a loop's increments "
    "through it are refused, graphc/distributed/rules.py)": {
        name for name in all_ops() if name not in LINEAR_IN_REDUCED
    },
}


def test_every_op_has_a_batch_split_rule_or_a_reason() -> None:
    from graphc.distributed import rules  # registers its rules on the ops

    unlisted, stale = _lacking(WITHOUT_RULE["batch_split"], lambda opdef: rules.KIND in opdef.rules)
    assert not unlisted, (
        f"ops the batch split has no rule for: add one (graphc/distributed/rules.py, "
        f"@carries_batch) or list them in WITHOUT_RULE['batch_split']: {sorted(unlisted)}"
    )
    assert not stale, f"listed as lacking a batch-split rule but have one: {sorted(stale)}"
    # register_rule names an existing op; each rule is a function of rules.py, and no
    # elementwise op has an entry of its own beside the generic rule
    for name, opdef in all_ops().items():
        if rules.KIND in opdef.rules:
            rule = opdef.rules[rules.KIND]
            assert callable(rule) and rule.__module__ == rules.__name__, f"'{name}': {rule}"
            assert not opdef.elementwise, f"'{name}': a rule beside the elementwise one"
    for module in ("distributed/rules.py", "distributed/split.py"):
        path = SOURCE / module
        assert not _literal_op_tables(path), f"{module}: op-name tables"
        assert not re.search(r"\b(RULES|PARTIAL_KINDS)\b", path.read_text()), module


# -- the vmap rule of each op ----------------------------------------------------------

# ops without a "vmap" rule (graphc/ops/batching.py), by reason: elementwise ops share
# the one broadcasting rule; vmap refuses the others, naming the node, wherever a
# batched value reaches them (an op none reaches is copied unchanged)
WITHOUT_RULE["vmap"] = {
    "elementwise: the generic rule": {
        name for name, opdef in all_ops().items() if opdef.elementwise
    },
    "no tensor inputs, so never batched: copied unchanged": {"arange", "constant", "count"},
    "a backend's fused nodes: vmap refuses them (vmap before fusion)": ops_with("fusion"),
}  # fmt: skip


def test_every_op_has_a_vmap_rule_or_a_reason() -> None:
    from graphc.ops import batching

    unlisted, stale = _lacking(WITHOUT_RULE["vmap"], lambda opdef: batching.KIND in opdef.rules)
    assert not unlisted, (
        f"ops vmap has no rule for: add one (graphc/ops/batching.py, @batches) or list "
        f"them in WITHOUT_RULE['vmap']: {sorted(unlisted)}"
    )
    assert not stale, f"listed as lacking a vmap rule but have one: {sorted(stale)}"
    for name, opdef in all_ops().items():
        if batching.KIND in opdef.rules:
            rule = opdef.rules[batching.KIND]
            assert callable(rule) and rule.__module__ == batching.__name__, f"'{name}': {rule}"
            assert not opdef.elementwise, f"'{name}': a rule beside the elementwise one"
    assert not _literal_op_tables(SOURCE / "ops/batching.py"), "ops/batching.py: op-name tables"


# -- a fused convolution's work after each chunk of images ----------------------------

# the nodes that fuse work after a convolution say what it is, for a backend's own
# convolution (native's) to run after each chunk of images
CHUNK_EPILOGUES = {"conv2d_epilogue", "conv2d_fused"}
WITHOUT_RULE["chunk_epilogue"] = {
    "they fuse no work after a convolution": {
        name for name in all_ops() if name not in CHUNK_EPILOGUES
    },
}


# -- the eager kind's rules: views, and PyTorch's names for the backward --------------

# the ops whose eager result is a numpy view of their input (graphc/eager/views.py)
VIEWS = {"slice", "reshape", "transpose", "broadcast_to"}
WITHOUT_RULE["eager_view"] = {
    "their eager result is a new array: only views share their input's memory": {
        name for name in all_ops() if name not in VIEWS
    },
}
# the ops whose backward PyTorch names otherwise than "<Op>Backward0" (eager/grad_fn.py)
TORCH_NAMED = {
    "cast", "clip", "concat", "transpose", "reshape", "broadcast_to", "take", "matmul", "gemm",
}  # fmt: skip
WITHOUT_RULE["torch_grad_fn"] = {
    "PyTorch names their backward '<Op>Backward0', after the op": {
        name for name in all_ops() if name not in TORCH_NAMED
    },
}


def test_eager_rules_live_in_the_eager_modules() -> None:
    from graphc.eager import views

    for name, opdef in all_ops().items():
        view = opdef.rules.get("eager_view")
        if view is not None:
            assert callable(view) and view.__module__ == views.__name__, f"'{name}': {view}"
        torch = opdef.rules.get("torch_grad_fn")
        if torch is not None:
            default = "".join(p.title() for p in name.split("_")) + "Backward0"
            assert re.fullmatch(r"[A-Z][A-Za-z]*Backward\d", torch), f"'{name}': {torch}"
            assert torch != default, f"'{name}': {torch} is the name it has without a rule"
