"""An op's type rule remembers its answers (graphc.ir.registry.MemoizedRule).

Every op's `infer` is a MemoizedRule; these tests hold what makes that invisible: the
same answer as the rule, keys that tell 1, 1.0 and True apart, a rule that raises asked
again, attrs that are not plain values (arrays, bodies) never keys, a bounded size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.ir.errors import ShapeError
from graphc.ir.registry import MemoizedRule, all_ops
from graphc.ir.types import TensorType

F32 = TensorType((3,), "float32")


class Counting:
    """A type rule that counts its calls and answers with the attr `dtype`, or raises."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: TensorType, **attrs: Any) -> TensorType:
        self.calls += 1
        if attrs.get("fail"):
            raise ShapeError("refused")
        value = attrs.get("value")
        plain = isinstance(value, (bool, int, float, tuple))
        return x.with_dtype(np.asarray(value).dtype if plain else x.dtype)


def test_every_op_rule_is_memoized_and_keeps_its_signature() -> None:
    for name, opdef in all_ops().items():
        assert isinstance(opdef.infer, MemoizedRule), name
        assert opdef.infer.__wrapped__ is opdef.infer.rule, name


def test_the_same_question_asks_the_rule_once() -> None:
    rule = Counting()
    memo = MemoizedRule(rule)
    first = memo(F32, value=2.5)
    assert memo(F32, value=2.5) is first and rule.calls == 1
    assert memo(TensorType((4,), "float32"), value=2.5) != first and rule.calls == 2


@pytest.mark.parametrize("values", [(1, 1.0, True), ((1,), (1.0,), (True,)), (0.0, -0.0, 0)])
def test_values_equal_in_python_but_of_other_types_are_other_keys(values: tuple) -> None:
    """1 == 1.0 == True in Python, and hash alike: a key holds each value's type too
    (a rule may answer int64, float64 or bool for them)."""
    rule = Counting()
    memo = MemoizedRule(rule)
    answers = [memo(F32, value=v) for v in values]
    distinct_types = len({type(np.asarray(v).dtype.type) for v in values})
    assert rule.calls >= distinct_types
    for v, got in zip(values, answers):
        assert got == rule(F32, value=v)


def test_a_rule_that_raises_is_asked_again() -> None:
    rule = Counting()
    memo = MemoizedRule(rule)
    for _ in range(2):
        with pytest.raises(ShapeError):
            memo(F32, fail=True)
    assert rule.calls == 2 and not memo.answers


@pytest.mark.parametrize("attr", [np.float32(1.0), [1, 2], np.zeros(2), {"a": 1}])
def test_attrs_that_are_not_plain_values_are_never_keys(attr: Any) -> None:
    rule = Counting()
    memo = MemoizedRule(rule)
    memo(F32, value=attr)
    memo(F32, value=attr)
    assert rule.calls == 2 and not memo.answers


def test_a_body_graph_attr_is_asked_every_time() -> None:
    g = gc.Graph("body")
    with g:
        gc.output(gc.exp(gc.placeholder("x", shape=(3,))), name="y")
    rule = Counting()
    memo = MemoizedRule(rule)
    memo(F32, body=g)
    memo(F32, body=g)
    assert rule.calls == 2


def test_at_most_size_answers_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MemoizedRule, "SIZE", 8)
    memo = MemoizedRule(Counting())
    for n in range(1, 30):
        memo(TensorType((n,), "float32"))
        assert len(memo.answers) <= 8


def test_a_zeros_sign_keeps_its_own_key() -> None:
    """0.0 == -0.0 in Python, but attrs compare bit for bit (a verified attr must be
    its canonical form exactly), so their keys differ; arrays have none."""
    from graphc.ir.registry import attrs_key

    assert attrs_key({"v": 0.0}) != attrs_key({"v": -0.0})
    assert attrs_key({"v": (0.0, 1)}) != attrs_key({"v": (-0.0, 1)})
    assert attrs_key({"v": 1.0}) == attrs_key({"v": 1.0})
    assert attrs_key({"v": np.zeros(1)}) is None
