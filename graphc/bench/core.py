"""What a benchmark is made of: workloads, their cases, modes, and prepared calls.

A `Workload` has cases (one per size) and, per mode, a builder. A builder gets the
case's parameters and the case's shared inputs and returns a `Prepared`: a call with
no arguments (the thing timed, with any compilation already done), a way to turn
that call's return value into arrays (checked against the other modes once), and the
bytes the mode keeps allocated between calls (a compiled plan's arena, preallocated
scratch), which count toward its peak memory.

A workload may also declare cold starts (`Workload.first_result`): per mode, a function
that prepares what a user already has (a model, input arrays) and returns a call going
from nothing to the first result (trace, compile, first call), timed on a cold cache by
`graphc.bench.first_result`.

Builders raise `UnavailableError` when a peer library is not importable (or graphc's
native backend cannot run here) and
`NotApplicableError` when the mode does not exist for the workload (numpy has no
compile step, fast_math rewrites nothing in the tiny graph), so every mode appears in
every workload's report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# the modes, in report order. graphc's static modes name their level and the backend
# their plans run on (`gc.compile(backend=...)`): "(numpy)" is the reference executor,
# "(native)" lowers elementwise steps and fused groups to C kernels (numpy runs the
# rest), and is "unavailable", with the reason, where it cannot run (never numpy under
# its name). "graphc-O2 (default)" is what a user gets without naming a backend
# (`backend="auto"`): numpy at once while the native kernels build in the background
# (issue 30); like every static mode it is timed after `wait()`, on its final tier,
# and its cold start is the "first result" column. "graphc-O2 (numpy)" is the one
# every ratio is taken against. graphc's static levels are exact (bit-identical to
# O0); the "-fast_math" modes also allow the value-changing rewrites, and run only
# where they change the plan. "graphc-O2-scan" is a loop compiled as one gc.scan node,
# in the workloads that have a loop (there "graphc-O2" is the loop unrolled).
# "numpy-copyto" copies the input into a preallocated output (`np.copyto`): the
# memory-traffic floor of an elementwise pass, in the GELU workload (not GELU: its
# results are not checked). "graphc-O2 batch gradient (default)", in the per-example
# workload, is the batch mean's gradient timed in the rounds of the per-example case,
# the denominator of its goal (another result: not checked). "torch-compile" is
# PyTorch under `torch.compile` (inductor), in the model workloads.
# "onnxruntime-1thread" and "onnxruntime" (default threads) run ONNX models in the
# `onnx` workload. A workload's table shows the modes it declares.
O0 = "graphc-O0 (numpy)"
BASELINE = "graphc-O2 (numpy)"
FAST_MATH = "graphc-O2-fast_math (numpy)"
NATIVE = "graphc-O2 (native)"
FAST_MATH_NATIVE = "graphc-O2-fast_math (native)"
DEFAULT = "graphc-O2 (default)"
SCAN = "graphc-O2-scan (numpy)"
SCAN_DEFAULT = "graphc-O2-scan (default)"
COPYTO = "numpy-copyto"
BATCH_GRADIENT = "graphc-O2 batch gradient (default)"
TORCH_COMPILE = "torch-compile"
MODES: tuple[str, ...] = (
    "graphc-eager",
    O0,
    BASELINE,
    FAST_MATH,
    NATIVE,
    FAST_MATH_NATIVE,
    DEFAULT,
    BATCH_GRADIENT,
    SCAN,
    SCAN_DEFAULT,
    "numpy",
    "numpy-chunked",
    COPYTO,
    "torch",
    TORCH_COMPILE,
    "jax",
    "onnxruntime-1thread",
    "onnxruntime",
    "dask-1worker",  # graphc.distributed on a LocalCluster (the `scale` workload)
    "dask-2workers",
)


# the modes whose time to first result is measured, where a workload declares them
FIRST_RESULT_MODES: tuple[str, ...] = (BASELINE, DEFAULT, "jax")
# What --quick leaves to the full run, said in each row it skips. Its cases are small
# (a goal reads few of them), and on a 2-core machine a peer's compile or a cold native
# build costs seconds for figures no goal reads: jax.jit's cold starts (0.1-3 s a case)
# everywhere, jax.jit in the model cases, and the default backend's cold start (its
# native build from an empty cache, 1.5-7 s) where the workload is a model or an RNN.
QUICK_SKIP_COLD = {"jax": "jax.jit's cold start takes seconds: measured in the full run"}
QUICK_SKIP_JAX = {"jax": "jax.jit compiles for seconds and no goal reads this case: full run"}
QUICK_SKIP_DEFAULT_COLD = {
    DEFAULT: "its native build from an empty cache takes seconds: measured in the full run"
}
# how long a background build may take before the bench gives up on it; the compiler's
# own limit is 300 s per kernel library (backends/native/toolchain.py)
BUILD_TIMEOUT = 900.0


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
    checked: bool = True  # False: computes something else on purpose (a floor), not compared
    built: Any = None  # graphc's Executable or TrainStep: waited for before timing


@dataclass
class FirstCall:
    """What a cold start made: its first result and what may still be building (graphc's
    Executable or TrainStep, whose `wait()` ends the background build; None for peers)."""

    value: Any
    built: Any = None


Start = Callable[[], FirstCall]  # from nothing to the first result
# (case params, case inputs) -> a cold start, prepared outside timing
StartBuilder = Callable[[dict[str, Any], dict[str, Any]], Start]


@dataclass
class Case:
    """One size of a workload: a label for the table and parameters for the builders."""

    label: str
    params: dict[str, Any]
    quick: bool = True  # part of `--quick`
    full: bool = True  # part of the full run
    skip_modes: dict[str, str] = field(default_factory=dict)  # mode -> reason
    quick_skip_modes: dict[str, str] = field(default_factory=dict)  # skipped with --quick
    # cold starts (time to first result) skipped with --quick, beyond QUICK_SKIP_COLD
    quick_skip_cold: dict[str, str] = field(default_factory=dict)


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
    first_result: dict[str, StartBuilder] = field(default_factory=dict)  # cold starts by mode


def finish_build(built: Any) -> bool | None:
    """Wait until `built` (graphc's Executable or TrainStep) runs on its final tier: its
    native kernels swapped in, or numpy after a failed build. True when it does, False
    when BUILD_TIMEOUT ran out first, None when it has nothing to wait for (no `wait()`:
    a peer, or a runtime that builds before the first result)."""
    wait = getattr(built, "wait", None)
    if wait is None:
        return None
    return bool(wait(timeout=BUILD_TIMEOUT))


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
