"""ONNX -> graphc: a ModelProto (or a file) becomes a Graph.

Graph inputs become placeholders named as in the model (their `dim_param`s symbolic
dims), initializers constants (or placeholders with `as_placeholders=True`), and each
node is built by its op type's handler (graphc/onnx/handlers*.py) with graphc's own
op functions. The handlers see three kinds of value:

- a graph value (`Symbol`), when the value depends on the inputs;
- a numpy array, when it is known at import (an initializer, a Constant, or a node
  all of whose inputs are known): the op functions then compute it with numpy, so
  constant subgraphs fold as they are read;
- a `Dims` array (numpy, dtype object) of ints and symbol names: the shape of a value
  whose type has symbolic dims (`Shape` of an input with a batch dim). The shape
  computations exporters write (Shape -> Gather -> Concat -> Reshape) run on these at
  import, so a Reshape gets a shape graphc can type, and the graph is as clean as a
  traced one. Where a shape depends on data, a handler says so, naming the node.

Every problem is an `OnnxError` naming the node (its name, or its op type and index),
the op type, the opset and what is supported. Nothing is approximated silently.

A model may be hostile (docs/onnx.md, "Untrusted models"): reading one never runs code,
opens no file but its own and the external data inside its folder (`tensor_value`),
refuses opsets and IR versions newer than those the handlers were checked against, and
computes at import at most `FOLD_LIMIT` elements of values: past that, ops on known
values stay in the graph (`fold_limit`) and run when the graph runs.
"""

from __future__ import annotations

import functools
import math
import os
import re
import stat
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, IndexRangeError, ShapeError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import TensorType, bfloat16, is_bfloat16
from graphc.ops.dispatch import fold_limit
from graphc.ops.symbolic import Symbol, add_constant

Value = Any  # Symbol | np.ndarray (known) | Dims (np.ndarray of object)
Handler = Callable[["Context", Sequence[Value], dict[str, Any]], Sequence[Value]]


class OnnxError(GraphcError, NotImplementedError):
    """An ONNX model graphc cannot import or export as asked (op, opset, attr, dtype).

    `needs`: the graph input whose value the import needs to know (a shape or axes given
    as an input): import again with `fixed={name: value}` to make it a constant.
    `needs_counter`: what the import needs to know is computed inside a loop body from
    its carried values (a slice at the loop counter): a loop unrolled could know it."""

    needs: str | None = None
    needs_counter: bool = False


def require_onnx() -> None:
    """Check the onnx package is installed (an optional extra of graphc), or raise an
    OnnxError saying how to install it (a bare ModuleNotFoundError named only 'onnx')."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise OnnxError(
            "graphc's ONNX import and export need the onnx package: pip install onnx "
            "onnxruntime (graphc's extra: pip install -e '.[onnx]')"
        ) from None


# the newest default-domain opset and IR version read: those of onnx 1.23, whose backend
# node cases the handlers pass (tests/onnx/test_node_cases.py); a newer one may change
# an op's meaning, so it is refused rather than read as the newest known
MAX_OPSET, MAX_IR_VERSION = 28, 14

# elements of values computed at import, in all (the model's own tensors aside): 512 MiB
# of float64. Past it an op on known values becomes a node, run when the graph runs;
# values of at most FOLD_SMALL elements (shapes, axes, scalars) are always computed.
FOLD_LIMIT, FOLD_SMALL = 1 << 26, 1 << 10

# op type -> [(since opset, handler)], newest first
HANDLERS: dict[str, list[tuple[int, Handler]]] = {}


def handler(*op_types: str, since: int = 1) -> Callable[[Handler], Handler]:
    """Register `fn` for `op_types` from opset `since` on."""

    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            entries = HANDLERS.setdefault(op_type, [])
            entries.append((since, fn))
            entries.sort(key=lambda e: -e[0])
        return fn

    return register


def supported_op_types() -> list[str]:
    return sorted(HANDLERS)


# -- dtypes -----------------------------------------------------------------------------

_ONNX_DTYPES = {
    1: "float32", 11: "float64", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
    3: "int8", 5: "int16", 2: "uint8", 4: "uint16", 12: "uint32", 13: "uint64",
}  # fmt: skip
_NAMES = {
    1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
    14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
    23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2",
}  # fmt: skip


_BFLOAT16 = 16  # TensorProto.BFLOAT16: ml_dtypes' bfloat16, imported when one is met


def numpy_dtype(elem_type: int, where: str) -> np.dtype:
    """graphc's dtype for an ONNX element type, or an OnnxError naming both."""
    if elem_type in _ONNX_DTYPES:
        return np.dtype(_ONNX_DTYPES[elem_type])
    if elem_type == _BFLOAT16:
        try:
            return bfloat16()
        except DTypeError as exc:  # ml_dtypes is missing
            raise OnnxError(f"{where}: element type BFLOAT16: {exc}") from None
    name = _NAMES.get(elem_type, f"element type {elem_type}")
    raise OnnxError(f"{where}: element type {name} is not supported; {SUPPORTED_TYPES}")


SUPPORTED_TYPES = (
    "graphc supports tensors of FLOAT, DOUBLE, FLOAT16, BFLOAT16 (with ml_dtypes), INT8, "
    "INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64 and BOOL"
)


def onnx_elem_type(dtype: np.dtype) -> int:
    if is_bfloat16(dtype):
        return _BFLOAT16
    for code, name in _ONNX_DTYPES.items():
        if np.dtype(name) == dtype:
            return code
    raise OnnxError(f"dtype {dtype} has no ONNX element type graphc writes")


# -- the import context -----------------------------------------------------------------


@dataclass
class Context:
    """What a handler may use: the graph, the node being read, its opset."""

    graph: Graph
    opset: int
    node: Any = None
    index: int = 0
    scope: str = ""
    names: dict[str, Value] = field(default_factory=dict)  # the values read so far, by name
    top: Graph | None = None  # the model's graph (ctx.graph is a body's while one is read)
    base_dir: str | None = None  # the folder external data is read from (None: read none)
    folded: int = 0  # elements of values computed so far

    def __post_init__(self) -> None:
        self.top = self.top or self.graph

    def where(self) -> str:
        node = self.node
        label = f"node '{node.name}'" if node is not None and node.name else f"node {self.index}"
        op = op_name(node) if node is not None else "?"
        return f"{label} ({op}, opset {self.opset}){self.scope}"

    def room(self) -> int:
        """How many elements a value computed at import may still hold."""
        return max(FOLD_LIMIT - self.folded, FOLD_SMALL)

    def check_size(self, size: int, what: str) -> None:
        """Refuse to compute `what` of `size` elements at import past `room()`."""
        room = self.room()
        if size > room:
            raise self.error(
                f"{what} would hold {size} elements, more than the {room} graphc may still "
                f"compute while importing the model (FOLD_LIMIT: {FOLD_LIMIT} in all)"
            )

    def recording(self) -> Any:
        """A context in which ops record nodes even on known inputs (for ops whose
        result is sized by symbolic dims, which numpy cannot compute at import)."""
        return nullcontext() if active_graph() is not None else self.graph

    def error(self, message: str) -> OnnxError:
        return OnnxError(f"{self.where()}: {message}")

    def symbol(self, value: Value) -> Symbol:
        """`value` as a graph value (a known array becomes a constant)."""
        if isinstance(value, Symbol):
            return value
        if is_dims(value):
            raise self.error("a shape with symbolic dims is used as data; graphc cannot compute it")
        return add_constant(self.graph, np.asarray(value))


def node_label(node: Any, index: int) -> str:
    """How errors name a node: "node 'name' (Op)", or "node 3 (Op)" when it has no name."""
    label = f"node '{node.name}'" if node.name else f"node {index}"
    return f"{label} ({op_name(node)})"


DEFAULT_DOMAINS = ("", "ai.onnx")


def op_name(node: Any) -> str:
    """A node's op as errors name it: `Relu`, or `com.microsoft::FusedGemm` for an op of
    another domain than ONNX's default one (whose ops have other meanings)."""
    if node.domain in DEFAULT_DOMAINS:
        return str(node.op_type)
    return f"{node.domain}::{node.op_type}"


def is_dims(value: Value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def known(value: Value) -> bool:
    return isinstance(value, np.ndarray)


def ints(ctx: Context, value: Value, what: str) -> list[Any]:
    """A known 1-D int value (or dims) as a list; an error naming `what` otherwise."""
    if not isinstance(value, np.ndarray):
        raise needs_known(ctx, value, what)
    return [d if isinstance(d, str) else int(d) for d in np.asarray(value).reshape(-1)]


def needs_known(ctx: Context, value: Value, what: str) -> OnnxError:
    """The error for a value the import must know but that depends on graph inputs:
    it names them (`.needs`: the first), so a caller can fix them (`fixed=`)."""
    node = getattr(value, "node", None)
    if node is not None and node.graph is not ctx.top:
        error = ctx.error(
            f"{what} is computed in the body from its loop-carried or captured values; "
            "graphc needs it known when the model is imported"
        )
        error.needs_counter = True
        return error
    inputs = placeholders_of(value)
    if not inputs:
        return ctx.error(f"{what} must be known when the model is imported (it depends on data)")
    error = ctx.error(
        f"{what} depends on the graph input(s) {inputs}: a static graph must know it when the "
        f"model is imported; pass fixed={{'{inputs[0]}': value, ...}} to import_model"
    )
    error.needs = inputs[0]
    return error


def placeholders_of(value: Value) -> list[str]:
    """The names of the placeholders a graph value depends on, in graph order."""
    node = getattr(value, "node", None)
    if node is None:
        return []
    seen, stack, found = set(), [node], []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.kind == "placeholder":
            found.append(n.name)
        stack.extend(n.inputs)
    order = {n.name: k for k, n in enumerate(node.graph.inputs)}
    return sorted(found, key=lambda name: order.get(name, 0))


# -- reading models ---------------------------------------------------------------------

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def symbol_name(dim_param: str, used: dict[str, str]) -> str:
    """A graphc symbol for an ONNX dim_param (which may be any string)."""
    if dim_param in used:
        return used[dim_param]
    name = dim_param if _SYMBOL.fullmatch(dim_param) else re.sub(r"\W", "_", dim_param)
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = "d_" + name
    used[dim_param] = name
    return name


def text(value: Any, what: str) -> str:
    """A string field of the model: protobuf gives bytes when it is not UTF-8."""
    if not isinstance(value, str):
        raise OnnxError(f"{what} {value!r} is not UTF-8 text")
    return value


def value_type(
    info: Any, used: dict[str, str], where: str, sizes: dict[str, int] | None = None
) -> TensorType:
    """The TensorType of a graph input; its dim_params symbolic dims (`used`: dim_param ->
    symbol), but those `sizes` gives a size (by dim_param or by symbol)."""
    tensor = info.type.tensor_type
    if not info.type.HasField("tensor_type"):
        kind = info.type.WhichOneof("value")
        raise OnnxError(f"{where}: type {kind} is not supported; {SUPPORTED_TYPES}")
    if not tensor.HasField("shape"):  # (an empty shape is a scalar's)
        raise OnnxError(
            f"{where}: has no shape in the model (any rank); a graphc graph needs each "
            "input's rank: give the model's input a shape (dims may be symbolic)"
        )
    dims: list[Any] = []
    for k, d in enumerate(tensor.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
            continue
        name = text(d.dim_param, f"{where}: the name of dim {k}")
        symbol = symbol_name(name or f"{info.name}_{k}", used)
        given = (sizes or {}).get(name, (sizes or {}).get(symbol))
        dims.append(symbol if given is None else given)
    try:
        return TensorType(dims, numpy_dtype(tensor.elem_type, where))
    except OnnxError:
        raise
    except GraphcError as exc:  # a negative dim, a size no array can hold
        raise OnnxError(f"{where}: {exc}") from None


def load(model: Any) -> Any:
    """A ModelProto from a ModelProto, a path or bytes. Only the model's own file is read
    here: external data is read by `tensor_value`, from inside the model's folder."""
    import onnx
    from google.protobuf.message import Error as ProtobufError

    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (str, os.PathLike, bytes)):
        raise OnnxError(
            f"import_model: expected an onnx.ModelProto, a path or bytes, "
            f"got {type(model).__name__}"
        )
    try:
        if isinstance(model, bytes):
            return onnx.load_from_string(model)
        return onnx.load(os.fspath(model), format="protobuf", load_external_data=False)
    except ProtobufError as exc:
        raise OnnxError(f"import_model: the model is not a valid ONNX protobuf ({exc})") from None


def model_folder(model: Any, base_dir: str | os.PathLike | None) -> str | None:
    """The folder external data is read from: `base_dir` if given, else a model file's
    own folder; None (no file is read) for a model given as bytes or a ModelProto."""
    if base_dir is not None:
        return os.fspath(base_dir)
    if isinstance(model, (str, os.PathLike)):
        return os.path.dirname(os.path.abspath(os.fspath(model)))
    return None


def opset_of(model: Any) -> int:
    """The default domain's opset (a node of another domain is refused when it is read);
    an OnnxError for an opset or IR version newer than graphc reads."""
    if model.ir_version > MAX_IR_VERSION:
        raise OnnxError(
            f"the model's IR version {model.ir_version} is newer than graphc reads "
            f"(IR versions up to {MAX_IR_VERSION})"
        )
    versions = {o.domain: o.version for o in model.opset_import}
    version = versions.get("", versions.get("ai.onnx", 1))
    if not 1 <= version <= MAX_OPSET:
        raise OnnxError(
            f"the model imports opset {version} of the default domain; graphc reads opsets "
            f"1 to {MAX_OPSET}"
        )
    return version


def attributes(node: Any, ctx: Context) -> dict[str, Any]:
    import onnx

    result: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            result[a.name] = a.g
        elif a.type == onnx.AttributeProto.TENSOR:
            where = f"{ctx.where()}, attribute '{a.name}'"
            result[a.name] = tensor_value(a.t, where, ctx.base_dir)
        else:
            try:
                value = onnx.helper.get_attribute_value(a)
            except ValueError:
                raise ctx.error(f"attribute '{a.name}' has no value of a known type") from None
            try:  # STRING and STRINGS attributes as text
                if isinstance(value, bytes):
                    value = value.decode()
                elif isinstance(value, list) and value and isinstance(value[0], bytes):
                    value = [v.decode() for v in value]
            except UnicodeDecodeError:
                raise ctx.error(f"attribute '{a.name}' is not UTF-8 text") from None
            result[a.name] = value
    return result


# element type -> the TensorProto field holding its values, and their stored dtype
_STORED = {
    1: ("float_data", "<f4"), 11: ("double_data", "<f8"), 6: ("int32_data", "<i4"),
    7: ("int64_data", "<i8"), 9: ("int32_data", "u1"), 3: ("int32_data", "i1"),
    5: ("int32_data", "<i2"), 2: ("int32_data", "u1"), 4: ("int32_data", "<u2"),
    12: ("uint64_data", "<u4"), 13: ("uint64_data", "<u8"), 10: ("int32_data", "<f2"),
    _BFLOAT16: ("int32_data", "<u2"),
}  # fmt: skip
# element types whose int32_data holds each value's bits (raw_data holds the values;
# bfloat16's are read as their bits, which numpy cannot name without ml_dtypes)
_BITS_IN_INT32 = {10: "<u2", _BFLOAT16: "<u2"}
_EXTERNAL = 1  # TensorProto.EXTERNAL: the values are in a file beside the model


def tensor_value(tensor: Any, where: str, base_dir: str | None = None) -> np.ndarray:
    """A TensorProto's value, decoded here rather than by onnx's numpy_helper (which
    reads external data relative to the current directory). External data is read only
    from inside `base_dir`; `where` names the tensor in errors."""
    dtype = numpy_dtype(tensor.data_type, where)
    shape = tuple(tensor.dims)
    if any(d < 0 for d in shape):
        raise OnnxError(f"{where}: dims {list(shape)} has a negative dim")
    if tensor.HasField("segment"):
        raise OnnxError(f"{where}: a segment of a tensor is not supported")
    field_name, stored = _STORED[tensor.data_type]
    stored, count = np.dtype(stored), math.prod(shape)
    if tensor.data_location == _EXTERNAL:
        flat = _read_external(tensor, where, base_dir, stored, count)
    elif raw := tensor.raw_data:  # (read once: each read copies the bytes)
        if len(raw) != count * stored.itemsize:
            raise OnnxError(
                f"{where}: holds {len(raw)} bytes of data; its dims {list(shape)} need "
                f"{count * stored.itemsize}"
            )
        flat = np.frombuffer(raw, stored)
    else:
        values = getattr(tensor, field_name)
        if len(values) != count:
            raise OnnxError(
                f"{where}: holds {len(values)} values; its dims {list(shape)} need {count}"
            )
        if tensor.data_type in _BITS_IN_INT32:
            flat = np.array(values, np.int64).astype(_BITS_IN_INT32[tensor.data_type])
            flat = flat.view(stored)
        else:
            flat = np.array(values, np.int64 if dtype.kind == "b" else stored)
    if tensor.data_type == _BFLOAT16:
        return flat.view(dtype).reshape(shape)  # the bits, not their values as integers
    return flat.astype(dtype).reshape(shape)


def _read_external(
    tensor: Any, where: str, base_dir: str | None, stored: np.dtype, count: int
) -> np.ndarray:
    """The `count` values of `tensor` from its external file, read with numpy after
    checking the file lies inside `base_dir` and holds them."""
    keys = {entry.key: entry.value for entry in tensor.external_data}
    location = text(keys.get("location", ""), f"{where}: external data location")
    nbytes = count * stored.itemsize
    if base_dir is None:
        raise OnnxError(
            f"{where}: its data is in the external file '{location}', and a model given as "
            "bytes or a ModelProto has no folder to read it from: pass base_dir= (the "
            "folder of the model's files)"
        )
    path = _inside(base_dir, location, where)
    try:
        offset, length = int(keys.get("offset", 0)), int(keys.get("length", nbytes))
    except ValueError:
        raise OnnxError(f"{where}: external data offset or length is not an integer") from None
    if offset < 0 or length != nbytes:
        raise OnnxError(
            f"{where}: external data of {length} bytes at offset {offset}; its dims "
            f"{list(tensor.dims)} need {nbytes} bytes"
        )
    try:  # no symlink swapped in since _inside; a FIFO would block a plain open
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError as exc:
        raise OnnxError(
            f"{where}: cannot open its external file '{location}': {exc.strerror}"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OnnxError(f"{where}: its external file '{location}' is not a regular file")
        if offset + nbytes > info.st_size:
            raise OnnxError(
                f"{where}: its external file '{location}' holds {info.st_size} bytes; the "
                f"tensor needs {nbytes} from offset {offset}"
            )
        with os.fdopen(fd, "rb", closefd=False) as file:
            flat = np.fromfile(file, stored, count, offset=offset)
    finally:
        os.close(fd)
    if flat.size != count:  # the file changed while it was read
        raise OnnxError(f"{where}: its external file '{location}' ended early")
    return flat


def _inside(base_dir: str, location: str, where: str) -> str:
    """The path of external file `location`, which must lie inside `base_dir`: a relative
    path without '..', and no symlink in it may lead out of the folder."""
    parts = location.replace("\\", "/").split("/")
    if (
        not location
        or "\0" in location
        or os.path.isabs(location)
        or parts[0] == ""
        or ".." in parts
    ):
        raise OnnxError(
            f"{where}: external data location '{location}' is not a relative path inside "
            "the model's folder"
        )
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise OnnxError(
            f"{where}: external data location '{location}' leads out of the model's folder "
            "(through a symlink)"
        )
    return path


def _plain(value: Value) -> Value:
    if is_dims(value) and not any(isinstance(d, str) for d in value.reshape(-1)):
        return np.asarray(value, np.int64)
    return value


@dataclass(frozen=True)
class _Signature:
    """What `check_node` reads of an op's schema (onnx.defs), kept per op and opset."""

    counts: dict[str, tuple[int, int]]  # "input"/"output" -> (fewest, most)
    required: dict[str, tuple[tuple[str, bool], ...]]  # per formal parameter: name, not optional
    attributes: dict[str, int]  # name -> AttributeProto type
    needed: tuple[str, ...]  # the required attributes


@functools.cache
def _signature(op_type: str, opset: int) -> _Signature | None:
    from onnx import defs

    try:
        schema = defs.get_schema(op_type, opset, "")
    except defs.SchemaError:
        return None
    single = defs.OpSchema.FormalParameterOption.Single
    return _Signature(
        counts={
            "input": (schema.min_input, schema.max_input),
            "output": (schema.min_output, schema.max_output),
        },
        required={
            "input": tuple((p.name, p.option == single) for p in schema.inputs),
            "output": tuple((p.name, p.option == single) for p in schema.outputs),
        },
        attributes={name: int(a.type) for name, a in schema.attributes.items()},
        needed=tuple(name for name, a in schema.attributes.items() if a.required),
    )


def check_node(ctx: Context, node: Any) -> None:
    """What onnx.checker and onnxruntime check of a node before running it: an op type
    graphc reads, and by the op's schema in the model's opset, its number of inputs and
    outputs, a name for each one that is not optional, and its attributes: known, each
    given once and of its type, the required ones present."""
    op = node.op_type
    if node.domain not in DEFAULT_DOMAINS:
        raise ctx.error(
            f"op {op_name(node)} is not supported: graphc reads the ops of ONNX's default "
            f"domain (ai.onnx), not those of domain '{node.domain}'; export the model "
            "without custom ops (e.g. torch.onnx.export without custom_opsets, no "
            "onnxruntime-optimized model) or replace the node by default-domain ops"
        )
    if op not in HANDLERS:
        raise ctx.error(f"op type {op} is not supported; see graphc.onnx.supported_op_types()")
    signature = _signature(op, ctx.opset)
    if signature is None:
        raise ctx.error(f"{op} is no op of opset {ctx.opset}")
    for kind, names in (("input", node.input), ("output", node.output)):
        low, high = signature.counts[kind]
        if not low <= len(names) <= high:
            takes = f"{low} or more" if high >= 2**31 - 1 else f"{low} to {high}"
            raise ctx.error(f"{op} takes {takes} {kind}s, the node has {len(names)}")
        formal = signature.required[kind]
        for k, name in enumerate(names):
            param, required = formal[min(k, len(formal) - 1)]
            if required and not name:
                raise ctx.error(f"{kind} {k} ({param}) is not optional, but has no name")
    given: set[str] = set()
    for a in node.attribute:
        expected = signature.attributes.get(a.name)
        if expected is None:
            raise ctx.error(f"{op} has no attribute '{a.name}'")
        if a.name in given:
            raise ctx.error(f"attribute '{a.name}' is given twice")
        if a.type != expected:
            from onnx import AttributeProto

            names = {code: name for name, code in AttributeProto.AttributeType.items()}
            raise ctx.error(
                f"attribute '{a.name}' is of type {names.get(a.type, a.type)}, "
                f"expected {names[expected]}"
            )
        given.add(a.name)
    for name in signature.needed:
        if name not in given:
            raise ctx.error(f"{op} needs the attribute '{name}'")


# what a handler raises on values no check of its foresaw (an axis out of range, an
# optional input missing that it needs, a constant sized by a huge declared shape that
# no check_size caught): still an OnnxError naming the node
_UNFORESEEN = (
    ArithmeticError, AttributeError, IndexError, KeyError, MemoryError, TypeError, ValueError
)  # fmt: skip


def symbols_in(values: Sequence[Value]) -> list[str]:
    """The symbolic dims among `values`: in graph values' shapes, and in Dims."""
    found: list[str] = []
    for v in values:
        dims = list(v.reshape(-1)) if is_dims(v) else list(getattr(v, "shape", ()))
        found += [d for d in dims if isinstance(d, str) and d not in found]
    return found


def symbolic_hint(values: Sequence[Value]) -> str:
    """What to do when a node cannot be read over symbolic dims: graphc's symbolic dims
    are names, so a shape of `batch * heads` (torch's attention) has no form; a size
    given at import (`dims=`) makes it concrete."""
    symbols = symbols_in(values)
    if not symbols:
        return ""
    example = ", ".join(f"'{d}': ..." for d in symbols)
    return (
        f" (over the model's symbolic dim(s) {symbols}: graphc's symbolic dims are names, "
        "not expressions such as a product of two; import with "
        f"dims={{{example}}} to give them sizes)"
    )


def run_node(ctx: Context, node: Any, inputs: list[Value], attrs: dict[str, Any]) -> list[Value]:
    """The values of `node`'s outputs, by its op type's handler for the model's opset
    (`check_node` has checked the node)."""
    entries = HANDLERS[node.op_type]
    # dims with no symbol left among them (a slice of a symbolic shape) are plain ints
    inputs = [_plain(v) for v in inputs]
    for since, fn in entries:
        if since <= ctx.opset:
            try:  # an op on known values past ctx.room() is recorded, not computed
                with fold_limit(ctx.room(), ctx.graph):
                    outputs = list(fn(ctx, inputs, attrs))
            except OnnxError:
                raise
            except GraphcError as exc:  # a shape over symbolic dims: what dims= gives
                shaped = isinstance(exc, ShapeError) and not isinstance(exc, IndexRangeError)
                raise ctx.error(f"{exc}{symbolic_hint(inputs) if shaped else ''}") from None
            except _UNFORESEEN as exc:  # the cause is kept for a report
                raise ctx.error(f"cannot be read: {type(exc).__name__}: {exc}") from exc
            ctx.folded += sum(
                v.size for v in outputs if known(v) and not any(v is x for x in inputs)
            )
            return [_plain(v) for v in outputs]
    raise ctx.error(f"{node.op_type} is supported from opset {entries[-1][0]} on")
