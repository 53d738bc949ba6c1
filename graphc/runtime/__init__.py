"""Running graphs: compiled plans (`compile`) and the reference interpreter (`run`)."""

from graphc.runtime.executable import Executable, compile, fuse
from graphc.runtime.reference import run

__all__ = ["Executable", "compile", "fuse", "run"]
