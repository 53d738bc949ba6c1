"""Building native kernels: find the C compiler, compile a plan's kernels in one call,
cache the shared library on disk by a hash of its source and flags, load it with ctypes.

The compiler is `GRAPHC_CC` when set, else `CC`, else the first of cc, gcc, clang on the
PATH. It is probed once per process with a small kernel that needs everything the
generated code needs (AVX2 vectors, glibc's libmvec, OpenMP); a failed probe makes the
native backend unavailable and names the reason. Libraries live in `GRAPHC_CACHE_DIR`
(default ``~/.cache/graphc/native``), named by the SHA-256 of compiler, flags and source,
so a warm cache loads without compiling and a changed kernel never loads a stale build.
A library is written under a temporary name and renamed into place, so concurrent
processes never load half a file.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# -O3 and the host's vector ISA; no -ffast-math and no FMA contraction, so every
# + - * / rounds once as numpy's does; -fwrapv: integer overflow wraps as numpy's does;
# -fno-math-errno: sqrt may be an instruction (errno is not part of any result)
FLAGS = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fwrapv",
    "-fopenmp",
    "-fPIC",
    "-shared",
    "-Wno-psabi",
)
LIBS = ("-lmvec", "-lm")

PROBE = """
#include <stdint.h>
#ifndef __AVX2__
#error "graphc's native kernels need AVX2"
#endif
typedef float vf32 __attribute__((vector_size(32)));
extern vf32 _ZGVdN8v_expf(vf32);
void graphc_probe(int64_t n, float *out) {
    #pragma omp parallel for if (n > 1024)
    for (int64_t i = 0; i < n; i += 8) {
        vf32 x = {0, 1, 2, 3, 4, 5, 6, 7};
        vf32 y = _ZGVdN8v_expf(x);
        for (int k = 0; k < 8 && i + k < n; k++) out[i + k] = y[k];
    }
}
"""


class BuildError(Exception):
    """The compiler failed on a kernel source (its message is the compiler's output)."""


@dataclass
class Toolchain:
    compiler: str
    flags: tuple[str, ...]
    version: str


_lock = threading.Lock()
_probed: dict[str, Toolchain | str] = {}  # compiler setting -> toolchain, or why not
_loaded: dict[str, ctypes.CDLL] = {}  # source hash -> library loaded in this process


def _compiler_setting() -> str:
    return os.environ.get("GRAPHC_CC") or os.environ.get("CC") or ""


def cache_dir() -> Path:
    root = os.environ.get("GRAPHC_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphc" / "native"


def _find_compiler(setting: str) -> str | None:
    if setting:
        return shutil.which(setting)
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def toolchain() -> Toolchain | str:
    """The working toolchain, or a sentence saying why there is none (probed once per
    compiler setting)."""
    setting = _compiler_setting()
    with _lock:
        if setting not in _probed:
            _probed[setting] = _probe(setting)
        return _probed[setting]


def reset() -> None:
    """Forget the probe (tests change GRAPHC_CC); loaded libraries stay loaded."""
    with _lock:
        _probed.clear()


def _probe(setting: str) -> Toolchain | str:
    compiler = _find_compiler(setting)
    if compiler is None:
        wanted = setting or "cc, gcc or clang"
        return f"no C compiler found ({wanted} is not on the PATH)"
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30
        ).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the C compiler {compiler} does not run: {exc}"
    chain = Toolchain(compiler, FLAGS, version)
    # how idle OpenMP workers wait: libgomp reads it when our first library loads it
    from graphc.runtime.native import threads  # threads builds with this module

    threads.openmp_environment()
    try:
        path = cache_dir() / f"graphc_{source_hash(chain, PROBE)}.so"
        lib = ctypes.CDLL(str(path)) if path.exists() else _build(chain, PROBE, path)
        out = (ctypes.c_float * 8)()
        lib.graphc_probe(ctypes.c_int64(8), out)
    except (BuildError, OSError) as exc:
        first = str(exc).strip().split("\n")[:3]
        return f"the C compiler {compiler} cannot build graphc's kernels: {' '.join(first)}"
    if abs(out[1] - 2.7182817) > 1e-5:
        return "libmvec's expf gave a wrong value in the probe"
    return chain


def host_id() -> str:
    """The processor's model and feature flags: -march=native builds for this processor,
    so a cache shared with another machine must not hand it this one's libraries."""
    try:
        lines = Path("/proc/cpuinfo").read_text().split("\n")
    except OSError:
        return platform.processor()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))][:2]
    return "\n".join(wanted)


def source_hash(chain: Toolchain, source: str) -> str:
    text = "\0".join([chain.compiler, chain.version, *chain.flags, *LIBS, host_id(), source])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class Built:
    library: ctypes.CDLL
    seconds: float  # compile time (0 when it came from a cache)
    cached: str  # "memory", "disk" or "compiled"
    path: Path


def build(source: str) -> Built:
    """The library of `source`, from this process, the disk cache, or the compiler.
    Raises BuildError when the toolchain is missing or the compiler fails."""
    chain = toolchain()
    if isinstance(chain, str):
        raise BuildError(chain)
    key = source_hash(chain, source)
    path = cache_dir() / f"graphc_{key}.so"
    with _lock:
        if key in _loaded:
            return Built(_loaded[key], 0.0, "memory", path)
    start = time.perf_counter()
    if path.exists():
        try:
            library = ctypes.CDLL(str(path))
            how = "disk"
        except OSError:  # a damaged file: build it again
            library, how = _build(chain, source, path), "compiled"
    else:
        library, how = _build(chain, source, path), "compiled"
    with _lock:
        _loaded[key] = library
    return Built(library, time.perf_counter() - start, how, path)


def _build(chain: Toolchain, source: str, path: Path | None = None) -> ctypes.CDLL:
    if path is None:
        path = cache_dir() / f"graphc_{source_hash(chain, source)}.so"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        c_file = Path(tmp) / "kernels.c"
        c_file.write_text(source)
        target = Path(tmp) / path.name
        command = [chain.compiler, *chain.flags, str(c_file), "-o", str(target), *LIBS]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BuildError(f"{chain.compiler} did not run: {exc}") from None
        if done.returncode != 0:
            # the message names the temporary file: say kernels.c, so that one failure
            # reads the same every time (a warning is given once per distinct message)
            message = done.stderr.replace(str(c_file), c_file.name)
            raise BuildError(message[-4000:] or f"{chain.compiler} exited {done.returncode}")
        os.replace(target, path)  # atomic: a concurrent process sees all of it or nothing
    return ctypes.CDLL(str(path))
