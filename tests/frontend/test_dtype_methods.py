"""The dtype methods, spelled every way torch and numpy spell them, on graph values as on
eager tensors: `x.type(dtype)` (torch's Tensor.type), `x.type()`, torch's type names,
`x.double()`, `x.half()`, `x.to(dtype)`, `x.type_as(y)`, `x.astype(dtype)`; and the
messages of graph values that cannot answer (len() of a symbolic dim, values of two
graphs of one name, a value kept from a finished trace).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.types import TensorType

X = np.array([[0.5, -1.25, 3.0], [2.0, 0.0, -7.5]], np.float32)

# spelling -> (method call, the dtype it gives)
SPELLINGS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "type(np.float64)": (lambda x: x.type(np.float64), "float64"),
    "type('int64')": (lambda x: x.type("int64"), "int64"),
    "type(dtype=np.float16)": (lambda x: x.type(dtype=np.float16), "float16"),
    "type(ge.float64)": (lambda x: x.type(ge.float64), "float64"),
    "type(float32), its own dtype": (lambda x: x.type(np.float32), "float32"),
    "double()": (lambda x: x.double(), "float64"),
    "half()": (lambda x: x.half(), "float16"),
    "long()": (lambda x: x.long(), "int64"),
    "int()": (lambda x: x.int(), "int32"),
    "bool()": (lambda x: x.bool(), "bool"),
    "to(np.float64)": (lambda x: x.to(np.float64), "float64"),
    "to('cpu', 'int32')": (lambda x: x.to("cpu", "int32"), "int32"),
    "to(dtype='float16')": (lambda x: x.to(dtype="float16"), "float16"),
    "to(other)": (lambda x: x.to(x.long()), "int64"),
    "type_as(other)": (lambda x: x.type_as(x.double()), "float64"),
    "astype('uint8')": (lambda x: x.abs().astype("uint8"), "uint8"),
}


def _traced(method: Callable[[Any], Any]) -> np.ndarray:
    return gc.trace(method, gc.TensorSpec(X.shape))(X)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_dtype_spelling_casts_a_graph_value_as_an_eager_tensor(spelling: str) -> None:
    method, dtype = SPELLINGS[spelling]
    eager = method(ge.tensor(X)).numpy()
    traced = _traced(method)
    assert eager.dtype == traced.dtype == np.dtype(dtype)
    want = np.abs(X).astype(dtype) if "astype" in spelling else X.astype(dtype)
    np.testing.assert_array_equal(traced, want)
    np.testing.assert_array_equal(eager, want)


# torch's type names: graphc gives torch's dtype and values
TORCH_NAMES = ["torch.DoubleTensor", "torch.HalfTensor", "torch.LongTensor", "torch.IntTensor",
               "torch.BoolTensor", "torch.ByteTensor", "torch.FloatTensor"]  # fmt: skip


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_torchs_type_names_cast_a_graph_value_as_torch_does(name: str) -> None:
    # x.type(...) on a graph value was a TypeError: `.type` was its TensorType, not callable
    torch = pytest.importorskip("torch")
    positive = np.abs(X)  # (a negative float's uint8 is undefined behaviour in C)
    want = torch.from_numpy(positive).type(name).numpy()
    by_name = gc.trace(lambda x: x.type(name), positive)(positive)
    by_class = gc.trace(lambda x: x.type(getattr(torch, name.split(".")[1])), positive)(positive)
    for got in (by_name, by_class):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


TORCH_DTYPE_CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "to(torch.float64)": lambda x, torch: x.to(torch.float64),
    "to(dtype=torch.int64)": lambda x, torch: x.to(dtype=torch.int64),
    "to(torch.device('cpu'), torch.float16)": lambda x, torch: x.to(
        torch.device("cpu"), torch.float16
    ),
    "type(torch.int32)": lambda x, torch: x.type(torch.int32),
    "to(torch.bool)": lambda x, torch: x.to(torch.bool),
}


@pytest.mark.parametrize("call", list(TORCH_DTYPE_CALLS))
def test_torchs_dtype_objects_cast_graph_values_and_eager_tensors_as_torch(call: str) -> None:
    # a torch program's x.to(torch.float64) was a DTypeError ("not a dtype") on both kinds
    torch = pytest.importorskip("torch")
    method = TORCH_DTYPE_CALLS[call]
    want = method(torch.from_numpy(X), torch).numpy()
    traced = _traced(lambda x: method(x, torch))
    for got in (traced, method(ge.tensor(X), torch).numpy()):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_type_without_a_dtype_names_it_and_takes_the_name_back() -> None:
    seen = {}

    def f(x: Any, n: Any) -> Any:
        seen["name"] = x.type()
        return n.type(x.type())  # torch's idiom: y.type(x.type())

    g = gc.trace(f, gc.TensorSpec((2,), "float64"), gc.TensorSpec((2,), "int64"))
    assert seen["name"] == ge.tensor(np.zeros(2)).type() == "graphc.float64"
    got = g(np.zeros(2), np.array([3, -4]))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [3.0, -4.0])


def test_a_graph_values_type_is_still_its_tensor_type() -> None:
    g = gc.Graph("typed")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        t = x.type
        assert t == TensorType(("B", 3), "float64") and TensorType(("B", 3), "float64") == t
        assert hash(t) == hash(TensorType(("B", 3), "float64"))
        assert (t.shape, t.dtype, str(t)) == (("B", 3), np.dtype("float64"), "f64[B,3]")
        assert type(pickle.loads(pickle.dumps(t))) is TensorType
        y = gc.exp(x)
        gc.output(y, name="y")
    # the types graphc stores are plain ones, holding no graph value
    assert all(type(n.type) is TensorType for n in g.nodes)


def test_a_cuda_type_name_is_refused_by_name_and_an_unknown_one_lists_the_known() -> None:
    g = gc.Graph("names")
    with g:
        x = gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.ArgumentError, match="no device 'cuda'"):
            x.type("torch.cuda.FloatTensor")
        with pytest.raises(gc.DTypeError, match=r"'torch.ComplexFloatTensor'.*torch.DoubleTensor"):
            x.type("torch.ComplexFloatTensor")


def test_len_of_a_symbolic_first_dim_names_the_dim_not_the_data() -> None:
    # the message said len() "needs its data"; it needs the size of dim 'B', known at run
    g = gc.Graph("lengths")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        with pytest.raises(gc.TracingError) as caught:
            len(x)
        message = str(caught.value)
        assert "dim 'B'" in message and "len()" in message and "needs its data" not in message
        assert "gc.TensorSpec with a number" in message  # what to change
        with pytest.raises(gc.TracingError, match="dim 'B'.*iteration"):
            iter(x)
        assert len(gc.placeholder("v", shape=(4, 2))) == 4


def test_len_of_a_0d_value_is_a_type_error_naming_it_as_in_eager_and_torch() -> None:
    # a TracingError said the graph could not be built, but no graph has a len() of a
    # 0-d value: torch and graphc.eager raise TypeError("len() of a 0-d tensor")
    def count(x: Any) -> Any:
        return len(x.sum())

    with pytest.raises(TypeError, match=r"^len\(\) of a 0-d tensor$"):
        count(ge.ones(3))
    with pytest.raises(
        TypeError, match=r"^len\(\) of a 0-d tensor: graph value 'sum' \(f32\[\]\)"
    ) as lengths:
        gc.trace(count, gc.TensorSpec((3,)))
    scalars = gc.Graph("scalars")
    with (
        scalars,
        pytest.raises(TypeError, match=r"^iteration over a 0-d tensor: graph value 's'") as loops,
    ):
        iter(gc.placeholder("s", shape=()))
    assert isinstance(lengths.value, gc.GraphcError) and isinstance(loops.value, gc.GraphcError)


def test_values_of_two_graphs_of_one_name_are_told_apart() -> None:
    # "value 'x' belongs to graph 'graph', but graph 'graph' is being declared"
    first, second = gc.Graph(), gc.Graph()
    with first:
        x = gc.placeholder("x", shape=(3,))
    with second:
        y = gc.placeholder("y", shape=(3,))
        with pytest.raises(gc.GraphMismatchError) as declaring:
            x + y
    with pytest.raises(gc.GraphMismatchError) as mixing:
        y * x
    for caught in (declaring, mixing):
        message = str(caught.value)
        assert "named 'graph'" in message and "too" in message
        assert 'gc.Graph("encoder")' in message and "placeholder" in message
    named = gc.Graph("decoder")
    with named, pytest.raises(gc.GraphMismatchError) as caught:
        x + gc.placeholder("z", shape=(3,))
    assert "graph 'graph', but graph 'decoder' is being declared" in str(caught.value)


def test_a_leaked_value_meeting_an_array_leaves_its_finished_graph_as_it_was() -> None:
    # the array was lifted into the finished graph as a constant first (a node after its
    # outputs, one per failed op), and the error then named that constant, not the value
    saved = {}

    def f(x: Any) -> Any:
        saved["v"] = x * 2.0
        return x + 1.0

    g = gc.trace(f, gc.TensorSpec((3,)))
    before = str(g)
    operand = np.array([4.0, 5.0, 6.0], np.float32)
    for op in (
        lambda: operand + saved["v"],
        lambda: saved["v"] * operand,
        lambda: 7.5 - saved["v"],
    ):
        with pytest.raises(gc.TracingError, match=r"on graph value 'mul' .*trace has finished"):
            op()
    assert str(g) == before


def test_an_output_of_another_graph_of_the_same_name_is_told_apart() -> None:
    """gc.output of a value of another graph named 'graph' (gc.Graph()'s default) said
    "belongs to graph 'graph', not to graph 'graph' being declared"; it now says they
    are two graphs of one name and how to bring the value in, as an op's error does."""
    first = gc.Graph()
    with first:
        x = gc.placeholder("x", (3,))
    second = gc.Graph()
    with second, pytest.raises(gc.GraphMismatchError, match="another named 'graph' too") as caught:
        gc.output(x)
    assert str(caught.value).startswith("output: value 'x'")
    assert "gc.placeholder" in str(caught.value)
