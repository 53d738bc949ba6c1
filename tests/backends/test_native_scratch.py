"""Native kernels that allocate scratch memory report a failed allocation, and the plan
raises MemoryError naming the op, instead of writing through a null pointer.

layer_norm_grad (a centered row per thread), log_softmax (a row of exps per thread) and
the attention node in C (a block of scores per thread) malloc their scratch; the
direct convolution keeps its tap offsets in the padded buffer the plan allocates. The
tests build those kernels with malloc defined to fail (the C text is the module's own,
with `#define malloc(n) NULL` around it) and check the error on one thread and on the
pool; the same graphs with the real kernels run and give numpy's results.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import attention, c_sources, norm, rows
from tests.backends.test_native_attention_c import _graph as attention_graph
from tests.native_checks import (
    direct_kernel_everywhere,  # noqa: F401 - a fixture
    needs_native,
)

# the kernel's own tests: it runs wherever it applies, on any processor
pytestmark = [needs_native, pytest.mark.usefixtures("direct_kernel_everywhere")]


def failing_malloc(source: str) -> str:
    """`source` with every malloc in it returning NULL."""
    return f"#define malloc(n) ((void *)0)\n{source}\n#undef malloc\n"


def _layer_norm_grad_graph() -> gc.Graph:
    g = gc.Graph("layer_norm_grad")
    with g:
        x = gc.placeholder("x", (6, 40), "float32")
        d = gc.placeholder("d", (6, 40), "float32")
        gc.output(gc.layer_norm_grad(x, d, axis=1), name="dx")
    return g


def _log_softmax_graph() -> gc.Graph:
    g = gc.Graph("log_softmax")
    with g:
        x = gc.placeholder("x", (6, 40), "float32")
        gc.output(gc.log_softmax(x * 2.0, axis=1), name="y")
    return g


def _feeds(graph: gc.Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        p.name: rng.standard_normal(p.type.shape).astype(np.float32)  # type: ignore[arg-type]
        for p in graph.inputs
    }


def _break(monkeypatch: pytest.MonkeyPatch, case: str, parallel: bool) -> None:
    """Make `case`'s kernel fail its mallocs, on the pool or on one thread."""
    work = 0 if parallel else 1 << 62
    if case == "layer_norm_grad":
        kernel = norm.LAYER_NORM_GRAD
        monkeypatch.setattr(
            norm,
            "LAYER_NORM_GRAD",
            dataclasses.replace(kernel, source=failing_malloc(kernel.source)),
        )
        monkeypatch.setattr(norm, "PARALLEL_WORK", work)
    elif case == "log_softmax":
        monkeypatch.setattr(rows, "instance", _failing_instance)
        monkeypatch.setattr(rows, "PARALLEL_SOFTMAX", work)
    else:
        monkeypatch.setattr(attention, "instance", _failing_instance)
        monkeypatch.setattr(attention, "PARALLEL_WORK", work)


def _failing_instance(name: str, defines: dict[str, str]) -> str:
    """A csrc template's instance whose mallocs fail (c_sources.instance's stand-in)."""
    return failing_malloc(c_sources.instance(name, defines))


def _case(case: str) -> tuple[gc.Graph, dict[str, Any]]:
    if case == "attention":  # float64: native fuses float32 attention no more (2291c59)
        graph = attention_graph(2, 8, np.float64)
        return graph, {"x": np.random.default_rng(1).standard_normal((3, 16, 16))}
    graph = _layer_norm_grad_graph() if case == "layer_norm_grad" else _log_softmax_graph()
    return graph, _feeds(graph)


CASES = ["layer_norm_grad", "log_softmax", "attention"]


@pytest.mark.parametrize("parallel", [False, True], ids=["one thread", "pool"])
@pytest.mark.parametrize("case", CASES)
def test_a_failed_scratch_allocation_raises_memory_error_naming_the_op(
    monkeypatch: pytest.MonkeyPatch, case: str, parallel: bool
) -> None:
    _break(monkeypatch, case, parallel)
    graph, feeds = _case(case)
    exe = gc.compile(graph, opt_level=2, backend="native")
    with pytest.raises(MemoryError, match=f"native kernel for {case}"):
        exe(**feeds)


@pytest.mark.parametrize("case", CASES)
def test_the_same_kernels_run_when_malloc_works(case: str) -> None:
    graph, feeds = _case(case)
    got = gc.compile(graph, opt_level=2, backend="native")(**feeds)
    want = gc.compile(graph, opt_level=2, backend="numpy")(**feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
