"""The text of `Executable.explain()`: a plan's steps, buffers, in-place decisions, memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphc.ir.types import dtype_name

if TYPE_CHECKING:
    from graphc.runtime.codegen import Generated
    from graphc.runtime.plan import Plan


class PlanText(str):
    """The text of a plan: a str to code, its lines to a notebook. IPython asks
    `_repr_pretty_` before the repr, so `exe.explain()` as a cell's last line shows the
    lines, as `print` does, not a str's repr (one quoted line of ``\\n`` escapes).

    >>> text = PlanText("steps:\\n  0  y = tanh(x)")
    >>> text == "steps:\\n  0  y = tanh(x)", repr(text)
    (True, "'steps:\\\\n  0  y = tanh(x)'")
    """

    __slots__ = ()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def size_text(nbytes: float) -> str:
    """Bytes as people read them: "512 B", "1.5 KiB", "3.2 MiB", "1.1 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError


def rules_header(level: int, fast_math: bool, value_changing: set[str]) -> str:
    """The line saying which rewrites compiled the plan: exact ones only, or fast_math's
    value-changing ones too (naming those that fired)."""
    if not fast_math:
        return f"compiled at O{level} (exact)"
    fired = ", ".join(sorted(value_changing)) or "none fired"
    return f"compiled at O{level} (fast_math: value-changing rules allowed; fired: {fired})"


def format_plan(
    plan: Plan, header: str | None = None, generated: Generated | None = None
) -> PlanText:
    """The plan as text; `header` (which rewrites ran) is its first line. With the
    `generated` code, each step also says which backend's lowering runs it, and the
    backend's notes (kernels built and compile time) follow the steps."""
    title = f"plan for graph '{plan.graph.name}'"
    if plan.bindings:
        title += " with " + ", ".join(f"{k}={v}" for k, v in sorted(plan.bindings.items()))
    lines = [title] if header is None else [header, title]
    lines.append(f"inputs: {', '.join(plan.inputs) or '-'}")
    if plan.state:
        lines.append(f"state: {', '.join(plan.state)}")
    if plan.scalar:
        lines.append("scalar plan: every value is one element, computed as a numpy scalar")
    elif generated is not None:
        lines.append(f"backend: {generated.backend}")
    lines.append("")
    lines.append("steps:")
    for step in plan.steps:
        call = f"{step.node.op}({', '.join(step.inputs)})"
        if step.results is None:
            line = f"  {step.index:>4}  {step.output} = {call}  : {_placed(plan, step.output)}"
        else:  # several results, each placed on its own
            line = f"  {step.index:>4}  {step.output} = {call}  : {step.node.type}"
            for k, name in enumerate(step.results):
                placed = "not read" if name is None else f"{name}: {_placed(plan, name)}"
                line += f"\n          result {k} -> {placed}"
        if step.frees:
            line += f"  frees {', '.join(f'b{b}' for b in step.frees)}"
        if step.scratch:
            line += f"  scratch {size_text(step.scratch)}"
        mixed = generated is not None and generated.backend != "numpy"  # else all are numpy
        if mixed and not plan.scalar and step.index in generated.step_backends:  # type: ignore[union-attr]
            note = generated.step_notes.get(step.index)  # type: ignore[union-attr]
            tag = generated.step_backends[step.index]  # type: ignore[union-attr]
            line += f"  [{tag}: {note}]" if note else f"  [{tag}]"
        lines.append(line)
        codes = generated.bodies.get(step.index, {}) if generated is not None else {}
        for attr, body in plan.bodies.get(step.index, {}).items():  # a loop's or branch's
            text = format_plan(body, generated=codes.get(attr))
            lines.append(f"          {attr}: " + _indented(text, "          "))
    for target, value in plan.late_updates.items():
        lines.append(f"  end   copy {value} into state {target}")
    if generated is not None and generated.notes:
        lines.append("")
        lines.extend(generated.notes)
    lines.append("")
    lines.append("buffers:")
    lines.append("  id   kind       dtype  bytes       offset    values [defined..last use]")
    for buffer in plan.buffers:
        held = ", ".join(
            f"{name}[{plan.values[name].defined}..{plan.values[name].last_use}]"
            for name in buffer.values
        )
        offset = "-" if buffer.offset is None else str(buffer.offset)
        lines.append(
            f"  b{buffer.id:<3} {buffer.kind:<10} {dtype_name(buffer.dtype):<6} "
            f"{buffer.nbytes:<11} {offset:<9} {held}"
        )
    inplace = [v for v in plan.values.values() if v.kind == "inplace"]
    reused = [v for v in plan.values.values() if v.kind == "reused"]
    lines.append("")
    lines.append(f"in place: {len(inplace)} step(s); reused buffers: {len(reused)} step(s)")
    lines.append(f"arena (allocated once per thread): {size_text(plan.arena_bytes)}")
    peak, scratch = _peak(plan)
    lines.append(f"peak bytes of intermediates: {size_text(peak)}")
    if scratch:
        lines.append(f"  of which kernels' scratch (step {scratch[0]}): {size_text(scratch[1])}")
    lines.append(f"sum of all intermediates: {size_text(plan.intermediate_bytes)}")
    lines.append(f"outputs allocated per call: {size_text(plan.output_bytes)}")
    if plan.recycled_bytes:
        lines.append(
            f"  of which recycled once the caller drops them: {size_text(plan.recycled_bytes)}"
        )
    return PlanText("\n".join(lines))


def _indented(text: str, prefix: str) -> str:
    """`text` with every line but the first indented by `prefix` (blank lines stay blank)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [prefix + line if line else "" for line in rest])


def _placed(plan: Plan, name: str) -> str:
    value = plan.values[name]
    where = f"b{value.buffer}"
    if value.kind == "inplace":
        where += f" in place of {value.base}"
    elif value.kind == "view":
        where += f" view of {value.base}"
    elif value.kind == "state":
        where += f" written into state {value.base}"
    return f"{value.type}  -> {value.kind} {where}"


def peak_bytes(plan: Plan, scratch: bool = True) -> int:
    """The most arena bytes holding live values at any one step, plus the working memory
    (scratch) that step's kernel allocates for itself (unless `scratch=False`: arena
    bytes only, which the arena always holds)."""
    return _peak(plan, scratch)[0]


def _peak(plan: Plan, scratch: bool = True) -> tuple[int, tuple[int, int] | None]:
    """The peak bytes, and (step, scratch bytes) at the peak when that step has any."""
    arena = {b.id for b in plan.buffers if b.kind == "allocated"}
    events: dict[int, int] = {}
    for b in plan.buffers:
        if b.id not in arena or not b.values:
            continue
        first = min(plan.values[v].defined for v in b.values)
        last = max(plan.values[v].last_use for v in b.values)
        for start, stop in _live_spans(plan, b.values, first, last):
            events[start] = events.get(start, 0) + b.nbytes
            events[stop + 1] = events.get(stop + 1, 0) - b.nbytes
    for step in plan.steps if scratch else ():  # a kernel's scratch lives during its step
        if step.scratch:
            events[step.index] = events.get(step.index, 0) + step.scratch
            events[step.index + 1] = events.get(step.index + 1, 0) - step.scratch
    peak = live = 0
    at_peak = None
    for at in sorted(events):
        live += events[at]
        if live > peak:
            peak, at_peak = live, at
    held = 0
    if scratch and at_peak is not None and at_peak < len(plan.steps):
        held = plan.steps[at_peak].scratch
    return peak, (at_peak, held) if held else None


def _live_spans(plan: Plan, names: list[str], first: int, last: int) -> list[tuple[int, int]]:
    # a reused buffer holds nothing between one value's last use and the next definition
    spans: list[tuple[int, int]] = []
    for name in names:
        v = plan.values[name]
        if spans and v.defined <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], v.last_use))
        else:
            spans.append((v.defined, v.last_use))
    return spans
