"""examples/rnn.py: the tutorials' RNN eagerly, unrolled and with gc.scan.

The example checks its own claim (the three ways agree); these tests check it again
from outside: each way against a float64 forward + BPTT written here in numpy, the
three against each other, and the sizes the example prints (the scan graph does not
grow with the sequence; the unrolled one does).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphc as gc
from tests.examples.test_examples import EXAMPLES, load, script_env

SIZES = ["--batch", "3", "--inputs", "4", "--hidden", "5"]
WAYS = ("eager", "unrolled", "scan")


def bptt(values: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
    """Loss mean(h_T ** 2) and its gradients by hand, in float64."""
    xs, h, w_ih, w_hh, b = (values[k].astype(np.float64) for k in ("xs", "h0", "w_ih", "w_hh", "b"))
    states = [h]
    for x in xs:
        h = np.tanh(x @ w_ih + h @ w_hh + b)
        states.append(h)
    loss = float(np.mean(h * h))
    dh = 2.0 * h / h.size
    grads = {"w_ih": np.zeros_like(w_ih), "w_hh": np.zeros_like(w_hh), "b": np.zeros_like(b)}
    for t in range(len(xs) - 1, -1, -1):
        dz = dh * (1.0 - states[t + 1] ** 2)  # through tanh
        grads["w_ih"] += xs[t].T @ dz
        grads["w_hh"] += states[t].T @ dz
        grads["b"] += dz.sum(axis=0)
        dh = dz @ w_hh.T
    return loss, grads


def close(got: Any, want: Any, rtol: float = 1e-5) -> None:
    """Equal to `rtol` of the array's largest magnitude (float32 sums of 6 steps), and
    element by element as np.allclose(rtol=1e-5) judges float32 (its default atol 1e-8
    for entries that are sums of nearly cancelling terms, ~1e-6 here)."""
    want = np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-8)


@pytest.fixture(scope="module")
def example() -> Any:
    return load("rnn")


@pytest.fixture(scope="module")
def result(example: Any) -> dict[str, Any]:
    return example.main(["--steps", "6", *SIZES, "--no-render"])


def test_three_ways_match_a_hand_written_bptt(example: Any, result: dict[str, Any]) -> None:
    values = example.make_inputs(6, 3, 4, 5)
    loss, grads = bptt(values)
    assert set(grads) == set(example.WEIGHTS)
    for way in WAYS:
        assert result[way]["loss"].dtype == np.float32
        close(result[way]["loss"], loss)
        for name, want in grads.items():
            assert result[way]["grads"][name].dtype == np.float32
            assert result[way]["grads"][name].shape == want.shape
            close(result[way]["grads"][name], want)
    assert float(np.max(np.abs(grads["w_hh"]))) > 1e-3  # BPTT reaches the recurrent weights


def test_three_ways_agree_with_each_other(result: dict[str, Any]) -> None:
    eager = result["eager"]
    for way in ("unrolled", "scan"):
        close(result[way]["loss"], eager["loss"])
        for name, want in eager["grads"].items():
            close(result[way]["grads"][name], want)


def test_the_loop_is_unrolled_once_and_scanned_once(example: Any, result: dict[str, Any]) -> None:
    ops = [n.op for n in result["scan"]["forward"].op_nodes]
    assert ops.count("scan") == 1 and "tanh" not in ops  # the step lives in the body
    unrolled = [n.op for n in result["unrolled"]["forward"].op_nodes]
    assert unrolled.count("tanh") == 6 and "scan" not in unrolled
    joint = [n.op for n in result["scan"]["joint"].op_nodes]
    assert joint.count("scan") == 2  # the forward (saving residuals) and the reverse scan
    # (on the default backend: the example checks each array to 1e-5 of its largest
    # magnitude; its element-wise check at rtol 1e-5 failed on native at 12 steps, where
    # one entry of w_ih's gradient, a sum that nearly cancels, differed by 1.3e-5 of
    # itself and 7e-7 of the array's largest)
    longer = example.main(["--steps", "12", *SIZES, "--no-render"])
    count = example.count_nodes
    for part in ("forward", "joint"):
        assert count(longer["scan"][part]) == count(result["scan"][part])
        assert count(longer["unrolled"][part]) > 1.8 * count(result["unrolled"][part])
    assert longer["eager"]["tape_nodes"] > result["eager"]["tape_nodes"]


def test_the_example_fails_when_the_ways_disagree(
    example: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = example.run_static

    def off(step: Any, values: Any) -> Any:  # one gradient 1e-3 of itself off
        found = real(step, values)
        found["grads"]["w_hh"] = found["grads"]["w_hh"] * np.float32(1.001)
        return found

    monkeypatch.setattr(example, "run_static", off)
    with pytest.raises(AssertionError, match="the three ways disagree"):
        example.main(["--steps", "3", *SIZES, "--no-render"])


def test_output_names_sizes_and_agreement(example: Any, capsys: pytest.CaptureFixture) -> None:
    example.main(["--steps", "4", *SIZES, "--no-render"])
    out = capsys.readouterr().out
    assert "the graphs at T = 4:" in out
    assert "scan: forward+backward" in out and "gc.compile at O2" in out
    assert "the same loss and gradients all three ways (within 1e-05)" in out


def test_pictures(example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["--steps", "4", *SIZES, "--draw-steps", "2", "--out", str(tmp_path)]
    if gc.viz.have_dot():
        files = example.main(argv)["files"]
        names = ["eager_tape", "unrolled_forward", "unrolled_gradients"]
        names += ["scan_forward", "scan_gradients"]
        assert [p.name for p in files] == [f"rnn_{n}.svg" for n in names]
        assert all("<svg" in p.read_text() for p in files)
    monkeypatch.setattr(gc.viz, "have_dot", lambda: False)
    assert example.main(argv)["files"] == []  # without graphviz: skipped, not an error


def test_runs_as_a_script(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "rnn.py"), "--steps", "5", *SIZES, "--no-render"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=script_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "all three ways" in done.stdout
