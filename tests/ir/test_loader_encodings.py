"""The text and JSON loaders on files as editors save them."""

from __future__ import annotations

import numpy as np

import graphc as gc


def small_graph() -> gc.Graph:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        gc.output(gc.exp(x) * 2, name="y")
    return g


def test_a_leading_byte_order_mark_is_ignored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a file a Windows editor saved starts with U+FEFF, which open(encoding="utf-8") and
    # Path.read_text() keep: parse said "unexpected character", from_json and load
    # "Unexpected UTF-8 BOM"
    g = small_graph()
    text, document = str(g), gc.to_json(g)
    assert str(gc.parse("\ufeff" + text)) == text
    assert str(gc.parse(("\ufeff" + text).encode("utf-8"))) == text
    assert gc.to_json(gc.from_json("\ufeff" + document)) == document
    path = tmp_path / "g.json"
    path.write_text(document, encoding="utf-8-sig")
    loaded = gc.load(path)
    xv = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(loaded(xv), np.exp(xv) * 2, rtol=1e-6)
    text_path = tmp_path / "g.txt"
    text_path.write_text(text.replace("\n", "\r\n"), encoding="utf-8-sig")
    assert str(gc.parse(text_path.read_text(encoding="utf-8"))) == text
