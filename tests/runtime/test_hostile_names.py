"""Names are data, never code: hostile value and graph names through every way in.

A name holding a newline used to be pasted into a comment of the generated plan, so
the line after it ran as code when the compiled graph was called; names with a
newline and a quote made `gc.compile` fail with a raw SyntaxError.
"""

from __future__ import annotations

import io
import json
import tokenize

import numpy as np
import pytest

import graphc as gc
from tests.differential import check_levels

SIDE_EFFECTS: list[str] = []


def _payload(tag: str) -> str:
    # if this ever runs, it records itself in SIDE_EFFECTS (a test assertion then fails)
    return f"x\n__import__('tests.runtime.test_hostile_names').runtime.test_hostile_names.SIDE_EFFECTS.append('{tag}')\n#"


HOSTILE = [
    _payload("a"),
    'q"\n\'"""\n',
    "back\\slash\\n",
    "#",
    "%",
    " ",
    "é\u2028ünï\u0085",
    "__builtins__",
    "None",
    "run",
    "arena",
    "1abc",
    "x" * 300,
]


def _code_names(source: str) -> set[str]:
    """The identifiers of the code (comments and string literals are not code)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.string for t in tokens if t.type == tokenize.NAME}


def _declared(names: list[str]) -> gc.Graph:
    g = gc.Graph(names[0] or "g")
    with g:
        x = gc.placeholder(names[0], shape=(4,), dtype="float64")
        y = gc.placeholder(names[1], shape=(4,), dtype="float64")
        z = gc.exp(x) * y + 1.0
        w = gc.tanh(z) - x
        gc.output(w, name=names[2])
        gc.output(gc.sum(z * w), name=names[3])
    return g


def _rename_ops(g: gc.Graph, names: list[str]) -> gc.Graph:
    """The same graph with its op nodes named after `names` too (through JSON)."""
    document = json.loads(gc.to_json(g))
    mapping = {}
    k = 0
    for entry in document["nodes"]:
        if entry["kind"] == "op":
            mapping[entry["name"]] = f"{names[k % len(names)]}{k}"
            k += 1
    for entry in document["nodes"]:
        entry["name"] = mapping.get(entry["name"], entry["name"])
        if "inputs" in entry:
            entry["inputs"] = [mapping.get(n, n) for n in entry["inputs"]]
    return gc.from_json(json.dumps(document))


@pytest.mark.parametrize("start", range(len(HOSTILE)))
@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_hostile_names_compile_and_run_through_every_loader(start: int, opt_level: int) -> None:
    names = [HOSTILE[(start + k) % len(HOSTILE)] + "_" * k for k in range(4)]
    declared = _declared(names)
    graphs = {
        "declared": declared,
        "text": gc.parse(str(declared)),
        "json": gc.from_json(gc.to_json(declared)),
        "op names": _rename_ops(declared, HOSTILE),
    }
    rng = np.random.default_rng(start)
    feeds = [rng.standard_normal(4), rng.standard_normal(4)]
    want = declared(*feeds)
    for how, g in graphs.items():
        gc.verify(g)
        named = dict(zip([p.name for p in g.inputs], feeds))
        for a, b in zip(gc.run(g, named), want):  # the loader kept the graph
            np.testing.assert_array_equal(a, b, err_msg=how)
        # and compiled it runs so: bit for bit on numpy, on native exp and tanh within
        # their declared bounds (tests/differential.py)
        check_levels(g, [named], levels=(opt_level,))
        exe = gc.compile(g, opt_level=opt_level)
        source = exe.source()
        compile(source, "<check>", "exec")  # the whole source is valid Python
        assert "__import__" not in _code_names(source), how
    assert SIDE_EFFECTS == []


def test_hostile_state_names_with_updates() -> None:
    name = _payload("state")
    g = gc.Graph("g")
    with g:
        w = gc.placeholder(name, shape=(3,), dtype="float64")
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        gc.output(gc.sum(w * x), name="loss")
        gc.output(w - 0.5 * x, name=name + "_new")
    exe = gc.compile(gc.parse(str(g)), updates={name: name + "_new"})
    exe.set_state(**{name: np.ones(3)})
    exe(np.ones(3))
    np.testing.assert_array_equal(exe.state[name], np.full(3, 0.5))
    assert SIDE_EFFECTS == []


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_name_must_be_a_non_empty_string(name: object) -> None:
    # the declare API says so itself, naming the call (2cbe11f), before the graph's check
    g = gc.Graph("g")
    with g, pytest.raises(gc.GraphcError, match="placeholder: expected a non-empty str"):
        gc.placeholder(name, shape=(2,))  # type: ignore[arg-type]
