"""`gc.viz.view` and `graphc view`: the page's data, its groups, its safety, its size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.cli import main
from graphc.ir.graph import Graph
from graphc.ir.types import TensorType
from graphc.viz.painter import backward_nodes
from graphc.viz.viewer import hierarchy
from graphc.viz.viewer.page import embedded_json

F = gc.TensorSpec
DATA = re.compile(r'<script type="application/json" id="graph-data">(.*?)</script>', re.S)


def page_data(path: Path) -> dict:
    """The JSON document a written page embeds."""
    found = DATA.findall(path.read_text(encoding="utf-8"))
    assert len(found) == 1
    return json.loads(found[0])


def rnn_loop(xs, h, w, u):  # type: ignore[no-untyped-def]
    for t in range(xs.shape[0]):
        h = gc.tanh(xs[t] @ w + h @ u)
    return gc.mean(h * h)


def unrolled(steps: int) -> Graph:
    return gc.trace(rnn_loop, F((steps, 2, 3)), F((2, 4)), F((3, 4)), F((4, 4)))


def rnn_scan(h, xs, w):  # type: ignore[no-untyped-def]
    last, _ = gc.scan(lambda c, x: (gc.tanh(c @ w + x), c), h, xs)
    return gc.sum(last)


def count_nodes(g: Graph) -> int:
    return sum(
        1 + sum(count_nodes(v) for v in n.attrs.values() if isinstance(v, Graph)) for n in g.nodes
    )


def members(view: dict, group: int) -> list[int]:
    """The node ids inside a group (nested groups' and heads included)."""
    found, stack = [], [group]
    while stack:
        g = view["groups"][stack.pop()]
        found += [g["h"]] if "h" in g else []
        for child in g["c"]:
            if child < 0:
                stack.append(-1 - child)
            else:
                found.append(child)
    return found


def groups_of(view: dict, kind: str) -> list[int]:
    return [k for k, g in enumerate(view["groups"]) if g["k"] == kind]


# -- the page -------------------------------------------------------------------------


def test_page_is_self_contained(tmp_path: Path) -> None:
    path = gc.viz.view(unrolled(3), tmp_path / "rnn.html")
    text = path.read_text(encoding="utf-8")
    assert "<link" not in text and "@import" not in text and " src=" not in text
    assert "fetch(" not in text and "XMLHttpRequest" not in text and "import(" not in text
    # the only address in the page is the SVG namespace, which names, never fetches
    assert set(re.findall(r"https?://[^\s\"'<>)]*", text)) == {"http://www.w3.org/2000/svg"}
    # two scripts, both inline: the data and the viewer
    assert len(re.findall(r"<script\b", text)) == 2
    assert re.search(r"<script>\s*// graphc view", text)
    assert text.count("</script>") == 2


def test_data_describes_every_node_once(tmp_path: Path) -> None:
    g = gc.gradients(gc.trace(rnn_scan, F((2, 3)), F((4, 2, 3)), F((3, 3))), wrt=["w"])
    view = page_data(gc.viz.view(g, tmp_path / "scan.html"))["views"][0]
    assert len(view["nodes"]) == count_nodes(g)
    assert sorted(members(view, 0)) == list(range(len(view["nodes"])))
    for k, n in enumerate(view["nodes"]):  # each node's group lists it (or it heads it)
        group = view["groups"][n["p"]]
        assert k in group["c"] or group.get("h") == k
    top = {n.name: n for n in g.nodes}
    for entry in view["nodes"]:
        if entry["p"] == 0 and entry["n"] in top and entry["o"] != "result":  # (reads a body)
            node = top[entry["n"]]
            assert entry["t"] == str(node.type)
            assert [view["nodes"][i]["n"] for i in entry["i"]] == [x.name for x in node.inputs]


def test_source_lines_types_and_gradient_targets(tmp_path: Path) -> None:
    g = gc.gradients(unrolled(3), wrt=["w", "u"])
    view = page_data(gc.viz.view(g, tmp_path / "rnn.html"))["views"][0]
    tanh = next(n for n in view["nodes"] if n["o"] == "tanh")
    assert view["locs"][tanh["l"]].startswith(__file__)
    grads = {n["n"]: n["g"] for n in view["nodes"] if "g" in n and n["k"] == "output"}
    assert grads == {"grad_w": "w", "grad_u": "u"}
    matmul = next(n for n in view["nodes"] if n["o"] == "transpose" and "a" in n)
    assert matmul["a"][0][0] == "axes"


# -- the groups -----------------------------------------------------------------------


def test_scan_body_is_a_group_wired_to_its_operands(tmp_path: Path) -> None:
    g = gc.trace(rnn_scan, F((2, 3)), F((4, 2, 3)), F((3, 3)))
    view = page_data(gc.viz.view(g, tmp_path / "scan.html"))["views"][0]
    (control,) = groups_of(view, "control")
    group = view["groups"][control]
    assert group["n"].startswith("scan") and "length=4" in group["n"]
    head = view["nodes"][group["h"]]
    assert head["o"] == "scan" and head["p"] == control
    inside = [view["nodes"][i] for i in members(view, control) if i != group["h"]]
    body = next(v for v in g.nodes if v.op == "scan").attrs["body"]
    assert sorted(n["n"] for n in inside) == sorted(n.name for n in body.nodes)
    carry = next(n for n in inside if n.get("s") == "carry 0" and n["k"] == "placeholder")
    (operand,) = carry["i"]
    assert view["nodes"][operand]["n"] == "h"  # the scan's first operand feeds carry 0
    result = next(n for n in view["nodes"] if n["o"] == "result")  # reads a body output
    assert all(view["nodes"][i]["p"] == control for i in result["i"])


def pick(p, x, y):  # type: ignore[no-untyped-def]
    chosen = gc.cond(gc.sum(p) > 0, lambda a, b: a * b, lambda a, b: a - gc.exp(b), x, y)
    return gc.sum(chosen)


def test_cond_is_a_group_of_its_two_branches() -> None:
    g = gc.trace(pick, F((3,)), F((3,)), F((3,)))
    h = hierarchy.build(g)
    (cond,) = [x for x in h.groups if x.kind == "control"]
    assert h.nodes[cond.head].op == "cond"
    branches = [x for x in cond.items if isinstance(x, hierarchy.Group)]
    assert [(b.label, b.kind) for b in branches] == [("true", "body"), ("false", "body")]
    ops = [sorted(str(h.nodes[i].op) for i in b.items if h.nodes[i].op) for b in branches]
    assert ops == [["mul"], ["exp", "sub"]]
    # each branch's inputs read x and y (operands 1 and 2; operand 0 is the predicate)
    x0 = [i for b in branches for i in b.items if h.part[i] == "operand 0"]
    assert [h.nodes[h.inputs[i][0]].name for i in x0] == ["x", "x"]


def test_fused_bodies_stand_for_their_operands_and_value() -> None:
    g = gc.trace(lambda x: gc.sum(gc.tanh(x) * 2.0 + 1.0), F((4,)))
    fused = gc.fuse(g, backend="numpy")
    h = hierarchy.build(fused)
    (group,) = [x for x in h.groups if x.kind == "fused"]
    parts = sorted(h.part[i] for i in group.items if isinstance(i, int) and h.part[i])
    assert parts == ["operand 0", "value"]


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)

    def forward(self, x):  # type: ignore[no-untyped-def]
        with gc.name_scope("loss"):
            return gc.mean(self.head(self.encoder(x)))


def group_path(view: dict, node: dict) -> list[str]:
    names, k = [], node["p"]
    while k > 0:
        names.insert(0, view["groups"][k]["n"])
        k = view["groups"][k]["p"]
    return names


def test_module_and_name_scopes_nest_as_groups(tmp_path: Path) -> None:
    g = gc.trace(Net(), F(("B", 3)))
    view = page_data(gc.viz.view(g, tmp_path / "net.html"))["views"][0]
    for entry, node in zip(view["nodes"], g.nodes):
        scope = node.meta.get("scope")
        assert group_path(view, entry) == (scope.split("/") if scope else [])
        if scope:
            assert entry["c"] == scope
            assert view["groups"][entry["p"]]["k"] == "scope"
    paths = {tuple(group_path(view, e)) for e in view["nodes"]}
    assert {("encoder", "0"), ("encoder", "1"), ("head",), ("loss",)} <= paths
    encoder = next(k for k, grp in enumerate(view["groups"]) if grp["n"] == "encoder")
    assert view["groups"][encoder]["p"] == 0


def test_unrolled_loop_is_a_repeat_group_of_steps() -> None:
    g = unrolled(30)
    h = hierarchy.build(g)
    (run,) = [x for x in h.root.items if isinstance(x, hierarchy.Group) and x.kind == "repeat"]
    assert run.label.endswith("× 30")
    steps = [s for block in run.items for s in (block.items if block.kind == "block" else [block])]
    assert [s.label for s in steps] == [f"step {k}" for k in range(1, 31)]
    ops = [[h.nodes[i].op for i in s.items] for s in steps]
    assert all(step == ops[0] for step in ops) and "tanh" in ops[0]
    assert all(len(b.items) <= hierarchy.MAX_CHILDREN for b in h.groups)


def test_gradients_are_one_group_holding_the_backward_nodes() -> None:
    g = gc.gradients(unrolled(4), wrt=["w", "u"])
    h = hierarchy.build(g)
    (grads,) = [x for x in h.groups if x.kind == "backward"]
    inside = set()
    stack = [grads]
    while stack:
        group = stack.pop()
        for item in group.items:
            if isinstance(item, hierarchy.Group):
                stack.append(item)
            else:
                inside.add(h.nodes[item])
    assert inside == backward_nodes(g)


def test_a_small_graph_opens_whole_and_a_long_run_stays_closed() -> None:
    small = hierarchy.build(unrolled(3))
    opened = set(hierarchy.initial_open(small))
    assert opened == {g.id for g in small.groups}
    long = hierarchy.build(gc.gradients(unrolled(60), wrt=["w"]))
    opened = set(hierarchy.initial_open(long))
    assert hierarchy.visible_items(long, opened) <= hierarchy.INITIAL_BUDGET
    assert not any(g.kind == "step" and g.id in opened for g in long.groups)


def big_graph(nodes: int, seed: int = 0) -> Graph:
    """`nodes` nodes, each unary op reading one of the 50 values before it: no names,
    no repeats, no chains (built on the IR directly: tracing 50,000 ops is slow)."""
    rng = np.random.default_rng(seed)
    g = Graph("big")
    t = TensorType((4,), "float32")
    values = [g.add_placeholder("x", t)]
    ops = ["tanh", "exp", "sin", "neg", "relu"]
    for k in range(nodes - 2):
        source = values[int(rng.integers(max(0, k - 49), k + 1))]
        values.append(g.add_op(ops[int(rng.integers(5))], [source], {}, t))
    g.add_output(values[-1], "y")
    return g


def test_a_50000_node_graph_opens_with_a_few_boxes(tmp_path: Path) -> None:
    view = page_data(gc.viz.view(big_graph(50_000), tmp_path / "big.html"))["views"][0]
    assert len(view["nodes"]) == 50_000
    assert sorted(members(view, 0)) == list(range(50_000))
    groups, opened = view["groups"], set(view["open"])
    assert all(len(group["c"]) <= hierarchy.MAX_CHILDREN for group in groups)
    # what the page draws first: the children of the open groups whose ancestors are open
    drawn = [c for k in opened for c in groups[k]["c"] if k == 0 or groups[k]["p"] in opened]
    assert 0 < len(drawn) <= hierarchy.INITIAL_BUDGET


# -- names are data -------------------------------------------------------------------

HOSTILE = [
    "</script><script>alert('x')</script>",
    'say "hi" & <b>bold</b>',
    "ünïcødé ∂loss/∂w 名字",
    "line\u2028separator",
    "{{data}}",
]


def hostile_graph() -> Graph:
    """A graph whose every name and source line would be markup or code, were it not data."""
    g = Graph("</script>{{title}}")
    t = TensorType((2,), "float32")
    x = g.add_placeholder(HOSTILE[0], t, meta={"loc": "<img src=x onerror=alert(1)>:1"})
    y = g.add_op("tanh", [x], {}, t, name=HOSTILE[1])
    z = g.add_op("exp", [y], {}, t, name=HOSTILE[2])
    w = g.add_op("neg", [z], {}, t, name=HOSTILE[3])
    g.add_output(w, HOSTILE[4])
    return g


def test_hostile_names_stay_data(tmp_path: Path) -> None:
    g = hostile_graph()
    path = gc.viz.view(g, tmp_path / "hostile.html")
    text = path.read_text(encoding="utf-8")
    assert text.count("</script>") == 2 and "alert('x')</script>" not in text
    assert "<img" not in text and "<b>bold" not in text
    assert "<title>&lt;/script&gt;{{title}} · graphc view</title>" in text
    data = page_data(path)
    assert data["title"] == g.name
    assert [n["n"] for n in data["views"][0]["nodes"]] == HOSTILE
    assert data["views"][0]["locs"] == ["<img src=x onerror=alert(1)>:1"]


def test_embedded_json_reads_back_as_the_same_text() -> None:
    value = {"names": HOSTILE, "n": 3}
    text = embedded_json(value)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == value


# -- views ----------------------------------------------------------------------------


def test_pair_and_report_views(tmp_path: Path) -> None:
    g = unrolled(3)
    pair = gc.split_backward(g, wrt=["w"])
    _, report = gc.optimize(gc.gradients(g, wrt=["w"]), 2, explain=True)
    data = page_data(gc.viz.view({"split": pair, "O2": report}, tmp_path / "views.html"))
    names = [v["name"] for v in data["views"]]
    assert names[:2] == ["split: forward", "split: backward"]
    assert names[2] == "O2: before O2" and names[-1] == "O2: after O2"
    passes = names[3:-1]
    assert passes and all(re.fullmatch(r"O2: pass \d+ \w+ \(\+\d+ −\d+\)", p) for p in passes)
    backward = data["views"][1]
    assert {n["r"] for n in backward["nodes"] if n["k"] == "op"} <= {"backward", "constant"}
    assert any(n["r"] == "saved" for n in backward["nodes"])
    roles = {n["r"] for v in data["views"][3:-1] for n in v["nodes"]}
    assert {"added", "removed"} <= roles


def test_view_refuses_what_it_cannot_show_naming_what_it_takes() -> None:
    with pytest.raises(gc.GraphcError, match=r"cannot show a int; expected a Graph"):
        gc.viz.view(42)


def test_view_defaults_to_a_temporary_folder() -> None:
    path = gc.viz.view(unrolled(2), title="test_view default/path")
    assert path.parent.name == "graphc-view" and path.name == "test_view_default_path.html"
    assert page_data(path)["title"] == "test_view default/path"
    path.unlink()


# -- the command ----------------------------------------------------------------------

MODEL = """
import graphc as gc

def model(x, w):
    return gc.mean(gc.tanh(x @ w))
"""


def test_graphc_view_writes_forward_backward_and_pass_views(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "model.py"
    source.write_text(MODEL)
    out = tmp_path / "model.html"
    args = ["view", f"{source}:model", "--spec", "B,3", "--spec", "3,2", "-o", str(out)]
    assert main([*args, "--backward", "--wrt", "w", "--opt-level", "1"]) == 0
    assert str(out) in capsys.readouterr().out
    names = [v["name"] for v in page_data(out)["views"]]
    assert names[:2] == ["forward", "forward + backward"]
    assert names[2].startswith("O1: before") and names[-1] == "O1: after O1"
    joint = page_data(out)["views"][1]
    assert {n["n"] for n in joint["nodes"] if "g" in n and n["k"] == "output"} == {"grad_w"}
    assert main([*args, "--fuse", "numpy"]) == 2
    assert "--fuse needs --opt-level" in capsys.readouterr().err


def test_graphc_view_reads_an_onnx_model(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    g = unrolled(2)
    model = gc.onnx.export_model(g)
    (tmp_path / "rnn.onnx").write_bytes(model.SerializeToString())
    out = tmp_path / "rnn.html"
    assert main(["view", str(tmp_path / "rnn.onnx"), "-o", str(out)]) == 0
    view = page_data(out)["views"][0]
    assert len(view["nodes"]) == len(gc.onnx.import_model(str(tmp_path / "rnn.onnx")).nodes)
