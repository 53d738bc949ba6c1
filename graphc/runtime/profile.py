"""`Executable.profile()`: where a plan's time goes, step by step.

Each step's figure is its median over `runs` runs, after one untimed run; the table
gives them in plan order with their share of the steps' sum, and a summary per op, as
PyTensor's profile and torch.profiler's table do. The runs use copies of the
executable's state (profiling trains nothing), on the tier the calls run (the profile
waits for a background build first). The plan's own call is timed in the same rounds
and shown beside the sum. How the steps are clocked depends on how that call starts
(the table says which, as explain's "entry:" line does):

- from a backend's entry in C (`profile_entry`): an entry of the profile's own, on the
  copies of the state, replays the same kernel calls with the clock read in C after
  each (native/entry.py's `Made.clock`); a call counts for the step whose code made it,
  so the steps' sum is close to the plan's own call;
- otherwise (`profile`): the plan is generated once more with a clock around each step
  (codegen's `laps`: two reads of `time.perf_counter` a step, nothing else changed), so
  the sum is the steps' cost as the Python walk pays it (about a microsecond a step).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from graphc.runtime.backend import Backend
    from graphc.runtime.plan import Plan, Step


@dataclass(frozen=True)
class StepTime:
    """One step of a profiled plan: its median seconds over the runs."""

    index: int
    name: str  # the value the step computes
    op: str  # its op (a backend's fused group: "fused", with its members in `ops`)
    backend: str  # the backend whose lowering runs it ("native", "numpy")
    seconds: float
    members: tuple[str, ...] = ()  # the ops a fused step computes


@dataclass(frozen=True)
class Profile:
    """Per-step median times of one plan (`Executable.profile`); `str()` is the table."""

    graph: str
    steps: tuple[StepTime, ...]
    runs: int
    call: float  # median seconds of the plan's own call, in the same rounds
    tier: str  # which backend ran the plan
    entry: str | None = None  # how the plan's own call starts (explain's "entry:" line)
    one_call: bool = False  # that call is one call of the backend's entry (Entries)
    in_c: bool = False  # the steps were clocked inside that entry, call by call

    @property
    def total(self) -> float:
        """The sum of the steps' medians (seconds)."""
        return sum(s.seconds for s in self.steps)

    def by_op(self) -> list[tuple[str, int, float]]:
        """(op, steps, seconds) per op, the most expensive first."""
        seconds: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        for s in self.steps:
            seconds[s.op] += s.seconds
            count[s.op] += 1
        return sorted(((op, count[op], t) for op, t in seconds.items()), key=lambda r: -r[2])

    def top(self, n: int = 10) -> list[StepTime]:
        """The `n` most expensive steps."""
        return sorted(self.steps, key=lambda s: -s.seconds)[:n]

    def __str__(self) -> str:
        total = self.total or 1.0
        lines = [
            f"profile of graph '{self.graph}' on {self.tier}: medians of {self.runs} runs",
            f"  the steps' sum {_time(self.total)}; the plan's own call {_time(self.call)}",
        ]
        if self.entry is not None:
            lines.append(f"  the plan's own call: {self.entry.removeprefix('entry: ')}")
        if self.in_c:
            lines.append(
                "  (the steps below are that call's, clocked in C after each kernel call; "
                "a step with no call, a view, takes none)"
            )
        elif self.one_call:
            lines.append(
                "  (it runs every step it can as a kernel; the steps below, clocked in "
                "Python, may leave small ones to numpy)"
            )
        lines += [
            "",
            f"  {'step':>4}  {'time':>9}  {'share':>6}  {'backend':<7}  value = op",
        ]
        for s in self.steps:
            op = f"{s.op}({', '.join(s.members)})" if s.members else s.op
            lines.append(
                f"  {s.index:>4}  {_time(s.seconds):>9}  {100 * s.seconds / total:5.1f}%  "
                f"{s.backend:<7}  {s.name} = {op}"
            )
        lines += ["", "per op:", f"  {'time':>9}  {'share':>6}  {'steps':>5}  op"]
        for op, n, t in self.by_op():
            lines.append(f"  {_time(t):>9}  {100 * t / total:5.1f}%  {n:>5}  {op}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def _members(step: Step) -> tuple[str, ...]:
    """The ops of a backend's fused step, each once in order (its meta's (name, op, loc))."""
    members = step.node.meta.get("members") or ()
    return tuple(dict.fromkeys(str(m[1]) for m in members))


def profile(
    plan: Plan,
    backend: Backend,
    states: list[np.ndarray],
    feeds: list[np.ndarray],
    runs: int,
    call: Callable[..., Any],
    entry: str | None = None,
    one_call: bool = False,
) -> Profile:
    """`plan` generated on `backend` with a clock around each step, run on copies of
    `states`, and the executable's own `call` (which updates `states`: they are put back
    after), `runs` times each, interleaved, on `feeds`: their Profile. `entry` is how
    that call starts, `one_call` whether it is one call of the backend's entry."""
    from graphc.runtime.codegen import Generator
    from graphc.runtime.executable import Compiled

    laps = [0.0] * len(plan.steps)
    generated = Generator(plan, False, backend, laps=laps).generate()
    clocked = Compiled(plan, generated).instantiate([np.array(v, copy=True) for v in states])

    def clocked_run() -> list[float]:
        laps[:] = [0.0] * len(laps)
        clocked(*feeds)
        return list(laps)

    per_step, calls = _rounds(clocked_run, call, feeds, states, runs)
    tier = generated.backend
    steps = tuple(
        StepTime(
            step.index,
            step.output,
            str(step.node.op),
            generated.step_backends.get(step.index, tier),
            statistics.median(per_step[k]),
            _members(step),
        )
        for k, step in enumerate(plan.steps)
    )
    median = statistics.median(calls)
    return Profile(plan.graph.name, steps, runs, median, tier, entry, one_call=one_call)


def _rounds(
    clocked: Callable[[], list[float]],
    call: Callable[..., Any],
    feeds: list[np.ndarray],
    states: list[np.ndarray],
    runs: int,
) -> tuple[list[list[float]], list[float]]:
    """`runs` rounds of a clocked run (its seconds per step) and the executable's own
    call on `feeds`, after one untimed of each (first touch of the arena, caches): the
    seconds of each step over the rounds, and the call's. The call updates `states`,
    which are put back after."""
    kept = [np.array(v, copy=True) for v in states]
    try:
        clocked()
        call(*feeds)
        rounds: list[list[float]] = []
        calls: list[float] = []
        for _ in range(runs):
            rounds.append(clocked())
            started = time.perf_counter()
            call(*feeds)
            calls.append(time.perf_counter() - started)
    finally:
        for buffer, value in zip(states, kept):
            np.copyto(buffer, value)
    return [list(step) for step in zip(*rounds)], calls


def clocked_entry(backend: Backend, plan: Plan, spec: Any, updates: Any, states: list) -> Any:
    """`backend`'s entry for `plan` (a signature's, with its `spec`) made again for a
    profile, on copies of `states` (its clocked runs train nothing), or None where it
    cannot be made: the profile then clocks the Python walk instead."""
    if backend.entries is None:
        return None
    copies = [np.array(v, copy=True) for v in states]
    try:
        return backend.entries.build(backend, plan, spec, updates, copies)
    except Exception:  # noqa: BLE001 - as a failed entry job (runtime/tiers.py): the walk
        return None


def profile_entry(
    entry: Any,
    feeds: list[np.ndarray],
    runs: int,
    call: Callable[..., Any],
    states: list[np.ndarray],
    tier: str,
    line: str | None,
) -> Profile:
    """The steps of a backend's entry in C (`entry`: one made for the profile, on copies
    of the state: `clocked_entry`'s), clocked in C call by call (`entry.clock`),
    and the executable's own `call` (which updates `states`: they are put back after),
    `runs` times each, interleaved, on `feeds`: their Profile. The calls the entry makes
    after its steps (copies into the state or the outputs) are a row of their own when
    there are any."""
    plan = entry.plan
    per_step, calls = _rounds(lambda: entry.clock(feeds), call, feeds, states, runs)
    steps = [
        StepTime(
            step.index,
            step.output,
            str(step.node.op),
            tier,
            statistics.median(per_step[k]),
            _members(step),
        )
        for k, step in enumerate(plan.steps)
    ]
    if len(plan.steps) in entry.call_steps:
        seconds = statistics.median(per_step[-1])
        steps.append(StepTime(len(plan.steps), "(after the steps)", "copy", tier, seconds))
    median = statistics.median(calls)
    return Profile(
        plan.graph.name, tuple(steps), runs, median, tier, line, one_call=True, in_c=True
    )
