"""The program's names: graph values named after the Python variables that hold them.

While user code declares a graph (`with g:` written outside graphc) or a function is
traced (`gc.trace`, `gc.jit`, nn modules, and the bodies of `gc.scan`, `gc.cond`, ...
traced inside), an op node named after its op (`matmul_2`, `const`) is renamed after
the first local variable of the user's code found holding it, the way a debugger reads
a frame's locals: `i2h = x @ w_ih` makes a node named `i2h`.

How, and why so: no trace function is installed. `sys.settrace` would run a Python
call for every call made while tracing (tracing three times slower) and would have to
share the slot with a debugger's or coverage's trace function. Instead the IR tells
this module of each node appended (ir/graph.py's observer); the session notes the
user's frames on the stack then (between the op call and the session's start) and
keeps their frame objects, which keep their locals after the function returns. A value
is looked up in those frames' locals when a later node first uses it (by then every
assignment before the use has happened), and at the session's end for what is left;
reading at every node instead made tracing half as slow again. A value is looked for
first in the frame that made it, so it takes the name it had there (`next_h` inside
the step, not `h` in the loop calling it, nor the next step's parameter `h`), then in
the others: returned helpers first, then the frames on the stack innermost first.

Rules: a node is renamed at most once, and only from its generated name (placeholders,
`gc.constant(..., name=)`, outputs and `gc.named` are the user's already); variables
starting with "_" are skipped (`_ = gc.output(...)`); a name already taken gets a
suffix as generated names do (`h`, `h_1`, ... for the steps of an unrolled loop); a
name the user gives explicitly later (an output's or placeholder's name, `gc.named`)
wins, and the value named after a variable moves aside to a suffixed name (but a
value whose output node already has the variable's name keeps its generated name:
the output carries it). Sessions
are per thread: each thread names values from its own frames.

>>> import graphc as gc
>>> def step(x, w):
...     i2h = x @ w
...     return gc.tanh(i2h)
>>> [n.name for n in gc.trace(step, gc.TensorSpec((2, 3)), gc.TensorSpec((3, 3))).op_nodes]
['i2h', 'tanh']
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

from graphc.ir import graph as graph_module
from graphc.ir.errors import GraphcError
from graphc.ir.graph import OP, OUTPUT, Graph, Node
from graphc.ops.symbolic import Symbol

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# frames of these are not the user's program (numpy's Python functions, contextlib, ...)
_LIBRARY_DIRS = tuple(
    os.path.abspath(d) + os.sep
    for d in {_PACKAGE_DIR, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)

Value = TypeVar("Value")


# whether a file is the user's, by its name: read for every frame of the stack at every
# node traced (a dict lookup inline there, as a call costs more than the lookup)
_USERS: dict[str, bool] = {}


def _is_users(filename: str) -> bool:
    mine = _USERS.get(filename)
    if mine is None:
        if len(_USERS) >= 4096:  # bounded (a notebook's cells are files of their own)
            _USERS.clear()
        mine = _USERS[filename] = _users_file(filename)
    return mine


def _users_file(filename: str) -> bool:
    if filename.startswith("<"):  # <stdin>, <string>, <doctest ...>, <ipython-input-...>
        return not filename.startswith("<frozen")
    path = os.path.abspath(filename)
    if path.startswith(_LIBRARY_DIRS):
        return False
    return f"{os.sep}numpy{os.sep}" not in path


def _generated_name(node: Node) -> bool:
    """Was `node` named by graphc after its op (`add`, `add_3`, `const_2`)?"""
    base = "const" if node.op == "constant" else str(node.op)
    name = node.name
    if name == base:
        return True
    return name.startswith(base) and name[len(base)] == "_" and name[len(base) + 1 :].isdigit()


class _Session:
    """One naming session: values waiting for a name, and the user's frames seen."""

    def __init__(self, stop: FrameType | None, root: FrameType | None) -> None:
        self.stop = stop  # the first frame not read (trace()'s own), if any
        self.root = root  # the last frame read (the one with `with g:`), if any
        # id(node) -> (node named after its op, id of the user's frame that made it)
        self.pending: dict[int, tuple[Node, int]] = {}
        self.frames: dict[int, FrameType] = {}  # the user's frames met, in that order
        self.depth = 1


class _Naming(threading.local):
    def __init__(self) -> None:
        self.session: _Session | None = None
        self.entries: list[bool] = []  # per `with graph:` open: did it begin a session?


_STATE = _Naming()
# per graph, the names given after variables (they move aside for explicit ones)
_GIVEN: weakref.WeakKeyDictionary[Graph, set[str]] = weakref.WeakKeyDictionary()


def _user_frames(session: _Session) -> list[FrameType]:
    """The user's frames on this thread's stack inside the session, innermost first."""
    frames = []
    stop, root, users = session.stop, session.root, _USERS
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame is not stop:
        filename = frame.f_code.co_filename
        mine = users.get(filename)
        if mine is None:
            mine = _is_users(filename)
        if mine:
            frames.append(frame)
        if frame is root:
            break
        frame = frame.f_back
    return frames


def _rename(node: Node, variable: str) -> None:
    graph = node.graph
    if graph is None or node.name not in graph or graph.node(node.name) is not node:
        return  # no longer in its graph (a builder abandoned it)
    holder = graph.node(variable) if variable in graph else None
    if holder is not None and holder.kind == OUTPUT and holder.inputs == (node,):
        return  # `y = ...; gc.output(y, name="y")`: the output carries the name
    name = graph.fresh_name(variable)
    graph.rename(node, name)
    given = _GIVEN.get(graph)  # not setdefault: its weak reference is made anew each call
    if given is None:
        given = _GIVEN[graph] = set()
    given.add(name)


def _settle(session: _Session, live: list[FrameType]) -> None:
    """Read the frames of returned helpers (then forget them) and the live ones."""
    frames = session.frames
    if len(frames) == len(live):  # every frame met is on the stack (live ones are met)
        _read_all(live, session.pending)
        return
    on_stack = {id(f) for f in live}
    finished = [frames.pop(k) for k in list(frames) if k not in on_stack]
    _read_all([*finished, *live], session.pending)


def _read_all(frames: list[FrameType], pending: dict[int, tuple[Node, int]]) -> None:
    """Name the pending values that the frames' local variables hold: each after a
    variable of the frame that made it if one holds it, else after the first found (in
    the order of `frames`, then of the variables)."""
    chosen: dict[int, tuple[bool, str]] = {}  # id(node) -> (made in that frame, variable)
    for frame in frames:
        if not pending:
            return
        for variable, value in frame.f_locals.items():
            if not isinstance(value, Symbol) or variable.startswith("_"):
                continue
            entry = pending.get(id(value.node))
            if entry is None:
                continue
            made_here = entry[1] == id(frame)
            earlier = chosen.get(id(value.node))
            if earlier is None or (made_here and not earlier[0]):
                chosen[id(value.node)] = (made_here, variable)
    for key, (_, variable) in chosen.items():
        _rename(pending.pop(key)[0], variable)


class _Observer:
    """What ir/graph.py tells: graphs entered and left, nodes appended (this thread's)."""

    def entered(self, graph: Graph) -> None:
        caller = sys._getframe(2)  # the frame running `with graph:`
        begins = _is_users(caller.f_code.co_filename)
        _STATE.entries.append(begins)
        if begins:
            _begin(stop=None, root=caller)

    def exited(self, graph: Graph) -> None:
        if _STATE.entries and _STATE.entries.pop():
            _end()

    def appended(self, node: Node) -> None:
        session = _STATE.session
        if session is None:
            return
        live = _user_frames(session)
        frames = session.frames
        for frame in live:
            frames.setdefault(id(frame), frame)
        pending = session.pending
        for x in node.inputs:
            if id(x) in pending:
                _settle(session, live)
                for y in node.inputs:  # used now: had it been assigned, it was read above
                    pending.pop(id(y), None)
                break
        if node.kind == OP and _generated_name(node):
            pending[id(node)] = (node, id(live[0]) if live else 0)


def _begin(stop: FrameType | None, root: FrameType | None) -> None:
    if _STATE.session is not None:
        _STATE.session.depth += 1
    else:
        _STATE.session = _Session(stop, root)


def _end() -> None:
    session = _STATE.session
    if session is None:
        return
    session.depth -= 1
    if session.depth > 0:
        return
    try:
        frames = [f for f in session.frames.values() if f is not session.root]
        if session.root is not None:
            frames.append(session.root)
        _read_all(frames, session.pending)
    finally:
        _STATE.session = None


@contextmanager
def naming_values(stop: FrameType | None) -> Iterator[None]:
    """Name values after the user's variables while the body runs (`trace` calls this
    with its own frame as `stop`: frames from there out are not the traced program)."""
    _begin(stop=stop, root=None)
    try:
        yield
    finally:
        _end()


def make_room(graph: Graph, name: str, value: Node | None = None) -> None:
    """If `name` is held by a value named after a variable, move that value aside so the
    caller can give `name` explicitly; an output named `name` for that very `value`
    gives the value back its generated name (`y = ...; gc.output(y, name="y")`)."""
    given = _GIVEN.get(graph)
    if not given or name not in given or name not in graph:
        return
    given.discard(name)
    node = graph.node(name)
    if node is value:
        graph.rename(node, graph.fresh_name(str(node.op)))
        return
    moved = graph.fresh_name(name)
    graph.rename(node, moved)
    given.add(moved)


def output_name(graph: Graph, value: Node) -> str:
    """The name an output of `value` gets when none is asked: `out`, `out_1`, ... as
    before values were named, so a graph's interface does not depend on the names of
    its variables (a value named `out` after a variable moves aside)."""
    given = _GIVEN.get(graph, set())
    candidate, count = "out", 0
    while candidate in graph and candidate not in given:
        count += 1
        candidate = f"out_{count}"
    make_room(graph, candidate, value)
    return candidate


def named(value: Value, name: str) -> Value:
    """Give a graph value `name` (where a variable cannot: a value in a list, a loop);
    returns `value`. Eager tensors and arrays are returned unchanged.

    >>> import graphc as gc
    >>> g = gc.trace(lambda x: gc.named(x * 2, "doubled"), gc.TensorSpec((3,)))
    >>> g.op_nodes[-1].name
    'doubled'
    """
    if not isinstance(name, str) or not name:
        raise GraphcError(f"gc.named: expected a non-empty str as the name, got {name!r}")
    if not isinstance(value, Symbol):
        return value
    node, graph = value.node, value.graph
    session = _STATE.session
    if session is not None:
        session.pending.pop(id(node), None)
    if node.name == name:
        return value
    make_room(graph, name)
    if name in graph:
        raise GraphcError(
            f"gc.named: graph '{graph.name}' already has {graph.node(name).describe()}; "
            f"choose another name for {node.describe()}"
        )
    given = _GIVEN.get(graph)
    if given is not None:
        given.discard(node.name)
    graph.rename(node, name)
    return value


graph_module.set_observer(_Observer())
