"""The rewrite driver: applies a table of local rules until none applies.

A rule is a pattern (see `patterns`) and a replacement: a function of the match that
returns the node to use instead, built from the matched nodes (or None to decline).

Algorithm: one forward walk over the topological order builds the new graph. Each
old node becomes a candidate on its already-rewritten inputs; the rules indexed by
its op (then the rules for any op) are tried in table order, and the first that
matches replaces it. Nodes a replacement creates are candidates too and are
rewritten the same way, bottom-up, before they are appended. So every node that
reaches the new graph was tried against every rule with its final inputs; since a
rule looks only at a node and its inputs (never its users), no rule applies to the
result: one walk reaches the fixed point (tests check that a second walk finds
nothing). One exception: a rule that would recompute an input for itself (so a
second user keeps the original alive) may ask `Match.used_once`, counted on the
old graph; a rewrite that drops a use can leave such a rule for a later walk. The same
holds for `Match.users_ignore_layout`, which reads the old node's users. Dead
nodes the rewrites leave behind are removed at the end. Cost: linear in the nodes,
times the (small) number of rules per op.

Invariants: a replacement must have exactly the type of the node it replaces;
a replacement of another type is discarded, so rules such as `reshape(x) -> x` need
no condition of their own (it applies exactly when the reshape does not change the
shape). A replacement whose construction fails (an op's type rule rejects what the
rule built, e.g. neg of a bool) is declined the same way; nodes it had appended are
left unused and removed with the rest, and rules that fired inside it go unreported.
Replacement nodes inherit the replaced node's `loc` and `grad_of`. A replacement is
None or the candidate itself (both decline), an input of the candidate, or a node built
with `Match.emit`, `constant` or `fold`; anything else (a node of the graph being
rewritten) is a `RuleError` naming the rule.
An exact rule's replacement also keeps the candidate's memory layout (runtime/plan.py,
LAYOUT): a transpose's view may stand for a C-contiguous value (x*1 -> x with x a
transpose) only when every user ignores layout (`Match.users_ignore_layout`), since a
matmul or a reduction rounds a permuted operand otherwise; else the driver declines it.

Every rule is tagged `exact` (its result is bit-identical to the original's for every
input) or not; see graphc/passes/simplify.py for what exact means and which is which.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.graph import OP, Graph, Node
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType, is_float
from graphc.ops.dispatch import prepare
from graphc.passes.builder import GraphBuilder, detached, replacement_meta
from graphc.passes.dce import eliminate_dead_code
from graphc.passes.patterns import Bindings, Pattern
from graphc.passes.report import PassLog

ZEROS_LIMIT = 1 << 16  # as constant folding's limit
MAX_DEPTH = 64  # nested replacements of one node; deeper means two rules undo each other


@dataclass(frozen=True)
class Rule:
    pattern: Pattern
    replace: Callable[[Match], Node | None]
    when: Callable[[Match], bool] | None = None
    exact: bool = True  # bit-identical results for every input; else only with fast_math

    def __str__(self) -> str:
        return str(self.pattern) if self.exact else f"{self.pattern} [fast_math]"


def rule(
    pattern: Pattern,
    replace: Callable[[Match], Node | None],
    when: Callable[[Match], bool] | None = None,
    exact: bool = True,
) -> Rule:
    return Rule(pattern, replace, when, exact)


class Match:
    """What a rule's replacement sees: the bindings (as attributes) and ways to build nodes."""

    def __init__(self, rewriter: Rewriter, node: Node, bound: Bindings, depth: int) -> None:
        self.node = node  # the candidate being replaced (its inputs are new nodes)
        self._rewriter = rewriter
        self._bound = bound
        self._depth = depth

    def __getattr__(self, name: str) -> Any:
        try:
            return self._bound[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def type(self) -> TensorType:
        return self.node.type

    def emit(self, op: str, *inputs: Node, **attrs: Any) -> Node:
        """A new node `op(inputs, attrs)`, itself rewritten before it is added."""
        full, out_type = prepare(get_op(op), [x.type for x in inputs], attrs)
        name = self._rewriter.builder.fresh_name(op)
        candidate = Node(name, OP, op, inputs, full, out_type, replacement_meta(self.node))
        return self._rewriter.emit(candidate, self._depth + 1)

    def constant(self, value: Any, replaces: Node | None = None) -> Node:
        """A new constant; one that `replaces` the candidate keeps its name."""
        meta = replacement_meta(self.node)
        return self._rewriter.builder.constant(value, meta=meta, replaces=replaces)

    def fold(self, op: str, *constants: Node, dtype: Any = None, **attrs: Any) -> Node | None:
        """A constant computed now by `op`'s own kernel on constant nodes; with `dtype`,
        on the constants cast to it (the dtype of the expression they scale, so nothing
        is rounded in a narrower one). None when the result is not finite although the
        constants are (a folded scale that overflows must not replace one that did not).
        """
        values = [c.value if dtype is None else c.value.astype(dtype) for c in constants]
        full, out_type = prepare(get_op(op), [TensorType.of(v) for v in values], attrs)
        with np.errstate(all="ignore"):
            value = np.asarray(get_op(op).kernel(*values, **full)).astype(out_type.dtype)
        if _finite(values) and not _finite([value]):
            return None
        return self.constant(value)

    def used_once(self, node: Node) -> bool:
        """Whether `node` (an input of the candidate) has no user besides the candidate.
        Counted on the old graph; a node a replacement made is used by it alone."""
        return self.uses(node) <= 1

    def uses(self, node: Node) -> int:
        """How many times `node` is an input (a node reading it twice counts twice),
        counted on the old graph; 1 for a node a replacement made."""
        return self._rewriter.uses.get(node, 1)

    def users_ignore_layout(self) -> bool:
        """Whether every user of the candidate is an elementwise op, whose bits do not
        depend on the candidate's memory order (matmul's and reductions' do:
        runtime/plan.py, LAYOUT). Not an output: the caller gets the layout, and a call
        that is fed the array back (a state, a recurrence) sums or multiplies it in that
        order. False for a node a replacement made (no users yet)."""
        users = self._rewriter.old_users(self.node)
        if users is None:
            return False
        return all(u.kind == OP and get_op(u.op).elementwise for u in users)

    def zeros(self) -> Node | None:
        """Zeros of the candidate's type: a constant when that is concrete and small,
        else full_like of an input of that type (None, declining, if there is none)."""
        t = self.node.type
        if t.is_concrete and t.size <= ZEROS_LIMIT:  # type: ignore[operator]
            return self.constant(np.zeros(t.shape, t.dtype))
        like = [x for x in self.node.inputs if x.type == t]
        return self.emit("full_like", like[0], value=0) if like else None


class RewriteLoopError(GraphcError):
    """Rules that undo each other (a bug in the table, never declined silently)."""


class RuleError(GraphcError):
    """A rule's replacement is no node of the graph being built (a node of the graph
    being rewritten, say): a bug in the rule, named before a later node trips on it."""


def _shown(value: object) -> str:
    if isinstance(value, Node):
        return f"{value.describe()}, which is not in the graph being built"
    return f"a value of type {type(value).__name__}, not a node"


def _permutes(node: Node) -> bool:
    """Whether `node`'s value is a view in permuted memory order (a transpose's)."""
    return node.kind == OP and get_op(node.op).permutes


def _finite(values: Sequence[np.ndarray]) -> bool:
    return all(not is_float(v.dtype) or bool(np.isfinite(v).all()) for v in values)


class Rewriter:
    def __init__(self, graph: Graph, rules: Sequence[Rule], log: PassLog | None) -> None:
        self.builder = GraphBuilder(graph)
        self.log = log
        self.fired: list[Rule] = []  # the rules that fired, in order (a declined attempt's
        # inner firings are dropped with it: the report names only rules whose work stays)
        self.declined = False
        by_op: dict[str | None, list[Rule]] = defaultdict(list)
        for r in rules:
            by_op[r.pattern.root_op].append(r)
        any_op = by_op.pop(None, [])
        # the rules to try per op, in table order, then those for any op
        self.by_op = {op: rs + any_op for op, rs in by_op.items()}
        self.any_op = any_op
        # new node -> uses in the old graph of the old nodes it stands for
        self.uses: Counter[Node] = Counter()
        # old node -> its uses in the old graph (a node reading one twice counts twice)
        self.old_uses = Counter(x for node in graph.nodes for x in node.inputs)
        self._users: dict[Node, list[Node]] | None = None  # old node -> its users, lazily
        self._current: tuple[Node, Node] | None = None  # (old node, its candidate) in walk

    def old_users(self, candidate: Node) -> list[Node] | None:
        """The users, in the old graph, of the old node `candidate` stands for."""
        if self._current is None or self._current[1] is not candidate:
            return None
        if self._users is None:
            self._users = defaultdict(list)
            for node in self.builder.old.nodes:
                for x in node.inputs:
                    self._users[x].append(node)
        return self._users.get(self._current[0], [])

    def emit(self, candidate: Node, depth: int = 0) -> Node:
        if depth > MAX_DEPTH:
            raise RewriteLoopError(
                f"rewrite rules keep replacing {candidate.describe()}: two rules undo each other"
            )
        for r in self.by_op.get(candidate.op, self.any_op):
            bound: Bindings = {}
            if not r.pattern.match(candidate, bound):
                continue
            m = Match(self, candidate, bound, depth)
            if r.when is not None and not r.when(m):
                continue
            mark = len(self.fired)
            try:
                result = r.replace(m)
            except (RewriteLoopError, RuleError):
                raise
            except GraphcError:  # a type rule refused what the rule built: decline
                result = None
            if result is candidate:  # "leave it as it is": a decline
                result = None
            if result is not None and (
                not isinstance(result, Node) or result.graph is not self.builder.graph
            ):
                raise RuleError(
                    f"rule {r} on {candidate.describe()} returned {_shown(result)}; a "
                    "replacement is None (decline), an input of the candidate or a node "
                    "built with m.emit, m.constant or m.fold"
                )
            if (
                result is None
                or result.type != candidate.type
                or (
                    r.exact
                    and _permutes(result)
                    and not _permutes(candidate)
                    and not m.users_ignore_layout()
                )
            ):
                self.declined = True  # nodes the attempt appended are now dead
                del self.fired[mark:]
                continue
            self.fired.append(r)
            return result
        return self.builder.append(candidate)

    def fires(self) -> bool:
        """Whether some rule matches some node of the old graph as it stands: when none
        does, the walk would copy the graph node for node (candidates are the old nodes
        on copies of their inputs, and nothing new is made for a rule to match later),
        so `rewrite` returns the graph itself instead. A rule whose replacement would
        decline still counts (the walk then finds out)."""
        self.uses = self.old_uses
        try:
            for node in self.builder.old.nodes:
                rules = self.by_op.get(node.op, self.any_op) if node.kind == OP else ()
                self._current = (node, node)
                for r in rules:
                    bound: Bindings = {}
                    if r.pattern.match(node, bound) and (
                        r.when is None or r.when(Match(self, node, bound, 0))
                    ):
                        return True
            return False
        finally:
            self.uses, self._current = Counter(), None

    def walk(self) -> Graph:
        new: dict[Node, Node] = {}
        for node in self.builder.old.nodes:
            inputs = tuple(new[x] for x in node.inputs)
            if node.kind == OP:
                candidate = detached(node, inputs)
                self._current = (node, candidate)
                new[node] = self.emit(candidate)
            else:
                new[node] = self.builder.copy(node, inputs)
            self.uses[new[node]] += self.old_uses[node]
        return self.builder.graph


def rewrite(graph: Graph, rules: Sequence[Rule], log: PassLog | None = None) -> Graph:
    """`graph` with `rules` applied until none applies, without the nodes left unused."""
    rewriter = Rewriter(graph, rules, log)
    if not rewriter.fires():
        return graph
    result = rewriter.walk()
    if log is not None:
        for r, n in Counter(rewriter.fired).items():
            log.count(str(r), n)
    return eliminate_dead_code(result) if rewriter.fired or rewriter.declined else result
