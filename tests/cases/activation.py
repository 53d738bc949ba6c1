"""Op cases: activation (added to the table of tests/op_cases.py)."""

from __future__ import annotations
