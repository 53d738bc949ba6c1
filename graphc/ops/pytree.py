"""Pytrees: nested containers of values, flattened to their leaves and a structure that
rebuilds them, with JAX's rules (`jax.tree_util`), for the operands, carries and results
of gc.cond / gc.switch / gc.scan / gc.while_loop / gc.fori_loop / gc.map.

The containers: tuples and lists (in order), dicts (in sorted key order, as JAX),
OrderedDicts (in insertion order) and defaultdicts (sorted), namedtuples (by field,
rebuilt as `kind(*children)`), None (an empty subtree, no leaves), and the types
registered with `register_pytree_node` (a flatten function giving
`(children, aux_data)`, an unflatten function taking `(aux_data, children)`) or
`register_dataclass`. Anything else is a leaf: an unregistered class or dataclass too,
and a subclass of list, tuple or dict that is not a namedtuple (JAX's rule: a type is a
container only if it, exactly, is registered).

The functions are top-level with jax.tree_util's names (`gc.tree_flatten`,
`gc.tree_unflatten`, `gc.tree_map`, `gc.tree_leaves`, `gc.tree_structure`,
`gc.register_pytree_node`, `gc.register_dataclass`), as graphc's control-flow functions
are `gc.cond` where JAX has `lax.cond`.

Key paths are JAX's too (`tree_flatten_with_path`, `tree_leaves_with_path`,
`tree_map_with_path`, `keystr`), with `tree_transpose`, `all_leaves`, `Partial` (a
function with bound arguments that is a pytree) and the treedef's `unflatten`,
`flatten_up_to` and `num_nodes`, in `gc.tree_util`.

The structure (`TreeDef`) compares equal when two trees have the same containers, keys
and aux data; `mismatch` says where two structures first differ, for the errors of the
control-flow functions (a carry that changes structure).

>>> leaves, tree = tree_flatten({"b": 1, "a": (2, None), "c": [3]})
>>> leaves, show_tree(tree)
([2, 1, 3], "{'a': (x, None), 'b': x, 'c': [x]}")
>>> tree_unflatten(tree, ["p", "q", "r"])
{'a': ('p', None), 'b': 'q', 'c': ['r']}
>>> tree_map(lambda v: v * 10, (1, {"k": 2}))
(10, {'k': 20})
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from graphc.ir.errors import GraphcError

LEAF = "*"  # the structure of a leaf


@dataclasses.dataclass(frozen=True)
class TreeDef:
    """The structure of one container: its type, its aux data (dict keys, a registered
    type's aux_data) and the structures of its children, in flattening order."""

    kind: type
    aux: Any
    children: tuple[Any, ...]

    @property
    def num_leaves(self) -> int:
        return num_leaves(self)

    @property
    def num_nodes(self) -> int:
        """The containers, leaves and Nones of the structure, as JAX counts them."""
        return _num_nodes(self)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """`tree_unflatten(self, leaves)`, as JAX's treedef.unflatten."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of `tree` at this structure's leaves (JAX's flatten_up_to)."""
        return _flatten_up_to(self, tree)

    def __repr__(self) -> str:
        return f"TreeDef({show_tree(self)})"


Tree = Any  # LEAF, None, or a TreeDef

FlattenFn = Callable[[Any], tuple[Iterable[Any], Hashable]]
UnflattenFn = Callable[[Hashable, tuple[Any, ...]], Any]


def _flatten_dict(value: dict) -> tuple[list[Any], tuple]:
    try:
        keys = tuple(sorted(value))
    except TypeError:
        raise GraphcError(
            f"pytree: the keys of a dict must be sortable (JAX flattens dicts in sorted "
            f"key order), got {list(value)}"
        ) from None
    return [value[k] for k in keys], keys


def _flatten_defaultdict(value: collections.defaultdict) -> tuple[list[Any], tuple]:
    children, keys = _flatten_dict(value)
    return children, (value.default_factory, keys)


def _unflatten_defaultdict(aux: tuple, children: tuple) -> collections.defaultdict:
    factory, keys = aux
    return collections.defaultdict(factory, zip(keys, children, strict=True))


_REGISTRY: dict[type, tuple[FlattenFn, UnflattenFn]] = {
    tuple: (lambda v: (v, None), lambda _, children: tuple(children)),
    list: (lambda v: (v, None), lambda _, children: list(children)),
    dict: (_flatten_dict, lambda keys, children: dict(zip(keys, children, strict=True))),
    collections.OrderedDict: (
        lambda v: (list(v.values()), tuple(v)),
        lambda keys, children: collections.OrderedDict(zip(keys, children, strict=True)),
    ),
    collections.defaultdict: (_flatten_defaultdict, _unflatten_defaultdict),
}


def register_pytree_node(
    nodetype: type, flatten_func: FlattenFn, unflatten_func: UnflattenFn
) -> None:
    """Make `nodetype` a container (`jax.tree_util.register_pytree_node`'s signature):
    `flatten_func(value)` gives `(children, aux_data)`, `unflatten_func(aux_data,
    children)` rebuilds the value. aux_data is part of the structure: two values whose
    aux_data differ (by ==) have different structures.

    >>> import graphc as gc
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> gc.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    >>> gc.tree_leaves(Pair(1, (2, 3)))
    [1, 2, 3]
    """
    if not isinstance(nodetype, type):
        raise GraphcError(f"register_pytree_node: expected a class, got {nodetype!r}")
    if nodetype in _REGISTRY or _is_namedtuple_class(nodetype) or nodetype is type(None):
        raise GraphcError(
            f"register_pytree_node: {nodetype.__qualname__} is already a pytree container"
        )
    _REGISTRY[nodetype] = (flatten_func, unflatten_func)


def register_pytree_node_class(cls: type) -> type:
    """Register a class that flattens itself (`jax.tree_util.register_pytree_node_class`,
    a decorator): `value.tree_flatten()` gives `(children, aux_data)` and the classmethod
    `cls.tree_unflatten(aux_data, children)` rebuilds it.

    >>> import graphc as gc
    >>> @gc.tree_util.register_pytree_node_class
    ... class Box:
    ...     def __init__(self, v):
    ...         self.v = v
    ...     def tree_flatten(self):
    ...         return (self.v,), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children):
    ...         return cls(*children)
    >>> gc.tree_map(lambda x: x * 2, Box(3)).v
    6
    """
    for method in ("tree_flatten", "tree_unflatten"):
        if not callable(getattr(cls, method, None)):
            raise GraphcError(
                f"register_pytree_node_class: {getattr(cls, '__qualname__', cls)!r} has no "
                f"{method} method (tree_flatten(self) -> (children, aux_data) and the "
                "classmethod tree_unflatten(cls, aux_data, children))"
            )
    register_pytree_node(cls, lambda value: value.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(
    nodetype: type,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> type:
    """Make a dataclass a container (`jax.tree_util.register_dataclass`): its data fields
    are children (in the order given, or the class's field order), its meta fields are
    aux data (part of the structure, compared by ==). Without the lists, every field is
    data except those declared `field(metadata={"static": True})`; `drop_fields` are
    neither. Returns the class, so it serves as a decorator. An unregistered dataclass
    is a leaf, as in JAX.

    >>> import dataclasses, graphc as gc
    >>> @gc.register_dataclass
    ... @dataclasses.dataclass
    ... class State:
    ...     x: object
    ...     n: int = dataclasses.field(default=0, metadata={"static": True})
    >>> leaves, tree = gc.tree_flatten(State(x=(1.0, 2.0), n=3))
    >>> leaves, gc.tree_unflatten(tree, [5.0, 6.0])
    ([1.0, 2.0], State(x=(5.0, 6.0), n=3))
    """
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise GraphcError(
                f"register_dataclass: {getattr(nodetype, '__qualname__', nodetype)} is not a "
                "dataclass; give data_fields= and meta_fields="
            )
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        data = tuple(f.name for f in fields if not f.metadata.get("static", False))
        meta = tuple(f.name for f in fields if f.metadata.get("static", False))
    elif data_fields is None or meta_fields is None:
        raise GraphcError("register_dataclass: give both data_fields= and meta_fields=, or neither")
    else:
        data, meta = tuple(data_fields), tuple(meta_fields)

    def flatten_fields(value: Any) -> tuple[list[Any], tuple]:
        return [getattr(value, n) for n in data], tuple(getattr(value, n) for n in meta)

    def unflatten_fields(aux: tuple, children: tuple) -> Any:
        return nodetype(
            **dict(zip(data, children, strict=True)), **dict(zip(meta, aux, strict=True))
        )

    register_pytree_node(nodetype, flatten_fields, unflatten_fields)
    _FIELDS[nodetype] = data
    return nodetype


_FIELDS: dict[type, tuple[str, ...]] = {}  # a registered dataclass's children, by name


def _is_namedtuple_class(kind: type) -> bool:
    return issubclass(kind, tuple) and hasattr(kind, "_fields")


def _rule(kind: type) -> tuple[FlattenFn, UnflattenFn] | None:
    rule = _REGISTRY.get(kind)
    if rule is None and _is_namedtuple_class(kind):
        return (lambda v: (v, None), lambda _, children: kind(*children))
    return rule


# -- flatten and unflatten ------------------------------------------------------------


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], Tree]:
    """The leaves of a pytree, in JAX's order, and the structure to rebuild it;
    `is_leaf(value)` True stops the descent at a value."""
    if is_leaf is not None and is_leaf(tree):  # asked first: None may be a leaf too
        return [tree], LEAF
    if tree is None:
        return [], None
    rule = _rule(type(tree))
    if rule is None:
        return [tree], LEAF
    children, aux = rule[0](tree)
    leaves: list[Any] = []
    subtrees = []
    for child in children:
        child_leaves, subtree = tree_flatten(child, is_leaf)
        leaves += child_leaves
        subtrees.append(subtree)
    return leaves, TreeDef(type(tree), aux, tuple(subtrees))


def tree_unflatten(treedef: Tree, leaves: Iterable[Any]) -> Any:
    """The pytree of structure `treedef` whose leaves are `leaves`, in order."""
    values = list(leaves)
    if len(values) != num_leaves(treedef):
        raise GraphcError(
            f"tree_unflatten: the structure {show_tree(treedef)} has {num_leaves(treedef)} "
            f"leaves, got {len(values)}"
        )
    it = iter(values)

    def build(t: Tree) -> Any:
        if t is None:
            return None
        if t == LEAF:
            return next(it)
        children = tuple(build(s) for s in t.children)
        rule = _rule(t.kind)
        if rule is None:
            raise GraphcError(f"tree_unflatten: {t.kind.__qualname__} is no longer registered")
        return rule[1](t.aux, children)

    return build(treedef)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of a pytree, in JAX's order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> Tree:
    """The structure of a pytree (a TreeDef, LEAF or None)."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """A pytree of `tree`'s structure whose leaves are `f(leaf, *leaves of rest)`; the
    trees in `rest` must have the same structure as `tree`."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for k, other in enumerate(rest):
        other_leaves, other_def = tree_flatten(other, is_leaf)
        where = mismatch(treedef, other_def)
        if where is not None:
            raise GraphcError(f"tree_map: tree {k + 1} differs from the first at {where}")
        others.append(other_leaves)
    return tree_unflatten(treedef, [f(*args) for args in zip(leaves, *others, strict=True)])


_NO_INITIAL = object()


def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _NO_INITIAL,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """`functools.reduce` of `function` over `tree`'s leaves (`jax.tree_util.tree_reduce`).

    >>> import graphc as gc
    >>> gc.tree_util.tree_reduce(lambda a, b: a + b, {"x": 1, "y": [2, 3]})
    6
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIAL:
        if not leaves:
            raise GraphcError("tree_reduce: a tree without leaves needs an initializer")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf is true (`jax.tree_util.tree_all`); True without leaves."""
    return all(tree_leaves(tree, is_leaf))


def num_leaves(tree: Tree) -> int:
    if tree is None:
        return 0
    if tree == LEAF:
        return 1
    return sum(num_leaves(s) for s in tree.children)


def _num_nodes(tree: Tree) -> int:
    if tree is None or tree == LEAF:
        return 1
    return 1 + sum(_num_nodes(s) for s in tree.children)


def _flatten_up_to(tree: Tree, value: Any) -> list[Any]:
    if tree == LEAF:
        return [value]
    if tree is None:
        if value is not None:
            raise GraphcError(f"flatten_up_to: expected None, got {type(value).__name__}")
        return []
    rule = _rule(type(value))
    if type(value) is not tree.kind or rule is None:
        raise GraphcError(
            f"flatten_up_to: expected a {tree.kind.__qualname__}, got {type(value).__qualname__}"
        )
    children, aux = rule[0](value)
    children = list(children)
    if aux != tree.aux or len(children) != len(tree.children):
        raise GraphcError(f"flatten_up_to: {show_tree(tree)} differs from the value's structure")
    return [v for s, c in zip(tree.children, children) for v in _flatten_up_to(s, c)]


# graphc's own short names, which the control-flow functions use
flatten = tree_flatten
unflatten = tree_unflatten


# -- key paths (jax.tree_util's *_with_path) ------------------------------------------


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A child of a tuple or list, by position: `[0]`."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """A child of a dict, by key: `['a']`."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """A child of a namedtuple or registered dataclass, by field: `.name`."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """A child of another registered type, by its position among the children."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def _child_keys(t: TreeDef) -> list[Any]:
    keys = _keys(t)
    if keys is not None:
        return [DictKey(k) for k in keys]
    if t.kind in (tuple, list):
        return [SequenceKey(k) for k in range(len(t.children))]
    if _is_namedtuple_class(t.kind):
        return [GetAttrKey(f) for f in t.kind._fields]  # type: ignore[attr-defined]
    if t.kind in _FIELDS:
        return [GetAttrKey(f) for f in _FIELDS[t.kind]]
    return [FlattenedIndexKey(k) for k in range(len(t.children))]


def _paths(tree: Tree, prefix: tuple = ()) -> list[tuple]:
    if tree is None:
        return []
    if tree == LEAF:
        return [prefix]
    keys = _child_keys(tree)
    return [p for k, child in zip(keys, tree.children) for p in _paths(child, (*prefix, k))]


def tree_flatten_with_path(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[tuple[tuple, Any]], Tree]:
    """`tree_flatten`, each leaf with its key path: a tuple of SequenceKey, DictKey,
    GetAttrKey or FlattenedIndexKey, as JAX's.

    >>> pairs, _ = tree_flatten_with_path({"a": (1, 2)})
    >>> [(keystr(path), leaf) for path, leaf in pairs]
    [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    return list(zip(_paths(treedef), leaves, strict=True)), treedef


def tree_leaves_with_path(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> list[tuple[tuple, Any]]:
    """The (key path, leaf) pairs of `tree`, in flattening order."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """`tree_map` whose function also takes each leaf's key path first."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    paths = iter([path for path, _ in pairs])
    return tree_map(lambda *leaves: f(next(paths), *leaves), tree, *rest, is_leaf=is_leaf)


def keystr(path: Sequence[Any]) -> str:
    """A key path as text: `keystr((DictKey('a'), SequenceKey(0)))` is "['a'][0]"."""
    return "".join(str(k) for k in path)


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of `iterable` is a leaf."""
    return all(tree_structure(x, is_leaf) == LEAF for x in iterable)


def tree_transpose(outer: Tree, inner: Tree, tree: Any) -> Any:
    """A tree of structure `outer` whose leaves are trees of structure `inner`, as a tree
    of structure `inner` whose leaves are trees of structure `outer` (JAX's).

    >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), [(1, 2), (3, 4)])
    ([1, 3], [2, 4])
    """
    columns = []
    for k, sub in enumerate(_flatten_up_to(outer, tree)):
        leaves, got = tree_flatten(sub)
        where = mismatch(inner, got)
        if where is not None:
            raise GraphcError(f"tree_transpose: the inner tree {k} differs at {where}")
        columns.append(leaves)
    rows = [tree_unflatten(outer, list(row)) for row in zip(*columns, strict=True)]
    if not columns:  # no outer leaves: each inner leaf is an empty outer tree
        rows = [tree_unflatten(outer, []) for _ in range(num_leaves(inner))]
    return tree_unflatten(inner, rows)


class Partial(functools.partial):
    """A function with some arguments bound, which is a pytree whose leaves are those
    arguments (the function is part of its structure), as jax.tree_util.Partial: it can
    be passed through transformations and control flow."""


def _flatten_partial(p: Partial) -> tuple[list[Any], Hashable]:
    names = tuple(sorted(p.keywords))
    return [*p.args, *(p.keywords[n] for n in names)], (p.func, len(p.args), names)


def _unflatten_partial(aux: Any, children: tuple[Any, ...]) -> Partial:
    func, count, names = aux
    return Partial(func, *children[:count], **dict(zip(names, children[count:], strict=True)))


# -- showing and comparing structures -------------------------------------------------


def _keys(t: TreeDef) -> list[Any] | None:
    """The keys naming the children of a mapping container, else None."""
    if t.kind is collections.defaultdict:
        return list(t.aux[1])
    if t.kind in (dict, collections.OrderedDict):
        return list(t.aux)
    return None


def show_tree(tree: Tree) -> str:
    """A structure as text: leaves as x, `(x, [x, None])`, `{'a': x}`, `P(a=x, b=x)`."""
    if tree is None:
        return "None"
    if tree == LEAF:
        return "x"
    shown = [show_tree(s) for s in tree.children]
    keys = _keys(tree)
    if keys is not None:
        inner = "{" + ", ".join(f"{k!r}: {s}" for k, s in zip(keys, shown, strict=True)) + "}"
        return inner if tree.kind is dict else f"{tree.kind.__name__}({inner})"
    if tree.kind is list:
        return "[" + ", ".join(shown) + "]"
    if tree.kind is tuple:
        return "(" + ", ".join(shown) + ("," if len(shown) == 1 else "") + ")"
    if _is_namedtuple_class(tree.kind):
        fields = tree.kind._fields  # type: ignore[attr-defined]
        inner = ", ".join(f"{f}={s}" for f, s in zip(fields, shown, strict=True))
        return f"{tree.kind.__name__}({inner})"
    aux = "" if tree.aux is None else f"[{tree.aux!r}]"
    return f"{tree.kind.__name__}{aux}(" + ", ".join(shown) + ")"


def _describe(tree: Tree) -> str:
    if tree is None:
        return "None"
    if tree == LEAF:
        return "a leaf"
    keys = _keys(tree)
    if keys is not None:
        return f"{tree.kind.__name__} with keys {keys!r}"
    return f"{tree.kind.__name__} of {len(tree.children)}"


def _step(tree: TreeDef, k: int) -> str:
    keys = _keys(tree)
    if keys is not None:
        return f"[{keys[k]!r}]"
    if _is_namedtuple_class(tree.kind):
        return "." + tree.kind._fields[k]  # type: ignore[attr-defined]
    return f"[{k}]"


def leaf_paths(tree: Tree, root: str) -> list[str]:
    """The path of each leaf of `tree`, in flattening order, as the errors name them:
    `leaf_paths(structure of (x, {"a": y}), "carry")` is `["carry[0]", "carry[1]['a']"]`.

    >>> leaf_paths(tree_structure((1, {"a": 2}, [None, 3])), "carry")
    ['carry[0]', "carry[1]['a']", 'carry[2][1]']
    """
    if tree is None:
        return []
    if tree == LEAF:
        return [root]
    paths: list[str] = []
    for k, child in enumerate(tree.children):
        paths += leaf_paths(child, root + _step(tree, k))
    return paths


def mismatch(a: Tree, b: Tree, path: str = "") -> str | None:
    """Where structures `a` and `b` first differ, as `path: what a has vs what b has`
    (`['a']: dict keys ['a', 'b'] vs ['a']`); None when they are equal."""
    if a == b:
        return None
    where = path or "the top"
    if isinstance(a, TreeDef) and isinstance(b, TreeDef) and a.kind is b.kind:
        keys_a, keys_b = _keys(a), _keys(b)
        if keys_a is not None and keys_a != keys_b:
            return f"{where}: {a.kind.__name__} keys {keys_a!r} vs {keys_b!r}"
        if len(a.children) != len(b.children):
            return f"{where}: {_describe(a)} vs {_describe(b)}"
        for k, (x, y) in enumerate(zip(a.children, b.children, strict=True)):
            inner = mismatch(x, y, path + _step(a, k))
            if inner is not None:
                return inner
        return f"{where}: {a.kind.__name__} aux data {a.aux!r} vs {b.aux!r}"
    return f"{where}: {_describe(a)} vs {_describe(b)}"


register_pytree_node(Partial, _flatten_partial, _unflatten_partial)
