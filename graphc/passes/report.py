"""What an optimization did: per pass, the node counts, the time, and notes.

Passes take an optional `log: PassLog` and write into it what a reader would ask
about: which rules fired, which fusion groups formed, why a candidate was left out.
The pipeline gathers one `PassLog` per pass run into an `OptimizationReport`, whose
`str()` is the table `gc.optimize(..., explain=True)` and `graphc inspect` show.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from graphc.ir.graph import Graph


@dataclass
class PassLog:
    """Notes one pass run leaves for the report."""

    name: str
    nodes_before: int = 0
    nodes_after: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    # the graphs around the pass, for pass-by-pass pictures (gc.viz.to_dot(report))
    before: Graph | None = field(default=None, repr=False, compare=False)
    after: Graph | None = field(default=None, repr=False, compare=False)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def count(self, what: str, n: int = 1) -> None:
        """Tally an event (a rule firing); tallies print as one line each."""
        self.counts[what] += n

    def lines(self) -> list[str]:
        tallies = [f"{n} x {what}" for what, n in sorted(self.counts.items())]
        return tallies + self.notes


@dataclass
class OptimizationReport:
    """The passes run by `gc.optimize`, in order.

    >>> import graphc as gc
    >>> g = gc.parse('''
    ... graph g(%x: f32[2]) {
    ...   %one: f32[] = constant(value=1.0)
    ...   %m: f32[2] = mul(%x, %one)
    ...   output %y = %m
    ... }''')
    >>> _, report = gc.optimize(g, level=1, explain=True)
    >>> report.nodes_before, report.nodes_after
    (4, 2)
    """

    level: int
    passes: list[PassLog] = field(default_factory=list)
    fast_math: bool = False  # value-changing rewrites were allowed
    title: str = ""  # what ran, when not the pipeline at `level` (a backend's fusion step)

    @property
    def value_changing(self) -> list[str]:
        """The value-changing rules that fired (only ever with fast_math), by name."""
        return sorted({what for p in self.passes for what in p.counts if "[fast_math]" in what})

    @property
    def nodes_before(self) -> int:
        return self.passes[0].nodes_before if self.passes else 0

    @property
    def nodes_after(self) -> int:
        return self.passes[-1].nodes_after if self.passes else 0

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.passes)

    def find(self, name: str) -> list[PassLog]:
        """The runs of pass `name`, in order."""
        return [p for p in self.passes if p.name == name]

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """A notebook cell ending with a report shows its table, as print does (the
        dataclass's repr is a dump of every pass's log)."""
        printer.text(str(self))

    def __str__(self) -> str:
        rules = "fast_math: value-changing rules allowed" if self.fast_math else "exact rules only"
        title = self.title or f"optimization at O{self.level}"
        header = (
            f"{title} ({rules}): {self.nodes_before} -> "
            f"{self.nodes_after} nodes in {self.seconds * 1e3:.1f} ms"
        )
        if not self.passes:
            return header + " (no passes at this level)"
        width = max(len(p.name) for p in self.passes)
        lines = [header, f"  {'pass':<{width}}  {'before':>6}  {'after':>6}  {'ms':>7}"]
        for p in self.passes:
            lines.append(
                f"  {p.name:<{width}}  {p.nodes_before:>6}  {p.nodes_after:>6}  "
                f"{p.seconds * 1e3:>7.2f}"
            )
            lines += [f"  {'':<{width}}    - {text}" for text in p.lines()]
        return "\n".join(lines)
