"""Op cases: cumprod (added to the table of tests/op_cases.py; cumsum and arange are in
tests/cases/arrays.py).

Its gradient is torch's, which holds where x has zeros: rows with none, one, two and
only zeros are checked against finite differences (the first zero's slope is the
running product of the others; past it every slope is 0), and so are its second
derivatives (the slopes past the first zero move with that zero, as torch's double
backward has it).
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from tests.op_cases import FLOAT, Arg, B, F, I, _case

_case("cumprod", "axis0", lambda x: gc.cumprod(x, 0), [F(3, 4)], lambda x: np.cumprod(x, 0))
_case("cumprod", "dim_neg", lambda x: gc.cumprod(x, dim=-1), [F(2, 3, 4)],
      lambda x: np.cumprod(x, -1))  # fmt: skip
_case("cumprod", "flat", gc.cumprod, [F(2, 3)], np.cumprod)
_case("cumprod", "0d", lambda x: gc.cumprod(x, -1), [F()], lambda x: x.copy())
_case("cumprod", "int32", lambda x: gc.cumprod(x, 1), [I(3, 4, dtype="int32")],
      lambda x: np.cumprod(x, 1))  # fmt: skip
_case("cumprod", "bool", lambda x: gc.cumprod(x, 0), [B(6)], lambda x: np.cumprod(x, 0))
_case("cumprod", "empty", lambda x: gc.cumprod(x, 0), [F(0, 3)], lambda x: np.cumprod(x, 0))
_case("cumprod", "empty_axis", lambda x: gc.cumprod(x, 1), [F(2, 0)], lambda x: np.cumprod(x, 1))
_ZEROS = [[1.5, -2.0, 0.5, 3.0, 0.7], [0.0, 2.0, -1.5, 0.5, 1.2], [1.1, 2.0, 0.0, 0.5, 0.0],
          [0.0, 0.0, 0.0, 0.0, 0.0], [0.9, -1.3, 1.7, 0.6, 0.0]]  # fmt: skip
_case("cumprod", "zeros", lambda x: gc.cumprod(x, 1), [Arg((5, 5), FLOAT, "fixed", value=_ZEROS)],
      lambda x: np.cumprod(x, 1), grad=(True,))  # fmt: skip
_case("cumprod", "zeros_axis0", lambda x: gc.cumprod(x, 0),
      [Arg((5, 5), FLOAT, "fixed", value=_ZEROS)], lambda x: np.cumprod(x, 0),
      grad=(True,))  # fmt: skip
_case("cumprod", "special", lambda x: gc.cumprod(x, 1),
      [Arg((3, 3), FLOAT, "fixed",
           value=[[np.inf, 0.0, 2.0], [np.nan, 1.0, 1.0], [1e30, 1e-30, -0.0]])],
      lambda x: np.cumprod(x, 1), grad=(False,))  # fmt: skip
