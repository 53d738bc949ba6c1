"""Pictures of graphs: forward, backward, fused, control flow, pass by pass, eager tapes;
and `view`, an HTML page to explore a graph of any size.

>>> import graphc as gc
>>> g = gc.Graph("double")
>>> with g:
...     _ = gc.output(gc.placeholder("x", shape=(3,)) * 2, name="y")
>>> dot = gc.viz.to_dot(g)          # a graphviz.Digraph; dot.source is its DOT text
>>> path = gc.viz.render(g, "double.svg")  # doctest: +SKIP
>>> page = gc.viz.view(g, "double.html")  # doctest: +SKIP
"""

from graphc.ir.graph import set_mime_handler
from graphc.viz.dot import to_dot
from graphc.viz.files import DotMissingWarning, have_dot, mime_bundle, render
from graphc.viz.report import pass_pictures
from graphc.viz.viewer import view

set_mime_handler(mime_bundle)

__all__ = [
    "DotMissingWarning",
    "have_dot",
    "mime_bundle",
    "pass_pictures",
    "render",
    "to_dot",
    "view",
]
