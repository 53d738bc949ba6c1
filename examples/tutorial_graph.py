"""The tutorials' graph y = (x + w)(w + 1), and the README's pictures of it.

    python examples/tutorial_graph.py

regenerates docs/img/tutorial-forward.svg and docs/img/tutorial-backward.svg through
the `graphc render` command (run it from the repository root), the same as

    graphc render examples/tutorial_graph.py:f --spec ":float32" --spec ":float32" \\
        -o docs/img/tutorial-forward.svg
    graphc render examples/tutorial_graph.py:f --spec ":float32" --spec ":float32" \\
        -o docs/img/tutorial-backward.svg --backward
"""

from __future__ import annotations


def f(x, w):  # type: ignore[no-untyped-def]
    a = x + w
    b = w + 1
    return a * b


def main() -> None:
    from graphc.cli import main as graphc

    specs = ["--spec", ":float32", "--spec", ":float32"]
    target = "examples/tutorial_graph.py:f"
    graphc(["render", target, *specs, "-o", "docs/img/tutorial-forward.svg"])
    graphc(["render", target, *specs, "-o", "docs/img/tutorial-backward.svg", "--backward"])


if __name__ == "__main__":
    main()
