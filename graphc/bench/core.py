"""What a benchmark is made of: workloads, their cases, modes, and prepared calls.

A `Workload` has cases (one per size) and, per mode, a builder. A builder gets the
case's parameters and the case's shared inputs and returns a `Prepared`: a call with
no arguments (the thing timed, with any compilation already done), a way to turn
that call's return value into arrays (checked against the other modes once), and the
bytes the mode keeps allocated between calls (a compiled plan's arena, preallocated
scratch), which count toward its peak memory.

Builders raise `UnavailableError` when a peer library is not importable and
`NotApplicableError` when the mode does not exist for the workload (numpy has no
compile step, fast_math rewrites nothing in the tiny graph), so every mode appears in
every workload's report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# the modes, in report order; "O2" is the one every ratio is taken against. graphc's
# static levels are exact (bit-identical to O0); "graphc-O2-fast_math" also allows the
# value-changing rewrites, and runs only where they change the plan. "graphc-O2-scan"
# is a loop compiled as one gc.scan node, in the workloads that have a loop (there
# "graphc-O2" is the loop unrolled). "torch-compile" is PyTorch under `torch.compile`
# (inductor), in the model workloads. "onnxruntime-1thread" and "onnxruntime" (default
# threads) run ONNX models in the `onnx` workload. A workload's table shows the modes it
# declares.
MODES: tuple[str, ...] = (
    "graphc-eager",
    "graphc-O0",
    "graphc-O2",
    "graphc-O2-fast_math",
    "graphc-O2-scan",
    "numpy",
    "numpy-chunked",
    "torch",
    "torch-compile",
    "jax",
    "onnxruntime-1thread",
    "onnxruntime",
)
BASELINE = "graphc-O2"
FAST_MATH = "graphc-O2-fast_math"
SCAN = "graphc-O2-scan"
TORCH_COMPILE = "torch-compile"


class UnavailableError(Exception):
    """The mode's library is not installed here."""


class NotApplicableError(Exception):
    """The mode has no meaning for this workload (e.g. numpy's compile time)."""


@dataclass
class Prepared:
    """A mode ready to time: `call()` runs once; `arrays(ret)` gives checkable results."""

    call: Callable[[], Any]
    arrays: Callable[[Any], Sequence[np.ndarray]] = lambda ret: as_arrays(ret)
    resident_bytes: int | None = 0  # None: memory is not measurable (torch, jax internals)
    note: str = ""
    single_shot: bool = False  # each call is expensive (compile time): fewer repeats


@dataclass
class Case:
    """One size of a workload: a label for the table and parameters for the builders."""

    label: str
    params: dict[str, Any]
    quick: bool = True  # part of `--quick`
    full: bool = True  # part of the full run
    skip_modes: dict[str, str] = field(default_factory=dict)  # mode -> reason
    quick_skip_modes: dict[str, str] = field(default_factory=dict)  # skipped with --quick


@dataclass
class Workload:
    """A named computation, its cases and one builder per mode."""

    name: str
    description: str
    unit: str  # what one call is: "call", "step", "compile"
    cases: list[Case]
    make_inputs: Callable[[dict[str, Any]], dict[str, Any]]
    builders: dict[str, Callable[[dict[str, Any], dict[str, Any]], Prepared]]
    tolerance: float = 1e-4  # max |a - b| / max |reference| for results to agree
    reference: str = "numpy"  # the mode other modes are checked against


def as_arrays(value: Any) -> list[np.ndarray]:
    """A call's return value (array, tensor, tuple of them) as a list of numpy arrays."""
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in as_arrays(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in as_arrays(v)]
    if hasattr(value, "detach"):  # torch tensor
        value = value.detach().numpy()
    elif hasattr(value, "numpy") and not isinstance(value, np.ndarray):  # graphc eager
        value = value.numpy()
    return [np.asarray(value)]


def relative_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """Largest |got - want| over the largest |want|, across all result arrays."""
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for a, b in zip(got, want):
        a = np.asarray(a, np.float64).ravel()
        b = np.asarray(b, np.float64).ravel()
        if a.shape != b.shape:
            return float("inf")
        if b.size == 0:
            continue
        scale = max(float(np.max(np.abs(b))), 1e-30)
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst
