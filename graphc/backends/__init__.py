"""The backends, peers behind the seam of runtime/backend.py: each registers its
`Backend` record and its lowerings when imported (graphc's own __init__ imports this
package). `numpy/` runs every step with numpy (the op's own kernel called with
``out=``, fused groups in cache-sized chunks, control-flow bodies planned once);
`native/` lowers what it can to C kernels built in the background and falls back to
numpy for the rest (docs/backends.md)."""

from graphc.backends import (
    native,
    numpy,  # first: native falls back to it
)

__all__ = ["native", "numpy"]
