"""The report as text: a markdown table per workload, and a bar chart file.

Times are per call (or step, or compile); "x O2" is the mode's median over graphc O2's
on the numpy backend (`core.BASELINE`) in the same run (above 1: slower than it; the
native modes' "x O2" is their speed-up or slow-down against the numpy backend). Peak memory is
tracemalloc's peak over one call plus the buffers the mode keeps between calls; n/a
where the library allocates outside Python's view (torch, jax).

Workloads with cold starts (graphc.bench.first_result) have two more columns: "first
result, cold", the median time from nothing to the first result (trace + compile +
first call on an empty kernel cache) with its number of cold runs, and "background
build", the median time from that first result until `wait()` returned (the default
backend's native kernels building behind it).
"""

from __future__ import annotations

from typing import Any

from graphc.bench.core import BASELINE, MODES


def seconds(value: float | None) -> str:
    """A duration with a readable unit: 3.21 us, 14.6 ms, 1.25 s."""
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def size(value: int | None) -> str:
    """Bytes with a readable unit."""
    if value is None:
        return "n/a"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value} B"


def _agreement(cell: dict[str, Any]) -> str:
    if cell["agrees"] is None:
        return "-"
    mark = "yes" if cell["agrees"] else "**NO**"
    return f"{mark} ({cell['rel_error']:.1e})"


def _escape(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def _first_result(cell: dict[str, Any]) -> tuple[str, str, str]:
    """The first-result columns of a row (first result, background build) and a note."""
    first = cell.get("first_result")
    if first is None:
        return "", "", ""
    if first["status"] != "ok":
        said = cell["status"] == first["status"] and cell["reason"] == first["reason"]
        return (first["status"] if said else f"{first['status']}: {first['reason']}"), "", ""
    runs = first["repeats"]
    spread = f"{seconds(first['min'])} .. {seconds(first['max'])}, " if runs > 1 else ""
    shown = f"{seconds(first['median'])} ({spread}{runs} cold)"
    if first["agrees"] is False:
        shown += f" **NO** ({first['rel_error']:.1e})"
    return shown, seconds(first["build"]), first["note"]


def _row(case: str, mode: str, cell: dict[str, Any], first_columns: bool = False) -> str:
    first, build, first_note = _first_result(cell)
    more = f" {_escape(first)} | {build} |" if first_columns else ""
    if cell["status"] != "ok":
        blank = "" if not first_note else f" first result: {_escape(first_note)}"
        return (
            f"| {case} | {mode} | {cell['status']}: {_escape(cell['reason'])} | | |{more}"
            f" | | |{blank} |"
        )
    ratio = "-" if cell["ratio"] is None else f"{cell['ratio']:.2f}"
    spread = f"{seconds(cell['min'])} .. {seconds(cell['max'])}"
    runs = f"{cell['repeats']}x{cell['number']}"
    note = "; ".join(x for x in (cell["note"], first_note and f"first result: {first_note}") if x)
    return (
        f"| {case} | {mode} | {seconds(cell['median'])} | {spread} | {ratio} |{more} "
        f"{size(cell['peak_bytes'])} | {_agreement(cell)} | {runs} | {_escape(note)} |"
    )


def _openmp(settings: dict[str, str | None]) -> str:
    """How the OpenMP runtimes of graphc and the peers wait when idle, in words."""
    given = [f"{k}={v}" for k, v in settings.items() if v is not None]
    return f"OpenMP runtimes loaded with {', '.join(given) or 'their default wait policy'}"


def _default(info: dict[str, Any]) -> str:
    """Which backend `gc.compile` picks by default here (the default mode's), when known."""
    chosen = info.get("default_backend")
    return f" (default: {chosen})" if chosen else ""


# what the header adds after --quick
QUICK_NOTE = (
    " --quick: small cases, one short block of timed calls per mode and one cold start "
    "each, so the figures are indicative; what it leaves to the full run says so in its row."
)


def _processor(info: dict[str, Any]) -> str:
    return f" ({info['processor']})" if info.get("processor") else ""


def markdown(report: dict[str, Any]) -> str:
    """Every workload's table, with the machine and run settings on top."""
    info = report["machine"]
    peers = ", ".join(f"{k} {info.get(k) or 'not installed'}" for k in ("torch", "jax"))
    lines = [
        f"# graphc bench{' --quick' if report['quick'] else ''}",
        "",
        f"Python {info['python']}, numpy {info['numpy']}, {info['cpus']} CPUs"
        f"{_processor(info)}, {peers}; "
        f"graphc backends here: {', '.join(info.get('backends') or ['numpy'])}"
        f"{_default(info)}; "
        f"{_openmp(info.get('openmp') or {})}; "
        f"load average {info['load_average']:.1f} at start, "
        f"{report.get('load_average_end', 0):.1f} at end; {report.get('seconds', 0):.0f} s. Median (min .. max) per call after warm-up; "
        f"x O2 = median / {BASELINE} median; agrees = max abs diff / max abs of the "
        "reference mode's result. First result, cold = trace + compile + first call on an "
        "empty kernel cache (median of the cold runs); background build = from that first "
        "result until wait() returned." + (QUICK_NOTE if report["quick"] else ""),
    ]
    for name, workload in report["workloads"].items():
        first = bool(workload.get("first_result_modes"))
        lines += [
            "",
            f"## {name}: {workload['description']}",
            "",
            f"| case | mode | median / {workload['unit']} | min .. max | x O2 | "
            + ("first result, cold | background build | " if first else "")
            + "peak mem | agrees | repeats | note |",
            "|---|---|---:|---|---:|" + ("---:|---:|" if first else "") + "---:|---|---|---|",
        ]
        modes = workload.get("modes", MODES)  # undeclared modes have nothing to show
        for case, cells in workload["cases"].items():
            lines += [_row(case, mode, cells[mode], first) for mode in modes]
    return "\n".join(lines) + "\n"


class PlotUnavailableError(Exception):
    """matplotlib is not installed."""


def plot(report: dict[str, Any], path: str) -> None:
    """A bar chart of medians (log scale), one panel per workload, one bar per mode."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise PlotUnavailableError(
            "--plot needs matplotlib, which is not installed: pip install matplotlib"
        ) from exc
    workloads = report["workloads"]
    fig, axes = plt.subplots(len(workloads), 1, figsize=(10, 3.2 * len(workloads)), squeeze=False)
    width = 0.8 / len(MODES)
    for ax, (name, workload) in zip(axes[:, 0], workloads.items()):
        cases = list(workload["cases"])
        for k, mode in enumerate(MODES):
            xs, heights = [], []
            for j, case in enumerate(cases):
                median = workload["cases"][case][mode]["median"]
                if median is not None:
                    xs.append(j + (k - len(MODES) / 2 + 0.5) * width)
                    heights.append(median)
            if heights:  # one colour per mode in every panel
                ax.bar(xs, heights, width, color=f"C{k}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)), cases)
        ax.set_ylabel(f"seconds / {workload['unit']}")
        ax.set_title(f"{name}: {workload['description']}", fontsize=9)
    handles = [Patch(color=f"C{k}", label=mode) for k, mode in enumerate(MODES)]
    fig.legend(handles=handles, loc="upper center", ncol=len(MODES), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    fig.savefig(path)
    plt.close(fig)
