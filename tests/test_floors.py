"""The declared dependency floors are the ones graphc's semantics need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_numpy_floor_is_2_because_nep50_promotion_is_assumed() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # (no tomllib on 3.10)
    assert 'dependencies = ["numpy>=2.0",' in text


def test_importing_graphc_on_numpy_1_says_what_to_install() -> None:
    code = (
        "import numpy; numpy.__version__ = '1.26.4'\n"
        "try:\n    import graphc\nexcept ImportError as e:\n    print('refused:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "refused: graphc needs numpy >= 2.0" in out.stdout
