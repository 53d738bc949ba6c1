"""Writing pictures to files, and the notebook hook.

Rendering needs graphviz's `dot` program. When it is missing nothing fails: `render`
writes the DOT source beside the requested path, returns that path and warns with
the command that installs `dot`. (Nothing below the CLI prints; the CLI reports the
returned path.)
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import graphviz

from graphc.ir.errors import GraphcError
from graphc.viz.dot import to_dot

FORMATS = ("svg", "png", "pdf", "dot")
# a notebook's picture gives up after this long in dot, and the cell shows the text:
# the size guards keep pictures small, but a display must never hold a kernel for minutes
DISPLAY_SECONDS = 30.0

INSTALL_HINT = (
    "graphviz's `dot` program is not installed, so only the DOT source was written. "
    "Install it (Debian/Ubuntu: `sudo apt-get install graphviz`; macOS: `brew install "
    "graphviz`; conda: `conda install graphviz`) and render again, or run "
    "`dot -T{format} {path} -o {target}` once it is installed."
)


class DotMissingWarning(UserWarning):
    """`render` fell back to writing DOT source because `dot` is not installed."""


def have_dot() -> bool:
    """Is graphviz's `dot` program on the PATH?"""
    return shutil.which("dot") is not None


def render(obj: Any, path: str | Path, **options: Any) -> Path:
    """Draw `obj` (see `to_dot`) to `path`; the suffix picks SVG, PNG, PDF or DOT.

    Returns the path written: `path` itself, or `path` with a ``.dot`` suffix when the
    `dot` program is missing (a `DotMissingWarning` says what to install).

    >>> import graphc as gc
    >>> g = gc.Graph("double")
    >>> with g:
    ...     _ = gc.output(gc.placeholder("x", shape=(3,)) * 2, name="y")
    >>> gc.viz.render(g, "double.svg")  # doctest: +SKIP
    PosixPath('double.svg')
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise GraphcError(
            f"render: cannot tell the format from '{path}'; use one of the suffixes "
            + ", ".join("." + f for f in FORMATS)
        )
    dot = obj if isinstance(obj, graphviz.Digraph) else to_dot(obj, **options)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "dot":
        path.write_text(dot.source, encoding="utf-8")
        return path
    if have_dot():
        try:
            path.write_bytes(dot.pipe(format=fmt))
            return path
        except graphviz.ExecutableNotFound:
            pass  # removed between the check and the call: fall back below
        except graphviz.CalledProcessError as exc:  # dot ran and gave up (a layout crash)
            kept = path.with_suffix(".dot")
            kept.write_text(dot.source, encoding="utf-8")
            said = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
            raise GraphcError(
                f"render: graphviz's dot could not draw {path.name}"
                + (f" ({'; '.join(said[:3])})" if said else "")
                + f"; its DOT source is in {kept}. A smaller picture may draw: "
                "max_nodes=100, or gc.viz.view(obj, 'page.html'), which needs no dot"
            ) from None
    fallback = path.with_suffix(".dot")
    fallback.write_text(dot.source, encoding="utf-8")
    hint = INSTALL_HINT.format(format=fmt, path=fallback, target=path)  # the format asked for
    warnings.warn(hint, DotMissingWarning, stacklevel=2)
    return fallback


def mime_bundle(obj: Any) -> dict[str, str]:
    """The SVG picture of `obj` for notebooks; empty when `dot` is missing or it fails."""
    if not have_dot():
        return {}
    source = to_dot(obj).source.encode("utf-8")
    try:  # run() kills dot when the time is up
        done = subprocess.run(
            ["dot", "-Tsvg"], input=source, capture_output=True, timeout=DISPLAY_SECONDS
        )
    except subprocess.TimeoutExpired:
        warnings.warn(
            f"graphc: dot took more than {DISPLAY_SECONDS:g} s to lay out this picture, so "
            "the cell shows text; gc.viz.view(obj, 'page.html') explores a graph of any "
            "size, and gc.viz.render(obj, 'picture.svg', max_nodes=100) draws a smaller one",
            stacklevel=2,
        )
        return {}
    except OSError:  # dot removed since the check
        return {}
    if done.returncode != 0:
        return {}
    return {"image/svg+xml": done.stdout.decode("utf-8")}
