"""examples/out_of_core.py at a small size: its summaries and the per-row classes it
wrote equal the MLP run in this process over the whole file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import graphc as gc
from tests.examples.test_examples import load

pytest.importorskip("dask.array")
pytest.importorskip("distributed")


def test_out_of_core_scoring_equals_one_process(tmp_path: Path, capsys) -> None:
    example = load("out_of_core")
    result = example.main(
        ["--rows", "30000", "--chunk", "4000", "--memory-limit", "400MiB", "--out", str(tmp_path)]
    )
    x = np.load(result["path"])
    predicted, mean_probs, max_logit, counts, lse = gc.compile(example.mlp_graph())(
        x, **result["params"]
    )
    stored = np.concatenate([np.load(p) for p in sorted(result["predicted_dir"].glob("*.npy"))])
    np.testing.assert_array_equal(stored, predicted)
    np.testing.assert_allclose(result["mean_probs"], mean_probs, rtol=1e-5)
    np.testing.assert_array_equal(result["class_counts"], counts)
    assert result["max_logit"] == max_logit
    np.testing.assert_allclose(result["logsumexp_best"], lse, rtol=1e-5)
    assert result["memory_limit"] == 400 * 2**20
    out = capsys.readouterr().out
    assert "rows per predicted class" in out
    assert result["path"] == tmp_path / "rows.npy"
    # dask's progress bar only on a terminal: in a captured log it is one long line
    assert "Completed" not in out and "\r" not in out
