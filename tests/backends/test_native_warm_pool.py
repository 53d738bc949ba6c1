"""Kernels of middling size go parallel only while the pool is warm
(calls.POOL_CLOCK; cexpr.PRELUDE's gc_pool_warm and gc_pool_used).

Each kernel library is bound to the process's one clock as it loads. A parallel region
stamps the clock when it ends; a kernel between its warm and its cold threshold enters
the pool only while the stamp is younger than the window (how long idle workers spin,
set from the OpenMP environment graphc chose or the user's). Checked per kind of
kernel (elementwise, column sum, log_softmax, matmul) by what the clock sees: an
always-warm window makes the kernel run a region (the stamp moves), a zero window keeps
it on the calling thread (the stamp stays), and the results are the same bits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import calls, kernels, matmul, outer, pool, rows, threads
from tests.edge_values import bits_differ
from tests.native_checks import needs_native

pytestmark = needs_native

RNG = np.random.default_rng(4)
F32 = np.float32


@pytest.fixture
def clock() -> Iterator[np.ndarray]:
    """calls.POOL_CLOCK, restored afterwards."""
    saved = calls.POOL_CLOCK.copy()
    yield calls.POOL_CLOCK
    calls.POOL_CLOCK[:] = saved


# (name, function, inputs): each between its kernel's warm and cold thresholds
MIDDLING: list[tuple[str, Callable, tuple[np.ndarray, ...]]] = [
    ("elementwise", lambda a: a * 3.0 - 1.0, (RNG.standard_normal(200_000).astype(F32),)),
    (
        "costly_elementwise",
        lambda a: gc.tanh(gc.sigmoid(a)),
        (RNG.standard_normal(8192).astype(F32),),
    ),
    (
        "column_sum",
        lambda a: gc.sum(a, axis=0),
        (RNG.standard_normal((512, 256)).astype(F32),),
    ),
    (
        "log_softmax",
        lambda a: gc.log_softmax(a, axis=-1),
        (RNG.standard_normal((512, 10)).astype(F32),),
    ),
    (
        "matmul",
        lambda a, b: a @ b,
        (RNG.standard_normal((32, 64)).astype(F32), RNG.standard_normal((64, 320)).astype(F32)),
    ),
    (
        "max_pool2d",
        lambda a: gc.max_pool2d(a, 2),
        (RNG.standard_normal((64, 16, 10, 10)).astype(F32),),
    ),
    (
        "max_pool2d_3x3",
        lambda a: gc.max_pool2d(a, 3, stride=1),
        (RNG.standard_normal((16, 16, 10, 10)).astype(F32),),
    ),
    (  # the digits MLP's per-example gradients of its last layer, rows split mid-matrix
        "stacked_outer",
        lambda a, b: a @ b,
        (
            RNG.standard_normal((255, 63, 1)).astype(F32),
            RNG.standard_normal((255, 1, 10)).astype(F32),
        ),
    ),
]


def test_the_cases_lie_between_the_thresholds() -> None:
    """Guards MIDDLING against threshold changes that would make the test below vacuous."""
    n = 200_000
    ops = ["mul", "sub"]
    assert kernels.warm_min(ops) <= n < kernels.parallel_min(ops)
    costly = ["sigmoid", "tanh"]  # a GRU's gates: a few thousand elements are worth two threads
    assert kernels.warm_min(costly) <= 8192 < kernels.PARALLEL_MIN <= kernels.parallel_min(costly)
    assert rows.WARM_SUM <= 512 * 256 < rows.PARALLEL_SUM
    assert rows.WARM_SOFTMAX <= 512 * 10 < rows.PARALLEL_SOFTMAX
    assert matmul.WARM_WORK <= 32 * 64 * 320 < matmul.PARALLEL_WORK
    for work in (64 * 16 * 5 * 5 * 4, 16 * 16 * 8 * 8 * 9):
        assert pool.WARM_WORK <= work < pool.PARALLEL_WORK
    assert outer.WARM_WORK <= 255 * 63 * 10 < outer.PARALLEL_WORK


@pytest.mark.parametrize(("name", "fn", "inputs"), MIDDLING, ids=[m[0] for m in MIDDLING])
def test_a_middling_kernel_enters_the_pool_only_while_it_is_warm(
    name: str, fn: Callable, inputs: tuple[np.ndarray, ...], clock: np.ndarray
) -> None:
    exe = gc.compile(gc.trace(fn, *inputs), backend="native")
    assert "[native]" in exe.explain(*inputs)
    clock[:] = (0, 0)  # never warm: the kernel stays on the calling thread
    cold = exe(*inputs)
    assert clock[0] == 0, f"{name} ran a parallel region with a cold pool"
    clock[:] = (1, 1 << 62)  # always warm: it runs on the pool and stamps the clock
    warm = exe(*inputs)
    assert clock[0] > 1, f"{name} stayed on one thread with a warm pool"
    assert bits_differ(warm, cold) is None, bits_differ(warm, cold)


@pytest.mark.parametrize("kind", ["elementwise", "conv2d"])
def test_a_parallel_region_stamps_the_clock(kind: str, clock: np.ndarray) -> None:
    """A kernel above its cold threshold runs a region whatever the window, and the
    stamp is a CLOCK_MONOTONIC time in ns: an elementwise kernel, and the direct
    convolution (so that LeNet's pool after it finds the pool warm)."""
    if kind == "elementwise":
        args = (RNG.standard_normal(1 << 22).astype(F32),)
        exe = gc.compile(gc.trace(lambda a: a * 3.0 - 1.0, *args), backend="native")
    else:
        args = (
            RNG.standard_normal((64, 1, 28, 28)).astype(F32),
            RNG.standard_normal((6, 1, 5, 5)).astype(F32),
        )
        exe = gc.compile(gc.trace(lambda x, w: gc.conv2d(x, w, padding=2), *args), backend="native")
        assert "gc_direct_conv2d_f32" in exe.source(*args), exe.source(*args)
    clock[:] = (0, 0)
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    exe(*args)
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert before <= clock[0] <= after


@pytest.mark.parametrize(
    ("environment", "setter", "window", "set_here"),
    [
        ({}, True, threads.WARM_NS, {"GOMP_SPINCOUNT": threads.SPIN_COUNT}),
        ({}, False, 0, {"OMP_WAIT_POLICY": "PASSIVE"}),
        ({"OMP_WAIT_POLICY": "active"}, True, threads.ACTIVE_NS, {}),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, True, 0, {}),
        ({"GOMP_SPINCOUNT": "5"}, True, 0, {}),
        ({"OMP_WAIT_POLICY": "active", "GOMP_SPINCOUNT": "5"}, True, 0, {}),
    ],
)
def test_the_window_follows_the_openmp_environment(
    environment: dict[str, str],
    setter: bool,
    window: int,
    set_here: dict[str, str],
    clock: np.ndarray,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """graphc's own spin count gives WARM_NS; a policy that sleeps (graphc's passive one
    when OpenBLAS keeps its pool, or the user's), or a spin count of the user's whose
    length is unknown, gives 0; the user's active policy gives ACTIVE_NS. Set once."""
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(threads, "_state", {})
    monkeypatch.setattr(threads, "_setter", lambda: (None, "x") if setter else "none here")
    clock[1] = -1
    threads.openmp_environment()
    assert clock[1] == window
    for key, value in set_here.items():
        assert os.environ[key] == value
    clock[1] = -1
    threads.openmp_environment()  # once per process: a second call changes nothing
    assert clock[1] == -1
