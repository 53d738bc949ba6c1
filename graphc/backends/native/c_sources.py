"""The fixed C of the native backend: the files of csrc/, read once from the package.

Only C that no graph changes lives there (the prelude's vector types and helpers, the
row sums' pairwise helper, the product, layer norm, pool and wide-convolution kernels,
the direct convolution's tile, epilogue and drivers, the BLAS thread callback, the
compiler probe), as real .h and .c files that C tooling can check
(tests/backends/test_native_csrc.py compiles each the way the backend does). What
depends on the graph (an elementwise kernel's body, libmvec's declarations of the ops
in NATIVE_OPS) or fills a template (the row kernels' names and types, the direct
convolution's tile sizes and unrolled cases) is made in Python.
"""

from __future__ import annotations

import functools
from importlib import resources

PACKAGE = "graphc.backends.native"
FOLDER = "csrc"


def c_files() -> list[str]:
    """The names of the files in csrc/, sorted."""
    folder = resources.files(PACKAGE) / FOLDER
    return sorted(f.name for f in folder.iterdir() if f.name.endswith((".c", ".h")))


@functools.cache
def c_source(name: str) -> str:
    """The text of csrc/`name`, after one blank line: the C was written in Python strings
    that began with one, and a kernel's cache key is its text, so the text stays as it was.

    >>> c_source("prelude.h").startswith("\\n#include <stdint.h>")
    True
    """
    return "\n" + (resources.files(PACKAGE) / FOLDER / name).read_text(encoding="utf-8")
