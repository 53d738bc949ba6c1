"""Devices, as a PyTorch program names them: graphc computes on the CPU, so "cpu" (or
None) passes wherever a device is taken, and another is an ArgumentError naming it,
on eager tensors, graph values and modules alike (ValueMethods.to and .cuda, eager's
creation functions, nn's Module.to).

>>> check_device("cpu", "to")
>>> is_device("cuda:1"), is_device("float32")
(True, False)
"""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import ArgumentError

# the device types torch names (torch.device's type), each but "cpu" absent here
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "hpu", "ipu", "mtia")


def is_device(value: Any) -> bool:
    """A device's spelling: "cuda", "cuda:1", "cpu", or an object with torch.device's
    `type` and `index`."""
    if isinstance(value, str):
        kind, _, index = value.partition(":")
        return kind in DEVICE_TYPES and (not index or index.isdigit())
    return isinstance(getattr(value, "type", None), str) and hasattr(value, "index")


def check_device(device: Any, where: str) -> None:
    """None and "cpu" pass: graphc computes on the CPU. Another device is an
    ArgumentError naming it (torch without that device refuses it too), not a silent
    CPU tensor the program then believes is elsewhere."""
    if device is None:
        return
    kind = device if isinstance(device, str) else getattr(device, "type", device)
    if isinstance(kind, str) and kind.partition(":")[0] == "cpu":
        return
    raise ArgumentError(
        f"{where}: graphc computes on the CPU (numpy and its native kernels); there is no "
        f"device {str(device)!r} here. Use 'cpu' or leave the device out "
        "(graphc.eager.cuda.is_available() is False)"
    )
