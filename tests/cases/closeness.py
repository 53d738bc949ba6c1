"""Builder cases (BUILDER_CASES of tests/op_cases.py): isclose and allclose, with bool
results (no gradients). numpy's isclose is the reference: its rule is torch's where both
operands have one dtype (equal infinities close, nan only with equal_nan).
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, B, F, I, _case

_builder = {"table": BUILDER_CASES}

_SPECIAL = [0.0, -0.0, 1.0, 1.0 + 1e-9, np.inf, -np.inf, np.nan, 1e300, 1.0]
_OTHER = [-0.0, 1e-9, 1.0 + 2e-6, 1.0, np.inf, np.inf, np.nan, np.inf, 1.1]


def _fixed(values: list) -> Arg:
    return Arg((len(values),), FLOAT, "fixed", value=values)


_case("isclose", "random", gc.isclose, [F(3, 4), F(4)], np.isclose, grad=(False, False),
      **_builder)  # fmt: skip
_case("isclose", "special", gc.isclose, [_fixed(_SPECIAL), _fixed(_OTHER)], np.isclose,
      **_builder)  # fmt: skip
_case("isclose", "equal_nan", lambda x, y: gc.isclose(x, y, equal_nan=True),
      [_fixed(_SPECIAL), _fixed(_OTHER)], lambda x, y: np.isclose(x, y, equal_nan=True),
      **_builder)  # fmt: skip
_case("isclose", "tolerances", lambda x, y: gc.isclose(x, y, rtol=0.1, atol=0.5),
      [F(3, 4), F(3, 4)], lambda x, y: np.isclose(x, y, rtol=0.1, atol=0.5),
      grad=(False, False), **_builder)  # fmt: skip
_case("isclose", "exact", lambda x, y: gc.isclose(x, y, rtol=0, atol=0),
      [_fixed(_SPECIAL), _fixed(_OTHER)], lambda x, y: np.isclose(x, y, rtol=0, atol=0),
      **_builder)  # fmt: skip
_case("isclose", "pyscalar", lambda x: gc.isclose(x, 0.5, atol=0.3), [F(2, 3)],
      lambda x: np.isclose(x, 0.5, atol=0.3), grad=(False,), **_builder)  # fmt: skip
_case("isclose", "int", lambda x, y: gc.isclose(x, y, atol=1.5), [I(3, 4), I(3, 4)],
      lambda x, y: np.isclose(x, y, atol=1.5), **_builder)  # fmt: skip
_case("isclose", "bool", gc.isclose, [B(4), B(4)], np.equal, **_builder)
_case("isclose", "empty", gc.isclose, [F(0, 2), F(2)], np.isclose, grad=(False, False),
      **_builder)  # fmt: skip
_case("allclose", "random", lambda x, y: gc.allclose(x, y, atol=3.0), [F(3, 4), F(4)],
      lambda x, y: np.asarray(np.allclose(x, y, atol=3.0)), grad=(False, False),
      **_builder)  # fmt: skip
_case("allclose", "special", lambda x, y: gc.allclose(x[:4], y[:4]),
      [_fixed(_SPECIAL), _fixed(_OTHER)], lambda x, y: np.asarray(np.allclose(x[:4], y[:4])),
      **_builder)  # fmt: skip
