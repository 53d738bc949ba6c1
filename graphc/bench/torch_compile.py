"""PyTorch under `torch.compile` (inductor), the "torch-compile" mode of the model workloads.

The builder compiles outside timing, like graphc's static modes: it makes the first call
(dynamo traces, inductor generates and builds C++ kernels; the note says how long that
took, which depends on inductor's on-disk cache) and then resets what that call changed
(a training step's parameters), so the runner's first call is step one, as in every
other mode. If compiling fails here (no C++ compiler, an unsupported platform) the mode
is `UnavailableError` with the reason, not an error of the benchmark.

Each compiled function starts from `torch._dynamo.reset()`: the builders compile
closures of one code object over new modules, and dynamo would otherwise count each as
a recompile and silently fall back to eager past its cache limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.bench.core import TORCH_COMPILE, Prepared, UnavailableError
from graphc.bench.report import seconds

# compiling takes seconds to a minute per model (more with a cold cache): full runs only
QUICK_SKIP = {TORCH_COMPILE: "compiling takes 5-60 s; measured in the full run"}
TRAIN_NOTE = "model + loss compiled (backward through AOTAutograd); foreach SGD eager"


def compiled(torch: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` under `torch.compile` for fixed shapes, from a clean dynamo cache."""
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def prepared(
    call: Callable[[], Any],
    arrays: Callable[[Any], Sequence[np.ndarray]],
    note: str,
    reset: Callable[[], Any] | None = None,
) -> Prepared:
    """A compiled call, compiled by calling it once (then `reset()`), ready to time."""
    start = time.perf_counter()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - any failure to compile means "not here"
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UnavailableError(
            f"torch.compile does not work here: {type(exc).__name__}: {first_line[:200]}"
        ) from exc
    took = time.perf_counter() - start
    if reset is not None:
        reset()
    return Prepared(call, arrays, None, note=f"{note}; first call (compiles) {seconds(took)}")
