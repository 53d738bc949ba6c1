"""Cases ported from PyTorch's autograd tests that graphc's eager side got wrong (issue 35):
`.grad` accumulation under create_graph, grad-mode decorators on generators, views
reaching an in-place op on their base, `_version` as an int, `unbind`, and assignment
through an integer-array or boolean index. Each runs on graphc and, where installed, on
torch, and the two must agree; otherwise graphc's own rule (finite differences) decides.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.eager.autograd import gradcheck, gradgradcheck
from graphc.ir.errors import AutodiffError, DTypeError, IndexRangeError, ShapeError

# torch warns that backward(create_graph=True) makes a reference cycle: the cases want it
pytestmark = pytest.mark.filterwarnings("ignore:Using backward.. with create_graph:UserWarning")


def _torch() -> Any:
    return pytest.importorskip("torch")


def _values(t: Any) -> list:
    return t.detach().tolist()


# -- 1. accumulating .grad -------------------------------------------------------------------


def _accumulations(lib: Any) -> list[Any]:
    """What a user sees of `.grad` over backward calls with and without create_graph."""
    seen: list[Any] = []

    def watch(x: Any, old: Any) -> None:
        seen.append((_values(old), _values(x.grad), old is x.grad, x.grad.requires_grad))

    # gradients that are constants, both passes with create_graph
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward(create_graph=True)
    old = x.grad
    (x * 2).sum().backward(create_graph=True)
    watch(x, old)
    # a plain pass, then one with create_graph
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    old = x.grad
    (x * x).sum().backward(create_graph=True)
    watch(x, old)
    # create_graph, then a plain pass: in place, the history of .grad kept
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward(create_graph=True)
    old = x.grad
    (x * x).sum().backward()
    watch(x, old)
    # backward(inputs=) with create_graph
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward(create_graph=True)
    old = x.grad
    lib.autograd.backward((x * x).sum(), inputs=[x], create_graph=True)
    watch(x, old)
    # a non-leaf's retained gradient is replaced, never written in place
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward(retain_graph=True)
    old = y.grad
    (y * y).sum().backward()
    watch(y, old)
    return seen


def test_create_graph_replaces_grad_instead_of_writing_it() -> None:
    seen = _accumulations(ge)
    constant, after_plain, then_plain, inputs, retained = seen
    assert constant == ([2.0, 2.0], [4.0, 4.0], False, False)
    assert after_plain == ([2.0, 4.0], [4.0, 8.0], False, True)
    assert then_plain == ([4.0, 8.0], [4.0, 8.0], True, True)
    assert inputs == ([2.0, 4.0], [4.0, 8.0], False, True)
    assert retained == ([4.0, 8.0], [8.0, 16.0], False, False)


def test_grad_accumulation_matches_torch() -> None:
    torch = _torch()
    assert _accumulations(ge) == _accumulations(torch)


def test_a_grad_made_with_create_graph_is_differentiable_after_accumulating() -> None:
    x = ge.tensor([1.0, 2.0], dtype=ge.float64, requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    first = x.grad
    (x**3).sum().backward(create_graph=True)
    assert first is not x.grad and x.grad.grad_fn is not None
    np.testing.assert_allclose(first.detach().numpy(), [3.0, 12.0])
    (second,) = ge.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(second.numpy(), [12.0, 24.0])  # d/dx of 2 * 3x^2


def test_the_first_grad_under_create_graph_is_a_copy_of_the_seed() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    seed = ge.tensor([1.0, 1.0], requires_grad=True)
    (x * 1).backward(seed, create_graph=True)
    assert x.grad is not seed and x.grad.grad_fn is not None
    x.grad = None
    x.backward(seed.detach(), create_graph=True)
    assert x.grad is not seed and x.grad.tolist() == [1.0, 1.0]


def test_plain_accumulation_is_in_place_and_bumps_the_grads_version() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    grad = x.grad
    assert grad._version == 0
    (x * 3).sum().backward()
    assert x.grad is grad and grad.tolist() == [6.0, 6.0] and grad._version == 1


# -- 2. grad-mode decorators on generator functions --------------------------------------------


def _decorators(lib: Any) -> dict[str, Any]:
    return {
        "no_grad()": lib.no_grad(),
        "no_grad": lib.no_grad,
        "enable_grad()": lib.enable_grad(),
        "inference_mode()": lib.inference_mode(),
        "inference_mode": lib.inference_mode,
        "inference_mode(False)": lib.inference_mode(False),
    }


def _generator_modes(lib: Any, name: str) -> list[Any]:
    """The grad mode inside a decorated generator's body at each resume and outside it
    between resumes, with values sent and thrown in, and its return value."""
    decorate = _decorators(lib)[name]
    x = lib.ones(2, requires_grad=True)

    @decorate
    def steps() -> Generator:
        got = yield lib.is_grad_enabled(), (x * 2).requires_grad
        try:
            yield lib.is_grad_enabled(), got
        except KeyError:
            yield "caught", lib.is_grad_enabled()
        return lib.is_grad_enabled()

    seen: list[Any] = []
    for outer in (True, False):
        with lib.set_grad_enabled(outer):
            run = steps()
            seen.append(next(run))
            seen.append(lib.is_grad_enabled())
            seen.append(run.send("sent"))
            seen.append(lib.is_grad_enabled())
            seen.append(run.throw(KeyError("k")))
            with pytest.raises(StopIteration) as stop:
                next(run)
            seen.append(stop.value.value)
            seen.append(lib.is_grad_enabled())
    return seen


@pytest.mark.parametrize("name", sorted(_decorators(ge)))
def test_a_decorated_generator_runs_its_body_in_the_mode(name: str) -> None:
    inner = name != "enable_grad()" and name != "inference_mode(False)"
    mode = not inner
    seen = _generator_modes(ge, name)
    for outer, run in zip((True, False), (seen[:7], seen[7:])):
        assert run == [(mode, mode), outer, (mode, "sent"), outer, ("caught", mode), mode, outer]


@pytest.mark.parametrize("name", sorted(_decorators(ge)))
def test_a_decorated_generator_matches_torch(name: str) -> None:
    torch = _torch()
    assert _generator_modes(ge, name) == _generator_modes(torch, name)


def test_set_grad_enabled_decorates_a_generator() -> None:
    @ge.set_grad_enabled(False)
    def steps() -> Generator:
        yield ge.is_grad_enabled()
        yield ge.is_grad_enabled()

    assert ge.is_grad_enabled()  # as a decorator it does not switch the mode at once
    run = steps()
    assert next(run) is False and ge.is_grad_enabled() and next(run) is False


def test_closing_a_decorated_generator_runs_its_cleanup_in_the_mode() -> None:
    modes = []

    @ge.no_grad()
    def steps() -> Generator:
        try:
            yield 1
            yield 2
        finally:
            modes.append(ge.is_grad_enabled())

    run = steps()
    next(run)
    run.close()
    assert modes == [False] and ge.is_grad_enabled()


def test_a_decorated_plain_function_still_works() -> None:
    @ge.no_grad()
    def double(x: Any) -> Any:
        return x * 2

    x = ge.ones(2, requires_grad=True)
    assert not double(x).requires_grad and ge.is_grad_enabled()


def test_inference_mode_false_turns_grad_mode_on() -> None:
    with ge.no_grad(), ge.inference_mode(False):
        assert ge.is_grad_enabled()  # as torch: leaving inference mode turns grad mode on
    with ge.inference_mode(True):
        assert not ge.is_grad_enabled()


# -- 3. views taken before an in-place op on their base --------------------------------------


def _view_then_base_written(lib: Any) -> list[Any]:
    x = lib.zeros(3, 2)
    r = lib.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    row = x.select(0, 1)
    column = x.t()[1]
    nested = x[1:][0]
    before = [row.requires_grad, row.grad_fn is None]
    x.add_(r)
    x.mul_(r)
    seen = [before, row.requires_grad, row.is_leaf, column.requires_grad, nested.requires_grad]
    seen.append((row * 2).requires_grad)
    (row * lib.tensor([10.0, 100.0])).sum().backward(retain_graph=True)
    seen.append(_values(r.grad))
    r.grad = None
    (column * column).sum().backward(retain_graph=True)
    seen.append(_values(r.grad))
    r.grad = None
    nested.sum().backward()
    seen.append(_values(r.grad))
    return seen


def test_views_taken_before_an_in_place_op_on_the_base_follow_its_history() -> None:
    seen = _view_then_base_written(ge)
    assert seen[:6] == [[False, True], True, False, True, True, True]
    assert seen[6] == [[0.0, 0.0], [60.0, 800.0], [0.0, 0.0]]  # d(r*r)/dr * 10, 100
    assert seen[7] == [[0.0, 4.0 * 8], [0.0, 4.0 * 64], [0.0, 4.0 * 216]]


def test_views_taken_before_an_in_place_op_match_torch() -> None:
    torch = _torch()
    assert _view_then_base_written(ge) == _view_then_base_written(torch)


def test_a_view_follows_the_base_against_finite_differences() -> None:
    def through_view(r: Any) -> Any:
        x = ge.zeros(3, 2, dtype=ge.float64)
        view = x.select(1, 0)
        x.add_(r)
        x.mul_(r.exp())
        return view * view

    r = ge.tensor(np.linspace(-1.0, 1.0, 6).reshape(3, 2), requires_grad=True)
    assert gradcheck(through_view, (r,))
    assert gradgradcheck(through_view, (r,))


def _no_grad_view_then_base_written(lib: Any, base_grad: bool, op_grad: bool, r_grad: bool) -> Any:
    """A view made under no_grad, then an in-place op on its base: what reading it gives."""
    a = lib.zeros(3, requires_grad=True)
    x = a * 1 if base_grad else lib.zeros(3)
    with lib.no_grad():
        view = x[1:]
    r = lib.ones(3, requires_grad=r_grad)
    with lib.set_grad_enabled(op_grad):
        x.add_(r)
    seen = [view.requires_grad, view.tolist()]
    with lib.no_grad():
        seen.append((view * 2).requires_grad)
    try:
        seen.append(view.grad_fn)
    except RuntimeError:
        seen.append("refused")
    try:
        seen.append((view * 2).requires_grad)
    except RuntimeError:
        seen.append("refused")
    return seen


FLAGS = [(b, g, r) for b in (False, True) for g in (False, True) for r in (False, True)]


@pytest.mark.parametrize("flags", FLAGS)
def test_a_no_grad_view_refuses_a_history_it_cannot_follow(flags: tuple) -> None:
    seen = _no_grad_view_then_base_written(ge, *flags)
    base_grad, op_grad, r_grad = flags
    if base_grad or (op_grad and r_grad):  # the base requires grad and the counter moved
        assert seen == [True, [1.0, 1.0], False, "refused", "refused"]
    else:  # nothing to follow: the view stays outside the tape
        assert seen == [False, [1.0, 1.0], False, None, False]


@pytest.mark.parametrize("flags", FLAGS)
def test_a_no_grad_view_after_an_in_place_op_matches_torch(flags: tuple) -> None:
    torch = _torch()
    assert _no_grad_view_then_base_written(ge, *flags) == _no_grad_view_then_base_written(
        torch, *flags
    )


def test_a_refused_view_still_prints_and_its_message_says_what_to_do() -> None:
    w = ge.zeros(3, requires_grad=True)
    with ge.no_grad():
        view = w[1:]
        w.add_(1)  # an optimizer-like update, after the view was taken
    assert repr(view) == "tensor([1., 1.], grad_fn=<Invalid>)"
    with pytest.raises(AutodiffError, match="created in no_grad mode.*both outside"):
        view.sum()
    with ge.no_grad():
        fresh = w[1:]
    assert fresh.grad_fn is None and not fresh.requires_grad  # taken after: nothing moved


# -- 4. _version is an int ---------------------------------------------------------------------


def _versions(lib: Any) -> list[Any]:
    x = lib.zeros(2, 3)
    row = x[0]
    seen = [(x._version, row._version)]
    x.add_(1)
    seen.append((x._version, row._version))
    row.mul_(2)
    seen.append((x._version, row._version))
    x[1, 2] = 5.0
    later = x.t()
    seen.append((x._version, row._version, later._version))
    later.zero_()
    seen.append((x._version, row._version, later._version, x.detach()._version))
    return seen


def test_version_is_an_int_shared_by_a_base_and_its_views() -> None:
    x = ge.zeros(2)
    assert type(x._version) is int and x._version == 0
    assert _versions(ge) == [(0, 0), (1, 1), (2, 2), (3, 3, 3), (4, 4, 4, 4)]
    snapshot = x._version
    x.add_(1)
    assert snapshot == 0 and x._version == 1  # a snapshot: it does not move afterwards
    with pytest.raises(AttributeError):
        x._version = 5  # read-only, as torch


def test_versions_match_torch() -> None:
    torch = _torch()
    assert _versions(ge) == _versions(torch)


# -- 5. unbind ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_unbind_gives_selects_with_their_gradients(dim: int) -> None:
    data = np.arange(24.0).reshape(2, 3, 4)
    x = ge.tensor(data, requires_grad=True)
    pieces = x.unbind(dim)
    assert len(pieces) == data.shape[dim] and isinstance(pieces, tuple)
    for i, piece in enumerate(pieces):
        np.testing.assert_array_equal(piece.detach().numpy(), np.take(data, i, axis=dim))
    assert gradcheck(lambda x: x.unbind(dim), (x,))
    assert all(a.tolist() == b.tolist() for a, b in zip(ge.unbind(x, dim), pieces))


def test_unbind_matches_torch() -> None:
    torch = _torch()
    data = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)

    def run(lib: Any, x: Any) -> tuple[list, list]:
        a, b, c = x.unbind(0)
        (a * b + c.exp()).sum().backward()
        return [_values(p) for p in lib.unbind(x, dim=-1)], _values(x.grad)

    ours = run(ge, ge.tensor(data, requires_grad=True))
    theirs = run(torch, torch.tensor(data, requires_grad=True))
    np.testing.assert_allclose(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_unbind_edges() -> None:
    assert ge.zeros(0, 3).unbind(0) == ()
    assert [t.shape for t in ge.zeros(2, 0).unbind(0)] == [(0,), (0,)]
    ints = ge.tensor([[1, 2], [3, 4]])
    assert [t.tolist() for t in ints.unbind(1)] == [[1, 3], [2, 4]]
    with pytest.raises(IndexRangeError, match="unbind: a 0-d value"):
        ge.tensor(1.0).unbind()
    with pytest.raises(IndexRangeError, match="unbind"):
        ge.zeros(2).unbind(1)


def test_unbind_traces_and_runs_on_arrays() -> None:
    data = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    g = gc.trace(lambda x: x.unbind(1), data)
    got = gc.run(g, {g.inputs[0].name: data})
    assert [a.tolist() for a in got] == [a.tolist() for a in ge.tensor(data).unbind(1)]
    assert [a.tolist() for a in gc.unbind(data)] == data.tolist()
    with pytest.raises(ShapeError, match="unbind: dim 0 .* is symbolic"):
        gc.trace(lambda x: gc.unbind(x), gc.TensorSpec(("B", 3)))


# -- 6. assignment through an integer-array or boolean index -----------------------------------


def _index_assignments(lib: Any) -> list[Any]:
    """The issue's `c[[1, 2]] = b[[1, 1]]` and other index_put_ cases without duplicates."""
    weights = lib.arange(1.0, 13.0).reshape(3, 4)
    seen = []
    for index, value_shape in [
        (([1, 2],), None),  # the case, written below
        (([0, 2], [1, 3]), (2,)),
        ((slice(None), [0, 3]), (3, 1)),
        (([2, 0],), (4,)),
        ((lib.tensor([True, False, True]),), ()),
        ((lib.tensor([[True, False, False, True]] * 3),), (6,)),
        ((..., lib.tensor([3, 1])), (2,)),
    ]:
        x = lib.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4))
        x.requires_grad_(True)
        b = lib.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4) / 7, requires_grad=True)
        c = x * 1
        if value_shape is None:
            c[[1, 2]] = b[[1, 1]]
        else:
            c[index] = b.reshape(-1)[: int(np.prod(value_shape))].reshape(value_shape) * 3
        version = c._version
        (c * weights).sum().backward()
        seen.append((_values(c), version, _values(x.grad), _values(b.grad)))
    return seen


def test_assignment_through_an_array_index_is_differentiable() -> None:
    seen = _index_assignments(ge)
    values, version, x_grad, b_grad = seen[0]
    assert values[1] == values[2] == pytest.approx([4 / 7, 5 / 7, 6 / 7, 1.0])
    assert version == 1
    assert x_grad == [[1.0, 2.0, 3.0, 4.0], [0.0] * 4, [0.0] * 4]
    assert b_grad == [[0.0] * 4, [5.0 + 9, 6.0 + 10, 7.0 + 11, 8.0 + 12], [0.0] * 4]


def test_assignment_through_an_array_index_matches_torch() -> None:
    torch = _torch()
    for ours, theirs in zip(_index_assignments(ge), _index_assignments(torch)):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_repeated_positions_keep_the_last_write_and_its_gradient() -> None:
    def put(x: Any, value: Any) -> Any:
        c = x * 1
        c[[1, 1, 2, 1]] = value
        return c * ge.arange(1.0, 5.0, dtype=ge.float64)

    x = ge.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    value = ge.tensor([10.0, 20.0, 30.0, 40.0], dtype=ge.float64, requires_grad=True)
    assert put(x, value).detach().tolist() == [-1.0, 80.0, 90.0, 4.0]
    put(x, value).sum().backward()
    # the derivative of what was computed: the overwritten entries 10 and 20 get nothing
    # (torch gives them the gradient of the position they lost, 2)
    assert value.grad.tolist() == [0.0, 0.0, 3.0, 2.0]
    assert gradcheck(put, (x, value))
    assert gradgradcheck(lambda x, v: put(x, v * v), (x, value))


def test_array_index_assignment_edges() -> None:
    x = ge.ones(3, requires_grad=True)
    c = x * 1
    c[[]] = ge.tensor(5.0, requires_grad=True)  # nothing written
    assert c.tolist() == [1.0, 1.0, 1.0] and c._version == 1
    c.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(IndexRangeError, match="__setitem__"):
        c[[3]] = ge.tensor(1.0, requires_grad=True)
    with pytest.raises(ShapeError):
        c[[0, 1]] = ge.ones(3, requires_grad=True)
    # an int value into a float tensor, through a view: the base's history is rewritten
    base = ge.zeros(2, 3, dtype=ge.float64, requires_grad=True) * 1
    v = ge.tensor([1.0, 2.0], dtype=ge.float64, requires_grad=True)
    base[1][[2, 0]] = v
    assert base.tolist() == [[0.0, 0.0, 0.0], [2.0, 0.0, 1.0]]
    (base * ge.arange(6.0, dtype=ge.float64).reshape(2, 3)).sum().backward()
    assert v.grad.tolist() == [5.0, 3.0]


def test_assignment_without_grad_still_writes_in_place() -> None:
    c = ge.zeros(4)
    c[[1, 2]] = ge.tensor([3.0, 4.0])
    assert c.tolist() == [0.0, 3.0, 4.0, 0.0] and c._version == 1 and c.grad_fn is None


def _random_index(rng: np.random.Generator, shape: tuple) -> tuple:
    """An integer-array, boolean or mixed index into shape, with no position twice."""
    kind = rng.integers(4)
    dim = int(rng.integers(len(shape)))
    size = shape[dim]
    before = (slice(None),) * dim
    if kind == 0:  # one integer array along a dim, some of them negative
        count = int(rng.integers(size + 1))
        picked = rng.permutation(size)[:count]
        picked = np.where(rng.random(count) < 0.3, picked - size, picked)
        return (*before, picked)
    if kind == 1:  # a boolean mask over the whole shape
        return (rng.random(shape) < 0.5,)
    if kind == 2:  # a boolean mask over the first dims
        return (rng.random(shape[: dim + 1]) < 0.5,)
    # integer arrays on two dims at once (as coordinates), when there are two
    if len(shape) < 2:
        return (rng.permutation(shape[0])[: shape[0] // 2],)
    flat = rng.permutation(shape[0] * shape[1])[: int(rng.integers(shape[0] * shape[1] + 1))]
    return np.unravel_index(flat, shape[:2])


def _random_put(lib: Any, seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(0, 4, size=int(rng.integers(1, 4))))
    if not all(shape):
        shape = tuple(d or 1 for d in shape[:-1]) + (shape[-1],)  # an empty last dim only
    index = _random_index(rng, shape) if shape[0] else (np.array([], np.int64),)
    written = np.zeros(shape)[index].shape
    value_shape = written[int(rng.integers(len(written) + 1)) :]  # broadcast from the front
    x_data = rng.standard_normal(shape)
    x_data.reshape(-1)[: min(2, x_data.size)] = [np.inf, np.nan][: min(2, x_data.size)]
    x = lib.tensor(x_data, requires_grad=True)
    value = lib.tensor(rng.standard_normal(value_shape), requires_grad=True)
    weights = lib.tensor(rng.standard_normal(shape))
    c = x * 1
    c[tuple(lib.tensor(i) if isinstance(i, np.ndarray) else i for i in index)] = value * 2
    (c * weights).sum().backward()
    zeros = np.zeros(value_shape)
    value_grad = zeros if value.grad is None else value.grad.numpy()  # nothing written: None
    return [c.detach().numpy(), x.grad.numpy(), value_grad]


@pytest.mark.parametrize("seed", range(40))
def test_random_array_index_assignments_match_torch(seed: int) -> None:
    torch = _torch()
    for ours, theirs in zip(_random_put(ge, seed), _random_put(torch, seed)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def _index_puts(lib: Any) -> list[Any]:
    """index_put_ with and without accumulate, repeated positions included."""
    seen = []
    weights = lib.arange(1.0, 7.0).reshape(3, 2)
    for indices, accumulate in [
        ((lib.tensor([0, 2, 0]),), True),
        ((lib.tensor([0, 2, 0]), lib.tensor([1, 1, 1])), True),
        ((lib.tensor([2, 0]),), False),
        ((lib.tensor([True, False, True]),), True),
    ]:
        x = lib.tensor(np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2))
        x.requires_grad_(True)
        shape = tuple(lib.zeros(3, 2)[indices].shape)
        values = lib.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1)
        values.requires_grad_(True)
        c = x * 1
        c.index_put_(indices, values * 2, accumulate=accumulate)
        (c * weights).sum().backward()
        plain = lib.zeros(3, 2)
        plain.index_put_(indices, values.detach(), accumulate=accumulate)
        seen.append((_values(c), _values(x.grad), _values(values.grad), plain.tolist()))
    return seen


def test_index_put_adds_up_repeated_positions_with_accumulate() -> None:
    first = _index_puts(ge)[0]
    # rows 0, 2, 0 of 2 * values = [[2, 4], [6, 8], [10, 12]] added into x
    np.testing.assert_allclose(first[0], [[-1.0 + 12, -0.6 + 16], [-0.2, 0.2], [0.6 + 6, 9.0]])
    assert first[1] == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert first[2] == [[2.0, 4.0], [10.0, 12.0], [2.0, 4.0]]  # each write its own gradient
    assert first[3] == [[6.0, 8.0], [0.0, 0.0], [3.0, 4.0]]

    def put(x: Any, values: Any) -> Any:
        c = x * 1
        return c.index_put_((ge.tensor([1, 0, 1, 1]),), values * values, accumulate=True)

    x = ge.tensor(np.linspace(-1.0, 1.0, 3), requires_grad=True)
    values = ge.tensor(np.linspace(0.5, 2.0, 4), requires_grad=True)
    assert gradcheck(put, (x, values)) and gradgradcheck(put, (x, values))


def test_index_put_matches_torch() -> None:
    torch = _torch()
    for ours, theirs in zip(_index_puts(ge), _index_puts(torch)):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_index_put_errors_name_it() -> None:
    x = ge.zeros(3)
    with pytest.raises(IndexRangeError, match="index_put_"):
        x.index_put_((ge.tensor([3]),), ge.tensor(1.0), accumulate=True)
    with pytest.raises(ShapeError, match="index_put_"):
        x.index_put_((ge.tensor([0, 1]),), ge.ones(3), accumulate=True)
    with pytest.raises(AutodiffError, match="index_put_: a leaf tensor that requires grad"):
        ge.zeros(3, requires_grad=True).index_put_((ge.tensor([0]),), ge.tensor(1.0))
    with pytest.raises(DTypeError, match="index_put_: values of dtype float32"):
        ge.zeros(2, dtype=ge.int64).index_put_((ge.tensor([0]),), ge.tensor(1.5), accumulate=True)


def _index_put_through_a_view(lib: Any) -> list[Any]:
    base = lib.zeros(2, 3)
    base.t().index_put_((lib.tensor([0, 0, 2]),), lib.tensor([1.0, 2.0]), accumulate=True)
    r = lib.tensor([1.0, 2.0], requires_grad=True)
    tracked = lib.zeros(2, 3)
    tracked.t().index_put_((lib.tensor([2, 2]),), r * r, accumulate=True)
    (tracked * lib.arange(6.0).reshape(2, 3)).sum().backward()
    return [base.tolist(), tracked.tolist(), _values(r.grad)]


def test_index_put_through_a_transposed_view_writes_its_base() -> None:
    assert _index_put_through_a_view(ge) == [
        [[2.0, 0.0, 1.0], [4.0, 0.0, 2.0]],
        [[0.0, 0.0, 2.0], [0.0, 0.0, 8.0]],
        [2 * 2 * 1.0 * 2, 2 * 2 * 2.0 * 5],  # c[:, 2] = 2 r^2, weighted by 2 and 5
    ]


def test_index_put_through_a_view_matches_torch() -> None:
    torch = _torch()
    assert _index_put_through_a_view(ge) == _index_put_through_a_view(torch)


def _random_read(lib: Any, seed: int) -> list[Any]:
    """x[index] for a random advanced index (repeats allowed), and its gradient."""
    rng = np.random.default_rng(1000 + seed)
    shape = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(1, 4))))
    index = _random_index(rng, shape)
    if rng.random() < 0.5:  # repeat the first array's entries: reads add up in the gradient
        first = next(k for k, item in enumerate(index) if isinstance(item, np.ndarray))
        if index[first].dtype != np.bool_:
            index = tuple(np.concatenate([i, i]) if isinstance(i, np.ndarray) else i for i in index)
    masks = any(getattr(i, "dtype", None) == np.bool_ for i in index)
    if rng.random() < 0.5 and not masks and len(index) < len(shape):
        index = (*index, int(rng.integers(-shape[-1], shape[-1])))  # beside an int
    x = lib.tensor(rng.standard_normal(shape), requires_grad=True)
    y = x[tuple(lib.tensor(i) if isinstance(i, np.ndarray) else i for i in index)]
    weights = lib.tensor(rng.standard_normal(tuple(y.shape)))
    (y * weights).sum().backward()
    return [y.detach().numpy(), x.grad.numpy()]


@pytest.mark.parametrize("seed", range(40))
def test_random_advanced_reads_match_torch(seed: int) -> None:
    torch = _torch()
    for ours, theirs in zip(_random_read(ge, seed), _random_read(torch, seed)):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def test_an_advanced_read_past_getitem_refuses_out_of_range() -> None:
    x = ge.zeros(2, 3)
    with pytest.raises(IndexRangeError, match="getitem"):
        x[[0, 2], [0, 0]]
    assert x[[True, False]].shape == (1, 3)  # a list of bools is a mask, as in torch
