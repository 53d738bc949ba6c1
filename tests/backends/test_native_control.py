"""Control flow on the native backend: the bodies of cond, scan and while_loop are
planned on native, give numpy's bits with exact ops, and their kernels are built in the
same compiler call as the enclosing plan's (one library per graph); explain marks the
bodies' steps; a failing build falls back to numpy for the bodies too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import toolchain
from tests.edge_values import bits_differ
from tests.native_checks import (
    check_native,
    compiler_fixture,  # noqa: F401 - a fixture
    every_size,  # noqa: F401 - a fixture
    failing_compiler,
    graphc_warnings,
    needs_native,
    normwise,
)

pytestmark = [needs_native, pytest.mark.usefixtures("every_size")]


def _counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kernels' build requests (toolchain.build_units calls that may run the
    compiler), in order: each request's units joined into one text. A lookup that may
    not compile (`compile=False`: the loop runner binding the library its graph's build
    made) is not a build."""
    builds: list[str] = []
    build_units = toolchain.build_units

    def counting(sources: list[str], prelude: str = "", compile: bool = True) -> dict:
        if compile:
            builds.append("\n".join(sources))
        return build_units(sources, prelude, compile)

    monkeypatch.setattr(toolchain, "build_units", counting)
    return builds


@pytest.mark.parametrize("body_op", ["exact", "tanh"])
def test_scan_body_runs_on_native(monkeypatch: pytest.MonkeyPatch, body_op: str) -> None:
    """Guards control flow: a scan's body is planned on native (its kernels are built)
    and gives numpy's bits with exact ops, native's own bits at every level with tanh."""
    builds = _counting_builds(monkeypatch)
    g = gc.Graph(f"scan_{body_op}")
    with g:
        h0 = gc.placeholder("h", shape=(3,), dtype="float32")
        xs = gc.placeholder("xs", shape=("T", 3), dtype="float32")

        def body(h: gc.Symbol, x: gc.Symbol) -> tuple[gc.Symbol, gc.Symbol]:
            h2 = h * 0.5 + x * x - gc.abs(x)
            return h2, gc.tanh(h2) if body_op == "tanh" else gc.maximum(h2, x)

        h, ys = gc.scan(body, h0, xs)
        gc.output(h, name="h_final")
        gc.output(ys, name="ys")
    rng = np.random.default_rng(10)
    feeds = {"h": np.ones(3, np.float32), "xs": rng.standard_normal((6, 3)).astype(np.float32)}
    check_native(g, [feeds], close=normwise(2.0**-16), close_sets=(0,))
    assert any("gk_" in source for source in builds), "no native kernel was built for the body"


def _branchy(outer_work: bool) -> gc.Graph:
    """cond, scan and while_loop, each body with a tanh (always native), and optionally
    native work outside them."""
    g = gc.Graph("branchy")
    with g:
        x = gc.placeholder("x", shape=("B", 8), dtype="float32")
        start = gc.tanh(x) * 0.5 if outer_work else x
        y = gc.cond(gc.sum(x) > 0, lambda v: gc.tanh(v) * 2.0, lambda v: gc.tanh(v) - 1.0, start)
        y = gc.fori_loop(0, 3, lambda i, v: gc.tanh(v * 0.5), y)
        y = gc.while_loop(lambda v: gc.max(gc.abs(v)) > 0.1, lambda v: gc.tanh(v) * 0.5, y)
        gc.output(y, name="y")
    return g


@pytest.mark.parametrize("outer_work", [True, False])
def test_bodies_are_built_with_the_enclosing_plan(
    monkeypatch: pytest.MonkeyPatch, compiler: Callable[[str], None], outer_work: bool
) -> None:
    """Guards "one build per graph": the kernels of every body are built with the
    outermost plan's, also when the outer plan itself lowers nothing (its kernels must
    still be built and bound, or the bodies would call None); explain marks the bodies'
    steps and says where their kernels are."""
    compiler(str(toolchain.toolchain().compiler))  # a fresh cache: a real build  # type: ignore[union-attr]
    builds = _counting_builds(monkeypatch)
    g = _branchy(outer_work)
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    exe = gc.compile(g, backend="native")
    got = exe(x)
    want = gc.compile(g, backend="numpy")(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(builds) == 1, f"{len(builds)} build requests for one graph"
    text = exe.explain(x)
    assert text.count("in the enclosing plan's libraries") >= 4, text
    assert "control-flow bodies)" in text, text
    body_lines = [line for line in text.splitlines() if line.startswith("               ")]
    assert any(line.endswith("[native]") for line in body_lines), text
    assert "tanh_f32" in exe.source("c", x)  # the bodies' C is shown with the outer plan's


def test_bodies_fall_back_with_the_enclosing_plan(
    compiler: Callable[[str], None], tmp_path: Path
) -> None:
    """Guards the fallback for control flow: a build that fails takes the whole graph,
    bodies included, to numpy with one warning, and the values are numpy's bits."""
    compiler(failing_compiler(tmp_path, "kernels.c:1:1: error: graphc test refuses kernels"))
    g = _branchy(True)
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = gc.compile(g, backend="native")
        got = exe(x)
    assert len(graphc_warnings(caught)) == 1, graphc_warnings(caught)
    assert bits_differ(got, gc.compile(g, backend="numpy")(x)) is None
    assert "[native]" not in exe.explain(x)
