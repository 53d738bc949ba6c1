"""conv2d_fused on the native backend: numpy's convolution, then the body as one C kernel
per chunk of images, with numpy's bits on hostile values for every kind of operand the
kernel takes (per channel, one row per image, broadcast blocks, strided broadcasts,
one element, constants in the body), in any chunking."""

from __future__ import annotations

import pytest

import graphc as gc
from graphc.ir.graph import Graph
from graphc.ops import conv_kernels
from graphc.ops.conv_ops import conv2d
from tests.edge_values import sprinkled_feeds
from tests.native_checks import check_native, every_size, needs_native  # noqa: F401 - a fixture

pytestmark = needs_native

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
    check_native(g, [sprinkled_feeds(g, 0), sprinkled_feeds(g, 1)], levels=(0, 2))


def test_large_outputs_only_by_default() -> None:
    """Without every_size, a body on fewer than native.SMALL elements stays on numpy."""
    g = _graph("per channel", "float32")
    steps = gc.compile(g, backend="native").explain().splitlines()
    line = next(x for x in steps if "conv2d_fused(" in x)
    assert "[numpy]" in line
