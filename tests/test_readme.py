"""The README's python blocks run as shown, and its printed graph is what graphc prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_code_runs_and_prints_the_graph_it_shows(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) >= 3
    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)
    shown_graph = re.search(r"```\n(graph affine.*?\n})\n```", text, flags=re.DOTALL)
    assert shown_graph is not None
    assert shown_graph.group(1) in printed.getvalue()
    assert "tensor([5.]) tensor([2.]) <MulBackward0" in printed.getvalue()
