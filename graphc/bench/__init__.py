"""`graphc bench`: workloads run in every mode, timed, checked and reported.

Modes: graphc eager, static O0 and O2 on the numpy backend and O2 on the native one
(C kernels; unavailable, with the reason, where it cannot run), hand-written numpy
(and, for the GELU chain, chunked numpy and the `np.copyto` floor), and PyTorch eager
and `jax.jit` when they are installed. The report
is plain data (JSON-ready); `report.markdown` and `report.plot` turn it into a table
and a chart, and `goals.evaluate` checks it against the runtime's performance goals.

>>> from graphc import bench
>>> report = bench.run(only=["tiny"], quick=True)  # doctest: +SKIP
>>> print(bench.markdown(report))  # doctest: +SKIP
"""

from graphc.bench import goals
from graphc.bench.core import BASELINE, MODES
from graphc.bench.report import PlotUnavailableError, markdown, plot
from graphc.bench.runner import WORKLOADS, run, select

__all__ = [
    "BASELINE",
    "MODES",
    "WORKLOADS",
    "PlotUnavailableError",
    "goals",
    "markdown",
    "plot",
    "run",
    "select",
]
