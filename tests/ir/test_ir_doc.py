"""docs/ir.md: its python blocks run, in order, in one namespace (each asserts what the
page says, against numpy)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "ir.md"


def test_ir_doc_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) >= 5
    namespace: dict = {"__name__": "ir_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own page
