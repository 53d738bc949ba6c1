"""`gc.viz.view`: one self-contained HTML page to explore a graph of any size.

The page (no network, no library: `page.py`) draws a graph as nested groups (name
scopes and nn modules, gradients, loop bodies, repeated steps, blocks:
`hierarchy.py`) of which only the open ones are laid out, so a 50,000-node graph
opens with a few dozen boxes. Pan, zoom, search by name or op, click a node for its
type, source line, attributes and the forward node a gradient differentiates; switch
between views (forward, backward, pass by pass: `payload.py`).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from graphc.viz.viewer.page import page
from graphc.viz.viewer.payload import view_data, views_of


def view(obj: Any, path: str | Path | None = None, title: str | None = None) -> Path:
    """Write the viewer page of `obj` and return its path.

    `obj` is a Graph, a ``(forward, backward)`` pair from `gc.split_backward`, a report
    from ``gc.optimize(graph, level, explain=True)`` (a view per pass that changed the
    graph), or a dict of those by view name. Without `path` the page goes to
    ``<temp>/graphc-view/<title>.html``. Open it in any browser; it fetches nothing.

    >>> import graphc as gc
    >>> g = gc.trace(lambda x: gc.sum(gc.tanh(x) * 2), gc.TensorSpec((3,)))
    >>> joint = gc.gradients(g, wrt=[g.inputs[0].name])
    >>> path = gc.viz.view({"forward": g, "forward + backward": joint})  # doctest: +SKIP
    """
    views = views_of(obj)
    title = title or views[0].graph.name
    if path is None:
        folder = Path(tempfile.gettempdir()) / "graphc-view"
        folder.mkdir(exist_ok=True)
        path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', title)}.html"
    path = Path(path)
    document = {"title": title, "views": [view_data(v) for v in views]}
    path.write_text(page(document), encoding="utf-8")
    return path


__all__ = ["view"]
