"""torch.cuda's questions, answered for graphc: there is no CUDA device here.

So that the PyTorch idiom `device = "cuda" if torch.cuda.is_available() else "cpu"`
picks the CPU, where graphc computes (a device other than "cpu" is an ArgumentError:
graphc.ops.devices.check_device).

>>> import graphc.eager as ge
>>> ge.cuda.is_available(), ge.cuda.device_count()
(False, 0)
"""

from __future__ import annotations


def is_available() -> bool:
    """False: graphc computes on the CPU."""
    return False


def device_count() -> int:
    """0: no CUDA device."""
    return 0


def manual_seed(seed: int) -> None:
    """Nothing to seed (torch.cuda.manual_seed does nothing without CUDA, too)."""


manual_seed_all = manual_seed
