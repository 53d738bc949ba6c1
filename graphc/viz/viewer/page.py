"""The viewer page: one HTML file holding its style, its script and its data.

Nothing is fetched when the page opens: the style sheet (`viewer.css`) and the
script (`viewer.js`, no library) are read from this package and written inline, and
the views' data is a JSON document inside a ``<script type="application/json">``
element. JSON alone would let a node named ``</script>`` end that element early, so
``<``, ``>`` and ``&`` (and the two line separators JavaScript once treated as line
ends) are written as ``\\u`` escapes, which JSON reads back as the same characters.
The script reads the data with `JSON.parse` and puts every name into the document as
text, never as markup.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

# what the template's {{...}} slots are filled with, in one pass (a title holding
# "{{data}}" stays text)
_SLOT = re.compile(r"\{\{(title|style|script|data)\}\}")
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _asset(name: str) -> str:
    return resources.files("graphc.viz.viewer").joinpath(name).read_text(encoding="utf-8")


def embedded_json(data: Any) -> str:
    """`data` as JSON that can sit inside a script element (see the module docstring)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m.group()], text)


def page(document: dict[str, Any]) -> str:
    """The HTML of the viewer showing `document` ({"title": ..., "views": [...]})."""
    slots = {
        "title": html.escape(str(document["title"])),
        "style": _asset("viewer.css"),
        "script": _asset("viewer.js"),
        "data": embedded_json(document),
    }
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("viewer.html"))
