"""The fixed C of the native backend: the files of csrc/, read once from the package.

Only C that no graph changes lives there (the prelude's vector types and helpers, the
row sums' pairwise helper, the row kernels (sums over rows and columns, softmax), the
attention call, the product, layer norm, pool and wide-convolution kernels, the direct
convolution's tile, epilogue and drivers, the BLAS thread callback, the compiler probe),
as real .h and .c files that C tooling can check (tests/backends/test_native_csrc.py
compiles each the way the backend does). A file written for several dtypes is a
template of macros (`instance` defines them: its kernel's name, types and thresholds).
What depends on the graph (an elementwise kernel's body, libmvec's declarations of the
ops in NATIVE_OPS) is made in Python, and constants Python measures or tunes (the direct
convolution's tile sizes, threading thresholds) reach the C as #defines.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
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


def instance(name: str, values: Mapping[str, str]) -> str:
    """The template csrc/`name` for one kernel: `values` (its name, types, thresholds)
    as #define lines before its text and #undef lines after, so that several instances
    may share one source (attention's carries its softmax row kernel's).

    >>> "#undef GC_NAME" in instance("row_sum.c", {"GC_NAME": "gc_rowsum_f32"})
    True
    """
    tail = "".join(f"#undef {key}\n" for key in values)
    return "\n" + defines(values) + c_source(name).lstrip("\n") + tail


def defines(values: Mapping[str, object]) -> str:
    """`values` as #define lines: constants Python measures or chooses, for the C."""
    return "".join(f"#define {key} {value}\n" for key, value in values.items())
