"""What a newcomer sees in a notebook and a terminal in the first hour: the text of
the objects a cell shows, the commands' help, the guide's first steps."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def _explained() -> str:
    g = gc.trace(lambda x: gc.tanh(x) * 2.0, gc.TensorSpec((4,), "float32"))
    return gc.compile(g, backend="numpy").explain(np.ones(4, np.float32))


def test_explain_shows_as_its_lines_when_a_cell_ends_with_it() -> None:
    # `exe.explain(...)` as a cell's last line: IPython's text is the repr, which for a
    # str is one quoted line of \n escapes; the plan's text must show as its lines
    pretty = pytest.importorskip("IPython.lib.pretty")
    text = _explained()
    shown = pretty.pretty(text)
    assert shown == str(text)
    assert "\\n" not in shown and shown.splitlines()[0].startswith("compiled at O2")
    assert "steps:" in shown.splitlines()


def test_explain_is_still_a_plain_string_to_code() -> None:
    text = _explained()
    assert isinstance(text, str) and text.startswith("compiled at O2")
    assert repr(text) == str.__repr__(text)  # repr(), f"{!r}" and lists: a str's
    assert str(text) == text and type(str(text)) is str


def test_help_first_steps_show_how_to_look_at_a_graph_too_big_to_draw(capsys) -> None:  # type: ignore[no-untyped-def]
    # `graphc --help` ends with first steps; `graphc view`, the way to a graph too big
    # for a picture, was listed among the commands but had no first step
    from graphc.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    first_steps = capsys.readouterr().out.split("first steps:")[1]
    commands = [line.split()[1] for line in first_steps.splitlines() if line.startswith("  graphc")]
    assert set(commands) >= {"demo", "inspect", "render", "view", "bench"}


def test_an_optimization_report_shows_its_table_when_a_cell_ends_with_it() -> None:
    """`gc.optimize(g, 2, explain=True)[1]` as a cell's last line showed the dataclass's
    repr, every pass's log dumped on one line; IPython calls _repr_pretty_ first."""
    g = gc.trace(lambda x: gc.exp(x) * 1.0 + 0.0, gc.TensorSpec((3,)))
    report = gc.optimize(g, 2, explain=True)[1]
    shown: list[str] = []

    class Printer:  # IPython's printer, as far as the method uses it
        def text(self, value: str) -> None:
            shown.append(value)

    report._repr_pretty_(Printer(), False)
    assert shown == [str(report)] and shown[0].startswith("optimization at O2")
    assert "PassLog(" not in shown[0]
