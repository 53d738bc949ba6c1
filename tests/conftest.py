"""Shared test settings: `--full` (every generated case and the slow tests; the default
run is the quick one, tests/budget.py); hypothesis runs without deadlines (the machine
is noisy); the `needs_dot` mark for tests that render pictures, `needs_torch` for those
comparing with PyTorch (optional: CI installs it, the oldest/newest matrix does not)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import graphc as gc
from tests.budget import FULL_ENV, draws


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="every generated case, every hypothesis draw and the slow tests (CI runs this)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--full"):
        # read by tests/budget.py when the test modules build their case tables
        os.environ[FULL_ENV] = "full"
        if config.option.markexpr == "not slow":  # the default from pyproject's addopts
            config.option.markexpr = ""
    # before the test modules are imported: their @settings read the budget too
    settings.register_profile(
        "graphc",
        deadline=None,
        print_blob=True,
        max_examples=draws(100),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.load_profile("graphc")


# The suite compares compiled results with the reference interpreter and eager mode bit
# for bit, which the numpy backend guarantees; `gc.compile`'s default ("auto") would pick
# the native backend where a C compiler is found, whose libmvec functions differ from
# numpy's in the last bits. So the default backend here is numpy, and the native backend
# is tested against it explicitly (tests/runtime/test_native*.py, every backend present).
# GRAPHC_BACKEND=native python -m pytest runs the whole suite on native instead.
os.environ.setdefault("GRAPHC_BACKEND", "numpy")

# tests that render pictures need graphviz's `dot` program; without it they skip and say
# how to install it (CI installs it, so they run there)
needs_dot = pytest.mark.skipif(
    not gc.viz.have_dot(),
    reason="graphviz's `dot` program is not installed: apt-get install graphviz "
    "(macOS: brew install graphviz; conda: conda install graphviz)",
)

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="PyTorch is not installed: pip install torch==2.13.0 (CI installs it)"
)
