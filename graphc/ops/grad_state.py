"""Whether ops record what gradients need, per thread: PyTorch's grad mode.

One switch for both kinds of value. The eager tape reads it (graphc/eager/grad_mode.py
turns it: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`), and so does
tracing (symbolic.py): a graph value computed under `no_grad` from one that may carry
a gradient is held behind gc.stop_gradient's node, so that gradients of the traced
graph skip it, as torch's skip a result computed under `no_grad`.
"""

from __future__ import annotations

import threading


class _GradState(threading.local):
    enabled = True


STATE = _GradState()
