"""Writing pictures: SVG and PNG when `dot` exists, DOT source and a hint when it does not."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import graphc as gc
from graphc.viz import files as render_module
from tests.conftest import needs_dot


def small_graph() -> gc.Graph:
    g = gc.Graph("small")
    with g:
        x = gc.placeholder("x", shape=("B", 2))
        gc.output(gc.sum(gc.exp(x)), name="y")
    return g


@needs_dot
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<svg"), (".png", b"\x89PNG")])
def test_render_writes_the_format_its_suffix_names(
    tmp_path: Path, suffix: str, magic: bytes
) -> None:
    g = small_graph()
    for obj in (g, gc.gradients(g, wrt=["x"]), gc.split_backward(g, wrt=["x"])):
        path = gc.viz.render(obj, tmp_path / f"picture{suffix}")
        data = path.read_bytes()
        assert path == tmp_path / f"picture{suffix}"
        assert len(data) > 100 and magic in data[:1000]


def test_dot_suffix_writes_the_source(tmp_path: Path) -> None:
    path = gc.viz.render(small_graph(), tmp_path / "sub" / "g.dot")
    assert path.read_text().startswith("digraph small")


def test_without_dot_the_source_is_written_and_the_warning_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render_module.shutil, "which", lambda name: None)
    with pytest.warns(gc.viz.DotMissingWarning, match="apt-get install graphviz"):
        path = gc.viz.render(small_graph(), tmp_path / "g.svg")
    assert path == tmp_path / "g.dot"
    assert "digraph small" in path.read_text()
    assert not (tmp_path / "g.svg").exists()
    assert render_module.mime_bundle(small_graph()) == {}
    assert set(small_graph()._repr_mimebundle_()) == {"text/plain"}


def test_unknown_suffix_is_a_graphc_error(tmp_path: Path) -> None:
    with pytest.raises(gc.GraphcError, match=r"\.svg"):
        gc.viz.render(small_graph(), tmp_path / "g.jpeg")


@needs_dot
def test_graphs_show_as_svg_in_notebooks() -> None:
    g = small_graph()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bundle = g._repr_mimebundle_()
    assert bundle["text/plain"] == str(g)
    assert bundle["image/svg+xml"].lstrip().startswith(("<?xml", "<svg", "<!DOCTYPE"))


def test_a_dot_that_fails_is_a_graphc_error_and_keeps_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """graphviz's dot can give up on a layout; the user gets a graphc error saying so,
    with dot's own words and the DOT source kept, not a CalledProcessError traceback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"
    fake.write_text("#!/bin/sh\necho 'Error: trouble in init_rank' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(gc.GraphcError, match="trouble in init_rank") as caught:
        gc.viz.render(small_graph(), tmp_path / "picture.svg")
    kept = tmp_path / "picture.dot"
    assert str(kept) in str(caught.value) and kept.read_text().startswith("digraph small")
    assert not (tmp_path / "picture.svg").exists()


@needs_dot
def test_a_notebook_picture_gives_up_on_a_slow_dot_and_shows_text(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a cell's display waited for dot however long it took (ten minutes and more for
    # a long eager tape); past DISPLAY_SECONDS the cell shows the text, with a warning
    from graphc.viz import files

    g = small_graph()
    assert "image/svg+xml" in g._repr_mimebundle_()
    monkeypatch.setattr(files, "DISPLAY_SECONDS", 1e-6)
    with pytest.warns(UserWarning, match="gc.viz.view"):
        bundle = g._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
