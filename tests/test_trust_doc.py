"""docs/trust.md's table of rewrite rules is the rule table of the code, tags included."""

from __future__ import annotations

import re
from pathlib import Path

from graphc.passes.simplify import REWRITES

DOC = Path(__file__).resolve().parents[1] / "docs" / "trust.md"


def test_the_rule_table_lists_every_rule_with_its_tag_in_order() -> None:
    rows = re.findall(r"^\| `([^`]+)` \| (exact|value-changing) \|", DOC.read_text("utf-8"), re.M)
    in_code = [(str(r.pattern), "exact" if r.exact else "value-changing") for r in REWRITES]
    assert rows == in_code
