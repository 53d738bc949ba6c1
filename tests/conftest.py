"""Shared test settings: hypothesis runs without deadlines (the machine is noisy)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "graphc",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("graphc")
