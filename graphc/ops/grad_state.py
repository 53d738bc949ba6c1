"""Whether ops record what gradients need, per thread: PyTorch's grad mode.

One switch for both kinds of value. The eager tape reads it (graphc/eager/grad_mode.py
turns it: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`), and so does
tracing (symbolic.py): a graph value computed under `no_grad` from one that may carry
a gradient is held behind gc.stop_gradient's node, so that gradients of the traced
graph skip it, as torch's skip a result computed under `no_grad`. The transformations
that differentiate trace with it on (`grad_enabled`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _GradState(threading.local):
    enabled = True


STATE = _GradState()


@contextmanager
def grad_enabled() -> Iterator[None]:
    """Grad mode on for the block: a transformation that differentiates the function it
    traces (gc.grad, vjp, jvp, a compiled training step) traces it so, whatever mode its
    caller is in, as torch.func's transforms ignore an outer no_grad (a no_grad inside
    the function still holds)."""
    saved, STATE.enabled = STATE.enabled, True
    try:
        yield
    finally:
        STATE.enabled = saved
