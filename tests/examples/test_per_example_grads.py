"""examples/per_example_grads.py: vmap(grad) and vmap_graph of gradients agree with a loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.examples.test_examples import load


def test_per_example_gradient_norms_agree_with_a_loop(tmp_path: Path, capsys) -> None:
    pytest.importorskip("sklearn")
    result = load("per_example_grads").main(
        ["--batch", "24", "--hidden", "16", "--out", str(tmp_path)]
    )
    assert result["max_rel_diff"] < 1e-9
    np.testing.assert_allclose(result["norms"], result["loop_norms"], rtol=1e-12)
    assert result["norms"].shape == (24,) and np.all(result["norms"] > 0)
    for grads in result["grads"].values():
        assert [g.shape for g in grads] == [(24, 64, 16), (24, 16), (24, 16, 10), (24, 10)]
    rows = np.loadtxt(result["csv"], delimiter=",", skiprows=1)
    assert result["csv"] == tmp_path / "norms.csv" and rows.shape == (24, 3)
    np.testing.assert_allclose(rows[:, 2], result["norms"], rtol=1e-9)
    assert "largest gradient norms" in capsys.readouterr().out
