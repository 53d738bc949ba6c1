"""conv2d_fused's body on the native backend: one C kernel per chunk of images, for every
kind of operand the kernel takes (per channel, one row per image, broadcast blocks,
strided broadcasts, one element, constants in the body), in any chunking: numpy's bits
after numpy's float64 convolution, the same bits at every level after the direct
float32 one (tests/backends/test_native_direct_conv.py holds that one to its bound)."""

from __future__ import annotations

import pytest

import graphc as gc
from graphc.backends.native import direct_conv
from graphc.ir.graph import Graph
from graphc.ops import conv_kernels
from graphc.ops.conv_ops import conv2d
from tests.edge_values import sprinkled_feeds
from tests.native_checks import (  # noqa: F401 - a fixture
    check_native,
    direct_kernel_everywhere,  # noqa: F401 - a fixture
    every_size,
    needs_native,
)

# the kernel's own tests: it runs wherever it applies, on any processor
pytestmark = [needs_native, pytest.mark.usefixtures("direct_kernel_everywhere")]

N, C, H, W = 3, 4, 9, 8

OTHERS = {
    "per channel": (C, 1, 1),  # BLOCK
    "per image": (N, C, H, W),  # FULL, cut to each chunk's images
    "one image": (1, C, H, W),  # BLOCK over (C, H, W)
    "per row and channel": (N, C, 1, 1),  # BLOCK whose size follows the chunk
    "channel and column": (C, 1, W),  # STRIDED
    "one element": (1,),  # SCALAR
}


def _graph(kind: str, dtype: str) -> Graph:
    """relu((conv - m) * s + o + 0.5) for o of the kind's shape, m and s per channel."""
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", (N, C, H, W), dtype)
        w = gc.placeholder("w", (C, C, 3, 3), dtype)
        m = gc.placeholder("m", (C, 1, 1), dtype)
        s = gc.placeholder("s", (C, 1, 1), dtype)
        o = gc.placeholder("o", OTHERS[kind], dtype)
        gc.output(gc.relu((conv2d(x, w, padding=1) - m) * s + o + 0.5), name="y")
    return g


@pytest.mark.usefixtures("every_size")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", list(OTHERS))
@pytest.mark.parametrize("chunk", ["default", "one image"])
def test_the_body_runs_in_c_with_numpys_bits(
    kind: str, dtype: str, chunk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = _graph(kind, dtype)
    exe = gc.compile(g, backend="native")
    fused = [line for line in exe.explain().splitlines() if "conv2d_fused(" in line]
    assert len(fused) == 1 and "[native]" in fused[0], exe.explain()
    if chunk == "one image":
        monkeypatch.setattr(conv_kernels, "SCRATCH_BYTES", 1)
        monkeypatch.setattr(direct_conv, "CHUNK_BYTES", 1)
    check_native(g, [sprinkled_feeds(g, 0), sprinkled_feeds(g, 1)], levels=(0, 2))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_small_outputs_run_the_body_in_c(dtype: str) -> None:
    """Without every_size, a body on fewer than native.SMALL elements still runs as its
    C kernel (numpy's ops on it measured slower, and a kernel of one size serves every
    batch): a float64 step runs numpy's convolution and the body in C, a float32 one the
    direct convolution with the body in its epilogue (one C kernel)."""
    g = _graph("per channel", dtype)
    text = gc.compile(g, backend="native").explain()
    line = next(x for x in text.splitlines() if "conv2d_fused(" in x)
    assert "[native]" in line, text
    if dtype == "float32":
        assert "native: 1 C kernel(s) for 1 step(s)" in text, text
