"""onnxruntime's `InferenceSession`, run by graphc: for a program written against
onnxruntime's Python API, one changed import runs its model on graphc.

>>> sess = gc.onnx.InferenceSession("model.onnx")     # doctest: +SKIP
>>> [i.name for i in sess.get_inputs()]                # doctest: +SKIP
['input']
>>> logits, = sess.run(["logits"], {"input": x})      # doctest: +SKIP

The model is imported once (`import_model`) and compiled once (`gc.compile`, O2 and the
default backend unless `opt_level=` and `backend=` say otherwise); `run` feeds it by
name and returns the asked outputs as a list of new numpy arrays, in the order asked, as
onnxruntime does. What onnxruntime refuses is refused here too, as a graphc error naming
the input or output: an unknown input or output name, a missing input, a feed of the
wrong dtype, rank or size. An initializer that the model also lists as an input (one
onnxruntime lets a feed replace: `get_overridable_initializers()`) may be fed too: the
first such feed compiles the model once more, with its initializers as placeholders.

onnxruntime's tuning is not graphc's: `sess_options`, `providers`, `provider_options`
and `run_options` are accepted and not read (graphc runs on this machine's CPU, its
threads as docs/backends.md says).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from graphc.ir.errors import FeedError
from graphc.onnx.importer import load, model_folder
from graphc.onnx.reader import import_model, initializers
from graphc.runtime.executable import Executable
from graphc.runtime.executable import compile as compile_graph

# onnxruntime's names of the tensor element types, by numpy dtype
_TYPE_NAMES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


class NodeArg(NamedTuple):
    """An input or output as onnxruntime describes it: its name, its type as
    "tensor(float)", and its shape, each dim a size, a dim_param's name, or None."""

    name: str
    type: str
    shape: list[int | str | None]


@dataclass(frozen=True)
class ModelMetadata:
    """The model's own description, as onnxruntime's `get_modelmeta()` gives it."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


class InferenceSession:
    """An ONNX model (a path, bytes or an onnx.ModelProto) compiled by graphc, run as an
    onnxruntime session is. `opt_level` and `backend` are gc.compile's; `fixed`, `dims`
    and `base_dir` are import_model's (a feed of a fixed input must equal its value)."""

    def __init__(
        self,
        path_or_bytes: str | os.PathLike | bytes | Any,
        sess_options: Any = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Any] | None = None,
        *,
        opt_level: int = 2,
        backend: str = "auto",
        fixed: Mapping[str, Any] | None = None,
        dims: Mapping[str, int] | None = None,
        base_dir: str | os.PathLike | None = None,
        **kwargs: Any,
    ) -> None:
        proto = load(path_or_bytes)
        self._proto = proto
        self._folder = model_folder(path_or_bytes, base_dir)  # external data's, read once
        self._compile_options = {"opt_level": opt_level, "backend": backend}
        self._import_options = {"fixed": dict(fixed or {}), "dims": dims, "base_dir": self._folder}
        self._fixed = {k: np.asarray(v) for k, v in self._import_options["fixed"].items()}
        graph = import_model(proto, **self._import_options)
        self._executable = compile_graph(graph, **self._compile_options)
        initialized = {t.name for t in proto.graph.initializer}
        declared = [v for v in proto.graph.input if v.name not in self._fixed]
        self._inputs = [_node_arg(v) for v in declared if v.name not in initialized]
        self._overridable = [_node_arg(v) for v in declared if v.name in initialized]
        named = _dim_params(proto)
        self._outputs = [
            NodeArg(v.name, _type_name(o.type.dtype), _shape(o.type.shape, named))
            for v, o in zip(proto.graph.output, graph.outputs, strict=True)
        ]
        self._overriding: tuple[Executable, dict[str, np.ndarray]] | None = None

    def get_inputs(self) -> list[NodeArg]:
        """The inputs a run must feed, in the model's order (not its initializers)."""
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs, in its order; shapes as graphc infers them."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """The initializers the model also lists as inputs: a run may feed them."""
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        proto = self._proto
        return ModelMetadata(
            producer_name=proto.producer_name,
            graph_name=proto.graph.name,
            domain=proto.domain,
            description=proto.doc_string,
            graph_description=proto.graph.doc_string,
            version=proto.model_version,
            custom_metadata_map={p.key: p.value for p in proto.metadata_props},
        )

    def get_providers(self) -> list[str]:
        """Where the model runs: graphc's backend for its plans, on the CPU."""
        return [f"graphc ({self._executable.tier})"]

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> list[np.ndarray]:
        """The outputs named (all of them for None or an empty list), as a list in that
        order, computed from `input_feed` (input name -> array)."""
        if isinstance(output_names, str):
            raise FeedError(
                f"run: output_names is a list of names, got the string {output_names!r}"
            )
        wanted = self._positions(output_names)
        feeds = dict(input_feed)
        self._check_fixed(feeds)
        known = {a.name for a in self._inputs} | {a.name for a in self._overridable}
        unknown = [name for name in feeds if name not in known]
        if unknown:
            raise FeedError(
                f"run: the model has no input {unknown[0]!r}; its inputs are "
                f"{sorted(a.name for a in self._inputs)}"
                + (
                    f" and its overridable initializers {sorted(a.name for a in self._overridable)}"
                    if self._overridable
                    else ""
                )
            )
        missing = [a.name for a in self._inputs if a.name not in feeds]
        if missing:
            raise FeedError(f"run: the feed has no value for the model's input(s) {missing}")
        executable, defaults = self._executable, {}
        if any(a.name in feeds for a in self._overridable):
            executable, defaults = self._with_initializers_fed()
        given = defaults | feeds
        results = executable(*(given[p.name] for p in executable.graph.inputs))
        if len(self._outputs) == 1:
            results = (results,)
        return [np.asarray(results[i]) for i in wanted]

    def _positions(self, output_names: Sequence[str] | None) -> list[int]:
        names = [a.name for a in self._outputs]
        if not output_names:
            return list(range(len(names)))
        positions = []
        for name in output_names:
            if name not in names:
                raise FeedError(f"run: the model has no output {name!r}; its outputs are {names}")
            positions.append(names.index(name))
        return positions

    def _check_fixed(self, feeds: dict[str, Any]) -> None:
        """A fed input that the import fixed (`fixed=`) must be its fixed value."""
        for name, value in self._fixed.items():
            if name in feeds:
                fed = np.asarray(feeds.pop(name))
                if fed.shape != value.shape or not np.array_equal(fed, value):
                    raise FeedError(
                        f"run: input {name!r} was fixed at import to {value.tolist()}; "
                        f"this feed gives {fed.tolist()} (make a session with that value)"
                    )

    def _with_initializers_fed(self) -> tuple[Executable, dict[str, np.ndarray]]:
        """The model compiled with its initializers as placeholders, and their values."""
        if self._overriding is None:
            graph = import_model(self._proto, as_placeholders=True, **self._import_options)
            values = initializers(self._proto, self._folder)
            self._overriding = (compile_graph(graph, **self._compile_options), values)
        return self._overriding


def _node_arg(value: Any) -> NodeArg:
    from onnx import helper

    tensor = value.type.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    if not tensor.HasField("shape"):
        return NodeArg(value.name, _type_name(dtype), [])
    dims = [
        d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in tensor.shape.dim
    ]
    return NodeArg(value.name, _type_name(dtype), dims)


def _type_name(dtype: np.dtype) -> str:
    return f"tensor({_TYPE_NAMES.get(np.dtype(dtype), np.dtype(dtype).name)})"


def _dim_params(proto: Any) -> set[str]:
    return {
        d.dim_param for v in proto.graph.input for d in v.type.tensor_type.shape.dim if d.dim_param
    }


def _shape(shape: tuple, named: set[str]) -> list[int | str | None]:
    """graphc's inferred shape as onnxruntime gives it: a dim_param's name stays, a dim
    graphc named itself (an input dim with neither size nor name) is None."""
    return [d if isinstance(d, int) else (str(d) if str(d) in named else None) for d in shape]
