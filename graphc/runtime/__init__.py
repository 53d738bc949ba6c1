"""Running graphs: the reference interpreter (and, later, compiled plans)."""

from graphc.runtime.reference import run

__all__ = ["run"]
