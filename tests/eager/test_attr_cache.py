"""The eager cache of canonical attrs keys attrs by type and exact value: 0, 0.0, False,
-0.0 and nan are different keys, so a result never depends on which call came first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc.eager as ge
from graphc.eager.value_kind import EAGER, cache_key

CALLS: list[tuple[str, Callable[[], Any]]] = [
    ("clip int 0", lambda: ge.clip(ge.tensor([0, 1, 2]), 0, 1)),
    ("clip float 0.0", lambda: ge.clip(ge.tensor([0, 1, 2]), 0.0, 1)),
    ("clip bool False", lambda: ge.clip(ge.tensor([0, 1, 2]), False, 1)),
    ("full_like 0.0", lambda: ge.full_like(ge.tensor([1.0, 2.0]), 0.0)),
    ("full_like -0.0", lambda: ge.full_like(ge.tensor([1.0, 2.0]), -0.0)),
    ("full_like 0", lambda: ge.full_like(ge.tensor([1, 2]), 0)),
    ("full_like False", lambda: ge.full_like(ge.tensor([1, 2]), False)),
    ("full_like nan", lambda: ge.full_like(ge.tensor([1.0, 2.0]), float("nan"))),
]


def _fingerprint(result: Any) -> tuple:
    data = np.asarray(result.numpy())
    return str(data.dtype), data.tobytes()  # bits: -0.0 and nan payloads count


def _fresh(call: Callable[[], Any]) -> tuple:
    EAGER._canonical.clear()
    return _fingerprint(call())


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_results_do_not_depend_on_call_order(order: str) -> None:
    expected = {name: _fresh(call) for name, call in CALLS}
    EAGER._canonical.clear()
    calls = CALLS if order == "forward" else CALLS[::-1]
    for name, call in calls:
        assert _fingerprint(call()) == expected[name], name


def test_clip_dtype_depends_on_the_bound_type_not_on_history() -> None:
    x = ge.tensor([0, 1, 2])
    EAGER._canonical.clear()
    first = (ge.clip(x, 0, 1).dtype, ge.clip(x, 0.0, 1).dtype)
    EAGER._canonical.clear()
    second = (ge.clip(x, 0.0, 1).dtype, ge.clip(x, 0, 1).dtype)
    assert first == second[::-1] and first[0] == np.int64 and first[1].kind == "f"


def test_keys() -> None:
    class Op:
        name = "op"

    arrays = [np.ones(2, np.float32)]

    def key(**attrs: Any) -> tuple:
        return cache_key(Op, arrays, attrs)  # type: ignore[arg-type]

    assert len({key(v=0), key(v=0.0), key(v=False), key(v=-0.0), key(v=np.float32(0))}) == 5
    assert key(v=float("nan")) == key(v=float("nan"))
    assert key(v=(1, 2)) == key(v=(1, 2)) and key(v=(1, 2)) != key(v=(1.0, 2))
    assert key(v=(0.0,)) != key(v=(-0.0,)) and key(v=(1, True)) != key(v=(1, 1))
    assert key(a=None, b="x") == key(a=None, b="x")
