"""nn.init.trunc_normal_ for any window [a, b]: a window far out in a tail, or narrow
against std, took a draw by rejection from the normal that kept almost nothing (a = 6
std hung); the moments against the truncated normal's closed form and torch's samples."""

from __future__ import annotations

import math

import pytest

import graphc.eager as ge
from graphc.nn import init
from tests.conftest import needs_torch, torch


def truncated_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    """The mean and standard deviation of N(mean, std^2) restricted to [a, b]."""
    low, high = (a - mean) / std, (b - mean) / std
    density = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    mass = 0.5 * (math.erfc(-high / math.sqrt(2)) - math.erfc(-low / math.sqrt(2)))
    shift = (density(low) - density(high)) / mass
    moment = lambda x: x * density(x) if math.isfinite(x) else 0.0  # noqa: E731
    spread = 1 + (moment(low) - moment(high)) / mass - shift * shift
    return mean + std * shift, std * math.sqrt(spread)


@pytest.mark.parametrize(
    "mean, std, a, b",
    [
        (0.0, 1.0, 6.0, 7.0),  # far in the upper tail: P(window) ~ 1e-9
        (0.0, 1.0, 5.0, math.inf),
        (1.0, 0.5, -4.0, -1.0),  # far in the lower tail
        (0.0, 100.0, -0.01, 0.01),  # narrow against std: nearly uniform
        (0.0, 1.0, 1.0, 1.01),
        (0.5, 2.0, -1.0, 1.5),  # the common case, by rejection from the normal
    ],
)
def test_trunc_normal_fills_any_window_with_its_moments(
    mean: float, std: float, a: float, b: float
) -> None:
    values = init.trunc_normal_(ge.zeros(40000, dtype="float64"), mean, std, a, b, 0).numpy()
    assert a <= values.min() and values.max() <= b
    want_mean, want_std = truncated_moments(mean, std, a, b)
    assert abs(values.mean() - want_mean) < 0.02 * want_std
    assert abs(values.std() / want_std - 1) < 0.02


@needs_torch
def test_trunc_normal_in_a_tail_matches_torchs_samples() -> None:
    torch.manual_seed(0)
    theirs = torch.nn.init.trunc_normal_(torch.zeros(40000, dtype=torch.float64), 0, 1, 1.5, 3)
    ours = init.trunc_normal_(ge.zeros(40000, dtype="float64"), 0.0, 1.0, 1.5, 3.0, 1).numpy()
    spread = theirs.std().item()
    assert abs(ours.mean() - theirs.mean().item()) < 0.03 * spread
    assert abs(ours.std() / spread - 1) < 0.03
    # the torch spelling layers copied from torch's reset_parameters use
    assert init._calculate_fan_in_and_fan_out(ge.zeros(4, 3, 2)) == (6, 8)
