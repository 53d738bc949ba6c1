"""Run the workloads: build each mode, check it agrees, time it, measure its memory.

For each case the inputs are made once and shared by the modes. Every mode is built
first (static modes compile here, outside timing), the reference mode first; every
other mode's first call is compared with it (largest absolute difference over the
largest reference value, against the workload's tolerance), and a disagreement is
marked, not hidden (a mode that computes something else on purpose, the copy floor,
says so with `Prepared.checked` and is not compared). Then all the modes of the case are timed in interleaved rounds
(`timing.interleave`) and their peak memory measured. Ratios are each mode's median
over graphc O2's (numpy backend) median in the same run. A mode whose library is missing, that does
not apply, or that fails is reported as such; the others still run. Nothing here
prints: progress goes to a callback.

graphc's static modes are timed on their final tier: after the first call the runner
waits for any background build of native kernels (`core.finish_build`). After the
timing, a workload that declares cold starts has its time to first result measured
(`first_result.measure`: numpy backend, default backend, jax.jit), into each mode's
`Cell.first_result`.
"""

from __future__ import annotations

import functools
import gc as garbage
import os
import platform
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from graphc.backends.native import toolchain
from graphc.bench import (
    cnn,
    compile_chain,
    first_result,
    gelu,
    mlp,
    onnx_zoo,
    peers,
    per_example,
    resnet_block,
    rnn,
    rnn_compile,
    scale,
    tiny,
    trace_compile,
    transformer,
    xent,
)
from graphc.bench.core import (
    BASELINE,
    BUILD_TIMEOUT,
    FIRST_RESULT_MODES,
    MODES,
    Case,
    NotApplicableError,
    Prepared,
    UnavailableError,
    Workload,
    finish_build,
    relative_error,
)
from graphc.bench.first_result import Rounds
from graphc.bench.timing import Schedule, interleave, peak_bytes, schedule
from graphc.runtime.backend import available_backends, resolve

WORKLOADS: tuple[Workload, ...] = (
    tiny.WORKLOAD,
    gelu.WORKLOAD,
    xent.WORKLOAD,
    mlp.WORKLOAD,
    rnn.WORKLOAD,
    cnn.WORKLOAD,
    transformer.WORKLOAD,
    resnet_block.WORKLOAD,
    compile_chain.WORKLOAD,
    trace_compile.WORKLOAD,
    rnn_compile.WORKLOAD,
    onnx_zoo.WORKLOAD,
    per_example.WORKLOAD,
)
# run only when named (`graphc bench --only scale`): they start dask clusters
ON_REQUEST: tuple[Workload, ...] = (scale.WORKLOAD,)
Progress = Callable[[int, int, str], None]  # (cells done, cells in all, what runs next)


@dataclass
class Cell:
    """One mode of one case: status, seconds per call, peak bytes, agreement, ratio."""

    status: str  # ok | error | unavailable | n/a | skipped
    reason: str = ""
    median: float | None = None
    min: float | None = None
    max: float | None = None
    repeats: int = 0
    number: int = 0
    peak_bytes: int | None = None
    rel_error: float | None = None
    agrees: bool | None = None
    ratio: float | None = None  # median / the BASELINE mode's (graphc-O2 (numpy)) median
    note: str = ""
    seconds: float = 0.0  # wall time spent on this cell: building, checking, timing
    first_result: dict[str, Any] | None = None  # first_result.FirstResult, where measured


@dataclass
class Settings:
    """How long to spend: seconds per cell and the bounds on repeats."""

    quick: bool
    budget: float
    min_repeats: int
    max_repeats: int
    rounds: int  # blocks of repeats per mode, interleaved across the modes of a case
    warmup: float  # seconds of untimed calls before each block (timing.py says why)
    first: Rounds  # cold measurements of the time to first result, per mode of a case

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if quick:  # cold starts: one round (each waits for its background build)
            first = Rounds(least=1, most=1, budget=0.0)
            return cls(
                True, 0.05, min_repeats=3, max_repeats=10, rounds=1, warmup=0.02, first=first
            )
        first = Rounds(least=3, most=7, budget=20.0)
        return cls(False, 2.0, min_repeats=6, max_repeats=60, rounds=5, warmup=0.15, first=first)


def select(
    only: Iterable[str] | None = None, workloads: Sequence[Workload] = WORKLOADS
) -> list[Workload]:
    """The workloads named in `only` (all when None); an unknown name is a ValueError."""
    if not only:
        return list(workloads)
    by_name = {w.name: w for w in (*workloads, *ON_REQUEST)}
    unknown = [name for name in only if name not in by_name]
    if unknown:
        raise ValueError(f"unknown workload(s) {unknown}; choose from {sorted(by_name)}")
    return [by_name[name] for name in only]


def _cases(workload: Workload, quick: bool) -> list[Case]:
    return [c for c in workload.cases if (c.quick if quick else c.full)]


def run(
    only: Iterable[str] | None = None,
    quick: bool = False,
    progress: Progress | None = None,
    workloads: Sequence[Workload] = WORKLOADS,
) -> dict[str, Any]:
    """Run the chosen workloads in every mode; the report as plain (JSON-ready) data."""
    settings = Settings.make(quick)
    workloads = select(only, workloads)
    total = sum(len(_cases(w, quick)) * len(MODES) for w in workloads)
    done = 0
    started = time.perf_counter()
    report: dict[str, Any] = {"machine": machine(), "quick": quick, "workloads": {}}
    for workload in workloads:
        entry: dict[str, Any] = {
            "description": workload.description,
            "unit": workload.unit,
            "reference": workload.reference,
            # the rows of its table, and those with a time to first result
            "modes": [m for m in MODES if m in workload.builders or m in workload.first_result],
            "first_result_modes": [m for m in FIRST_RESULT_MODES if m in workload.first_result],
            "cases": {},
        }
        for case in _cases(workload, quick):
            where = f"{workload.name} {case.label}"
            tick = functools.partial(_tick, progress, done, total, where)
            cells = _run_case(workload, case, settings, tick)
            done += len(MODES)
            entry["cases"][case.label] = {m: asdict(cells[m]) for m in MODES}
            garbage.collect()  # cycles holding a case's arrays go before the next case
        report["workloads"][workload.name] = entry
    if progress is not None:
        progress(done, total, "done")
    report["seconds"] = time.perf_counter() - started
    report["load_average_end"] = os.getloadavg()[0]
    return report


def _tick(
    progress: Progress | None, done: int, total: int, where: str, step: int, what: str
) -> None:
    if progress is not None:
        progress(done + step, total, f"{where} {what}")


def _run_case(
    workload: Workload, case: Case, settings: Settings, tick: Callable[[int, str], None]
) -> dict[str, Cell]:
    """Build and check every mode, time them interleaved, then measure their memory.

    `tick(k, what)` reports progress: k modes of this case built, `what` runs next.
    """
    inputs = workload.make_inputs(case.params)
    cells: dict[str, Cell] = {}
    ready: dict[str, tuple[Prepared, Schedule]] = {}
    reference: list[np.ndarray] | None = None
    order = [workload.reference, *(m for m in MODES if m != workload.reference)]
    for k, mode in enumerate(order):
        tick(k, f"build {mode}")
        start = time.perf_counter()
        cell, arrays, prepared, first = _prepare(workload, case, mode, inputs, settings)
        if prepared is not None and not prepared.checked:
            arrays = None  # not the workload's result: nothing to compare
        if prepared is not None:
            plan = schedule(
                prepared.call,
                settings.budget,
                first=first,
                min_repeats=settings.min_repeats,
                max_repeats=settings.max_repeats,
                warmup_seconds=settings.warmup,
                single_shot=prepared.single_shot,
            )
            ready[mode] = prepared, plan
        if reference is None and arrays is not None:
            reference = arrays
            cell.rel_error, cell.agrees = 0.0, True
        elif arrays is not None:
            cell.rel_error = relative_error(arrays, reference)
            cell.agrees = cell.rel_error <= workload.tolerance
        cell.seconds = time.perf_counter() - start
        cells[mode] = cell
    tick(len(order) - 1, "timing")
    start = time.perf_counter()
    interleave([plan for _, plan in ready.values()], settings.rounds)
    for mode, (prepared, plan) in ready.items():
        cell = cells[mode]
        try:
            if plan.error is not None:
                raise plan.error
            for key, value in asdict(plan.timing()).items():
                setattr(cell, key, value)
            if prepared.resident_bytes is not None:
                cell.peak_bytes = peak_bytes(prepared.call) + prepared.resident_bytes
        except Exception as exc:
            cells[mode] = Cell("error", _describe(exc), seconds=cell.seconds)
    shared = (time.perf_counter() - start) / max(1, len(ready))
    for mode in ready:
        cells[mode].seconds += shared
    _add_ratios(cells)
    if workload.first_result:
        start = time.perf_counter()
        step = functools.partial(tick, len(order) - 1)
        firsts = first_result.measure(workload, case, inputs, settings.first, settings.quick, step)
        shared = (time.perf_counter() - start) / max(1, len(firsts))
        for mode, result in firsts.items():
            cells[mode].first_result = asdict(result)
            cells[mode].seconds += shared
    return cells


def _prepare(
    workload: Workload, case: Case, mode: str, inputs: dict[str, Any], settings: Settings
) -> tuple[Cell, list[np.ndarray] | None, Prepared | None, float]:
    """Build a mode and make its first call: the cell, its results, the prepared call."""
    skip = case.skip_modes.get(mode) or (settings.quick and case.quick_skip_modes.get(mode))
    if skip:
        return Cell("skipped", skip), None, None, 0.0
    builder = workload.builders.get(mode)
    if builder is None:  # a workload written before the mode existed
        return Cell("n/a", f"{workload.name} has no {mode} mode"), None, None, 0.0
    try:
        prepared = builder(case.params, inputs)
    except UnavailableError as exc:
        return Cell("unavailable", str(exc)), None, None, 0.0
    except NotApplicableError as exc:
        return Cell("n/a", str(exc)), None, None, 0.0
    except Exception as exc:  # a broken mode is reported, the other modes still run
        return Cell("error", _describe(exc)), None, None, 0.0
    try:
        start = time.perf_counter()
        result = prepared.call()
        first = time.perf_counter() - start
        arrays = [np.array(a, copy=True) for a in prepared.arrays(result)]
        # time the final tier: a plan may build its kernels in the background from here
        if finish_build(prepared.built) is False:
            why = f"its background build did not finish in {BUILD_TIMEOUT:.0f} s"
            return Cell("error", why), None, None, 0.0
    except Exception as exc:
        return Cell("error", _describe(exc)), None, None, 0.0
    return Cell("ok", note=prepared.note), arrays, prepared, first


def _describe(exc: Exception) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} ({os.path.basename(where.filename)}:{where.lineno})"


def _add_ratios(cells: dict[str, Cell]) -> None:
    base = cells.get(BASELINE)
    if base is None or base.median is None:
        return
    for cell in cells.values():
        if cell.median is not None:
            cell.ratio = cell.median / base.median


def processor(cpuinfo: str | None = None) -> str:
    """The processor's model, family and widest vector ISA, from /proc/cpuinfo (its
    `cpuinfo` text): machines of one name differ (an "AMD EPYC" has been a Zen 2 with
    AVX2 here, a Zen 4 whose AVX-512 runs as 256-bit halves, and by its GELU figures one
    with full-width AVX-512), and the compute-bound figures with them. platform's name
    where there is no /proc/cpuinfo."""
    cpuinfo = toolchain.cpuinfo() if cpuinfo is None else cpuinfo
    if cpuinfo is None:
        return platform.processor() or "unknown"
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f", family {fields['cpu family']}, model {fields['model']}"
    return f"{name}, {isa}"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "processor": processor(),
        "platform": platform.platform(),
        "load_average": os.getloadavg()[0],  # other processes sharing the cores
        "backends": available_backends(),  # graphc's backends that run here, preferred first
        "default_backend": resolve("auto").name,  # gc.compile's, GRAPHC_BACKEND heeded
        # how idle OpenMP workers wait, as the peers' OpenMP runtimes (torch's libgomp)
        # read it when versions() loads them: the native backend's probe above sets it
        # (native/threads.py), and torch's LeNet step took 1.7x longer with the
        # PASSIVE setting graphc made before 2026-11-28 (docs/bench-results.md)
        "openmp": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
        **peers.versions(),
    }
