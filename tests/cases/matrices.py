"""Builder cases (BUILDER_CASES of tests/op_cases.py): outer and diagonal, torch's
matrix builders over mul and broadcasting (outer) and over transpose, reshape and a
strided slice (diagonal, whose gradient scatters back onto the diagonal).
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from tests.op_cases import BUILDER_CASES, B, F, I, _case

_builder = {"table": BUILDER_CASES}

_case("outer", "vectors", gc.outer, [F(3), F(4)], np.outer, **_builder)
_case("outer", "int", gc.outer, [I(3), I(2)], np.outer, **_builder)
_case("outer", "int_float", gc.outer, [I(3), F(2)], np.outer, grad=(False, True), **_builder)
_case("outer", "bool", gc.outer, [B(3), B(2)], np.outer, **_builder)
_case("outer", "empty", gc.outer, [F(0), F(3)], np.outer, **_builder)

for _label, _shape, _offset, _axes in [
    ("square", (4, 4), 0, (0, 1)),
    ("wide_up", (3, 5), 2, (0, 1)),
    ("tall_down", (5, 3), -2, (0, 1)),
    ("swapped", (3, 4), 1, (1, 0)),
    ("batched_last", (2, 3, 4), 0, (-2, -1)),
    ("batched_outer", (3, 2, 4), -1, (2, 0)),
    ("past_the_end", (3, 4), 4, (0, 1)),
    ("empty", (0, 3), 0, (0, 1)),
]:
    _case("diagonal", _label, lambda x, o=_offset, a=_axes: gc.diagonal(x, o, *a), [F(*_shape)],
          lambda x, o=_offset, a=_axes: np.diagonal(x, o, *a).copy(), **_builder)  # fmt: skip
_case("diagonal", "dims", lambda x: gc.diagonal(x, dim1=1, dim2=2), [I(2, 3, 3)],
      lambda x: np.diagonal(x, 0, 1, 2).copy(), **_builder)  # fmt: skip
_case("diagonal", "bool", gc.diagonal, [B(3, 3)], lambda x: np.diagonal(x).copy(), **_builder)
