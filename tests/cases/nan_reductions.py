"""Builder cases (BUILDER_CASES of tests/op_cases.py): nansum and nanmean, which count
nan as 0 (nanmean: the mean of the elements that are numbers). Their gradient is 0 at
the nans: finite differences agree, since stepping a nan leaves it nan and the result
unmoved. A group of nans only has nanmean nan (0 / 0), without a gradient check.
"""

from __future__ import annotations

import numpy as np

import graphc as gc
from tests.op_cases import BUILDER_CASES, FLOAT, Arg, B, F, I, _case

_builder = {"table": BUILDER_CASES}

for _name, _fn, _ref in [("nansum", gc.nansum, np.nansum), ("nanmean", gc.nanmean, np.nanmean)]:
    for _axis, _keep in [(None, False), (1, False), (-1, True), ((0, 2), False)]:
        _case(_name, f"axis{_axis}_keep{int(_keep)}".replace(" ", ""),
              lambda x, f=_fn, a=_axis, k=_keep: f(x, axis=a, keepdims=k), [F(2, 3, 4)],
              lambda x, r=_ref, a=_axis, k=_keep: np.asarray(r(x, axis=a, keepdims=k)),
              rtol=2e-5, **_builder)  # fmt: skip
    _case(_name, "dim", lambda x, f=_fn: f(x, dim=0, keepdim=True), [F(3, 2)],
          lambda x, r=_ref: r(x, axis=0, keepdims=True), rtol=2e-5, **_builder)  # fmt: skip
    _case(_name, "0d", _fn, [F()], lambda x, r=_ref: np.asarray(r(x)), **_builder)
    _NANS = Arg(
        (2, 4), FLOAT, "fixed", value=[[1.5, np.nan, -0.5, 2.0], [np.nan, np.nan, 0.25, -1]]
    )
    _case(_name, "nans", lambda x, f=_fn: f(x, axis=1), [_NANS],
          lambda x, r=_ref: r(x, axis=1), grad=(True,), **_builder)  # fmt: skip
_case("nanmean", "all_nan", lambda x: gc.nanmean(x, axis=0),
      [Arg((2, 2), FLOAT, "fixed", value=[[np.nan, 1.0], [np.nan, 2.0]])],
      lambda x: np.array([np.nan, 1.5], x.dtype), **_builder)  # fmt: skip
_case("nansum", "int", lambda x: gc.nansum(x, axis=0), [I(3, 4)], lambda x: np.sum(x, axis=0),
      **_builder)  # fmt: skip
_case("nansum", "bool", lambda x: gc.nansum(x, axis=1), [B(3, 4)], lambda x: np.sum(x, axis=1),
      **_builder)  # fmt: skip
_case("nansum", "empty", lambda x: gc.nansum(x, axis=1), [F(2, 0)],
      lambda x: np.nansum(x, axis=1), **_builder)  # fmt: skip
