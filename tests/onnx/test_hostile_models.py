"""Hostile ONNX models (issue 31): importing one reads no file outside the model's folder
(none at all for bytes or a ModelProto unless base_dir is given), refuses what
onnx.checker and onnxruntime refuse (a value defined twice, an opset newer than graphc
reads, a node its op's schema forbids), computes no huge value at import, and fails
only with graphc's errors, each naming the node or initializer. A hypothesis fuzzer
mutates the bytes of the models the other ONNX tests build and checks both properties:
graphc errors only, no file opened outside the model's folder."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import draws

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.ir.errors import GraphcError  # noqa: E402
from graphc.onnx import OnnxError, importer  # noqa: E402

F = TensorProto.FLOAT
_node, _attribute = helper.make_node, helper.make_attribute


def _model(nodes: list, inputs: list, outputs: list, inits: list = (), opset: int = 17) -> Any:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name: str, shape: Any = (2,), elem: int = F) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _refused_by_onnx(model: Any) -> bool:
    """Whether onnx.checker refuses `model` too (what graphc mirrors)."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError:
        return True
    return False


# -- files opened: an audit hook, which cannot be removed, so it checks a flag -----------


class _Watch:
    active = False
    paths: list[str] = []
    installed = False


def _audit(event: str, args: tuple) -> None:
    if _Watch.active and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _Watch.paths.append(os.path.realpath(os.fsdecode(args[0])))


@contextlib.contextmanager
def opened_files() -> Iterator[list[str]]:
    """The paths of the files opened (by Python's open, io.open or os.open) inside."""
    if not _Watch.installed:
        sys.addaudithook(_audit)
        _Watch.installed = True
    _Watch.paths = []
    _Watch.active = True
    try:
        yield _Watch.paths
    finally:
        _Watch.active = False


def _outside(paths: list[str], folder: Path) -> list[str]:
    root = os.path.realpath(folder)
    return [p for p in paths if os.path.commonpath([root, p]) != root]


# -- external data ---------------------------------------------------------------------


def _external_model(location: str, values: int = 2, **keys: str) -> Any:
    """y = x + w, with w's `values` float32 values kept in the external file `location`."""
    w = TensorProto(name="w", data_type=F, dims=[values])
    w.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, **keys}.items():
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    nodes = [_node("Add", ["x", "w"], ["y"])]
    return _model(nodes, [_info("x", [values])], [_info("y", [values])], [w])


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the model's folder, holding weights.bin = [1, 2]; the current directory, beside
    it, holding secret.bin and a weights.bin of its own)."""
    folder, cwd = tmp_path / "model", tmp_path / "cwd"
    folder.mkdir()
    cwd.mkdir()
    (folder / "weights.bin").write_bytes(np.array([1, 2], np.float32).tobytes())
    (cwd / "secret.bin").write_bytes(np.array([7, 7], np.float32).tobytes())
    (cwd / "weights.bin").write_bytes(np.array([7, 7], np.float32).tobytes())
    monkeypatch.chdir(cwd)
    return folder, cwd


def _weights(graph: gc.Graph) -> np.ndarray:
    return gc.run(graph, {"x": np.zeros(2, np.float32)})[0]


def test_bytes_or_a_modelproto_read_no_file_unless_base_dir_is_given(folders: tuple) -> None:
    folder, cwd = folders
    model = _external_model("weights.bin")
    for given_as in (model, model.SerializeToString()):
        with opened_files() as paths, pytest.raises(OnnxError) as caught:
            gc.onnx.import_model(given_as)
        assert paths == []  # not the current directory's weights.bin
        assert "initializer 'w'" in str(caught.value) and "base_dir=" in str(caught.value)
        with opened_files() as paths:
            graph = gc.onnx.import_model(given_as, base_dir=folder)
        assert _weights(graph).tolist() == [1, 2]
        assert paths == [os.path.realpath(folder / "weights.bin")]
    assert gc.onnx.initializers(model, base_dir=folder)["w"].tolist() == [1, 2]
    with pytest.raises(OnnxError, match="base_dir="):
        gc.onnx.initializers(model)


def test_a_model_file_reads_external_data_from_its_own_folder(folders: tuple) -> None:
    folder, cwd = folders
    path = folder / "model.onnx"
    onnx.save_model(_external_model("weights.bin"), path)
    with opened_files() as paths:
        graph = gc.onnx.import_model(path)
    assert _weights(graph).tolist() == [1, 2]  # the folder's weights.bin, not the cwd's
    assert not _outside(paths, folder) and len(paths) == 2  # the model, then its weights
    assert gc.onnx.initializers(str(path))["w"].tolist() == [1, 2]


def test_onnx_load_is_asked_for_no_external_data(
    folders: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = folders
    path = folder / "model.onnx"
    onnx.save_model(_external_model("weights.bin"), path)
    calls = []
    load = onnx.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return load(*args, **kwargs)

    monkeypatch.setattr(onnx, "load", spy)
    gc.onnx.import_model(path)
    assert calls and all(kw.get("load_external_data") is False for kw in calls)


@pytest.mark.parametrize(
    "location, why",
    [
        ("../cwd/secret.bin", "not a relative path inside"),
        ("sub/../../cwd/secret.bin", "not a relative path inside"),
        ("ABSOLUTE", "not a relative path inside"),
        ("link.bin", "leads out of the model's folder"),
        ("linked_dir/secret.bin", "leads out of the model's folder"),
        ("", "not a relative path inside"),
    ],
)
def test_external_data_outside_the_folder_is_refused(
    folders: tuple, location: str, why: str
) -> None:
    folder, cwd = folders
    if location == "ABSOLUTE":
        location = str(cwd / "secret.bin")
    if "link" in location:
        (folder / "link.bin").symlink_to(cwd / "secret.bin")
        (folder / "linked_dir").symlink_to(cwd, target_is_directory=True)
    path = folder / "model.onnx"
    onnx.save_model(_external_model(location), path)
    with opened_files() as paths, pytest.raises(OnnxError) as caught:
        gc.onnx.import_model(path)
    assert paths == [os.path.realpath(path)]  # the model only: never the secret
    assert "initializer 'w'" in str(caught.value) and why in str(caught.value)


def test_a_symlink_inside_the_folder_is_followed(folders: tuple) -> None:
    folder, _ = folders
    (folder / "data").mkdir()
    (folder / "data" / "real.bin").write_bytes(np.array([3, 4], np.float32).tobytes())
    (folder / "alias.bin").symlink_to(folder / "data" / "real.bin")
    path = folder / "model.onnx"
    onnx.save_model(_external_model("alias.bin"), path)
    assert _weights(gc.onnx.import_model(path)).tolist() == [3, 4]


@pytest.mark.parametrize(
    "keys, values, message",
    [
        ({"length": "12"}, 2, "external data of 12 bytes at offset 0; its dims [2] need 8"),
        ({"offset": "4"}, 2, "holds 8 bytes; the tensor needs 8 from offset 4"),
        ({"offset": "-1"}, 2, "at offset -1"),
        ({"offset": "four"}, 2, "offset or length is not an integer"),
        ({}, 2**40, "holds 8 bytes; the tensor needs 4398046511104 from offset 0"),
    ],
)
def test_external_data_is_read_at_its_declared_size(
    folders: tuple, keys: dict, values: int, message: str
) -> None:
    folder, _ = folders
    model = _external_model("weights.bin", values, **keys)
    with pytest.raises(OnnxError, match="initializer 'w'") as caught:
        gc.onnx.import_model(model, base_dir=folder)
    assert message in str(caught.value)
    with_offset = _external_model("weights.bin", 1, offset="4", length="4")
    assert gc.onnx.initializers(with_offset, base_dir=folder)["w"].tolist() == [2]


def test_external_data_must_be_a_regular_file(folders: tuple) -> None:
    folder, _ = folders
    (folder / "dir.bin").mkdir()
    with pytest.raises(OnnxError, match="initializer 'w'.*'dir.bin'"):
        gc.onnx.import_model(_external_model("dir.bin"), base_dir=folder)
    if hasattr(os, "mkfifo"):  # a FIFO would block a plain open
        os.mkfifo(folder / "pipe.bin")
        with pytest.raises(OnnxError, match="'pipe.bin' is not a regular file"):
            gc.onnx.import_model(_external_model("pipe.bin"), base_dir=folder)
    with pytest.raises(OnnxError, match="cannot open its external file 'missing.bin'"):
        gc.onnx.import_model(_external_model("missing.bin"), base_dir=folder)


# -- single static assignment and the other load-time checks ----------------------------

X, Y = _info("x"), _info("y")
W = numpy_helper.from_array(np.array([1, 2], np.float32), "w")


def _branch(name: str, nodes: list) -> Any:
    return helper.make_graph(nodes, name, [], [_info(nodes[-1].output[0])])


def _if(then_nodes: list, else_nodes: list, outputs: list = ("y",)) -> Any:
    return _node(
        "If",
        ["c"],
        list(outputs),
        then_branch=_branch("then", then_nodes),
        else_branch=_branch("else", else_nodes),
    )


C = _info("c", [], TensorProto.BOOL)
TWICE = {
    "two nodes": (
        _model([_node("Relu", ["x"], ["y"]), _node("Neg", ["x"], ["y"])], [X], [Y]),
        "value 'y' is defined twice: by node 0 (Relu) and by node 1 (Neg)",
    ),
    "one node's two outputs": (
        _model([_node("Split", ["x"], ["y", "y"], axis=0, num_outputs=2)], [X], [Y], opset=18),
        "value 'y' is defined twice: by node 0 (Split) and by node 0 (Split)",
    ),
    "a node over a graph input": (
        _model([_node("Neg", ["x"], ["x"]), _node("Neg", ["x"], ["y"])], [X], [Y]),
        "value 'x' is defined twice: by graph input 'x' and by node 0 (Neg)",
    ),
    "a node over an initializer": (
        _model([_node("Neg", ["x"], ["w"]), _node("Add", ["x", "w"], ["y"])], [X], [Y], [W]),
        "value 'w' is defined twice: by initializer 'w' and by node 0 (Neg)",
    ),
    "an initializer twice": (
        _model([_node("Add", ["x", "w"], ["y"])], [X], [Y], [W, W]),
        "value 'w' is defined twice: by initializer 'w' and by initializer 'w'",
    ),
    "a graph input twice": (
        _model([_node("Neg", ["x"], ["y"])], [X, X], [Y]),
        "value 'x' is defined twice: by graph input 'x' and by graph input 'x'",
    ),
    "a branch's node over an outer value": (
        _model(
            [_node("Neg", ["x"], ["z"]), _if([_node("Abs", ["x"], ["z"])], [_node("Neg", ["x"], ["e"])])],
            [X, C], [Y],
        ),
        "value 'z' in body 'then' of node 1 (If) is defined twice: by a value of an enclosing "
        "graph and by node 0 (Abs) in body 'then' of node 1 (If)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TWICE))
def test_a_value_defined_twice_is_refused_naming_both_definitions(case: str) -> None:
    model, message = TWICE[case]
    assert _refused_by_onnx(model)
    with pytest.raises(OnnxError) as caught:
        gc.onnx.import_model(model)
    assert str(caught.value) == message


def test_names_onnx_allows_still_import() -> None:
    # an initializer also listed as a graph input (IR < 4), once
    listed = _model([_node("Add", ["x", "w"], ["y"])], [X, _info("w")], [Y], [W])
    # both branches defining the same name of their own; a branch's name that the outer
    # graph defines only after the If
    branches = _model(
        [
            _if([_node("Abs", ["x"], ["z"])], [_node("Neg", ["x"], ["z"])], ["b"]),
            _node("Neg", ["b"], ["z"]),
            _node("Neg", ["z"], ["y"]),
        ],
        [X, C],
        [Y],
    )  # fmt: skip
    for model in (listed, branches):
        assert not _refused_by_onnx(model)
        assert isinstance(gc.onnx.import_model(model), gc.Graph)
    x = np.array([-1, 2], np.float32)
    assert gc.run(gc.onnx.import_model(listed), {"x": x})[0].tolist() == [0, 4]
    for c, want in ((True, [1, 2]), (False, [1, -2])):
        got = gc.run(gc.onnx.import_model(branches), {"x": x, "c": np.array(c)})
        assert got[0].tolist() == want


def test_an_undefined_input_is_refused_even_in_a_branch_never_read() -> None:
    model = _model([_node("Add", ["x", "q"], ["y"])], [X], [Y])
    with pytest.raises(OnnxError, match=r"node 0 \(Add\): input 'q' is not defined before"):
        gc.onnx.import_model(model)
    true = numpy_helper.from_array(np.array(True), "c")  # the If reads its then branch only
    nodes = [_if([_node("Neg", ["x"], ["t"])], [_node("Neg", ["q"], ["e"])])]
    model = _model(nodes, [X], [Y], [true])
    assert _refused_by_onnx(model)
    with pytest.raises(
        OnnxError, match=r"node 0 \(Neg\) in body 'else' of node 0 \(If\): input 'q'"
    ):
        gc.onnx.import_model(model)
    model = _model([_node("Neg", ["x"], ["z"])], [X], [Y])
    with pytest.raises(OnnxError, match="graph output 'y' is computed by no node"):
        gc.onnx.import_model(model)


def _relu_with(**changes: Any) -> Any:
    node = _node("LeakyRelu", ["x"], ["y"], alpha=0.5)
    for key, value in changes.items():
        if key == "attribute":
            node.attribute.append(value)
        else:
            del getattr(node, key)[:]
            getattr(node, key).extend(value)
    return _model([node], [X], [Y])


SCHEMA = {
    "too many inputs": (_relu_with(input=["x", "x"]), "LeakyRelu takes 1 to 1 inputs, the node has 2"),
    "two outputs": (_relu_with(output=["y", "z"]), "LeakyRelu takes 1 to 1 outputs, the node has 2"),
    "an empty required input": (_relu_with(input=[""]), "input 0 (X) is not optional, but has no name"),
    "an unknown attribute": (_relu_with(attribute=_attribute("beta", 1.0)), "LeakyRelu has no attribute 'beta'"),
    "an attribute twice": (_relu_with(attribute=_attribute("alpha", 0.1)), "attribute 'alpha' is given twice"),
    "an attribute of the wrong type": (
        _model([_node("LeakyRelu", ["x"], ["y"], alpha=1)], [X], [Y]),
        "attribute 'alpha' is of type INT, expected FLOAT",
    ),
    "a required attribute missing": (
        _model([_node("Cast", ["x"], ["y"])], [X], [Y]), "Cast needs the attribute 'to'"
    ),
    "an op of a later opset": (
        _model([_node("Gelu", ["x"], ["y"])], [X], [Y]), "Gelu is no op of opset 17"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SCHEMA))
def test_nodes_are_checked_against_their_op_schema(case: str) -> None:
    model, message = SCHEMA[case]
    assert _refused_by_onnx(model)
    with pytest.raises(OnnxError, match=r"^node 0 \((LeakyRelu|Cast|Gelu), opset 17\): ") as caught:
        gc.onnx.import_model(model)
    assert message in str(caught.value)


@pytest.mark.parametrize("opset", [0, importer.MAX_OPSET + 1, 9999])
def test_an_opset_graphc_does_not_read_is_refused_naming_the_range(opset: int) -> None:
    model = _model([_node("Relu", ["x"], ["y"])], [X], [Y], opset=opset)
    with pytest.raises(OnnxError, match=f"opset {opset} of the default domain; graphc reads "
                       f"opsets 1 to {importer.MAX_OPSET}"):  # fmt: skip
        gc.onnx.import_model(model)


def test_the_newest_opset_and_ir_version_read_import_and_newer_ir_is_refused() -> None:
    model = _model([_node("Relu", ["x"], ["y"])], [X], [Y], opset=importer.MAX_OPSET)
    model.ir_version = importer.MAX_IR_VERSION
    assert [n.op for n in gc.onnx.import_model(model).op_nodes] == ["relu"]
    model.ir_version = importer.MAX_IR_VERSION + 1
    with pytest.raises(OnnxError, match=f"IR version {importer.MAX_IR_VERSION + 1} is newer"):
        gc.onnx.import_model(model)


# -- raw exceptions become OnnxErrors naming the node or initializer --------------------


@pytest.mark.parametrize(
    "data", [b"\x0a\xff\xff", b"\xff" * 16, b"\x08", _model([], [], []).SerializeToString()[:-1]]
)
def test_malformed_protobuf_bytes(data: bytes, tmp_path: Path) -> None:
    with pytest.raises(OnnxError, match="not a valid ONNX protobuf"):
        gc.onnx.import_model(data)
    (tmp_path / "bad.onnx").write_bytes(data)
    with pytest.raises(OnnxError, match="not a valid ONNX protobuf"):
        gc.onnx.import_model(tmp_path / "bad.onnx")
    with pytest.raises(OnnxError, match="expected an onnx.ModelProto, a path or bytes"):
        gc.onnx.import_model(12)


def test_invalid_utf8_in_a_string_attribute() -> None:
    node = _node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])
    node.attribute.append(helper.make_attribute("auto_pad", b"\xff\xfe"))
    model = _model([node], [_info("x", [1, 1, 4, 4])], [_info("y", None)])
    with pytest.raises(
        OnnxError, match=r"node 0 \(MaxPool, opset 17\): attribute 'auto_pad' is not UTF-8"
    ):
        gc.onnx.import_model(model)


def _tensor(**fields: Any) -> Any:
    return TensorProto(**{"name": "w", "data_type": F, **fields})


@pytest.mark.parametrize(
    "tensor, message",
    [
        (_tensor(dims=[2]), "holds 0 values; its dims [2] need 2"),
        (_tensor(dims=[2], raw_data=b"\0" * 4), "holds 4 bytes of data; its dims [2] need 8"),
        (_tensor(dims=[2], float_data=[1, 2, 3]), "holds 3 values; its dims [2] need 2"),
        (_tensor(dims=[-2], float_data=[1, 2]), "dims [-2] has a negative dim"),
        (_tensor(dims=[2], raw_data=b"ab", data_type=TensorProto.COMPLEX64), "element type COMPLEX64 is not"),
    ],
)  # fmt: skip
def test_initializers_that_do_not_hold_their_dims(tensor: Any, message: str) -> None:
    model = _model([_node("Add", ["x", "w"], ["y"])], [X], [Y], [tensor])
    with pytest.raises(OnnxError, match="^initializer 'w': ") as caught:
        gc.onnx.import_model(model)
    assert message in str(caught.value)
    constant = _node("Constant", [], ["w"], value=tensor)
    model = _model([constant, _node("Add", ["x", "w"], ["y"])], [X], [Y])
    with pytest.raises(OnnxError, match=r"^node 0 \(Constant, opset 17\), attribute 'value'"):
        gc.onnx.import_model(model)


def test_initializers_are_decoded_as_numpy_helper_does() -> None:
    rng = np.random.default_rng(0)
    arrays = [
        rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(4),
        np.array([[1, -2], [3, 2**40]]), np.array([5, -6], np.int32),
        np.array([True, False, True]), np.zeros((0, 3), np.float32), np.float64(2.5),
        np.array([-128, 127], np.int8), np.array([-3, 2**15 - 1], np.int16),
        np.array([0, 255], np.uint8), np.array([7, 2**16 - 1], np.uint16),
        np.array([1, 2**32 - 1], np.uint32), np.array([2**64 - 1, 0], np.uint64),
        np.array([0.1, -65504.0, np.inf, 6e-8], np.float16),
    ]  # fmt: skip
    for array in arrays:
        for raw in (True, False):
            tensor = numpy_helper.from_array(array, "t")
            if not raw:  # the typed fields (float_data, int32_data...) instead of raw bytes
                tensor = helper.make_tensor("t", tensor.data_type, array.shape, array.reshape(-1))
            got = importer.tensor_value(tensor, "t")
            assert got.dtype == array.dtype and got.shape == array.shape
            assert np.array_equal(got, array)
            assert got.flags.writeable and got.flags.c_contiguous


def test_a_handler_surprised_by_its_values_names_the_node() -> None:
    nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Concat", ["s", "s"], ["y"], axis=5),
    ]
    with pytest.raises(OnnxError, match=r"^node 1 \(Concat, opset 17\): cannot be read: AxisError"):
        gc.onnx.import_model(_model(nodes, [_info("x", ["N", 3])], [Y]))  # fmt: skip


# -- no huge value computed at import ---------------------------------------------------


def _shape_const(name: str, value: Any) -> Any:
    return numpy_helper.from_array(np.asarray(value, np.int64), name)


@contextlib.contextmanager
def peak_bytes() -> Iterator[list[int]]:
    """The peak of memory numpy allocated inside (tracemalloc sees numpy's buffers)."""
    tracemalloc.start()
    found: list[int] = []
    try:
        yield found
    finally:
        found.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


@pytest.mark.parametrize("size", [2**52, 2**27])  # 16 PiB; 512 MiB, which would fit
def test_a_huge_constant_of_shape_stays_an_op(size: int) -> None:
    nodes = [
        _node("ConstantOfShape", ["shape"], ["big"]),
        _node("Shape", ["big"], ["n"]),
        _node("Cast", ["n"], ["y"], to=F),
    ]
    model = _model(nodes, [], [_info("y", [1])], [_shape_const("shape", [size])])
    with peak_bytes() as peak:
        graph = gc.onnx.import_model(model)
    assert peak[0] < 2**24
    assert "broadcast_to" in [n.op for n in graph.op_nodes]
    output = graph.outputs[0].inputs[0]  # its shape is known without making it
    assert output.is_constant and output.value.tolist() == [size]


def test_folding_stops_at_the_limit_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer, "FOLD_LIMIT", 1000)
    monkeypatch.setattr(importer, "FOLD_SMALL", 10)
    a = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(40, 1), "a")
    b = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(1, 40), "b")
    small = [_node("ConstantOfShape", ["s"], [f"c{k}"]) for k in range(3)]
    nodes = [
        *small,  # 3 x 300 elements: folded, 900 of the 1000
        _node("Add", ["a", "b"], ["ab"]),  # 1,600: an op, a broadcast of constants
        _node("ConstantOfShape", ["s"], ["late"]),  # past the limit in all: an op
        _node("ReduceSum", ["ab"], ["t"], keepdims=0),
        _node("Add", ["x", "t"], ["y"]),
    ]
    model = _model(nodes, [X], [Y], [a, b, _shape_const("s", [300])])
    graph = gc.onnx.import_model(model)
    ops = [n.op for n in graph.op_nodes]
    assert ops.count("broadcast_to") == 1 and "add" in ops and "sum" in ops
    got = gc.run(graph, {"x": np.zeros(2, np.float32)})[0]
    assert got.tolist() == [float(np.sum(np.arange(40.0)[:, None] + np.arange(40.0)))] * 2
    # only while importing: ops on arrays compute again afterwards
    assert isinstance(gc.add(np.ones(5000), np.ones(5000)), np.ndarray)


def test_huge_values_a_handler_would_make_are_refused_naming_node_and_size() -> None:
    scalars = [_shape_const("zero", 0), _shape_const("end", 2**50), _shape_const("one", 1)]
    nodes = [_node("Range", ["zero", "end", "one"], ["r"])]
    nodes.append(_node("Cast", ["r"], ["y"], to=F))
    with pytest.raises(OnnxError, match=r"node 0 \(Range, opset 17\): Range's result would "
                       r"hold 1125899906842624 elements, more than the 67108864 graphc may still "):  # fmt: skip
        gc.onnx.import_model(_model(nodes, [], [_info("y", None)], scalars))
    values = numpy_helper.from_array(np.array([0, 1], np.float32), "values")
    nodes = [_node("OneHot", ["i", "end", "values"], ["y"])]
    model = _model(
        nodes, [_info("i", [2], TensorProto.INT64)], [_info("y", None)], [*scalars, values]
    )
    with pytest.raises(OnnxError, match=r"node 0 \(OneHot, opset 17\): OneHot's depth would hold"):
        gc.onnx.import_model(model)


def test_constants_sized_by_huge_declared_shapes_are_refused() -> None:
    # a graph input's type costs nothing, but constants a handler makes from its dims would
    x = _info("x", [1, 1, 2**20, 2**20])
    outputs = [_info("y", None), _info("i", None, TensorProto.INT64)]
    pool = _model([_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])], [x], outputs)
    hidden = 2**25  # LSTM without B: a zero bias of 4 * hidden
    inputs = [
        _info("x", [2, 1, 3]),
        _info("w", [1, 4 * hidden, 3]),
        _info("r", [1, 4 * hidden, hidden]),
    ]
    lstm = _model(
        [_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden)],
        inputs,
        [_info("y", None)],
    )
    for model, what in ((pool, "MaxPool's table of positions"), (lstm, "LSTM's zero bias")):
        with pytest.raises(
            OnnxError, match=rf"^node 0 \(\w+, opset 17\): {what} would hold \d+ elements"
        ):
            gc.onnx.import_model(model)
    huge = _model([_node("Relu", ["x"], ["y"])], [_info("x", [2**62, 2**62])], [Y])
    with pytest.raises(OnnxError, match="^graph input 'x': the type f32.* has more bytes than"):
        gc.onnx.import_model(huge)  # fmt: skip


# -- fuzzing: mutated bytes of the models the other ONNX tests build --------------------


@functools.cache
def _seed_models() -> dict[str, bytes]:
    """Serialized models to mutate: tests/onnx/test_zoo.py's zoo (graphc.nn models,
    exported), the import benchmark's chain, test_import_control.py's If and Loops, a
    shape computation and a model with external data (weights.bin, 2 floats)."""
    from graphc.bench.zoo_models import chain_model
    from tests.onnx import test_import_control as control
    from tests.onnx.test_zoo import ZOO

    seeds = {"chain": chain_model(nodes=8, width=3)}
    for name in ("mlp", "lenet", "gru", "lstm", "transformer", "cond_and_loops"):
        make, shape = ZOO[name]
        graph = gc.trace(make(), gc.TensorSpec(("batch", *shape)))
        model = gc.onnx.export_model(graph, initializers=gc.lifted_feeds(graph))
        seeds[name] = model.SerializeToString()
    seeds["if"] = control._if_model().SerializeToString()
    seeds["loop"] = control._counting_loop(3, stop_early=False).SerializeToString()
    seeds["while"] = control._counting_loop(3, stop_early=True).SerializeToString()
    seeds["unrolled"] = control._slicing_loop(3).SerializeToString()
    shape_nodes = [
        _node("Shape", ["x"], ["s"]),
        _node("Gather", ["s", "zero"], ["n"], axis=0),
        _node("Concat", ["n", "three"], ["target"], axis=0),
        _node("ConstantOfShape", ["three"], ["filled"]),
        _node("Range", ["zero_s", "three_s", "one_s"], ["r"]),
        _node("Reshape", ["x", "target"], ["flat"]),
        _node("Expand", ["filled", "target"], ["wide"]),
        _node("Add", ["flat", "wide"], ["y"]),
    ]
    inits = [_shape_const("zero", [0]), _shape_const("three", [3])]
    inits += [_shape_const(n, v) for n, v in (("zero_s", 0), ("three_s", 3), ("one_s", 1))]
    shape_model = _model(shape_nodes, [_info("x", ["N", 3])], [_info("y", ["N", 3])], inits)
    seeds["shapes"] = shape_model.SerializeToString()
    seeds["external"] = _external_model("weights.bin").SerializeToString()
    return seeds


@st.composite
def mutated(draw: Any, seeds: dict[str, bytes]) -> bytes:
    """One seed model's bytes with 1 to 6 edits: a byte set, bytes inserted, a range
    deleted or the tail cut."""
    data = bytearray(seeds[draw(st.sampled_from(sorted(seeds)))])
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        edit = draw(st.sampled_from(["set", "set", "insert", "delete", "cut"]))
        if edit == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            del data[at:]
    return bytes(data)


def _fuzz(data: bytes, folder: Path) -> None:
    # an OnnxError, or a graphc error of the graph being built (a ShapeError...); any
    # other exception fails the test
    with opened_files() as paths, contextlib.suppress(GraphcError):
        gc.onnx.import_model(data, base_dir=folder)
    assert not _outside(paths, folder), paths


def _fuzz_models(folder: Path, examples: int) -> None:
    (folder / "weights.bin").write_bytes(np.array([1, 2], np.float32).tobytes())
    seeds = _seed_models()
    for data in seeds.values():  # the seeds themselves import (and warm up lazy imports)
        assert isinstance(gc.onnx.import_model(data, base_dir=folder), gc.Graph)

    @settings(max_examples=examples, derandomize=examples <= 100)
    @given(mutated(seeds))
    def mutate(data: bytes) -> None:
        _fuzz(data, folder)

    mutate()


@pytest.mark.reads_budget
def test_mutated_models_raise_graphc_errors_only_and_open_nothing_outside(
    tmp_path: Path,
) -> None:
    _fuzz_models(tmp_path, draws(100))


@pytest.mark.slow
def test_mutated_models_raise_graphc_errors_only_and_open_nothing_outside_long(
    tmp_path: Path,
) -> None:
    _fuzz_models(tmp_path, 3000)


def test_a_node_name_that_is_no_utf8_text_imports() -> None:
    """protobuf gives a string field that is no UTF-8 as bytes: such a node name is no
    scope path, and the model still imports (found by the mutation fuzzer)."""
    node = helper.make_node("Relu", ["x"], ["y"], name="n_Relu")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    data = helper.make_model(graph).SerializeToString().replace(b"n_Relu", b"\x80_Relu")
    g = gc.onnx.import_model(data)
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(gc.run(g, {"x": x})[0], np.maximum(x, 0))
