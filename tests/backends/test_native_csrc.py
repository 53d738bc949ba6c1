"""The native backend's fixed C in csrc/: found as package data, every file used, and
each compiling with the toolchain's flags in the place the backend puts it (the prelude
on its own, each kernel after the kernels' header, the thread callback and the probe on
their own, the entry module with the interpreter's and numpy's headers), checked with
`-fsyntax-only` (skipped without a working compiler)."""

from __future__ import annotations

import subprocess
from importlib import resources

import pytest

from graphc.backends.native import (
    attention,
    c_sources,
    copies,
    direct_conv,
    entry,
    loops,
    matmul,
    norm,
    one_hot,
    outer,
    pool,
    rows,
    threads,
    toolchain,
    unslice,
    wide_conv,
    winograd,
)

# the texts the backend compiles, each as one translation unit; what every kernel starts
# with is rows.prelude(): the header (prelude.h, libmvec's declarations, composites.h)
# and pairwise.h
KERNEL_PRELUDE = rows.prelude()
KERNELS = {
    "direct_conv": direct_conv.source(),
    "matmul": matmul.SOURCE,
    "outer": outer.SOURCE,
    "one_hot": one_hot.KERNEL.source,
    "strided_copy": copies.KERNEL.source,
    "unslice": unslice.KERNEL.source,
    "layer_norm": norm.LAYER_NORM.source,
    "layer_norm_grad": norm.LAYER_NORM_GRAD.source,
    **{f"max_pool_{k.name}": k.source for k in pool.KERNELS.values()},
    **{f"max_pool_backward_{k.name}": k.source for k in pool.BACKWARD_KERNELS.values()},
    "wide_conv": wide_conv.SOURCE,
    "winograd": winograd.SOURCE,
    "loop": loops.SOURCE,
    # the templates, instantiated as the backend does, for each dtype; attention's text
    # carries its softmax kernel's first (two instances in one source)
    **{
        f"{kind}_{ct}": rows.row_kernel(kind, ct, 1 << 20, 1 << 16).source
        for kind in rows.TEMPLATES
        for ct in ("f32", "f64")
    },
    **{
        f"attention_{ct}_{bits}": attention.attention_kernel(
            ct, bits, rows.row_kernel("softmax", ct, 1 << 17, 1 << 12)
        ).source
        for ct in ("f32", "f64")
        for bits in (32, 64)
    },
}
UNITS = {
    "prelude.h": c_sources.c_source("prelude.h"),
    "kernel header": KERNEL_PRELUDE,
    **{name: KERNEL_PRELUDE + text for name, text in KERNELS.items()},
    "threads.c": threads.SOURCE,
    "probe.c": toolchain.PROBE,
    "entry.c": entry.SOURCE,  # a CPython extension: with the interpreter's and numpy's headers
}


def test_package_data_found() -> None:
    folder = resources.files("graphc.backends.native") / "csrc"
    names = c_sources.c_files()
    assert "prelude.h" in names
    for name in names:
        assert (folder / name).is_file()
        assert c_sources.c_source(name) == "\n" + (folder / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", c_sources.c_files())
def test_every_file_used(name: str) -> None:
    text = c_sources.c_source(name)
    assert any(text in unit for unit in UNITS.values()), f"csrc/{name} is in no unit"


def _compiler() -> toolchain.Toolchain:
    chain = toolchain.toolchain()
    if isinstance(chain, str):
        pytest.skip(f"no working C compiler: {chain}")
    return chain


@pytest.mark.parametrize("unit", list(UNITS))
def test_compiles(unit: str) -> None:
    chain = _compiler()
    flags = [f for f in chain.flags if f != "-shared"]
    includes: list[str] = []
    if unit == "entry.c":
        found, why = entry.headers()
        if why is not None:
            pytest.skip(why)
        includes = [f"-I{where}" for where in found]
    done = subprocess.run(
        [chain.compiler, *flags, *includes, "-fsyntax-only", "-Werror", "-x", "c", "-"],
        input=UNITS[unit],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
