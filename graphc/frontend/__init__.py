"""The user-facing ways to make graphs: declaring them, and (later) tracing functions."""

from graphc.frontend.declare import constant, output, placeholder

__all__ = ["constant", "output", "placeholder"]
