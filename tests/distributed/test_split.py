"""The batch split without a cluster: split graphs by text, per-op rules, refusals, and
chunked runs of the split graphs equal to the whole graph (run here with gc.compile)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.distributed import BatchSplitError, split_batch
from graphc.distributed.split import BatchSplit
from graphc.ops.reduce import count
from tests.budget import draws
from tests.distributed.batch_graphs import batch_feeds, batch_graphs
from tests.strategies import random_graphs


def run_split(split: BatchSplit, feeds: dict, rows_per_chunk: list[int]) -> list[np.ndarray]:
    """The split graphs run chunk by chunk in this process, joined as map_batches does."""
    chunk, merge, combine = (gc.compile(g) for g in (split.chunk, split.merge, split.combine))
    bindings = {split.batch_dim: sum(rows_per_chunk)}
    sizes = split.size_values(bindings)
    results, start = [], 0
    for n in rows_per_chunk:
        window = {}
        for name, axis in split.batch_inputs.items():
            index = [slice(None)] * feeds[name].ndim
            index[axis] = slice(start, start + n)
            window[name] = feeds[name][tuple(index)]
        start += n
        given_ = {**feeds, **sizes, **window}
        out = chunk(**{p.name: given_[p.name] for p in split.chunk.inputs})
        results.append(dict(zip([o.name for o in split.chunk.outputs], _tuple(out))))
    values = {}
    for o in split.outputs:
        if o.mapped:
            values[o.name] = np.concatenate([r[o.name] for r in results], axis=o.axis)
    stacked = {f"{p.name}_chunks": np.stack([r[p.name] for r in results]) for p in split.partials}
    merged = {}
    if split.partials:
        out = merge(**stacked)
        merged = dict(zip([o.name for o in split.merge.outputs], _tuple(out)))
    if split.combine.outputs:
        given_ = {**feeds, **sizes, **merged}
        out = combine(**{p.name: given_[p.name] for p in split.combine.inputs})
        values.update(zip([o.name for o in split.combine.outputs], _tuple(out)))
    return [values[o.name] for o in split.outputs]


def _tuple(out: object) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _graph(text: str) -> gc.Graph:
    return gc.parse(text)


def _lines(graph: gc.Graph) -> str:
    return str(graph).strip()


# -- split graphs by text ----------------------------------------------------------------


def test_a_mean_becomes_a_sum_and_a_count() -> None:
    split = split_batch(
        _graph("""
graph g(%x: f64[B,3], %w: f64[3]) {
  %mul: f64[B,3] = mul(%x, %w)
  %mean: f64[] = mean(%mul, axis=None, keepdims=False)
  output %y = %mul
  output %loss = %mean
}""")
    )
    assert (
        _lines(split.chunk)
        == """graph g_chunk(%x: f64[B,3], %w: f64[3]) {
  %mul: f64[B,3] = mul(%x, %w)
  %mean_sum: f64[] = sum(%mul, axis=None, keepdims=False)
  output %y = %mul
  output %mean_partial = %mean_sum
}"""
    )
    assert (
        _lines(split.merge)
        == """graph g_merge(%mean_partial_chunks: f64[chunks]) {
  %mean_partial_merge: f64[] = sum(%mean_partial_chunks, axis=None, keepdims=False)
  output %mean_partial = %mean_partial_merge
}"""
    )
    assert (
        _lines(split.combine)
        == """graph g_combine(%mean_partial: f64[], %mean_count: f64[]) {
  %mean: f64[] = div(%mean_partial, %mean_count)
  output %loss = %mean
}"""
    )
    assert [(s.name, s.shape, s.axis) for s in split.sizes] == [("mean_count", ("B", 3), None)]
    assert split.size_values({"B": 5})["mean_count"] == 15.0
    assert [(o.name, o.mapped, o.axis) for o in split.outputs] == [
        ("y", True, 0),
        ("loss", False, None),
    ]


def test_logsumexp_max_and_a_weight_gradient_merge_by_their_own_ops() -> None:
    split = split_batch(
        _graph("""
graph g(%x: f64[3,B], %dy: f64[B,2], %s: f64[]) {
  %l: f64[3] = logsumexp(%x, axis=(1,), keepdims=False)
  %m: f64[3,1] = max(%x, axis=(1,), keepdims=True)
  %dw: f64[3,2] = matmul(%x, %dy)
  %scaled: f64[3,2] = mul(%dw, %s)
  output %lse = %l
  output %max = %m
  output %grad = %scaled
}""")
    )
    assert [(p.root, p.kind) for p in split.partials] == [
        ("l", "logsumexp"),
        ("m", "max"),
        ("dw", "sum"),
    ]
    merge = _lines(split.merge)
    assert "logsumexp(%l_partial_chunks, axis=(0,), keepdims=False)" in merge
    assert "max(%m_partial_chunks, axis=(0,), keepdims=False)" in merge
    assert "sum(%dw_partial_chunks, axis=(0,), keepdims=False)" in merge
    assert (
        _lines(split.combine)
        == """graph g_combine(%s: f64[], %l_partial: f64[3], %m_partial: f64[3,1], %dw_partial: f64[3,2]) {
  %scaled: f64[3,2] = mul(%dw_partial, %s)
  output %lse = %l_partial
  output %max = %m_partial
  output %grad = %scaled
}"""
    )
    assert [p.name for p in split.chunk.inputs] == ["x", "dy"]  # the chunks do not read s


def test_the_gradient_of_a_mean_loss_feeds_the_whole_batch_count_to_every_chunk() -> None:
    g = _graph("""
graph g(%x: f64[B,3], %w: f64[3,2]) {
  %h: f64[B,2] = matmul(%x, %w)
  %sq: f64[B,2] = mul(%h, %h)
  %l: f64[] = mean(%sq, axis=None, keepdims=False)
  output %loss = %l
}""")
    split = split_batch(gc.gradients(g, wrt=["w"]))
    chunk = _lines(split.chunk)
    # the backward's count(shape=(B, 2)) is the whole batch's, fed as a placeholder
    assert chunk.startswith("graph g_grad_chunk(%x: f64[B,3], %w: f64[3,2], %count: f64[])")
    assert "= count(" not in chunk
    assert [s.name for s in split.sizes] == ["count", "l_count"]
    assert [(p.root, p.kind) for p in split.partials] == [("l", "mean"), ("matmul", "sum")]


def test_an_integer_mean_sums_exactly_and_divides_as_float() -> None:
    split = split_batch(
        _graph("""
graph g(%k: i64[B]) {
  %m: f64[] = mean(%k, axis=None, keepdims=False)
  output %mean = %m
}""")
    )
    assert "%m_total: f64[] = cast(%m_partial" in _lines(split.combine)
    k = np.arange(11, dtype=np.int64)
    [got] = run_split(split, {"k": k}, [4, 4, 3])
    assert got == np.mean(k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_mean_sums_its_chunks_in_float32(dtype: str) -> None:
    # the mean op sums a float16 batch in float32 (as np.mean and torch do): the chunks'
    # partial sums must too, or 200 rows of 1000 overflow float16 (65504) to inf
    split = split_batch(
        _graph(f"""
graph g(%x: {"bf16" if dtype == "bfloat16" else "f16"}[B,2]) {{
  %m: {"bf16" if dtype == "bfloat16" else "f16"}[2] = mean(%x, axis=(0,), keepdims=False)
  output %mean = %m
}}""")
    )
    x = np.full((200, 2), 1000.0, np.float32).astype(gc.TensorType((), dtype).dtype)
    x[::7] = -999.5
    [got] = run_split(split, {"x": x}, [70, 70, 60])
    torch = pytest.importorskip("torch")
    want = torch.tensor(x.astype(np.float32)).to(getattr(torch, dtype)).mean(dim=0)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.float().numpy())


def test_a_free_output_and_a_count_output_come_from_the_combine_graph() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=("B", 2), dtype="float64")
        w = gc.placeholder("w", shape=(2,), dtype="float64")
        gc.output(x * w, name="y")
        gc.output(w * 2.0, name="w2")
        gc.output(count(("B", 2), dtype="float64"), name="n")
    split = split_batch(g)
    x_ = np.ones((5, 2))
    y, w2, n = run_split(split, {"x": x_, "w": np.array([1.0, 2.0])}, [2, 3])
    assert y.shape == (5, 2) and list(w2) == [2.0, 4.0] and n == 10.0


# -- refusals ----------------------------------------------------------------------------

UNSPLITTABLE = {
    "x @ x.T pairs rows": (
        """graph g(%x: f64[B,3]) {
  %t: f64[3,B] = transpose(%x, axes=(1, 0))
  %gram: f64[B,B] = matmul(%x, %t)
  output %y = %gram
}""",
        "node 'gram' (op matmul)",
        "pairs every row",
    ),
    "batch statistics feed back": (
        """graph g(%x: f64[B,3]) {
  %mu: f64[1,3] = mean(%x, axis=(0,), keepdims=True)
  %c: f64[B,3] = sub(%x, %mu)
  output %y = %c
}""",
        "node 'c' (op sub)",
        "'mu', a reduction over the batch",
    ),
    "a reshape merging the batch": (
        """graph g(%x: f64[B,3]) {
  %r: f64[3,B] = reshape(%x, shape=(3, "B"))
  output %y = %r
}""",
        "node 'r' (op reshape)",
        "moves elements across the batch axis",
    ),
    "sorting along the batch": (
        """graph g(%x: f64[B,3]) {
  %s: i64[B,3] = argsort(%x, axis=0, descending=False)
  output %y = %s
}""",
        "node 's' (op argsort)",
        "reorders rows",
    ),
    "a softmax over the batch": (
        """graph g(%x: f64[B,3]) {
  %s: f64[B,3] = softmax(%x, axis=0)
  output %y = %s
}""",
        "node 's' (op softmax)",
        "normalizes over rows",
    ),
    "a layer norm over dims that include the batch": (
        """graph g(%x: f64[4,B], %w: f64[], %b: f64[]) {
  %n: f64[4,B] = layer_norm(%x, %w, %b, axis=0, eps=1e-05)
  output %y = %n
}""",
        "node 'n' (op layer_norm)",
        "normalizes over rows",
    ),
    "a cumulative sum down the batch": (
        """graph g(%x: f64[B,3]) {
  %s: f64[B,3] = cumsum(%x, axis=0)
  output %y = %s
}""",
        "(op cumsum)",
        "accumulates earlier rows",
    ),
    "a row picked by position": (
        """graph g(%x: f64[B,3]) {
  %s: f64[3] = slice(%x, index="0")
  output %y = %s
}""",
        "(op slice)",
        "by their position",
    ),
    "a contraction of the batch with fixed rows": (
        """graph g(%x: f64[3,B], %w: f64[B,2]) {
  %m: f64[3,2] = matmul(%x, %w)
  output %y = %m
}""",
        "",
        "",
    ),
    "positions along the batch": (
        """graph g(%x: f64[B]) {
  %i: i64[B] = arange(start=0, step=1, length="B", dtype=i64)
  %c: f64[B] = cast(%i, dtype=f64)
  %s: f64[B] = add(%x, %c)
  output %y = %s
}""",
        "node 'i' (op arange)",
        "position",
    ),
    "a batch total spread back over the rows": (
        """graph g(%x: f64[B,3]) {
  %t: f64[] = sum(%x, axis=None, keepdims=False)
  %h: f64[] = mul(%t, %t)
  %b: f64[B] = broadcast_to(%h, shape=("B",))
  output %y = %b
}""",
        "node 'b' (op broadcast_to)",
        "computed from 't' (sum over the batch)",
    ),
    "the batch on two axes": (
        """graph g(%x: f64[B,B]) {
  output %y = %x
}""",
        "placeholder 'x'",
        "2 axes",
    ),
}


@pytest.mark.parametrize("case", list(UNSPLITTABLE))
def test_unsplittable_graphs_raise_a_named_error(case: str) -> None:
    text, where, why = UNSPLITTABLE[case]
    if case == "a contraction of the batch with fixed rows":
        # w carries B, so it is a batch input: this contraction is a sum over rows
        split = split_batch(_graph(text))
        assert [p.kind for p in split.partials] == ["sum"]
        return
    with pytest.raises(BatchSplitError, match="cannot split|batch dim") as info:
        split_batch(_graph(text))
    assert isinstance(info.value, gc.GraphcError)
    assert where in str(info.value) and why in str(info.value), str(info.value)


def test_a_loss_normalized_by_a_batch_count_says_why_it_is_refused() -> None:
    # label smoothing's term is divided by the number of rows not ignored, a sum over the
    # batch: its gradient spreads that over the rows. The refusal named only the
    # broadcast ("carries the batch dim but no batch rows"), not the reduction or why.
    model = gc.nn.Linear(4, 3, dtype="float64", generator=1)
    loss = gc.nn.CrossEntropyLoss(label_smoothing=0.1)
    step = gc.compile_train_step(
        model,
        loss,
        gc.optim.SGD(model.parameters(), lr=0.1),
        (np.zeros((8, 4)), np.zeros(8, np.int64)),
    )
    with pytest.raises(BatchSplitError, match=r"from '\w+' \(sum over the batch\)") as info:
        split_batch(step.graph)
    assert "label_smoothing" in str(info.value)


def test_a_node_no_output_reads_is_not_refused() -> None:
    # compile drops dead code; the split refused a leftover cumsum down the batch
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.cumsum(x, axis=0)  # read by nothing
        gc.output(gc.sum(x * 2.0, axis=0), name="s")
    split = split_batch(g)
    assert "cumsum" not in str(split.chunk) + str(split.combine)
    x = np.random.default_rng(2).normal(size=(9, 3))
    [got] = run_split(split, {"x": x}, [4, 5])
    np.testing.assert_allclose(got, np.sum(x * 2.0, axis=0), rtol=1e-12)


def test_an_op_without_a_rule_is_refused_not_guessed() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float64")
        gc.output(gc.pad(x, ((0, 0), (1, 1))), name="y")
    with pytest.raises(BatchSplitError, match=r"node 'pad' \(op pad\).*no rule"):
        split_batch(g)


def test_a_graph_without_the_batch_dim_is_an_error_naming_the_dim() -> None:
    g = _graph("graph g(%x: f64[3]) {\n  output %y = %x\n}")
    with pytest.raises(BatchSplitError, match="no placeholder with the batch dim N"):
        split_batch(g, batch_dim="N")


# -- rules on their own ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "out_axis"),
    [
        (("B", 3), (3, 2), 0),  # rows stay rows
        ((2, "B", 3), (3, 4), 1),  # a leading axis
        ((3,), (2, 3, "B"), 1),  # the columns of y: (2, B), 1-D x promoted and dropped
        (("B", 2, 3), ("B", 3, 4), 0),  # a shared leading axis
    ],
)
def test_matmul_keeps_the_batch_where_numpy_puts_it(x: tuple, w: tuple, out_axis: int) -> None:
    g = gc.Graph("g")
    with g:
        a = gc.placeholder("a", shape=x, dtype="float64")
        b = gc.placeholder("b", shape=w, dtype="float64")
        gc.output(a @ b, name="y")
    [plan] = split_batch(g).outputs
    assert plan.mapped and plan.axis == out_axis


@pytest.mark.parametrize("level", [0, 2])
def test_a_conv_block_splits_by_images_and_its_chunks_fuse(level: int) -> None:
    """conv2d -> batch norm (eval) -> + x -> relu, as written and as gc.optimize leaves
    it: mapped on N, exactly; the chunk graph fuses (conv2d_epilogue, conv2d_fused) when a
    worker plans it, and the fused graph itself is refused, naming its fused node."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", ("B", 3, 6, 6), "float64")
        w = gc.placeholder("w", (3, 3, 3, 3), "float64")
        b = gc.placeholder("b", (3,), "float64")
        s = gc.placeholder("s", (3, 1, 1), "float64")
        h = gc.relu(gc.conv2d(x, w, b, padding=1))
        gc.output(gc.relu(gc.conv2d(h, w, padding=1) * s + x), name="y")
    graph = gc.optimize(g, level=level)
    split = split_batch(graph)
    fused_chunk = {n.op for n in gc.fuse(split.chunk, backend="numpy").op_nodes}
    assert {"conv2d_epilogue", "conv2d_fused"} <= fused_chunk
    # (the fused node keeps the name of the variable h holding the relu it ends in)
    with pytest.raises(BatchSplitError, match="'h'.*fused node.*split the graph before"):
        split_batch(gc.fuse(graph, backend="numpy"))
    assert split.outputs[0].mapped and split.outputs[0].axis == 0
    rng = np.random.default_rng(0)
    feeds = {p.name: rng.standard_normal(tuple(5 if d == "B" else d for d in p.type.shape))
             for p in graph.inputs}  # fmt: skip
    np.testing.assert_array_equal(run_split(split, feeds, [2, 3])[0], gc.compile(graph)(**feeds))


def test_a_fused_conv_input_with_the_batch_elsewhere_is_refused() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (2, 3, 4, "B"), "float64")
        w = gc.placeholder("w", (3, 3, 1, 1), "float64")
        gc.output(gc.relu(gc.conv2d(x, w) * x), name="y")
    graph = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    assert "conv2d_fused" in {n.op for n in graph.op_nodes}
    with pytest.raises(BatchSplitError, match="conv2d_fused"):
        split_batch(graph)


# -- chunked runs equal the whole graph ----------------------------------------------------

CHUNKINGS = [[3, 3, 1], [7], [1] * 7, [2, 5]]


@settings(max_examples=draws(60))
@given(batch_graphs(), st.sampled_from(CHUNKINGS))
def test_random_batch_graphs_split_and_rejoin_exactly(g: gc.Graph, rows: list[int]) -> None:
    feeds = batch_feeds(g, sum(rows))
    want = gc.compile(g)(**feeds)
    got = run_split(split_batch(g), feeds, rows)
    for a, b in zip(_tuple(want), got):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-13, err_msg=str(g))


@settings(max_examples=draws(30))
@given(batch_graphs(gradients=True), st.sampled_from(CHUNKINGS))
def test_random_gradients_of_a_mean_loss_split_exactly(g: gc.Graph, rows: list[int]) -> None:
    feeds = batch_feeds(g, sum(rows))
    want = gc.compile(g)(**feeds)
    got = run_split(split_batch(g), feeds, rows)
    for a, b in zip(_tuple(want), got):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-13, err_msg=str(g))


@settings(max_examples=draws(150))
@given(random_graphs(min_ops=4, max_ops=12, symbolic=True), st.sampled_from(CHUNKINGS))
def test_any_random_graph_is_split_exactly_or_refused(g: gc.Graph, rows: list[int]) -> None:
    """The suite's random graphs (many ops without a rule): never a wrong answer."""
    try:
        split = split_batch(g)
    except BatchSplitError:
        return
    feeds = batch_feeds(g, sum(rows))
    try:
        want = gc.compile(g)(**feeds)
    except gc.GraphcError:
        return  # e.g. an extremum over an empty axis: no answer to compare
    got = run_split(split, feeds, rows)
    for a, b in zip(_tuple(want), got):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, err_msg=str(g))


def test_an_embedding_gradient_cumprod_and_custom_nodes_split_as_one_process() -> None:
    """Found by the distributed and ops hunts: an embedding's weight gradient (scatter_add
    of the rows by their ids) sums chunk partials; cumprod keeps rows as cumsum does;
    a custom-gradient node (BCE's loss, stop_gradient, a value traced under no_grad)
    runs its forward ops, since a split graph is never differentiated again."""
    import graphc.eager as ge
    from graphc.nn import functional as F

    table = np.random.default_rng(0).normal(size=(5, 3))

    def loss(ids, p, x):
        rows = gc.take(gc.constant(table), ids, axis=0)
        with ge.no_grad():
            held = gc.exp(x) * 0.5
        total = F.binary_cross_entropy(p, gc.sigmoid(rows[:, 0] + x[:, 1]))
        return total + gc.sum(gc.cumprod(x, axis=1) * held) + gc.sum(gc.stop_gradient(x))

    spec = (
        gc.TensorSpec(("B",), "int64"),
        gc.TensorSpec(("B",), "float64"),
        gc.TensorSpec(("B", 3), "float64"),
    )
    g = gc.trace(loss, *spec)
    joint = gc.gradients(g, wrt=["p", "x"])
    weight = gc.gradients(
        gc.trace(
            lambda ids, w: gc.sum(gc.take(w, ids, axis=0) ** 2),
            spec[0],
            gc.TensorSpec((5, 3), "float64"),
        ),
        wrt=["w"],
    )
    rng = np.random.default_rng(1)
    feeds = {
        "ids": rng.integers(0, 5, 7),
        "p": rng.uniform(0.1, 0.9, 7),
        "x": rng.normal(size=(7, 3)),
        "w": table,
    }
    for graph in (joint, weight):
        split = split_batch(graph)
        want = gc.compile(graph)(**{p.name: feeds[p.name] for p in graph.inputs})
        got = run_split(split, {p.name: feeds[p.name] for p in graph.inputs}, [3, 4])
        for a, b in zip(got, _tuple(want)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


# -- loops: a recurrent layer's scans ------------------------------------------------------


def _recurrent_loss(kind: str, **options: object) -> tuple[gc.Graph, dict]:
    """The gradient graph of a recurrent model's cross entropy (a train step's loss graph,
    on a symbolic batch) with respect to its parameters and input, and feeds."""
    from graphc import nn, optim

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(nn, kind)(3, 4, batch_first=True, dtype="float64", **options)
            self.out = nn.Linear(
                self.rnn.hidden_size * (1 + options.get("bidirectional", 0)), 2, dtype="float64"
            )

        def forward(self, x):
            return self.out(self.rnn(x)[0][:, -1])

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(7, 5, 3)), rng.integers(0, 2, 7)
    model = Model()
    # gc.cross_entropy: a mean over every target, one pass (nn.CrossEntropyLoss's mean
    # over the targets not ignored needs a count of the labels first: test_training.py)
    step = gc.compile_train_step(
        model, gc.cross_entropy, optim.SGD(model.parameters(), lr=0.1), (x, y)
    )
    loss = step.loss_graph
    graph = gc.gradients(loss, wrt=[p.name for p in loss.inputs if p.name != "y"])
    feeds = {"x": x, "y": y, **step.parameters()}
    return graph, {p.name: feeds[p.name] for p in graph.inputs}


@pytest.mark.parametrize(
    "kind, options",
    [("GRU", {}), ("RNN", {}), ("LSTM", {}), ("LSTM", {"num_layers": 2, "bidirectional": True})],
    ids=["gru", "rnn", "lstm", "lstm-2-layers-bidirectional"],
)
def test_a_recurrent_layers_gradients_split_as_one_process(kind: str, options: dict) -> None:
    """The backward scan accumulates the weight gradients over the steps in carries that
    start at zero: each chunk's accumulators are partials, merged by sum, where the split
    used to refuse every scan."""
    graph, feeds = _recurrent_loss(kind, **options)
    split = split_batch(graph)
    ops = {n.name: n.op for n in graph.nodes}
    accumulated = [p for p in split.partials if ops[p.root] == "result"]
    assert len(accumulated) >= 2 and {p.kind for p in accumulated} == {"sum"}  # W_hh, b_hh
    want = gc.compile(graph)(**feeds)
    got = run_split(split, feeds, [3, 1, 3])
    for a, b in zip(got, _tuple(want)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def _scan_graph(step, init, xs_spec=("T", "B", 3)):
    def f(x, w):
        carry, ys = gc.scan(lambda c, xt: step(c, xt, w), init(x), x)
        return (*carry, ys) if isinstance(carry, tuple) else (carry, ys)

    return gc.trace(f, gc.TensorSpec(xs_spec, "float64"), gc.TensorSpec((3, 3), "float64"))


def test_a_scan_with_sums_over_the_batch_per_step_merges_them_by_sum() -> None:
    # rows carried (h), a per-step sum over the batch stacked (ys), and a carry summing a
    # contraction of the rows (the weight-gradient shape): all three rejoin exactly
    def step(c, xt, w):
        h, acc = c
        h = gc.tanh(xt @ w + h)
        return (h, acc + gc.transpose(xt) @ h * 0.5), gc.sum(h, axis=0) - gc.sum(xt)

    # the accumulator starts at ones: each chunk's loop runs from zero, the start is added
    # once after the merge
    g = _scan_graph(step, lambda x: (x[0] * 0.0, gc.ones((3, 3), "float64")))
    split = split_batch(g)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.normal(size=(4, 6, 3)), "w": rng.normal(size=(3, 3))}
    want = gc.compile(g)(**feeds)
    for rows in ([6], [2, 4], [1, 1, 1, 3]):
        got = run_split(split, feeds, rows)
        for a, b in zip(got, _tuple(want)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


SCAN_REFUSALS = {
    "an accumulator read besides its sum": (
        lambda c, xt, w: (c + c * gc.sum(xt), gc.sum(xt)),
        lambda x: gc.ones((), "float64"),
        ("T", "B", 3),
        "is not a sum of values reduced over the batch (acc + d",
    ),
    "a carry squaring its batch sums": (
        lambda c, xt, w: (c + gc.sum(xt) * gc.sum(xt), gc.sum(xt)),
        lambda x: gc.zeros((), "float64"),
        ("T", "B", 3),
        "other than by sums and linear ops",
    ),
    "an increment reading another accumulator": (
        lambda c, xt, w: ((c[0] + gc.sum(xt), c[1] + c[0]), gc.sum(xt)),
        lambda x: (gc.ones((), "float64"), gc.zeros((), "float64")),
        ("T", "B", 3),
        "not a sum of values reduced over the batch (acc + d",
    ),
    "a batch sum fed back into the rows": (
        lambda c, xt, w: (c + xt * gc.sum(xt), gc.sum(c)),
        lambda x: x[0] * 0.0,
        ("T", "B", 3),
        "in its body",
    ),
    "the batch scanned over": (
        lambda c, xt, w: (c + xt, gc.sum(xt)),
        lambda x: gc.zeros((4, 3), "float64"),
        ("B", 4, 3),
        "scanned along the batch dim",
    ),
    "a mean over the batch in the body": (
        lambda c, xt, w: (c + gc.mean(xt), gc.sum(xt)),
        lambda x: gc.zeros((), "float64"),
        ("T", "B", 3),
        "other than by sums",
    ),
}


@pytest.mark.parametrize("case", list(SCAN_REFUSALS))
def test_scans_that_would_not_add_up_are_refused_naming_why(case: str) -> None:
    step, init, spec, why = SCAN_REFUSALS[case]
    with pytest.raises(BatchSplitError, match="cannot split") as info:
        split_batch(_scan_graph(step, init, spec))
    assert "(op scan)" in str(info.value) and why in str(info.value), str(info.value)
